//! `EngineRequest` → SMG `GenerateRequest`.
//!
//! The servicer builds vLLM's `SamplingParams` from the message (unset top_p and
//! repetition_penalty read as 1.0, an unset temperature as 1.0), so every value is sent as it
//! is. Stop strings never travel: the gateway's pipeline decides them on the text, as it does
//! for the ZMQ engines. A field the service has no place for is refused, never dropped.

use shardgate_wire::{Constraint, EngineRequest};

use super::messages as pb;

/// What `EngineRequest` asked that SMG's `GenerateRequest` cannot say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is not supported by gRPC workers (SMG's vllm_engine service has no field for it)", self.0)
    }
}

impl std::error::Error for Unsupported {}

/// The streamed Generate call for one sample; `dp_rank` pins a data-parallel rank.
pub fn generate_request(req: &EngineRequest, dp_rank: Option<u32>) -> Result<pb::GenerateRequest, Unsupported> {
    let s = &req.sampling;
    let refuse = |what: &str| Err(Unsupported(what.to_string()));
    if s.allowed_token_ids.is_some() {
        return refuse("allowed_token_ids");
    }
    if !s.bad_words_token_ids.is_empty() {
        return refuse("bad_words");
    }
    if req.cache_salt.is_some() {
        return refuse("cache_salt");
    }
    if req.priority != 0 {
        return refuse("a non-zero priority");
    }
    let seed = match s.seed.map(i32::try_from) {
        Some(Err(_)) => return refuse("a seed outside the 32-bit range"),
        Some(Ok(v)) => Some(v),
        None => None,
    };
    let mut logit_bias = std::collections::HashMap::with_capacity(s.logit_bias.len());
    for &(id, bias) in &s.logit_bias {
        let Ok(id) = i32::try_from(id) else { return refuse("a logit_bias token id above 2^31") };
        logit_bias.insert(id, bias as f32);
    }
    let sampling = pb::SamplingParams {
        temperature: Some(s.temperature as f32),
        top_p: s.top_p as f32,
        // vLLM reads 0 and -1 alike as "no top-k"; the field is unsigned.
        top_k: s.top_k.max(0) as u32,
        min_p: s.min_p as f32,
        frequency_penalty: s.frequency_penalty as f32,
        presence_penalty: s.presence_penalty as f32,
        repetition_penalty: s.repetition_penalty as f32,
        max_tokens: Some(s.max_tokens),
        min_tokens: s.min_tokens,
        stop_token_ids: s.stop_token_ids.clone(),
        ignore_eos: s.ignore_eos,
        n: 1,
        logprobs: s.logprobs,
        prompt_logprobs: s.prompt_logprobs,
        seed,
        logit_bias,
        constraint: s.constraint.as_ref().map(constraint),
    };
    Ok(pb::GenerateRequest {
        request_id: req.request_id.clone(),
        tokenized: Some(pb::TokenizedInput { original_text: String::new(), input_ids: req.prompt_token_ids.to_vec() }),
        sampling_params: Some(sampling),
        stream: true,
        // Ranks are small: a rank table never holds 2^31 engines.
        data_parallel_rank: dp_rank.map(|r| r as i32),
    })
}

fn constraint(c: &Constraint) -> pb::Constraint {
    match c {
        Constraint::JsonSchema(s) => pb::Constraint::JsonSchema(s.clone()),
        Constraint::JsonObject => pb::Constraint::JsonObject(true),
        Constraint::Regex(s) => pb::Constraint::Regex(s.clone()),
        Constraint::Grammar(s) => pb::Constraint::Grammar(s.clone()),
        Constraint::StructuralTag(s) => pb::Constraint::StructuralTag(s.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shardgate_wire::SamplingParams;

    fn request(edit: impl FnOnce(&mut EngineRequest)) -> EngineRequest {
        let mut r = EngineRequest {
            request_id: "r-1".into(),
            prompt_token_ids: vec![1, 2, 3].into(),
            sampling: SamplingParams::default(),
            arrival_time: 0.0,
            cache_salt: None,
            priority: 0,
            mm_features: Default::default(),
        };
        edit(&mut r);
        r
    }

    #[test]
    fn refuses_what_the_service_cannot_say() {
        type Edit = fn(&mut EngineRequest);
        let cases: [(&str, Edit); 6] = [
            ("allowed_token_ids", |r| r.sampling.allowed_token_ids = Some(vec![1])),
            ("bad_words", |r| r.sampling.bad_words_token_ids = vec![vec![1]]),
            ("cache_salt", |r| r.cache_salt = Some("s".into())),
            ("a non-zero priority", |r| r.priority = 1),
            ("a seed outside the 32-bit range", |r| r.sampling.seed = Some(1 << 40)),
            ("a logit_bias token id above 2^31", |r| r.sampling.logit_bias = vec![(u32::MAX, 1.0)]),
        ];
        for (what, edit) in cases {
            assert_eq!(generate_request(&request(edit), None), Err(Unsupported(what.into())), "{what}");
        }
    }

    #[test]
    fn maps_every_sampling_field() {
        let r = request(|r| {
            let s = &mut r.sampling;
            (s.temperature, s.top_p, s.top_k, s.min_p) = (0.5, 0.9, -1, 0.05);
            (s.frequency_penalty, s.presence_penalty, s.repetition_penalty) = (0.25, -0.5, 1.5);
            (s.max_tokens, s.min_tokens, s.ignore_eos) = (7, 2, true);
            (s.logprobs, s.prompt_logprobs, s.seed) = (Some(3), Some(0), Some(-4));
            s.stop_token_ids = vec![9, 10];
            s.logit_bias = vec![(5, -100.0)];
            s.constraint = Some(Constraint::Regex("a+".into()));
        });
        let g = generate_request(&r, Some(1)).unwrap();
        let s = g.sampling_params.unwrap();
        assert_eq!((g.request_id.as_str(), g.stream, g.data_parallel_rank), ("r-1", true, Some(1)));
        assert_eq!(g.tokenized.unwrap().input_ids, vec![1, 2, 3]);
        assert_eq!((s.temperature, s.top_p, s.top_k, s.min_p), (Some(0.5), 0.9, 0, 0.05));
        assert_eq!((s.frequency_penalty, s.presence_penalty, s.repetition_penalty), (0.25, -0.5, 1.5));
        assert_eq!((s.max_tokens, s.min_tokens, s.ignore_eos, s.n), (Some(7), 2, true, 1));
        assert_eq!((s.logprobs, s.prompt_logprobs, s.seed), (Some(3), Some(0), Some(-4)));
        assert_eq!(s.stop_token_ids, vec![9, 10]);
        assert_eq!(s.logit_bias.get(&5), Some(&-100.0));
        assert_eq!(s.constraint, Some(pb::Constraint::Regex("a+".into())));
    }
}
