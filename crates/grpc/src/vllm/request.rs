//! `EngineRequest` → vLLM's `Inference` `GenerateRequest`.
//!
//! Every `EngineRequest` field has a place here (unlike SMG's service). The answer is asked
//! for as token ids only (`output_text` off: the gateway detokenizes itself), with the
//! prompt's ids echoed only when prompt logprobs are asked for, since their rows name them.

use shardgate_wire::{Constraint, EngineRequest};

use super::messages as pb;

/// `k` alternatives per position, or all of them (`-1`), or none (`0`).
fn candidates(k: i32) -> Option<pb::CandidateTokens> {
    let select = match k {
        0 => return None,
        k if k < 0 => pb::Select::All(true),
        k => pb::Select::TopN(k as u32),
    };
    Some(pb::CandidateTokens { select: Some(select) })
}

pub fn generate_request(req: &EngineRequest) -> pb::GenerateRequest {
    let s = &req.sampling;
    let response = pb::ResponseOptions {
        prompt_token_ids: s.prompt_logprobs.is_some(),
        prompt_logprobs: s.prompt_logprobs.is_some(),
        prompt_candidates: s.prompt_logprobs.and_then(candidates),
        output_text: Some(false),
        output_token_ids: true,
        output_logprobs: s.logprobs.is_some(),
        output_candidates: s.logprobs.and_then(candidates),
    };
    pb::GenerateRequest {
        request_id: req.request_id.clone(),
        token_ids: Some(pb::TokenIds { ids: req.prompt_token_ids.to_vec() }),
        temperature: Some(s.temperature as f32),
        sampling: Some(pb::RandomSampling {
            num_sequences: 1,
            // vLLM reads 0 and -1 alike as "no top-k"; the field is unsigned.
            top_k: Some(s.top_k.max(0) as u32),
            top_p: Some(s.top_p as f32),
            min_p: Some(s.min_p as f32),
            seed: s.seed,
        }),
        decoding: Some(pb::DecodingParameters {
            presence_penalty: s.presence_penalty as f32,
            frequency_penalty: s.frequency_penalty as f32,
            repetition_penalty: s.repetition_penalty as f32,
            logit_bias: s.logit_bias.iter().map(|&(id, b)| (id, b as f32)).collect(),
            allowed_token_ids: s.allowed_token_ids.clone().unwrap_or_default(),
            structured_output: s.constraint.as_ref().map(structured_output),
            bad_words_token_ids: s.bad_words_token_ids.iter().map(|w| pb::TokenIds { ids: w.clone() }).collect(),
        }),
        stopping: Some(pb::StoppingCriteria {
            max_new_tokens: s.max_tokens,
            min_new_tokens: s.min_tokens,
            stop_token_ids: s.stop_token_ids.clone(),
            ignore_eos: s.ignore_eos,
        }),
        response: Some(response),
        kv: req.cache_salt.as_ref().map(|salt| pb::KvCacheParameters { cache_salt: salt.clone() }),
        priority: req.priority,
    }
}

fn structured_output(c: &Constraint) -> pb::StructuredOutput {
    match c {
        Constraint::JsonSchema(s) => pb::StructuredOutput::Json(s.clone()),
        Constraint::JsonObject => pb::StructuredOutput::JsonObject(true),
        Constraint::Regex(s) => pb::StructuredOutput::Regex(s.clone()),
        Constraint::Grammar(s) => pb::StructuredOutput::Grammar(s.clone()),
        Constraint::StructuralTag(s) => pb::StructuredOutput::StructuralTag(s.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shardgate_wire::SamplingParams;

    #[test]
    fn maps_every_field() {
        let mut sampling = SamplingParams {
            temperature: 0.5,
            top_k: -1,
            seed: Some(1 << 40),
            max_tokens: 7,
            ..SamplingParams::default()
        };
        (sampling.logprobs, sampling.prompt_logprobs) = (Some(2), Some(-1));
        sampling.allowed_token_ids = Some(vec![4, 5]);
        sampling.bad_words_token_ids = vec![vec![6, 7]];
        sampling.constraint = Some(Constraint::JsonObject);
        let req = EngineRequest {
            request_id: "r-1".into(),
            prompt_token_ids: vec![1, 2].into(),
            sampling,
            arrival_time: 0.0,
            cache_salt: Some("salt".into()),
            priority: -3,
            mm_features: Default::default(),
        };
        let g = generate_request(&req);
        let (s, d, r) = (g.sampling.unwrap(), g.decoding.unwrap(), g.response.unwrap());
        assert_eq!((g.temperature, s.top_k, s.seed, s.num_sequences), (Some(0.5), Some(0), Some(1 << 40), 1));
        assert_eq!((d.allowed_token_ids, d.bad_words_token_ids), (vec![4, 5], vec![pb::TokenIds { ids: vec![6, 7] }]));
        assert_eq!(d.structured_output, Some(pb::StructuredOutput::JsonObject(true)));
        assert_eq!((g.stopping.unwrap().max_new_tokens, g.kv.unwrap().cache_salt, g.priority), (7, "salt".into(), -3));
        assert_eq!(
            (r.output_text, r.output_token_ids, r.output_logprobs, r.prompt_token_ids),
            (Some(false), true, true, true)
        );
        assert_eq!(r.output_candidates.unwrap().select, Some(pb::Select::TopN(2)));
        assert_eq!(r.prompt_candidates.unwrap().select, Some(pb::Select::All(true)));
    }
}
