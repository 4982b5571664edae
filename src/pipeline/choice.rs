//! One choice's output state: incremental detokenization, stop strings (vLLM's
//! `BaseIncrementalDetokenizer.update` semantics, including the stop-token skip and trimming
//! token ids after a stop string), the finish reason, and what has been streamed so far.

use super::params::OutputOptions;
use super::parse::{OutputParser, ParsedDelta};
use crate::engine::{FinishReason, Logprobs, StopReason, TokenEvent};
use shardgate_text::detokenize::IncrementalDecoder;
use shardgate_text::stops;
use shardgate_text::tokenizer::Tokenizer;

/// Why a choice finished, and vLLM's stop reason (the stop string or token that ended it).
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    pub reason: FinishReason,
    pub stop_reason: Option<StopReason>,
}

pub struct ChoiceState {
    pub index: u32,
    decoder: IncrementalDecoder,
    /// All output text so far (cut at a stop string once one matched).
    pub text: String,
    pub token_ids: Vec<u32>,
    /// Bytes of `text` already handed to the client.
    sent: usize,
    pub finish: Option<Finish>,
    pub cached_tokens: Option<u32>,
    /// Logprobs of the tokens not yet handed out (all of them when not streaming).
    pub pending_logprobs: Vec<TokenLogprob>,
    /// The chat parse stage (reasoning, tool calls); `None` for plain text.
    pub parser: Option<OutputParser>,
    parser_finished: bool,
    logprob_context: Vec<u32>,
    /// Echo with logprobs: the prompt's logprobs not yet handed out, first token unscored.
    pub prompt_logprobs: Vec<TokenLogprob>,
    prompt_context: std::collections::VecDeque<u32>,
    /// The first prompt token, until its unscored row is written (prompt logprobs may arrive
    /// over several events).
    first_prompt_token: Option<u32>,
}

/// One generated token's logprob and its position's alternatives, as text. `alternatives`
/// is vLLM's per-position dict in order: the sampled token first, then the engine's top-k,
/// each id once.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub token: String,
    /// `None` for the first prompt token, which no model scores.
    pub logprob: Option<f32>,
    pub alternatives: Vec<(String, f32)>,
}

/// Preceding sampled tokens used to complete a token that ends in half a UTF-8 character
/// (four bytes is the longest character).
const LOGPROB_CONTEXT_TOKENS: usize = 4;

/// What an engine event did to a choice.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Applied {
    /// A stop string matched: the engine must be told to stop (the request is still running).
    pub stop_string_hit: bool,
    /// The choice is finished (by the engine or by a stop string).
    pub finished: bool,
}

impl ChoiceState {
    pub fn new(index: u32, tokenizer: &Tokenizer, prompt: &[u32], opts: &OutputOptions) -> Self {
        ChoiceState {
            index,
            decoder: IncrementalDecoder::new(
                tokenizer,
                prompt,
                opts.skip_special_tokens,
                opts.spaces_between_special_tokens,
            ),
            text: String::new(),
            token_ids: Vec::new(),
            sent: 0,
            finish: None,
            cached_tokens: None,
            pending_logprobs: Vec::new(),
            parser: None,
            parser_finished: false,
            logprob_context: Vec::new(),
            prompt_logprobs: Vec::new(),
            prompt_context: std::collections::VecDeque::new(),
            first_prompt_token: prompt.first().copied(),
        }
    }

    pub fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// Applies one engine event; an ERROR finish never gets here (`generate` makes it a fault).
    pub fn apply(&mut self, tokenizer: &Tokenizer, opts: &OutputOptions, ev: TokenEvent) -> Applied {
        debug_assert!(self.finish.is_none(), "event after finish");
        if ev.cached_tokens.is_some() {
            self.cached_tokens = ev.cached_tokens;
        }
        if let Some(lp) = ev.prompt_logprobs {
            self.push_prompt_logprobs(tokenizer, lp);
        }
        if let Some(lp) = ev.logprobs {
            self.push_logprobs(tokenizer, lp);
        }
        let before = self.token_ids.len();
        let stop_hit = self.push_tokens(tokenizer, opts, &ev.token_ids, ev.finish == Some(FinishReason::Stop));
        if let Some(parser) = &mut self.parser {
            // The tokens the output kept (a stop string cuts the rest), stop token included:
            // it ends a Harmony message.
            parser.push_tokens(&self.token_ids[before.min(self.token_ids.len())..]);
        }
        if let Some(stop_index) = stop_hit {
            let stop_reason = Some(StopReason::Text(opts.stop[stop_index].clone()));
            self.finish = Some(Finish { reason: FinishReason::Stop, stop_reason });
            return Applied { stop_string_hit: ev.finish.is_none(), finished: true };
        }
        if let Some(reason) = ev.finish {
            self.finish = Some(engine_finish(reason, ev.stop_reason, opts));
            return Applied { finished: true, ..Default::default() };
        }
        Applied::default()
    }

    /// The next delta through the parse stage (plain text without one). The parse stage is
    /// closed exactly once, with the last delta of a finished choice.
    pub fn take_parsed_delta(&mut self, opts: &OutputOptions) -> ParsedDelta {
        let finished = self.finish.is_some();
        let text = self.take_delta(opts).to_string();
        let Some(parser) = &mut self.parser else {
            return ParsedDelta::text(text);
        };
        let mut delta = parser.push(&text);
        if finished && !self.parser_finished {
            self.parser_finished = true;
            let tail = parser.finish();
            delta.content.push_str(&tail.content);
            delta.reasoning.push_str(&tail.reasoning);
            delta.calls.extend(tail.calls);
        }
        delta
    }

    /// The choice stopped normally having called tools (clients are told it ended in tool
    /// calls, not in a plain stop).
    pub fn ended_in_tool_calls(&self) -> bool {
        self.finish.as_ref().is_some_and(|f| f.reason == FinishReason::Stop)
            && self.parser.as_ref().is_some_and(OutputParser::ends_in_tool_calls)
    }

    fn push_logprobs(&mut self, tokenizer: &Tokenizer, lp: Logprobs) {
        for row in lp.rows {
            // Context: the sampled tokens before this position (all of them have logprobs).
            let context = &self.logprob_context[..];
            let token = tokenizer.logprob_token_text(row.token_id, context);
            let mut seen = vec![row.token_id];
            let mut alternatives = vec![(token.clone(), row.logprob)];
            for &(id, l) in &row.top {
                if !seen.contains(&id) {
                    seen.push(id);
                    alternatives.push((tokenizer.logprob_token_text(id, context), l));
                }
            }
            self.pending_logprobs.push(TokenLogprob { token, logprob: Some(row.logprob), alternatives });
            if self.logprob_context.len() == LOGPROB_CONTEXT_TOKENS {
                self.logprob_context.remove(0);
            }
            self.logprob_context.push(row.token_id);
        }
    }

    /// Prompt logprobs (echo): the first prompt token unscored, then each scored position; a
    /// position's context is the scored prompt tokens before it, as vLLM takes it.
    fn push_prompt_logprobs(&mut self, tokenizer: &Tokenizer, lp: Logprobs) {
        if let Some(first) = self.first_prompt_token.take() {
            self.prompt_logprobs.push(TokenLogprob {
                token: tokenizer.decode_like_transformers(&[first]),
                logprob: None,
                alternatives: Vec::new(),
            });
        }
        for row in lp.rows {
            let scored: Vec<u32> = self.prompt_context.iter().copied().collect();
            let token = tokenizer.logprob_token_text(row.token_id, &scored);
            let mut seen = vec![row.token_id];
            let mut alternatives = vec![(token.clone(), row.logprob)];
            for &(id, l) in &row.top {
                if !seen.contains(&id) {
                    seen.push(id);
                    alternatives.push((tokenizer.logprob_token_text(id, &scored), l));
                }
            }
            self.prompt_logprobs.push(TokenLogprob { token, logprob: Some(row.logprob), alternatives });
            if self.prompt_context.len() == LOGPROB_CONTEXT_TOKENS {
                self.prompt_context.pop_front();
            }
            self.prompt_context.push_back(row.token_id);
        }
    }

    /// Detokenizes new tokens and checks stop strings. Returns the matched stop's index.
    fn push_tokens(
        &mut self,
        tokenizer: &Tokenizer,
        opts: &OutputOptions,
        new: &[u32],
        stop_terminated: bool,
    ) -> Option<usize> {
        if new.is_empty() {
            return None;
        }
        // The token that made the engine stop (EOS or a stop token) is not text, unless asked.
        let (detok, skipped) = if stop_terminated && !opts.include_stop_str_in_output {
            (&new[..new.len() - 1], Some(new[new.len() - 1]))
        } else {
            (new, None)
        };
        let prev_tokens = self.token_ids.len();
        let checking = !opts.stop.is_empty();
        let mut offsets: Vec<usize> = Vec::with_capacity(if checking { new.len() + 1 } else { 0 });
        if checking {
            offsets.push(self.text.len());
        }
        for &id in detok {
            self.token_ids.push(id);
            let piece = self.decoder.step(tokenizer, id);
            self.text.push_str(&piece);
            if checking {
                offsets.push(self.text.len());
            }
        }
        if let Some(id) = skipped {
            self.token_ids.push(id);
            if checking {
                offsets.push(self.text.len());
            }
        }
        if !checking || self.token_ids.len() <= opts.min_tokens as usize {
            return None;
        }
        let first_checked = (opts.min_tokens as usize).saturating_sub(prev_tokens).min(offsets.len() - 1);
        let m = stops::check(&self.text, offsets[first_checked], &opts.stop, opts.include_stop_str_in_output)?;
        // Keep the tokens up to the end of the stop string; later ones never happened.
        let stop_end = m.end;
        let kept = offsets[1..].iter().position(|&o| o >= stop_end).map_or(offsets.len(), |p| p + 1);
        self.token_ids.truncate(prev_tokens + kept);
        if let Some(cut) = m.truncate_to {
            debug_assert!(cut >= self.sent, "stop string cut into text already sent");
            self.text.truncate(cut);
            self.sent = self.sent.min(cut);
        }
        Some(m.stop_index)
    }

    /// Text not yet handed out. While running, the end that could still become a stop string
    /// is held back.
    pub fn take_delta(&mut self, opts: &OutputOptions) -> &str {
        let end = if self.finish.is_some() {
            self.text.len()
        } else {
            let hold = stops::holdback_len(&self.text[self.sent..], &opts.stop);
            self.text.len() - hold
        };
        let start = self.sent;
        self.sent = end.max(start);
        &self.text[start..self.sent]
    }
}

fn engine_finish(reason: FinishReason, stop_reason: Option<StopReason>, opts: &OutputOptions) -> Finish {
    match reason {
        FinishReason::Stop => {
            // A stop string we sent as a token id is reported as the string.
            let stop_reason = match stop_reason {
                Some(StopReason::TokenId(id)) => match opts.stop_string_tokens.iter().find(|&&(t, _)| t == id) {
                    Some(&(_, i)) => Some(StopReason::Text(opts.stop[i].clone())),
                    None => Some(StopReason::TokenId(id)),
                },
                other => other,
            };
            Finish { reason, stop_reason }
        }
        FinishReason::Repetition => {
            Finish { reason, stop_reason: stop_reason.or(Some(StopReason::Text("repetition_detected".into()))) }
        }
        FinishReason::Length | FinishReason::Abort | FinishReason::Error => Finish { reason, stop_reason: None },
    }
}
