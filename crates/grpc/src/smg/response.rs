//! SMG `GenerateResponse` stream → `TokenEvent`s.
//!
//! A streamed Generate sends one chunk per engine step with that step's new tokens, then, when
//! the sample finishes, a `complete` that repeats the last step's tokens (the servicer builds it
//! from the same delta output). So tokens are taken from chunks only, and `complete` becomes an
//! event with the finish and stop reason and no tokens.
//!
//! Logprobs: the servicer lists the first k entries of vLLM's per-token dict, which starts with
//! the sampled token, so a sampled token outside the top k pushes the k-th alternative out
//! (exact for greedy decoding and whenever the sampled token is among the top k). The rank is
//! 1 + the number of listed alternatives scoring higher.

use shardgate_wire::output::LogprobRow;
use shardgate_wire::{FinishReason, Logprobs, RequestError, StopReason, TokenEvent};

use super::messages as pb;
use crate::response_error::ResponseError;

/// vLLM's finish reasons by the names the servicer sends.
pub fn finish_reason(name: &str) -> Result<FinishReason, ResponseError> {
    Ok(match name {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "abort" => FinishReason::Abort,
        "error" => FinishReason::Error,
        "repetition" => FinishReason::Repetition,
        other => return Err(ResponseError::UnknownFinishReason(other.to_string())),
    })
}

/// One Generate call's reading state.
#[derive(Debug, Default)]
pub struct GenerateReader {
    seen_chunk: bool,
    finished: bool,
}

impl GenerateReader {
    pub fn finished(&self) -> bool {
        self.finished
    }

    pub fn event(&mut self, message: pb::GenerateResponse) -> Result<TokenEvent, ResponseError> {
        if self.finished {
            return Err(ResponseError::AfterComplete);
        }
        match message.response.ok_or(ResponseError::Empty)? {
            pb::Response::Chunk(c) => self.chunk(c),
            pb::Response::Complete(c) => self.complete(c),
        }
    }

    fn chunk(&mut self, c: pb::GenerateStreamChunk) -> Result<TokenEvent, ResponseError> {
        if c.index != 0 {
            return Err(ResponseError::UnexpectedIndex(c.index));
        }
        let first = !self.seen_chunk;
        self.seen_chunk = true;
        Ok(TokenEvent {
            token_ids: c.token_ids,
            logprobs: c.output_logprobs.map(output_logprobs).transpose()?,
            prompt_logprobs: c.input_logprobs.map(input_logprobs).transpose()?,
            cached_tokens: first.then_some(c.cached_tokens),
            ..TokenEvent::default()
        })
    }

    fn complete(&mut self, c: pb::GenerateComplete) -> Result<TokenEvent, ResponseError> {
        if c.index != 0 {
            return Err(ResponseError::UnexpectedIndex(c.index));
        }
        let finish = finish_reason(&c.finish_reason)?;
        self.finished = true;
        Ok(TokenEvent {
            finish: Some(finish),
            stop_reason: c.matched_stop.map(|m| match m {
                pb::MatchedStop::TokenId(id) => StopReason::TokenId(id),
                pb::MatchedStop::Text(s) => StopReason::Text(s),
            }),
            // A sample that never produced a chunk (finished at once): its cached count is here.
            cached_tokens: (!self.seen_chunk).then_some(c.cached_tokens),
            error: (finish == FinishReason::Error)
                .then(|| RequestError::fatal("the gRPC worker finished the request with an error")),
            ..TokenEvent::default()
        })
    }
}

fn row(token_id: u32, logprob: f32, top: Option<&pb::TopLogProbs>) -> Result<LogprobRow, ResponseError> {
    let top = match top {
        Some(t) if t.values.len() != t.token_ids.len() => return Err(ResponseError::LogprobShape("top")),
        Some(t) => {
            let mut pairs: Vec<(u32, f32)> = t.token_ids.iter().copied().zip(t.values.iter().copied()).collect();
            // vLLM's order: best first (the servicer's dict order starts with the sampled token).
            pairs.sort_by(|a, b| b.1.total_cmp(&a.1));
            pairs
        }
        None => Vec::new(),
    };
    let rank = 1 + top.iter().filter(|&&(_, v)| v > logprob).count() as i64;
    Ok(LogprobRow { token_id, logprob, rank, top })
}

fn output_logprobs(l: pb::OutputLogProbs) -> Result<Logprobs, ResponseError> {
    if l.token_ids.len() != l.token_logprobs.len()
        || (!l.top_logprobs.is_empty() && l.top_logprobs.len() != l.token_ids.len())
    {
        return Err(ResponseError::LogprobShape("output"));
    }
    let rows = (0..l.token_ids.len())
        .map(|i| row(l.token_ids[i], l.token_logprobs[i], l.top_logprobs.get(i)))
        .collect::<Result<_, _>>()?;
    Ok(Logprobs { rows })
}

/// Prompt logprobs: the first prompt token has none, so rows start at the second, as the ZMQ
/// engines deliver them.
fn input_logprobs(l: pb::InputLogProbs) -> Result<Logprobs, ResponseError> {
    if l.token_ids.len() != l.token_logprobs.len()
        || (!l.top_logprobs.is_empty() && l.top_logprobs.len() != l.token_ids.len())
    {
        return Err(ResponseError::LogprobShape("prompt"));
    }
    let rows = (1..l.token_ids.len())
        .map(|i| {
            let value = l.token_logprobs[i].value.ok_or(ResponseError::LogprobShape("prompt"))?;
            row(l.token_ids[i], value, l.top_logprobs.get(i))
        })
        .collect::<Result<_, _>>()?;
    Ok(Logprobs { rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(ids: &[u32], index: u32) -> pb::GenerateResponse {
        let c = pb::GenerateStreamChunk { token_ids: ids.to_vec(), cached_tokens: 4, index, ..Default::default() };
        pb::GenerateResponse { response: Some(pb::Response::Chunk(c)) }
    }

    fn complete(reason: &str, stop: Option<pb::MatchedStop>) -> pb::GenerateResponse {
        let c = pb::GenerateComplete {
            output_ids: vec![9],
            finish_reason: reason.into(),
            matched_stop: stop,
            ..Default::default()
        };
        pb::GenerateResponse { response: Some(pb::Response::Complete(c)) }
    }

    #[test]
    fn finish_reasons_by_name() {
        let cases = [
            ("stop", Ok(FinishReason::Stop)),
            ("length", Ok(FinishReason::Length)),
            ("abort", Ok(FinishReason::Abort)),
            ("error", Ok(FinishReason::Error)),
            ("repetition", Ok(FinishReason::Repetition)),
            ("eos", Err(ResponseError::UnknownFinishReason("eos".into()))),
            ("", Err(ResponseError::UnknownFinishReason(String::new()))),
        ];
        for (name, want) in cases {
            assert_eq!(finish_reason(name), want, "{name:?}");
        }
    }

    #[test]
    fn a_stream_reads_in_order_and_rejects_what_breaks_it() {
        let stop = Some(pb::MatchedStop::Text("END".into()));
        type Want = Result<Vec<TokenEvent>, ResponseError>;
        let cases: Vec<(&str, Vec<pb::GenerateResponse>, Want)> = vec![
            (
                "two chunks then complete",
                vec![chunk(&[5], 0), chunk(&[9], 0), complete("stop", stop.clone())],
                Ok(vec![
                    TokenEvent { token_ids: vec![5], cached_tokens: Some(4), ..Default::default() },
                    TokenEvent { token_ids: vec![9], ..Default::default() },
                    TokenEvent {
                        finish: Some(FinishReason::Stop),
                        stop_reason: Some(StopReason::Text("END".into())),
                        ..Default::default()
                    },
                ]),
            ),
            ("other index", vec![chunk(&[5], 1)], Err(ResponseError::UnexpectedIndex(1))),
            ("empty oneof", vec![pb::GenerateResponse { response: None }], Err(ResponseError::Empty)),
            ("after complete", vec![complete("length", None), chunk(&[1], 0)], Err(ResponseError::AfterComplete)),
            (
                "unknown reason",
                vec![chunk(&[5], 0), complete("timeout", None)],
                Err(ResponseError::UnknownFinishReason("timeout".into())),
            ),
        ];
        for (name, messages, want) in cases {
            let mut r = GenerateReader::default();
            let got: Result<Vec<_>, _> = messages.into_iter().map(|m| r.event(m)).collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn logprob_rows_sorted_and_ranked() {
        // A sampled token (7, -2.0) that is not the best: listed first by the servicer.
        let top = pb::TopLogProbs { values: vec![-2.0, -0.5, -1.0], token_ids: vec![7, 3, 4] };
        let l = pb::OutputLogProbs { token_logprobs: vec![-2.0], token_ids: vec![7], top_logprobs: vec![top] };
        let rows = output_logprobs(l).unwrap().rows;
        assert_eq!(
            rows,
            vec![LogprobRow { token_id: 7, logprob: -2.0, rank: 3, top: vec![(3, -0.5), (4, -1.0), (7, -2.0)] }]
        );
        let bad = pb::OutputLogProbs { token_logprobs: vec![], token_ids: vec![7], top_logprobs: vec![] };
        assert_eq!(output_logprobs(bad), Err(ResponseError::LogprobShape("output")));
    }
}
