//! What the pipeline tells an API adapter while a generation runs, choice by choice: a choice
//! starts, its output grows (text, reasoning, tool-call pieces, with the logprobs of the tokens
//! behind them), it finishes; at the end, the token counts. Adapters render these in their own
//! wire format (`sink.rs`); none of them is specific to one.
//!
//! A streamed response gets the events as outputs arrive; a one-shot response gets the same
//! kinds of events once everything finished, each choice's whole output in one `Delta`.
//! `Collected` is what a choice's events add up to: one-shot bodies are rendered from it, and
//! a client that concatenates a stream ends up with exactly it.

use super::choice::{Finish, TokenLogprob};
use super::parse::{ParsedDelta, ToolCall};

/// Token accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
}

/// New output of one choice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delta {
    pub choice: u32,
    /// Text, reasoning and tool-call pieces (reasoning first, then text, then calls).
    pub output: ParsedDelta,
    /// The logprobs of the tokens behind it (when asked for).
    pub logprobs: Vec<TokenLogprob>,
    /// The token counts so far, when the request asked for them on every event.
    pub usage: Option<Usage>,
}

/// The end of one choice.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub choice: u32,
    pub finish: Finish,
    /// It stopped normally having called tools.
    pub tool_calls: bool,
    /// The token counts so far, when the request asked for them on every event.
    pub usage: Option<Usage>,
}

/// One event. Per choice: `Start`, then `PromptLogprobs` (echo with logprobs) and `Delta`s in
/// any number, then `Finished`; `Usage` once, last of all.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Start {
        choice: u32,
    },
    /// Logprobs of the prompt's tokens (the first unscored), before the output they precede.
    PromptLogprobs {
        choice: u32,
        rows: Vec<TokenLogprob>,
    },
    Delta(Delta),
    Finished(Finished),
    /// The whole response's token counts.
    Usage(Usage),
}

/// A choice's whole output: what its events add up to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collected {
    pub content: String,
    pub reasoning: String,
    /// Whole calls, their pieces joined.
    pub calls: Vec<ToolCall>,
    pub logprobs: Vec<TokenLogprob>,
    pub prompt_logprobs: Vec<TokenLogprob>,
    /// `None` until the choice finished.
    pub finish: Option<Finish>,
    pub tool_calls: bool,
}

impl Collected {
    fn add(&mut self, d: Delta) {
        append(&mut self.content, d.output.content);
        append(&mut self.reasoning, d.output.reasoning);
        for piece in d.output.calls {
            if piece.index >= self.calls.len() {
                // A call's first piece carries its id and name.
                self.calls.push(ToolCall {
                    id: piece.id.unwrap_or_default(),
                    name: piece.name.unwrap_or_default(),
                    arguments: piece.arguments,
                });
            } else {
                self.calls[piece.index].arguments.push_str(&piece.arguments);
            }
        }
        append_rows(&mut self.logprobs, d.logprobs);
    }
}

/// Moves `more` in when `text` is empty (a one-shot choice's only delta is not copied).
fn append(text: &mut String, more: String) {
    if text.is_empty() {
        *text = more;
    } else {
        text.push_str(&more);
    }
}

fn append_rows(rows: &mut Vec<TokenLogprob>, more: Vec<TokenLogprob>) {
    if rows.is_empty() {
        *rows = more;
    } else {
        rows.extend(more);
    }
}

/// Every choice's `Collected`, and the response's usage, from its events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collector {
    pub choices: Vec<Collected>,
    pub usage: Usage,
}

impl Collector {
    pub fn add(&mut self, event: Event) {
        match event {
            Event::Start { choice } => {
                let at = choice as usize;
                if self.choices.len() <= at {
                    self.choices.resize_with(at + 1, Collected::default);
                }
            }
            Event::PromptLogprobs { choice, rows } => {
                if let Some(c) = self.choices.get_mut(choice as usize) {
                    append_rows(&mut c.prompt_logprobs, rows);
                }
            }
            Event::Delta(d) => {
                if let Some(c) = self.choices.get_mut(d.choice as usize) {
                    c.add(d);
                }
            }
            Event::Finished(f) => {
                if let Some(c) = self.choices.get_mut(f.choice as usize) {
                    c.finish = Some(f.finish);
                    c.tool_calls = f.tool_calls;
                }
            }
            Event::Usage(u) => self.usage = u,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::FinishReason;
    use crate::pipeline::parse::CallDelta;

    fn piece(index: usize, first: bool, arguments: &str) -> CallDelta {
        CallDelta {
            index,
            id: first.then(|| format!("call_{index}")),
            name: first.then(|| format!("f{index}")),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn a_choices_events_add_up_to_its_whole_output() {
        let delta = |content: &str, reasoning: &str, calls: Vec<CallDelta>| {
            let output = ParsedDelta { content: content.into(), reasoning: reasoning.into(), calls };
            Event::Delta(Delta { choice: 1, output, ..Default::default() })
        };
        let finish = Finish { reason: FinishReason::Stop, stop_reason: None };
        let mut c = Collector::default();
        for e in [
            Event::Start { choice: 0 },
            Event::Start { choice: 1 },
            delta("", "plan", vec![]),
            delta("Hi", " more", vec![piece(0, true, "{\"a\":")]),
            delta(" there", "", vec![piece(0, false, "1}"), piece(1, true, "{}")]),
            Event::Finished(Finished { choice: 1, finish: finish.clone(), tool_calls: true, usage: None }),
            Event::Usage(Usage { prompt_tokens: 3, completion_tokens: 4, cached_tokens: 0 }),
        ] {
            c.add(e);
        }
        assert_eq!(c.choices.len(), 2);
        assert_eq!(c.choices[0], Collected::default());
        let one = &c.choices[1];
        assert_eq!((one.content.as_str(), one.reasoning.as_str()), ("Hi there", "plan more"));
        let calls: Vec<(&str, &str, &str)> =
            one.calls.iter().map(|t| (t.id.as_str(), t.name.as_str(), t.arguments.as_str())).collect();
        assert_eq!(calls, vec![("call_0", "f0", "{\"a\":1}"), ("call_1", "f1", "{}")]);
        assert_eq!((one.finish.as_ref(), one.tool_calls), (Some(&finish), true));
        assert_eq!(c.usage.completion_tokens, 4);
    }
}
