//! Sending a generation once more when its engine failed before producing anything for it.
//!
//! The decision (`decide`) is taken per generation, not per sample: all `n` × prompts engine
//! requests of a generation go to one worker, a worker's link fails as a whole (a lost rank of
//! a grouped worker fails the link, and so every rank's requests), and one response must come
//! from one worker. A generation is resent, to a worker other than the one that failed, when
//! all of these hold:
//!
//! - the fault is `retry_safe`: the request never reached the engine, or the engine that had it
//!   is gone (it died or its connection closed: `LinkLoss::retry_safe`), so nothing of it runs
//!   any more. A silent, undecodable or unwritable engine, the gateway's own shutdown or a
//!   removal are not; client errors (400s) and a full relay queue (503) never are. An engine's
//!   ERROR finish is when the engine marked its error retryable (vLLM 0.33's
//!   `RequestError.retryable`, e.g. a KV-cache load that failed), and is not otherwise (the
//!   same request would fail everywhere). A retryable one that cannot be resent is a 503 with
//!   Retry-After, any other a 500 with the engine's description;
//! - no engine output for any of its requests has reached the gateway. This is "before the
//!   first byte": a stream has written only what does not depend on the engine (the headers,
//!   chat's role chunk, an echoed prompt, keep-alive comments), which a resent generation
//!   would write identically, so the stream simply continues with the new worker's tokens.
//!   A non-streamed request writes nothing before its end, but it is held to the same rule:
//!   once any sample produced output, the generation is not started again;
//! - it has not been resent already (exactly once more);
//! - another worker is ready (`ShardCtx::pick_link_except`, the `--policy` choice among the
//!   others); otherwise the client gets today's error.
//!
//! Each resend is counted in `smg_worker_retries_total{endpoint}` and logged with its cause and
//! both workers and ranks.

use std::rc::Rc;

use super::choice::ChoiceState;
use super::plan::Generation;
use super::submit::submit_all;
use crate::engine::link::{EngineLink, Submission};
use crate::engine::submit_error::SubmitError;
use crate::error::{ApiError, EngineFault};

/// Whether a failed generation is sent once more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Resend,
    /// The fault may have left work running on the engine, or is not the engine's.
    NotRetrySafe,
    /// The engine already produced output for the generation.
    OutputSeen,
    /// It was resent once already.
    AlreadyResent,
}

/// The rule above, less the availability of another worker.
pub fn decide(fault: &EngineFault, output_seen: bool, resent: bool) -> Decision {
    if !fault.retry_safe {
        Decision::NotRetrySafe
    } else if output_seen {
        Decision::OutputSeen
    } else if resent {
        Decision::AlreadyResent
    } else {
        Decision::Resend
    }
}

/// One generation's retry state: the link its requests are on now, and what rules out a resend.
pub struct Retry {
    link: Rc<EngineLink>,
    output_seen: bool,
    resent: bool,
}

impl Retry {
    pub fn new(link: Rc<EngineLink>) -> Self {
        Retry { link, output_seen: false, resent: false }
    }

    /// The engine delivered output for one of the generation's requests.
    pub fn saw_output(&mut self) {
        self.output_seen = true;
    }

    /// Whether `fault` may be answered by a resend (another worker is looked for then).
    pub fn allows(&self, fault: &EngineFault) -> bool {
        decide(fault, self.output_seen, self.resent) == Decision::Resend
    }

    /// Submits the generation on its link; a fault of the link before anything was sent is
    /// routed around once (see the module comment). Errors are the client's answer.
    pub async fn submit(
        &mut self,
        g: &Generation,
        states: &mut Vec<ChoiceState>,
        subs: &mut Vec<Option<Submission>>,
    ) -> Result<(), ApiError> {
        match submit_all(g, &self.link, states, subs).await {
            Ok(()) => Ok(()),
            Err(SubmitError::Fault(fault)) if self.allows(&fault) => self.resend(g, fault, states, subs).await,
            Err(e) => Err(answer(g, e)),
        }
    }

    /// Drops the generation's requests (aborting any still on the failed link), then submits it
    /// from scratch on another worker's link. Errors are the client's answer: the fault's own
    /// when no other worker is ready, else whatever the second attempt met.
    pub async fn resend(
        &mut self,
        g: &Generation,
        fault: EngineFault,
        states: &mut Vec<ChoiceState>,
        subs: &mut Vec<Option<Submission>>,
    ) -> Result<(), ApiError> {
        debug_assert!(self.allows(&fault));
        self.resent = true;
        subs.clear();
        states.clear();
        let failed = self.link.clone();
        let from = place(&failed, fault.rank.into_iter());
        let tokens = g.prompts.first().map_or(&[][..], |p| &p.token_ids[..]);
        let Some(next) = g.ctx.pick_link_except(tokens, Some(failed.worker.key)) else {
            tracing::warn!(
                "request {}: {from} failed before any output ({}); no other ready worker to retry on",
                g.response_id,
                fault.message
            );
            tracing::warn!("request {} failed: {fault}", g.response_id);
            return Err(fault.to_api_error());
        };
        self.link = next;
        g.ctx.metrics().of(g.link.mode()).retry(g.endpoint);
        let result = submit_all(g, &self.link, states, subs).await;
        let to = place(&self.link, subs.iter().flatten().map(Submission::rank));
        tracing::warn!(
            "request {}: {from} failed before any output ({}); retrying once on {to}",
            g.response_id,
            fault.message
        );
        result.map_err(|e| answer(g, e))
    }
}

/// A submission that stays failed, as the client's answer (a fault is logged; a refusal is the
/// client's own error and is not).
fn answer(g: &Generation, e: SubmitError) -> ApiError {
    if let SubmitError::Fault(fault) = &e {
        tracing::warn!("request {} failed: {fault}", g.response_id);
    }
    e.to_api_error()
}

/// `worker URL rank R` (`ranks R1, R2` for samples spread over ranks; just the worker when the
/// rank is unknown).
fn place(link: &EngineLink, ranks: impl Iterator<Item = usize>) -> String {
    let mut ranks: Vec<usize> = ranks.collect();
    ranks.sort_unstable();
    ranks.dedup();
    let url = link.worker.url();
    match ranks.as_slice() {
        [] => format!("worker {url}"),
        [one] => format!("worker {url} rank {one}"),
        many => {
            let list: Vec<String> = many.iter().map(usize::to_string).collect();
            format!("worker {url} ranks {}", list.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FaultSource;

    #[test]
    fn resent_once_only_for_a_retry_safe_fault_before_any_output() {
        let safe = EngineFault::new(FaultSource::Transport, "engine connection lost: x", true);
        let unsafe_ = EngineFault::new(FaultSource::Transport, "engine connection lost: y", false);
        // (fault, output seen, resent already, decision)
        let cases = [
            (&safe, false, false, Decision::Resend),
            (&safe, true, false, Decision::OutputSeen),
            (&safe, false, true, Decision::AlreadyResent),
            (&safe, true, true, Decision::OutputSeen),
            (&unsafe_, false, false, Decision::NotRetrySafe),
            (&unsafe_, true, false, Decision::NotRetrySafe),
        ];
        for (fault, output_seen, resent, want) in cases {
            assert_eq!(decide(fault, output_seen, resent), want, "{fault} {output_seen} {resent}");
        }
    }
}
