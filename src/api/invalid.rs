//! The pipeline's refusals as client errors: each neutral field by the name this endpoint gave
//! it (`param`), and each problem in the words `vllm serve` answers with, so clients and their
//! tests see the same 400s from either.

use crate::error::ApiError;
use crate::limits;
use crate::pipeline::constraint_check;
use crate::pipeline::invalid::{Field, Invalid, Problem, Refusal};
use shardgate_util::json::py_float;

/// The parameters whose name depends on the endpoint (or on the request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Names {
    pub prompt: &'static str,
    pub max_tokens: &'static str,
    pub logprobs: &'static str,
    pub stop: &'static str,
}

impl Names {
    pub const COMPLETIONS: Names =
        Names { prompt: "prompt", max_tokens: "max_tokens", logprobs: "logprobs", stop: "stop" };

    /// Anthropic's Messages API: stop strings are `stop_sequences`; it has no logprobs.
    pub const MESSAGES: Names =
        Names { prompt: "messages", max_tokens: "max_tokens", logprobs: "logprobs", stop: "stop_sequences" };

    /// `/v1/responses`: the prompt is rendered from `input`.
    pub const RESPONSES: Names =
        Names { prompt: "input", max_tokens: "max_output_tokens", logprobs: "top_logprobs", stop: "stop" };

    /// Chat's names; the output bound is named by the field the request used.
    pub fn chat(max_completion_tokens_given: bool) -> Names {
        let max_tokens = if max_completion_tokens_given { "max_completion_tokens" } else { "max_tokens" };
        Names { prompt: "messages", max_tokens, logprobs: "top_logprobs", stop: "stop" }
    }

    pub fn param(&self, field: Field) -> &'static str {
        match field {
            Field::Prompt => self.prompt,
            Field::MaxTokens => self.max_tokens,
            Field::Logprobs => self.logprobs,
            Field::Stop => self.stop,
            other => vllm_name(other),
        }
    }

    pub fn refusal(&self, e: Refusal) -> ApiError {
        match e {
            Refusal::Invalid(e) => self.invalid(e),
            Refusal::Failed(e) => e,
        }
    }

    /// An error from below the adapter: a parameter the engine cannot take is named as chat
    /// names it (`top_logprobs`); this endpoint may name it otherwise.
    pub fn engine_error(&self, e: &ApiError) -> ApiError {
        let mut e = e.clone();
        if e.param.as_deref() == Some("top_logprobs") {
            e.param = Some(self.logprobs.to_string());
        }
        e
    }

    pub fn invalid(&self, e: Invalid) -> ApiError {
        let param = self.param(e.field);
        let message = message(e.field, param, &e.problem);
        match e.problem {
            // vLLM names no parameter for these.
            Problem::Unsatisfiable(_) => ApiError::bad_request(message),
            Problem::Empty if e.field == Field::Prompt => ApiError::bad_request(message).with_param(param),
            Problem::PromptTooLong { .. } | Problem::PromptFillsContext { .. } => {
                ApiError::bad_request(message).with_code("context_length_exceeded").with_param(param)
            }
            Problem::ConflictingDefs(_) => {
                ApiError::invalid_param(param, message).with_code("invalid_tool_configuration")
            }
            _ => ApiError::invalid_param(param, message),
        }
    }
}

/// The name vLLM's messages give a field (`max_tokens` whichever field set it).
fn vllm_name(field: Field) -> &'static str {
    match field {
        Field::Prompt => "prompt",
        Field::N => "n",
        Field::Temperature => "temperature",
        Field::TopP => "top_p",
        Field::TopK => "top_k",
        Field::MinP => "min_p",
        Field::PresencePenalty => "presence_penalty",
        Field::FrequencyPenalty => "frequency_penalty",
        Field::RepetitionPenalty => "repetition_penalty",
        Field::MinTokens => "min_tokens",
        Field::MaxTokens => "max_tokens",
        Field::Stop => "stop",
        Field::StopTokenIds => "stop_token_ids",
        Field::Logprobs => "logprobs",
        Field::LogitBias => "logit_bias",
        Field::AllowedTokenIds => "allowed_token_ids",
        Field::BadWords => "bad_words",
        Field::Priority => "priority",
        Field::CacheSalt => "cache_salt",
        Field::Constraint => "structured_outputs",
        Field::ToolChoice => "tool_choice",
        Field::Tools => "tools",
    }
}

/// vLLM's text for a problem with a field (`param`: the request's name for it).
fn message(field: Field, param: &str, problem: &Problem) -> String {
    let name = vllm_name(field);
    match problem {
        Problem::TooSmall { got, min } => match field {
            Field::MinTokens => format!("min_tokens must be greater than or equal to {min}, got {got}."),
            Field::Logprobs => format!("logprobs must be non-negative or -1, got {got}."),
            _ => format!("{name} must be at least {min}, got {got}."),
        },
        Problem::TooLarge { got, max } => match field {
            Field::Logprobs => format!("Requested sample logprobs of {got}, which is greater than max allowed: {max}"),
            _ => format!("{name} must be at most {max}, got {got}."),
        },
        Problem::IntOutOfRange(k) if field == Field::TopK => {
            format!("top_k must be 0 (disable), or at least 1, got {k}.")
        }
        Problem::IntOutOfRange(v) => format!("{name} out of range: {v}"),
        Problem::OutOfRange { got, range } => format!("{name} must be in {range}, got {}.", py_float(*got)),
        Problem::NotFinite(v) => format!("{name} must be a finite number, got {}.", py_float(*v)),
        Problem::Negative(v) => format!("{name} must be non-negative, got {}.", py_float(*v)),
        Problem::NotPositive(v) => format!("{name} must be greater than zero, got {}.", py_float(*v)),
        Problem::AboveMaxTokens { min_tokens, max_tokens } => {
            format!("min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.")
        }
        Problem::AboveContext { got, max_model_len } => format!(
            "{param}={got} cannot be greater than max_model_len={max_model_len}. Please request fewer output tokens. \
             (parameter={param}, value={got})"
        ),
        Problem::EmptyString(words) if field == Field::BadWords => {
            format!("bad_words cannot contain an empty string. Got bad_words={words:?}")
        }
        Problem::EmptyString(_) => format!("{name} cannot contain an empty string."),
        Problem::TooManyStrings { count_max, bytes_max } => {
            let what = if field == Field::BadWords { "bad words" } else { "stop strings" };
            format!("at most {count_max} {what} of at most {bytes_max} bytes each")
        }
        Problem::TooManyIds { max } => format!("{name} has more than {max} entries"),
        Problem::OutOfVocab { ids, vocab } if field == Field::BadWords => {
            format!("The model vocabulary size is {vocab}, but the following tokens were specified as bad: {ids:?}.")
        }
        Problem::OutOfVocab { ids, vocab } => {
            format!("token_id(s) {ids:?} in {name} contain out-of-vocab token ids. Vocabulary size: {vocab}")
        }
        Problem::TokenOutOfVocab { id, vocab } => format!("Token id {id} is out of vocabulary (vocabulary size {vocab})"),
        Problem::Empty => match field {
            Field::Prompt => "The decoder prompt cannot be empty".into(),
            Field::AllowedTokenIds => "allowed_token_ids is not None and empty!".into(),
            _ => format!("Parameter '{name}' must be a non-empty string if provided."),
        },
        Problem::NoTokens => format!("{name} entries must tokenize to at least one token."),
        Problem::Tokenizer(e) => e.to_string(),
        Problem::PromptTooLong { len, max_model_len } => format!(
            "This model's maximum context length is {max_model_len} tokens. However, your prompt contains {len} input \
             tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input prompt."
        ),
        Problem::PromptFillsContext { len, max_model_len } => format!(
            "The decoder prompt (length {len}) plus the number of requested output tokens (at least 1) is longer than the \
             maximum model length of {max_model_len}. Make sure that `max_model_len` is no smaller than the number of \
             text tokens (prompt + requested output tokens)."
        ),
        Problem::TooManyChoices => "too many choices (prompts × n) in one request".into(),
        Problem::Unsatisfiable(u) => unsatisfiable(u),
        Problem::UnknownTool(tool) => format!("Tool '{tool}' has not been passed in `tools`."),
        Problem::ConflictingDefs(def) => format!("Tool definition '{def}' has multiple schemas, which is not supported."),
    }
}

/// vLLM's answer to a constraint its xgrammar backend refuses (it names no parameter).
fn unsatisfiable(e: &constraint_check::Invalid) -> String {
    use constraint_check::Invalid;
    match e {
        Invalid::RegexNul => "structured_outputs.regex must not contain a NUL character ('\\x00')".into(),
        Invalid::Regex(e) => format!("Failed to transform regex into a grammar: {e}"),
        Invalid::Grammar(_) => "Invalid grammar specification.".into(),
        Invalid::SchemaJson(_) => "Invalid JSON grammar specification.".into(),
        Invalid::Schema(e) => format!("Failed to transform json schema into a grammar: {e}"),
        Invalid::TooDeep => format!(
            "The JSON schema is nested too deeply: objects and arrays may nest at most {} levels",
            limits::constraint_json_nesting_max
        ),
        Invalid::TagEmpty => "structured_outputs.structural_tag cannot be an empty string".into(),
        Invalid::Tag(_) => "Invalid structural tag specification.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Constraint;
    use crate::pipeline::invalid::Range;

    fn error(names: Names, field: Field, problem: Problem) -> (u16, Option<String>, Option<&'static str>, String) {
        let e = names.invalid(Invalid::new(field, problem));
        (e.status, e.param, e.code, e.message)
    }

    #[test]
    fn refusals_read_as_vllm_answers_them() {
        let chat = Names::chat(true);
        let p = |s: &str| Some(s.to_string());
        let value = Some("invalid_value");
        let cases = [
            (chat, Field::N, Problem::TooSmall { got: 0, min: 1 }, p("n"), value, "n must be at least 1, got 0."),
            (
                chat,
                Field::MaxTokens,
                Problem::TooSmall { got: 0, min: 1 },
                p("max_completion_tokens"),
                value,
                "max_tokens must be at least 1, got 0.",
            ),
            (
                Names::COMPLETIONS,
                Field::MaxTokens,
                Problem::AboveContext { got: 65, max_model_len: 64 },
                p("max_tokens"),
                value,
                "max_tokens=65 cannot be greater than max_model_len=64. Please request fewer output tokens. \
                 (parameter=max_tokens, value=65)",
            ),
            (
                chat,
                Field::TopP,
                Problem::OutOfRange { got: 2.0, range: Range { min: 0.0, max: 1.0, min_open: true } },
                p("top_p"),
                value,
                "top_p must be in (0, 1], got 2.0.",
            ),
            (
                chat,
                Field::Logprobs,
                Problem::TooLarge { got: i64::MAX, max: 20 },
                p("top_logprobs"),
                value,
                "Requested sample logprobs of 9223372036854775807, which is greater than max allowed: 20",
            ),
            (
                Names::COMPLETIONS,
                Field::Logprobs,
                Problem::TooLarge { got: 21, max: 20 },
                p("logprobs"),
                value,
                "Requested sample logprobs of 21, which is greater than max allowed: 20",
            ),
            (
                chat,
                Field::StopTokenIds,
                Problem::OutOfVocab { ids: vec![-1], vocab: 10 },
                p("stop_token_ids"),
                value,
                "token_id(s) [-1] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: 10",
            ),
            (
                chat,
                Field::Stop,
                Problem::EmptyString(vec![String::new()]),
                p("stop"),
                value,
                "stop cannot contain an empty string.",
            ),
            (
                chat,
                Field::BadWords,
                Problem::EmptyString(vec!["a".into(), String::new()]),
                p("bad_words"),
                value,
                "bad_words cannot contain an empty string. Got bad_words=[\"a\", \"\"]",
            ),
            (
                chat,
                Field::CacheSalt,
                Problem::Empty,
                p("cache_salt"),
                value,
                "Parameter 'cache_salt' must be a non-empty string if provided.",
            ),
            (chat, Field::Prompt, Problem::Empty, p("messages"), None, "The decoder prompt cannot be empty"),
            (
                Names::COMPLETIONS,
                Field::Prompt,
                Problem::TokenOutOfVocab { id: 999_999_999, vocab: 10 },
                p("prompt"),
                value,
                "Token id 999999999 is out of vocabulary (vocabulary size 10)",
            ),
            (
                chat,
                Field::Tools,
                Problem::ConflictingDefs("A".into()),
                p("tools"),
                Some("invalid_tool_configuration"),
                "Tool definition 'A' has multiple schemas, which is not supported.",
            ),
        ];
        let cases = cases.into_iter().chain([(
            Names::MESSAGES,
            Field::Stop,
            Problem::EmptyString(vec![String::new()]),
            p("stop_sequences"),
            value,
            "stop cannot contain an empty string.",
        )]);
        for (names, field, problem, param, code, message) in cases {
            assert_eq!(error(names, field, problem), (400, param, code, message.to_string()));
        }
        let (_, param, code, message) =
            error(chat, Field::Prompt, Problem::PromptTooLong { len: 2000, max_model_len: 1024 });
        assert_eq!((param.as_deref(), code), (Some("messages"), Some("context_length_exceeded")));
        assert!(message.starts_with("This model's maximum context length is 1024 tokens"), "{message}");
    }

    /// What the engine's xgrammar refuses is answered with vLLM's text and no parameter.
    #[test]
    fn unsatisfiable_constraints_name_no_parameter() {
        let cases = [
            (Constraint::Regex("((((".into()), "Failed to transform regex into a grammar: Regex parsing error"),
            (Constraint::Regex("a\0".into()), "must not contain a NUL character"),
            (Constraint::Grammar("root ::= (((".into()), "Invalid grammar specification."),
            (
                Constraint::JsonSchema("{\"type\":\"foo\"}".into()),
                "Failed to transform json schema into a grammar: Unsupported type",
            ),
            (Constraint::StructuralTag("not json".into()), "Invalid structural tag specification."),
            (Constraint::StructuralTag(" ".into()), "cannot be an empty string"),
        ];
        for (c, want) in cases {
            let e = Names::COMPLETIONS.invalid(crate::pipeline::constraint::check(&c).expect_err("refused"));
            assert_eq!((e.status, e.param.as_deref(), e.code), (400, None, None), "{c:?}");
            assert!(e.message.contains(want), "{c:?}: {}", e.message);
        }
    }

    #[test]
    fn engine_errors_use_the_endpoints_names() {
        let refused = ApiError::invalid_param("top_logprobs", "top_logprobs are not supported");
        assert_eq!(Names::COMPLETIONS.engine_error(&refused).param.as_deref(), Some("logprobs"));
        assert_eq!(Names::chat(false).engine_error(&refused).param.as_deref(), Some("top_logprobs"));
        let other = ApiError::invalid_param("echo", "prompt logprobs are not supported");
        assert_eq!(Names::COMPLETIONS.engine_error(&other), other);
    }
}
