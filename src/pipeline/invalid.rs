//! Why the pipeline refuses a request, in its own terms: which neutral field is wrong and what
//! is wrong with it, with the values involved. No text: an API adapter names the field its own
//! way (one endpoint's prompt is another's conversation; an output bound is named after the
//! field the request set it with) and words the message as its API does
//! (`api::invalid` words vLLM's).

use std::fmt;

use super::constraint_check;
use crate::error::ApiError;
use shardgate_text::TokenizerError;

/// A value of the neutral request (`request::GenerateRequest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The prompt (its token ids, its length against the context window).
    Prompt,
    N,
    Temperature,
    TopP,
    TopK,
    MinP,
    PresencePenalty,
    FrequencyPenalty,
    RepetitionPenalty,
    MinTokens,
    MaxTokens,
    /// Stop strings.
    Stop,
    StopTokenIds,
    /// Top logprobs per output token.
    Logprobs,
    LogitBias,
    AllowedTokenIds,
    BadWords,
    Priority,
    CacheSalt,
    /// The output constraint (a grammar, a schema).
    Constraint,
    /// The tool a forced call names.
    ToolChoice,
    Tools,
}

/// A closed or half-open interval of a sampling value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
    /// The minimum itself is outside.
    pub min_open: bool,
}

impl Range {
    pub const fn closed(min: f64, max: f64) -> Range {
        Range { min, max, min_open: false }
    }

    pub fn contains(&self, v: f64) -> bool {
        let above_min = if self.min_open { v > self.min } else { v >= self.min };
        above_min && v <= self.max
    }
}

/// `[-2, 2]`, `(0, 1]`: the notation vLLM's messages use.
impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let open = if self.min_open { '(' } else { '[' };
        write!(f, "{open}{}, {}]", self.min, self.max)
    }
}

/// What is wrong with a field's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// An integer below the field's least value.
    TooSmall {
        got: i64,
        min: i64,
    },
    /// An integer above the field's greatest value (logprobs: -1, "all of them", is `i64::MAX`).
    TooLarge {
        got: i64,
        max: i64,
    },
    /// An integer outside what the field can hold.
    IntOutOfRange(i64),
    /// A number outside the field's range.
    OutOfRange {
        got: f64,
        range: Range,
    },
    NotFinite(f64),
    Negative(f64),
    /// Zero or below where only positive values make sense.
    NotPositive(f64),
    /// More minimum output tokens than the output bound (the request's or the model's default).
    AboveMaxTokens {
        min_tokens: i64,
        max_tokens: u32,
    },
    /// An output bound the context window cannot hold.
    AboveContext {
        got: i64,
        max_model_len: u32,
    },
    /// A list of strings with an empty one (the list as given).
    EmptyString(Vec<String>),
    /// Too many strings, or one too long.
    TooManyStrings {
        count_max: usize,
        bytes_max: usize,
    },
    /// Too many entries in a list of token ids.
    TooManyIds {
        max: usize,
    },
    /// Token ids outside the vocabulary, in the order given.
    OutOfVocab {
        ids: Vec<i64>,
        vocab: usize,
    },
    /// A prompt token id outside the vocabulary.
    TokenOutOfVocab {
        id: u64,
        vocab: usize,
    },
    /// Present but empty (a list, a string, a prompt).
    Empty,
    /// A string that tokenizes to nothing.
    NoTokens,
    /// The tokenizer refused the text.
    Tokenizer(TokenizerError),
    /// A prompt longer than the context window.
    PromptTooLong {
        len: usize,
        max_model_len: u32,
    },
    /// A prompt that leaves no room for one output token.
    PromptFillsContext {
        len: usize,
        max_model_len: u32,
    },
    /// More choices (prompts × samples) than one request may ask for.
    TooManyChoices,
    /// A constraint the engine's grammar compiler would refuse.
    Unsatisfiable(constraint_check::Invalid),
    /// A forced call of a tool the request does not declare.
    UnknownTool(String),
    /// Two tools define one `$defs` name differently.
    ConflictingDefs(String),
}

/// One invalid field.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub field: Field,
    pub problem: Problem,
}

impl Invalid {
    pub fn new(field: Field, problem: Problem) -> Self {
        Invalid { field, problem }
    }
}

/// Why a request was not run: an invalid field (for the adapter to name), or a failure that is
/// already a client error (no worker, a tokenizer fault).
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    Invalid(Invalid),
    Failed(ApiError),
}

impl From<Invalid> for Refusal {
    fn from(e: Invalid) -> Self {
        Refusal::Invalid(e)
    }
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Self {
        Refusal::Failed(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_read_as_vllm_writes_them() {
        let penalty = Range::closed(-2.0, 2.0);
        let top_p = Range { min: 0.0, max: 1.0, min_open: true };
        assert_eq!(penalty.to_string(), "[-2, 2]");
        assert_eq!(top_p.to_string(), "(0, 1]");
        assert!(penalty.contains(-2.0) && penalty.contains(2.0) && !penalty.contains(2.5));
        assert!(!top_p.contains(0.0) && top_p.contains(1.0) && !top_p.contains(f64::NAN));
    }
}
