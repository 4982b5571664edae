//! vLLM's finish semantics restored on top of TokenSpeed's outputs, per request.
//!
//! The wire reports a finish *type* only. Three things differ from what the pipeline expects of
//! an engine (vLLM's behaviour), and each needs the request's own parameters, which the batch
//! decoder does not have:
//! - `stop_reason`: vLLM names the stop token id that matched (nothing for EOS); TokenSpeed does
//!   not, but the matched token is the event's last, so it is recovered from the request's ids.
//! - `ignore_eos`: vLLM still stops on `stop_token_ids`; TokenSpeed ignores those too. With
//!   both set, the gateway watches for them itself, cuts the event there and must ABORT the
//!   request on the engine, which is still generating.
//! - An engine-side refusal (a check the gateway could not foresee, such as logprobs on an
//!   engine started without `--enable-output-logprobs`) arrives as `abort` with no tokens and no
//!   reason; to the client that is an error, not a cancelled request.

use crate::{FinishReason, RequestError, SamplingParams, StopReason, TokenEvent};

/// The error text for an `abort` before the first token.
pub const REFUSED: &str = "the TokenSpeed engine aborted the request before its first token; the wire carries no \
reason and the engine log names it (logprobs need --enable-output-logprobs, structured outputs need --grammar-backend)";

/// Per-request finish state; the link keeps one next to each live request.
#[derive(Debug, Clone)]
pub struct RequestFinish {
    eos_token_id: Option<u32>,
    stop_token_ids: Vec<u32>,
    /// `ignore_eos` with stop ids: the engine ignores the stop ids, so we watch for them.
    watch: bool,
    min_tokens: u64,
    emitted: u64,
}

impl RequestFinish {
    pub fn new(s: &SamplingParams) -> Self {
        RequestFinish {
            eos_token_id: s.eos_token_id,
            stop_token_ids: s.stop_token_ids.clone(),
            watch: s.ignore_eos && !s.stop_token_ids.is_empty(),
            min_tokens: s.min_tokens.into(),
            emitted: 0,
        }
    }

    /// Completes one decoded event in place. Returns true when the gateway itself finished
    /// the request at a stop token the engine ignores: the engine is still generating, so the
    /// link must send it an ABORT (which produces no further frame).
    pub fn apply(&mut self, ev: &mut TokenEvent) -> bool {
        if self.watch {
            let from = self.emitted;
            let hit = ev.token_ids.iter().enumerate().find(|&(i, t)| {
                // As in vLLM, a stop token counts only once `min_tokens` have been generated.
                from + i as u64 >= self.min_tokens && self.stop_token_ids.contains(t)
            });
            if let Some((i, &token)) = hit {
                let keep = i + 1;
                let engine_finished = ev.finish.is_some() && keep == ev.token_ids.len();
                ev.token_ids.truncate(keep);
                if let Some(lp) = &mut ev.logprobs {
                    lp.rows.truncate(keep);
                }
                ev.finish = Some(FinishReason::Stop);
                ev.stop_reason = Some(StopReason::TokenId(token));
                self.emitted += keep as u64;
                return !engine_finished;
            }
        }
        self.emitted += ev.token_ids.len() as u64;
        match ev.finish {
            Some(FinishReason::Stop) => {
                ev.stop_reason = match ev.token_ids.last() {
                    Some(&t) if Some(t) != self.eos_token_id && self.stop_token_ids.contains(&t) => {
                        Some(StopReason::TokenId(t))
                    }
                    _ => None,
                }
            }
            Some(FinishReason::Abort) if self.emitted == 0 => {
                ev.finish = Some(FinishReason::Error);
                ev.error = Some(RequestError::fatal(REFUSED));
            }
            _ => {}
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::LogprobRow;
    use crate::Logprobs;

    fn ev(tokens: &[u32], finish: Option<FinishReason>) -> TokenEvent {
        TokenEvent { token_ids: tokens.to_vec(), finish, ..Default::default() }
    }

    fn params(ignore_eos: bool, stop: &[u32], min_tokens: u32) -> SamplingParams {
        SamplingParams {
            eos_token_id: (!ignore_eos).then_some(2),
            stop_token_ids: stop.to_vec(),
            ignore_eos,
            min_tokens,
            ..Default::default()
        }
    }

    #[test]
    fn stop_reason_names_a_stop_token_but_not_eos() {
        let mut f = RequestFinish::new(&params(false, &[7, 9], 0));
        let mut e = ev(&[5, 9], Some(FinishReason::Stop));
        assert!(!f.apply(&mut e));
        assert_eq!(e.stop_reason, Some(StopReason::TokenId(9)));
        assert_eq!(e.token_ids, [5, 9], "the stop token stays for the pipeline to skip");
        let mut eos = ev(&[5, 2], Some(FinishReason::Stop));
        RequestFinish::new(&params(false, &[7], 0)).apply(&mut eos);
        assert_eq!(eos.stop_reason, None);
        let mut length = ev(&[9], Some(FinishReason::Length));
        RequestFinish::new(&params(false, &[9], 0)).apply(&mut length);
        assert_eq!(length.stop_reason, None);
    }

    #[test]
    fn ignore_eos_stop_ids_are_watched_by_the_gateway() {
        let mut f = RequestFinish::new(&params(true, &[7], 2));
        let mut first = ev(&[7, 4], None);
        assert!(!f.apply(&mut first), "a stop id before min_tokens is text");
        assert_eq!(first.finish, None);
        let mut second = ev(&[5, 7, 8], None);
        second.logprobs = Some(Logprobs {
            rows: [5, 7, 8].iter().map(|&t| LogprobRow { token_id: t, logprob: -1.0, rank: 0, top: vec![] }).collect(),
        });
        assert!(f.apply(&mut second), "the engine is still running: ABORT it");
        assert_eq!(second.token_ids, [5, 7]);
        assert_eq!(second.logprobs.unwrap().rows.len(), 2);
        assert_eq!((second.finish, second.stop_reason), (Some(FinishReason::Stop), Some(StopReason::TokenId(7))));
        let mut last = ev(&[1, 7], Some(FinishReason::Length));
        assert!(!RequestFinish::new(&params(true, &[7], 0)).apply(&mut last), "the engine finished already");
        assert_eq!(last.finish, Some(FinishReason::Stop));
    }

    #[test]
    fn abort_before_any_token_is_an_error() {
        let mut refused = ev(&[], Some(FinishReason::Abort));
        RequestFinish::new(&params(false, &[], 0)).apply(&mut refused);
        assert_eq!(refused.finish, Some(FinishReason::Error));
        assert_eq!(refused.error, Some(RequestError::fatal(REFUSED)));
        let mut f = RequestFinish::new(&params(false, &[], 0));
        f.apply(&mut ev(&[3], None));
        let mut late = ev(&[], Some(FinishReason::Abort));
        f.apply(&mut late);
        assert_eq!(late.finish, Some(FinishReason::Abort));
    }
}
