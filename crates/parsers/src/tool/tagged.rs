//! Calls whose name is written in markup: qwen_xml, glm45/47, minimax m2/m3,
//! the DeepSeek families, step3, kimik2 and kimi_k3. A [`TagSyntax`] holds a
//! family's markers; [`TagDecoder`] is the one machine for all of them:
//!
//! ```text
//! section_open? ( noise* call_open HEADER header_end  BODY  call_close )+ section_close?
//! BODY := ( param_open KEY header_end value_open? VALUE param_close )*   parameters
//!       | ```json? {JSON} ```?                                            JSON arguments
//!       | nested elements (minimax_m3, see nested_xml)
//! ```
//!
//! Parameters are written one member at a time; a string-typed value is
//! streamed as it arrives. A value or body also ends at the next parameter,
//! call or section marker, so a missing closing tag does not swallow the
//! rest of the output.

use serde_json::Value;

use super::json_args::{JsonStatus, JsonStreamer};
use super::markup::{derive_name, parse_header, Header, HeaderParse};
use super::nested_xml;
use super::param_value::{Typing, ValueState, ValueText};
use super::region::{Decision, RegionDecoder};
use super::schema;
use super::sink::{is_valid_name, CallSink, ObjectWriter};
use crate::stream_core::{expect_at_start, leading_whitespace_len, scan, Expect, Scan};

/// Calls grouped in a section. The section's opening marker is the
/// family's trigger (see `formats`); only its close is needed here.
pub(crate) struct Section {
    pub close: &'static str,
}

pub(crate) struct ParamSyntax {
    pub header: Header,
    /// A tag between the key and the value (`<arg_value>`).
    pub value_open: Option<&'static str>,
    pub close: &'static str,
    pub typing: Typing,
    pub text: ValueText,
}

pub(crate) enum Body {
    /// `json_fallback`: a body starting with `{` is JSON arguments instead.
    Params { params: ParamSyntax, json_fallback: bool },
    /// `fence`: the JSON may sit in a ```json fence.
    Json { fence: bool },
    /// Nested elements (minimax_m3).
    Nested,
}

pub(crate) struct TagSyntax {
    pub section: Option<Section>,
    /// Markers skipped between calls inside a section.
    pub between: &'static [&'static str],
    pub call: Header,
    pub call_close: &'static [&'static str],
    /// A new call marker inside a body ends the current call.
    pub reopen_ends_call: bool,
    pub body: Body,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Term {
    CallClose,
    SectionClose,
    CallOpen,
    ParamOpen,
    ParamClose,
}

/// A set of terminators and their roles.
#[derive(Default)]
struct Terms {
    texts: Vec<&'static str>,
    roles: Vec<Term>,
}

impl Terms {
    fn add(&mut self, text: &'static str, role: Term) {
        self.texts.push(text);
        self.roles.push(role);
    }
}

enum State {
    Section,
    /// The text starts with the open literal (`literal_len` bytes, 0 when
    /// the engine consumed it as the trigger).
    Header {
        literal_len: usize,
    },
    Params,
    ParamHeader {
        literal_len: usize,
    },
    ValueOpen(ValueState),
    Value(ValueState),
    JsonPrelude,
    JsonArgs(JsonStreamer),
    JsonTail,
    Nested(String),
}

pub(crate) struct TagDecoder {
    syntax: &'static TagSyntax,
    in_section: bool,
    state: State,
    name: String,
    writer: Option<ObjectWriter>,
    json_checked: bool,
    body_terms: Terms,
    param_terms: Terms,
    value_terms: Terms,
}

impl TagDecoder {
    /// After the section-open trigger.
    pub(crate) fn in_section(syntax: &'static TagSyntax) -> Self {
        Self::new(syntax, true, State::Section)
    }

    /// After a call-open trigger (a call outside any section).
    pub(crate) fn bare_call(syntax: &'static TagSyntax) -> Self {
        Self::new(syntax, false, State::Header { literal_len: 0 })
    }

    fn new(syntax: &'static TagSyntax, in_section: bool, state: State) -> Self {
        let mut body_terms = Terms::default();
        for close in syntax.call_close {
            body_terms.add(close, Term::CallClose);
        }
        if let Some(section) = &syntax.section {
            body_terms.add(section.close, Term::SectionClose);
        }
        if syntax.reopen_ends_call {
            body_terms.add(syntax.call.open, Term::CallOpen);
        }
        let (mut param_terms, mut value_terms) = (Terms::default(), Terms::default());
        if let Body::Params { params, .. } = &syntax.body {
            value_terms.add(params.close, Term::ParamClose);
            for terms in [&mut param_terms, &mut value_terms] {
                terms.add(params.header.open, Term::ParamOpen);
                for (text, role) in body_terms.texts.iter().zip(&body_terms.roles) {
                    terms.add(text, *role);
                }
            }
        }
        Self {
            syntax,
            in_section,
            state,
            name: String::new(),
            writer: None,
            json_checked: false,
            body_terms,
            param_terms,
            value_terms,
        }
    }

    fn params(&self) -> Option<&'static ParamSyntax> {
        match &self.syntax.body {
            Body::Params { params, .. } => Some(params),
            _ => None,
        }
    }

    /// Gives up on text that is not a call: rejected if nothing was begun,
    /// otherwise the region ends here and the rest is content.
    fn abandon(sink: &CallSink) -> Decision {
        if sink.region_committed() {
            Decision::Done(0)
        } else {
            Decision::Reject
        }
    }

    fn section_step(&mut self, text: &str, at_end: bool, sink: &CallSink) -> Decision {
        let Some(section) = &self.syntax.section else {
            return Self::abandon(sink);
        };
        let blank = leading_whitespace_len(text);
        let mut expected = vec![self.syntax.call.open, section.close];
        expected.extend_from_slice(self.syntax.between);
        match expect_at_start(&text[blank..], &expected) {
            Expect::Matched(0) => {
                self.state = State::Header { literal_len: self.syntax.call.open.len() };
                Decision::Advance(blank)
            }
            Expect::Matched(1) if sink.region_committed() => Decision::Done(blank + section.close.len()),
            Expect::Matched(1) => Decision::Reject,
            Expect::Matched(index) => Decision::Advance(blank + expected[index].len()),
            Expect::Undecided if !at_end => Decision::Wait,
            _ => Self::abandon(sink),
        }
    }

    fn header_step(&mut self, text: &str, literal_len: usize, at_end: bool, sink: &mut CallSink) -> Decision {
        let header = &self.syntax.call;
        let after = text.get(literal_len..).unwrap_or("");
        let (capture, consumed) = match parse_header(after, header, at_end) {
            HeaderParse::Wait => return Decision::Wait,
            HeaderParse::Invalid => return Self::abandon(sink),
            HeaderParse::Parsed { capture, consumed } => (capture, consumed),
        };
        let Some(name) = derive_name(&after[capture.0..capture.1], &header.name).filter(|n| is_valid_name(n)) else {
            return Self::abandon(sink);
        };
        sink.begin(&name);
        self.name = name;
        self.json_checked = false;
        self.writer = None;
        self.state = match &self.syntax.body {
            Body::Params { .. } => {
                self.writer = Some(ObjectWriter::default());
                State::Params
            }
            Body::Json { .. } => State::JsonPrelude,
            Body::Nested => State::Nested(String::new()),
        };
        Decision::Advance(literal_len + consumed)
    }

    /// Ends the current call; the decoder goes on with the section (or the
    /// region ends) after `consumed` bytes.
    fn finish_call(&mut self, consumed: usize, sink: &mut CallSink) -> Decision {
        if let Some(mut writer) = self.writer.take() {
            writer.close(sink);
        }
        sink.end();
        if self.in_section {
            self.state = State::Section;
            Decision::Advance(consumed)
        } else {
            Decision::Done(consumed)
        }
    }

    /// Ends the call at a body terminator found at `at` (`term_len` long):
    /// a call close is consumed, other terminators belong to what follows.
    fn finish_at(&mut self, at: usize, role: Term, term_len: usize, sink: &mut CallSink) -> Decision {
        let consumed = if role == Term::CallClose { at + term_len } else { at };
        self.finish_call(consumed, sink)
    }

    fn params_step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        let json_fallback = matches!(self.syntax.body, Body::Params { json_fallback: true, .. });
        if json_fallback && !self.json_checked {
            let blank = leading_whitespace_len(text);
            if blank == text.len() && !at_end {
                return Decision::Wait;
            }
            self.json_checked = true;
            if text[blank..].starts_with('{') {
                self.writer = None;
                self.state = State::JsonArgs(JsonStreamer::object());
                return Decision::Advance(blank);
            }
        }
        match scan(text, &self.param_terms.texts) {
            Scan::Found { at, index } => match self.param_terms.roles[index] {
                Term::ParamOpen => {
                    self.state = State::ParamHeader { literal_len: self.param_terms.texts[index].len() };
                    Decision::Advance(at)
                }
                role => self.finish_at(at, role, self.param_terms.texts[index].len(), sink),
            },
            Scan::Partial { .. } if at_end => self.finish_call(text.len(), sink),
            Scan::Partial { safe_len: 0 } => Decision::Wait,
            // Text between parameters (usually newlines) is markup.
            Scan::Partial { safe_len } => Decision::Advance(safe_len),
        }
    }

    fn param_header_step(&mut self, text: &str, literal_len: usize, at_end: bool, sink: &CallSink) -> Decision {
        let Some(params) = self.params() else {
            return Decision::Done(0);
        };
        let after = text.get(literal_len..).unwrap_or("");
        let (capture, consumed) = match parse_header(after, &params.header, at_end) {
            HeaderParse::Wait => return Decision::Wait,
            HeaderParse::Invalid => {
                // Not a parameter after all: skip its opening as markup.
                self.state = State::Params;
                return Decision::Advance(literal_len);
            }
            HeaderParse::Parsed { capture, consumed } => (capture, consumed),
        };
        let header_text = &after[capture.0..capture.1];
        self.state = State::Params;
        let Some(key) = derive_name(header_text, &params.header.name).filter(|k| !k.is_empty()) else {
            return Decision::Advance(literal_len + consumed);
        };
        let property_schema = schema::property(sink.schema(&self.name), &key);
        let value = ValueState::new(key, &params.typing, params.text, header_text, property_schema);
        self.state = if params.value_open.is_some() { State::ValueOpen(value) } else { State::Value(value) };
        Decision::Advance(literal_len + consumed)
    }

    fn value_open_step(&mut self, text: &str, at_end: bool) -> Decision {
        let State::ValueOpen(_) = &self.state else {
            return Decision::Advance(0);
        };
        let open = self.params().and_then(|p| p.value_open).unwrap_or_default();
        let blank = leading_whitespace_len(text);
        let matched = match expect_at_start(&text[blank..], &[open]) {
            Expect::Matched(_) => blank + open.len(),
            Expect::Undecided if !at_end => return Decision::Wait,
            // A value without its opening tag starts right here.
            _ => 0,
        };
        if let State::ValueOpen(value) = std::mem::replace(&mut self.state, State::Params) {
            self.state = State::Value(value);
        }
        Decision::Advance(matched)
    }

    fn value_step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        let Some(params) = self.params() else {
            return Decision::Done(0);
        };
        let found = scan(text, &self.value_terms.texts);
        let ended = matches!(found, Scan::Found { .. }) || at_end;
        let text_len = found.text_len(text, at_end);
        let State::Value(value) = &mut self.state else {
            return Decision::Advance(0);
        };
        let piece = &text[..text_len];
        let Some(consumed) = value.take(piece, ended, params.text, self.writer.as_mut(), sink) else {
            return Decision::Wait;
        };
        if !ended {
            return if consumed == 0 { Decision::Wait } else { Decision::Advance(consumed) };
        }
        if let State::Value(value) = std::mem::replace(&mut self.state, State::Params) {
            value.finish(params.text, self.writer.as_mut(), sink);
        }
        match found {
            Scan::Found { at, index } => match self.value_terms.roles[index] {
                Term::ParamClose => Decision::Advance(at + self.value_terms.texts[index].len()),
                Term::ParamOpen => Decision::Advance(at),
                role => self.finish_at(at, role, self.value_terms.texts[index].len(), sink),
            },
            Scan::Partial { .. } => self.finish_call(text.len(), sink),
        }
    }

    fn json_prelude_step(&mut self, text: &str, at_end: bool) -> Decision {
        let fence = matches!(self.syntax.body, Body::Json { fence: true });
        let blank = leading_whitespace_len(text);
        let skipped = if fence {
            match expect_at_start(&text[blank..], &["```json", "```"]) {
                Expect::Matched(index) => blank + ["```json", "```"][index].len(),
                Expect::Undecided if !at_end => return Decision::Wait,
                _ => 0,
            }
        } else {
            0
        };
        self.state = State::JsonArgs(JsonStreamer::object());
        Decision::Advance(skipped)
    }

    fn json_args_step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        let (limit, closed) = match scan(text, &self.body_terms.texts) {
            Scan::Found { at, .. } => (at, true),
            Scan::Partial { .. } if at_end => (text.len(), true),
            Scan::Partial { safe_len } => (safe_len, false),
        };
        let State::JsonArgs(streamer) = &mut self.state else {
            return Decision::Advance(0);
        };
        let mut fragment = String::new();
        let (used, status) = streamer.feed(&text[..limit], closed, &mut fragment);
        let done = status != JsonStatus::Pending || closed;
        if done && status != JsonStatus::Complete {
            streamer.close(&mut fragment);
        }
        sink.args(&fragment);
        if done {
            self.state = State::JsonTail;
            Decision::Advance(used)
        } else if used == 0 {
            Decision::Wait
        } else {
            Decision::Advance(used)
        }
    }

    /// After JSON arguments: skips markup (a closing fence) up to the end of
    /// the call.
    fn json_tail_step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        match scan(text, &self.body_terms.texts) {
            Scan::Found { at, index } => {
                let role = self.body_terms.roles[index];
                self.finish_at(at, role, self.body_terms.texts[index].len(), sink)
            }
            Scan::Partial { .. } if at_end => self.finish_call(text.len(), sink),
            Scan::Partial { safe_len: 0 } => Decision::Wait,
            Scan::Partial { safe_len } => Decision::Advance(safe_len),
        }
    }

    fn nested_step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        let found = scan(text, &self.body_terms.texts);
        let text_len = found.text_len(text, at_end);
        let State::Nested(body) = &mut self.state else {
            return Decision::Advance(0);
        };
        body.push_str(&text[..text_len]);
        let ended = matches!(found, Scan::Found { .. }) || at_end;
        if !ended {
            return if text_len == 0 { Decision::Wait } else { Decision::Advance(text_len) };
        }
        let arguments = nested_xml::arguments(body, sink.schema(&self.name));
        sink.args(&Value::Object(arguments).to_string());
        match found {
            Scan::Found { at, index } => {
                let role = self.body_terms.roles[index];
                self.finish_at(at, role, self.body_terms.texts[index].len(), sink)
            }
            Scan::Partial { .. } => self.finish_call(text.len(), sink),
        }
    }
}

impl RegionDecoder for TagDecoder {
    fn step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        match self.state {
            State::Section => self.section_step(text, at_end, sink),
            State::Header { literal_len } => self.header_step(text, literal_len, at_end, sink),
            State::Params => self.params_step(text, at_end, sink),
            State::ParamHeader { literal_len } => self.param_header_step(text, literal_len, at_end, sink),
            State::ValueOpen(_) => self.value_open_step(text, at_end),
            State::Value(_) => self.value_step(text, at_end, sink),
            State::JsonPrelude => self.json_prelude_step(text, at_end),
            State::JsonArgs(_) => self.json_args_step(text, at_end, sink),
            State::JsonTail => self.json_tail_step(text, at_end, sink),
            State::Nested(_) => self.nested_step(text, at_end, sink),
        }
    }
}
