//! Submitting a generation: one engine request per (prompt, sample), with its choice state.
//! `generate` submits a generation once; `retry` submits it again on another worker.

use std::rc::Rc;

use super::choice::ChoiceState;
use super::parse::OutputParser;
use super::plan::Generation;
use crate::engine::link::{EngineLink, Submission};
use crate::engine::submit_error::SubmitError;
use crate::engine::EngineRequest;
use shardgate_util::ids::engine_request_id;

/// Submits every (prompt, sample) to the engine on `link` (the generation's, or the worker a
/// retry chose): the one place requests leave for it. On an error, what was submitted is
/// dropped (aborted) by the caller.
pub async fn submit_all(
    g: &Generation,
    link: &Rc<EngineLink>,
    states: &mut Vec<ChoiceState>,
    subs: &mut Vec<Option<Submission>>,
) -> Result<(), SubmitError> {
    let n = g.params.n;
    let max_model_len = link.max_model_len();
    let arrival_time = shardgate_util::time::unix_time_f64();
    for (p, prompt) in g.prompts.iter().enumerate() {
        let mut sampling = g.params.sampling.clone();
        sampling.max_tokens =
            super::params::resolve_max_tokens(g.params.max_tokens_requested, max_model_len, prompt.token_ids.len());
        for i in 0..n {
            let index = p as u32 * n + i;
            let mut s = sampling.clone();
            // n samples with an explicit seed: seed + i keeps them distinct and reproducible.
            s.seed = sampling.seed.map(|seed| seed.wrapping_add(i as i64));
            let req = EngineRequest {
                request_id: engine_request_id(&g.response_id, index, g.ctx.index),
                prompt_token_ids: prompt.token_ids.clone(),
                sampling: s,
                arrival_time,
                cache_salt: g.params.cache_salt.clone(),
                priority: g.params.priority,
                mm_features: prompt.mm_features.clone(),
            };
            let mut state = ChoiceState::new(index, &g.model.tokenizer, &prompt.token_ids, &g.params.output);
            if g.parse.is_active() {
                state.parser = Some(OutputParser::new(&g.parse)?);
            }
            let sub = link.submit(&req, g.model.is_moe).await?;
            states.push(state);
            subs.push(Some(sub));
        }
    }
    Ok(())
}
