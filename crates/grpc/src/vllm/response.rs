//! vLLM `Inference` `GenerateStream` answers → `TokenEvent`s.
//!
//! The stream opens with a `prompt_info` message (prompt length, and prompt logprobs when
//! asked), then one `outputs` message per engine step with that step's new tokens; the last
//! carries `finish_info` with its tokens. Prompt logprobs are held and given with the first
//! output event, where the ZMQ engines give them. The cached-prompt count comes with the finish.

use shardgate_wire::output::LogprobRow;
use shardgate_wire::{FinishReason, Logprobs, StopReason, TokenEvent};

use super::messages::{self as pb, finish_reason as fr};
use crate::response_error::ResponseError;

/// One GenerateStream call's reading state.
#[derive(Debug, Default)]
pub struct GenerateReader {
    prompt_logprobs: Option<Logprobs>,
    finished: bool,
}

impl GenerateReader {
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The event in `message`; `None` for the prompt-only opening message.
    pub fn event(&mut self, message: pb::GenerateResponse) -> Result<Option<TokenEvent>, ResponseError> {
        if self.finished {
            return Err(ResponseError::AfterComplete);
        }
        if message.prompt_info.is_none() && message.outputs.is_none() {
            return Err(ResponseError::Empty);
        }
        if let Some(p) = message.prompt_info {
            self.prompt_logprobs = prompt_logprobs(p)?;
        }
        let Some(out) = message.outputs else { return Ok(None) };
        if out.index != 0 {
            return Err(ResponseError::UnexpectedIndex(out.index));
        }
        let logprobs = match out.logprobs.is_empty() {
            true => None,
            false => Some(rows(&out.token_ids, &out.logprobs, &out.ranks, &out.candidate_tokens, "output")?),
        };
        let mut event = TokenEvent {
            logprobs,
            prompt_logprobs: self.prompt_logprobs.take(),
            token_ids: out.token_ids,
            ..TokenEvent::default()
        };
        if let Some(f) = out.finish_info {
            let finish = match f.finish_reason {
                fr::NOT_FINISHED => None,
                fr::LENGTH => Some(FinishReason::Length),
                fr::STOP => Some(FinishReason::Stop),
                fr::ABORTED => Some(FinishReason::Abort),
                other => return Err(ResponseError::UnknownFinishReason(other.to_string())),
            };
            self.finished = finish.is_some();
            event.finish = finish;
            event.stop_reason = f.stop_reason.and_then(|r| match r {
                pb::StopReason::StopTokenId(id) => Some(StopReason::TokenId(id)),
                // EOS is not a stop reason in vLLM's output (its `stop_reason` stays None).
                pb::StopReason::EosTokenId(_) => None,
                pb::StopReason::StopString(s) => Some(StopReason::Text(s)),
            });
            event.cached_tokens = f.num_cached_tokens;
        }
        Ok(Some(event))
    }
}

/// Prompt logprobs: the first position has none, so rows start at the second.
fn prompt_logprobs(p: pb::PromptInfo) -> Result<Option<Logprobs>, ResponseError> {
    if p.logprobs.is_empty() {
        return Ok(None);
    }
    let skip = |v: &[u32]| v.get(1..).unwrap_or_default().to_vec();
    let logprobs = p.logprobs.get(1..).unwrap_or_default();
    let candidates = p.candidate_tokens.get(1..).unwrap_or_default();
    rows(&skip(&p.token_ids), logprobs, &skip(&p.ranks), candidates, "prompt").map(Some)
}

fn rows(
    ids: &[u32],
    logprobs: &[f32],
    ranks: &[u32],
    candidates: &[pb::CandidateTokenInfo],
    what: &'static str,
) -> Result<Logprobs, ResponseError> {
    let n = ids.len();
    if logprobs.len() != n || ranks.len() != n || (!candidates.is_empty() && candidates.len() != n) {
        return Err(ResponseError::LogprobShape(what));
    }
    let rows = (0..n)
        .map(|i| LogprobRow {
            token_id: ids[i],
            logprob: logprobs[i],
            rank: i64::from(ranks[i]),
            top: candidates.get(i).map(|c| c.tokens.iter().map(|t| (t.id, t.logprob)).collect()).unwrap_or_default(),
        })
        .collect();
    Ok(Logprobs { rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(ids: &[u32], finish: Option<(i32, Option<pb::StopReason>)>) -> pb::GenerateResponse {
        let finish_info = finish.map(|(reason, stop)| pb::FinishInfo {
            finish_reason: reason,
            stop_reason: stop,
            num_cached_tokens: Some(3),
            ..Default::default()
        });
        let out = pb::SequenceOutput { token_ids: ids.to_vec(), finish_info, ..Default::default() };
        pb::GenerateResponse { prompt_info: None, outputs: Some(out) }
    }

    #[test]
    fn a_stream_reads_in_order_and_rejects_what_breaks_it() {
        let prompt = pb::GenerateResponse {
            prompt_info: Some(pb::PromptInfo { num_prompt_tokens: 2, ..Default::default() }),
            outputs: None,
        };
        type Want = Result<Vec<Option<TokenEvent>>, ResponseError>;
        let cases: Vec<(&str, Vec<pb::GenerateResponse>, Want)> = vec![
            (
                "prompt, step, finishing step",
                vec![
                    prompt.clone(),
                    output(&[5], None),
                    output(&[9], Some((fr::STOP, Some(pb::StopReason::StopTokenId(9))))),
                ],
                Ok(vec![
                    None,
                    Some(TokenEvent { token_ids: vec![5], ..Default::default() }),
                    Some(TokenEvent {
                        token_ids: vec![9],
                        finish: Some(FinishReason::Stop),
                        stop_reason: Some(StopReason::TokenId(9)),
                        cached_tokens: Some(3),
                        ..Default::default()
                    }),
                ]),
            ),
            (
                "EOS is no stop reason",
                vec![output(&[2], Some((fr::STOP, Some(pb::StopReason::EosTokenId(2)))))],
                Ok(vec![Some(TokenEvent {
                    token_ids: vec![2],
                    finish: Some(FinishReason::Stop),
                    cached_tokens: Some(3),
                    ..Default::default()
                })]),
            ),
            (
                "unknown enum value",
                vec![output(&[1], Some((7, None)))],
                Err(ResponseError::UnknownFinishReason("7".into())),
            ),
            ("empty message", vec![pb::GenerateResponse::default()], Err(ResponseError::Empty)),
            (
                "after the finish",
                vec![output(&[1], Some((fr::LENGTH, None))), output(&[2], None)],
                Err(ResponseError::AfterComplete),
            ),
        ];
        for (name, messages, want) in cases {
            let mut r = GenerateReader::default();
            let got: Result<Vec<_>, _> = messages.into_iter().map(|m| r.event(m)).collect();
            assert_eq!(got, want, "{name}");
        }
    }
}
