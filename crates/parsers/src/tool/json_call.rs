//! Tool calls written as JSON objects, `{"name": ..., "arguments": {...}}`
//! (or an array of them), inside a family's framing: bare (`json`, `llama`),
//! after `[TOOL_CALLS]` (`mistral`), between `<tool_call>` tags (`qwen`),
//! `<|START_ACTION|>` tags (`cohere`), or a TML tool block (`inkling`).
//!
//! [`CallWalker`] walks the object key by key. The call begins as soon as its
//! name is known; arguments then stream through [`JsonStreamer`]. Arguments
//! that come before the name are collected and sent when the name arrives. An
//! object that ends (or breaks) without a name was not a call.

use serde_json::Value;

use super::json_args::{JsonStatus, JsonStreamer};
use super::region::{Decision, RegionDecoder};
use super::sink::CallSink;
use crate::limits;
use crate::stream_core::{expect_at_start, leading_whitespace_len, scan, Expect, Scan};

/// Which keys carry the function name and its arguments.
pub(crate) struct CallKeys {
    pub name: &'static [&'static str],
    pub arguments: &'static [&'static str],
}

pub(crate) struct JsonSyntax {
    pub keys: CallKeys,
    /// An array of call objects is accepted as well as a single object.
    pub allow_array: bool,
    /// Names must be declared tools (bare JSON, which ordinary answers can
    /// resemble).
    pub strict_names: bool,
    /// Separates consecutive call objects (`;` for Llama).
    pub separator: Option<char>,
    /// Markers ending the region (consumed); empty when the JSON ends it.
    pub close: &'static [&'static str],
}

impl JsonSyntax {
    /// Calls as `{"name": ..., "arguments" | "parameters": {...}}`, one or an array of them.
    pub(crate) const fn calls(strict_names: bool, separator: Option<char>, close: &'static [&'static str]) -> Self {
        const NAME_ARGUMENTS: CallKeys = CallKeys { name: &["name"], arguments: &["arguments", "parameters"] };
        JsonSyntax { keys: NAME_ARGUMENTS, allow_array: true, strict_names, separator, close }
    }
}

/// What the walker did with its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    /// Consumed this much; the object (or array) continues.
    Pending(usize),
    /// The object (or array) ended within the consumed bytes.
    Complete(usize),
    /// Syntax broke after a call was begun; the call was closed.
    Broken(usize),
    /// Not a call.
    Reject,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyRole {
    Name,
    Arguments,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArgsForm {
    /// `{...}`: streamed (or collected until the name arrives).
    Object,
    /// `"{...}"`: a JSON string holding the object, decoded when complete.
    Encoded,
    /// Anything else: ignored, the call gets `{}`.
    Ignored,
}

enum WalkState {
    Start,
    ArrayItem { first: bool },
    ArrayNext,
    KeyOrEnd,
    Key(JsonStreamer, String),
    Colon(KeyRole),
    Value(KeyRole, ArgsForm, JsonStreamer, String),
    ObjectNext,
    Finished,
}

/// The call object being walked.
#[derive(Default)]
struct CallObject {
    name: Option<String>,
    begun: bool,
    /// Arguments text collected before the name was known.
    early_arguments: Option<String>,
    arguments_seen: bool,
}

pub(crate) struct CallWalker {
    syntax: &'static JsonSyntax,
    state: WalkState,
    in_array: bool,
    object: CallObject,
    /// Bytes walked in this region, for the unnamed-object limit.
    walked: usize,
}

impl CallWalker {
    pub(crate) fn new(syntax: &'static JsonSyntax) -> Self {
        Self { syntax, state: WalkState::Start, in_array: false, object: CallObject::default(), walked: 0 }
    }

    /// Walks `text`; with `at_end`, nothing follows it.
    pub(crate) fn walk(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Walk {
        let mut pos = 0;
        loop {
            let before = pos;
            let outcome = self.token(&text[pos..], at_end, sink);
            match outcome {
                Some(Ok(used)) => pos += used,
                Some(Err(broken)) => return self.fail(sink, pos + broken),
                None => {}
            }
            self.walked += pos - before;
            if matches!(self.state, WalkState::Finished) {
                return Walk::Complete(pos);
            }
            if outcome.is_none() || pos == text.len() && !self.has_pending_value() {
                break;
            }
        }
        if at_end {
            // Nothing more will come: close what is open.
            return self.fail(sink, text.len());
        }
        Walk::Pending(pos)
    }

    fn has_pending_value(&self) -> bool {
        matches!(self.state, WalkState::Value(..) | WalkState::Key(..))
    }

    /// Ends the walk early: closes a begun call, else rejects (or, in an
    /// array with earlier calls, drops the unfinished object).
    fn fail(&mut self, sink: &mut CallSink, pos: usize) -> Walk {
        if let WalkState::Value(KeyRole::Arguments, ArgsForm::Object, streamer, buffer) = &mut self.state {
            if self.object.begun {
                buffer.clear();
                streamer.close(buffer);
                sink.args(buffer);
                self.object.arguments_seen = true;
            }
        }
        if self.object.begun {
            if !self.object.arguments_seen {
                sink.args("{}");
            }
            sink.end();
            self.state = WalkState::Finished;
            return Walk::Broken(pos);
        }
        if sink.region_committed() {
            self.state = WalkState::Finished;
            return Walk::Broken(pos);
        }
        Walk::Reject
    }

    /// Processes one token. `Some(Ok(n))`: consumed `n` bytes (0 when only
    /// the state changed). `Some(Err(n))`: the text is broken at `n`. `None`:
    /// waiting for more text.
    fn token(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Option<Result<usize, usize>> {
        if let WalkState::Key(..) | WalkState::Value(..) = self.state {
            return self.continue_value(text, at_end, sink);
        }
        let blank = leading_whitespace_len(text);
        let c = text[blank..].chars().next()?;
        // The limit is checked where a token starts, a position that does
        // not depend on how the text was chunked.
        if !sink.region_committed() && self.walked + blank > limits::tool_call_unnamed_bytes_max {
            return Some(Err(blank));
        }
        let next = match (&self.state, c) {
            (WalkState::Start, '[') if self.syntax.allow_array => {
                self.in_array = true;
                WalkState::ArrayItem { first: true }
            }
            (WalkState::Start | WalkState::ArrayItem { .. }, '{') => {
                self.object = CallObject::default();
                WalkState::KeyOrEnd
            }
            (WalkState::ArrayItem { first: true } | WalkState::ArrayNext, ']') => {
                if !sink.region_committed() {
                    return Some(Err(blank));
                }
                WalkState::Finished
            }
            (WalkState::ArrayNext, ',') => WalkState::ArrayItem { first: false },
            (WalkState::KeyOrEnd, '"') => {
                let outcome = self.start_value(&text[blank..], None, at_end, sink);
                return Some(shift(outcome, blank));
            }
            // `{...,}`: a trailing comma is tolerated.
            (WalkState::KeyOrEnd | WalkState::ObjectNext, '}') => {
                return Some(self.end_object(sink).map(|()| blank + 1).map_err(|()| blank));
            }
            (WalkState::ObjectNext, ',') => WalkState::KeyOrEnd,
            (WalkState::Colon(role), ':') => {
                let role = *role;
                let after = blank + 1;
                let value_blank = leading_whitespace_len(&text[after..]);
                if after + value_blank == text.len() && !at_end {
                    return None;
                }
                let outcome = self.start_value(&text[after + value_blank..], Some(role), at_end, sink);
                return Some(shift(outcome, after + value_blank));
            }
            _ => return Some(Err(blank)),
        };
        self.state = next;
        Some(Ok(blank + c.len_utf8()))
    }

    /// Starts a key (`role` is `None`) or a value and feeds what is there.
    /// `Ok(n)`: consumed `n` bytes; `Err(n)`: broken at `n`.
    fn start_value(
        &mut self,
        text: &str,
        role: Option<KeyRole>,
        at_end: bool,
        sink: &mut CallSink,
    ) -> Result<usize, usize> {
        self.state = match role {
            None => WalkState::Key(JsonStreamer::any(), String::new()),
            Some(role) => {
                let (role, form) = match (role, text.chars().next()) {
                    // Only the first arguments member counts.
                    (KeyRole::Arguments, _) if self.object.arguments_seen => (KeyRole::Other, ArgsForm::Ignored),
                    (KeyRole::Arguments, Some('{')) => (role, ArgsForm::Object),
                    (KeyRole::Arguments, Some('"')) => (role, ArgsForm::Encoded),
                    (role, _) => (role, ArgsForm::Ignored),
                };
                let streamer = if form == ArgsForm::Object { JsonStreamer::object() } else { JsonStreamer::any() };
                WalkState::Value(role, form, streamer, String::new())
            }
        };
        self.continue_value(text, at_end, sink).unwrap_or(Ok(0))
    }

    fn continue_value(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Option<Result<usize, usize>> {
        let streaming_arguments = self.object.begun;
        let (used, status, finished) = match &mut self.state {
            WalkState::Key(streamer, buffer) => {
                let (used, status) = streamer.feed(text, at_end, buffer);
                (used, status, None)
            }
            WalkState::Value(role, form, streamer, buffer) => {
                let (used, status) = streamer.feed(text, at_end, buffer);
                if *role == KeyRole::Arguments && *form == ArgsForm::Object && streaming_arguments {
                    sink.args(buffer);
                    buffer.clear();
                }
                (used, status, Some((*role, *form)))
            }
            _ => return Some(Ok(0)),
        };
        match status {
            JsonStatus::Pending if used == 0 => None,
            JsonStatus::Pending => Some(Ok(used)),
            JsonStatus::Invalid => Some(Err(used)),
            JsonStatus::Complete => {
                let state = std::mem::replace(&mut self.state, WalkState::ObjectNext);
                match (finished, state) {
                    (None, WalkState::Key(_, key)) => {
                        self.state = WalkState::Colon(self.role_of(&key));
                    }
                    (Some((role, form)), WalkState::Value(_, _, _, buffer)) => {
                        let is_call = self.value_complete(role, form, buffer, sink);
                        if !is_call {
                            return Some(Err(used));
                        }
                    }
                    _ => {}
                }
                Some(Ok(used))
            }
        }
    }

    fn role_of(&self, key_json: &str) -> KeyRole {
        let key: String = serde_json::from_str(key_json).unwrap_or_default();
        if self.syntax.keys.name.contains(&key.as_str()) {
            KeyRole::Name
        } else if self.syntax.keys.arguments.contains(&key.as_str()) {
            KeyRole::Arguments
        } else {
            KeyRole::Other
        }
    }

    /// Handles a finished value; `false` if it shows this is not a call.
    fn value_complete(&mut self, role: KeyRole, form: ArgsForm, buffer: String, sink: &mut CallSink) -> bool {
        match role {
            KeyRole::Name => {
                let Ok(Value::String(name)) = serde_json::from_str::<Value>(&buffer) else {
                    return true;
                };
                if self.object.name.is_some() {
                    return true;
                }
                if name.is_empty() || self.syntax.strict_names && !sink.is_declared(&name) {
                    return false;
                }
                self.object.name = Some(name.clone());
                sink.begin(&name);
                self.object.begun = true;
                if let Some(early) = self.object.early_arguments.take() {
                    sink.args(&early);
                }
            }
            KeyRole::Arguments => {
                let text = match form {
                    ArgsForm::Object => buffer,
                    ArgsForm::Encoded => decode_encoded_arguments(&buffer),
                    ArgsForm::Ignored => "{}".to_string(),
                };
                self.object.arguments_seen = true;
                if self.object.begun {
                    sink.args(&text);
                } else {
                    self.object.early_arguments = Some(text);
                }
            }
            KeyRole::Other => {}
        }
        true
    }

    fn end_object(&mut self, sink: &mut CallSink) -> Result<(), ()> {
        if !self.object.begun {
            return if sink.region_committed() && self.in_array {
                // An unnamed object among calls: skipped.
                self.state = WalkState::ArrayNext;
                Ok(())
            } else {
                Err(())
            };
        }
        if !self.object.arguments_seen {
            sink.args("{}");
        }
        sink.end();
        self.object = CallObject::default();
        self.state = if self.in_array { WalkState::ArrayNext } else { WalkState::Finished };
        Ok(())
    }
}

/// Moves a token outcome's offset past `prefix_len` bytes.
fn shift(outcome: Result<usize, usize>, prefix_len: usize) -> Result<usize, usize> {
    match outcome {
        Ok(used) => Ok(prefix_len + used),
        Err(at) => Err(prefix_len + at),
    }
}

/// Arguments given as a JSON string: the object it holds, re-serialised, or
/// `{}` if it holds something else.
fn decode_encoded_arguments(quoted: &str) -> String {
    let inner: Option<Value> =
        serde_json::from_str::<String>(quoted).ok().and_then(|text| serde_json::from_str(&text).ok());
    match inner {
        Some(object @ Value::Object(_)) => object.to_string(),
        _ => "{}".to_string(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Walk,
    AfterCall,
    /// A call broke: skip to the closing marker.
    Skip,
}

/// A region holding JSON call objects, with optional separators and closing
/// markers around them.
pub(crate) struct JsonRegion {
    syntax: &'static JsonSyntax,
    walker: CallWalker,
    phase: Phase,
}

impl JsonRegion {
    pub(crate) fn new(syntax: &'static JsonSyntax) -> Self {
        Self { syntax, walker: CallWalker::new(syntax), phase: Phase::Walk }
    }

    fn walk_step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        // The walker never sees a closing marker: a call left open by it is
        // closed where the marker is.
        let (limit, closed) = if self.syntax.close.is_empty() {
            (text.len(), at_end)
        } else {
            match scan(text, self.syntax.close) {
                Scan::Found { at, .. } => (at, true),
                Scan::Partial { .. } if at_end => (text.len(), true),
                Scan::Partial { safe_len } => (safe_len, false),
            }
        };
        match self.walker.walk(&text[..limit], closed, sink) {
            Walk::Pending(0) => Decision::Wait,
            Walk::Pending(used) => Decision::Advance(used),
            Walk::Complete(used) => {
                self.phase = Phase::AfterCall;
                Decision::Advance(used)
            }
            Walk::Broken(used) => {
                self.phase = Phase::Skip;
                Decision::Advance(used)
            }
            Walk::Reject => Decision::Reject,
        }
    }

    fn after_call_step(&mut self, text: &str, at_end: bool) -> Decision {
        let blank = leading_whitespace_len(text);
        let rest = &text[blank..];
        if let (Some(separator), Some(c)) = (self.syntax.separator, rest.chars().next()) {
            if c == separator {
                self.walker = CallWalker::new(self.syntax);
                self.phase = Phase::Walk;
                return Decision::Advance(blank + c.len_utf8());
            }
        }
        match expect_at_start(rest, self.syntax.close) {
            Expect::Matched(index) => Decision::Done(blank + self.syntax.close[index].len()),
            Expect::Undecided if !at_end => Decision::Wait,
            _ if rest.is_empty() && !at_end => Decision::Wait,
            // Whatever follows is content, blank text included.
            _ => Decision::Done(0),
        }
    }

    fn skip_step(&mut self, text: &str, at_end: bool) -> Decision {
        if self.syntax.close.is_empty() {
            return Decision::Done(0);
        }
        match scan(text, self.syntax.close) {
            Scan::Found { at, index } => Decision::Done(at + self.syntax.close[index].len()),
            Scan::Partial { .. } if at_end => Decision::Done(text.len()),
            Scan::Partial { safe_len: 0 } => Decision::Wait,
            Scan::Partial { safe_len } => Decision::Advance(safe_len),
        }
    }
}

impl RegionDecoder for JsonRegion {
    fn step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        match self.phase {
            Phase::Walk => self.walk_step(text, at_end, sink),
            Phase::AfterCall => self.after_call_step(text, at_end),
            Phase::Skip => self.skip_step(text, at_end),
        }
    }
}
