//! Streams a JSON value written by a model into compact, always-closable JSON.
//!
//! The output is written as the input arrives, so tool-call arguments reach
//! the client as deltas. Two rules keep every prefix of the output closable
//! into valid JSON by [`JsonStreamer::close`] (for a truncated stream, or a
//! call whose end marker arrives early):
//! - structure that needs a following value (a comma, a key and its colon) is
//!   held until that value starts, so a trailing comma or a dangling key is
//!   simply never written;
//! - scalars that are not strings (numbers, `true`, `null`) are written whole,
//!   once the next character proves they ended.
//!
//! It also repairs what serde_json would reject: raw control characters in
//! strings are escaped, unknown escapes become a literal backslash, lone
//! surrogate escapes become U+FFFD, Python's `True`/`False`/`None` become JSON
//! literals, trailing commas vanish. Whitespace outside strings is dropped.

use crate::limits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    Object,
    Array,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Expecting a value (top level, after `:`, after `,` in an array).
    Value,
    /// After `[`: a value or `]`.
    ArrayFirst,
    /// After `{`: a key or `}`.
    KeyFirst,
    /// After `,` in an object: a key (or `}` for a trailing comma).
    Key,
    /// Inside a key string; the key is held.
    InKey,
    /// After a key: `:`.
    Colon,
    /// Inside a value string; written as it comes.
    InString,
    /// After a value: `,` or the closer of the enclosing container.
    AfterValue,
    Done,
    Invalid,
}

/// Where a [`JsonStreamer::feed`] left off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonStatus {
    /// The value is not finished; feed more text (or `close`).
    Pending,
    /// The value ended with the last consumed byte.
    Complete,
    /// The text at the returned offset is not JSON; `close` to finish.
    Invalid,
}

#[derive(Debug, Clone)]
pub(crate) struct JsonStreamer {
    frames: Vec<Frame>,
    state: State,
    held: String,
    /// The top-level value must be an object (tool-call arguments).
    object_only: bool,
    written: bool,
}

impl JsonStreamer {
    /// A streamer for any JSON value.
    pub(crate) fn any() -> Self {
        Self::new(false)
    }

    /// A streamer for an object (arguments). Anything else is invalid.
    pub(crate) fn object() -> Self {
        Self::new(true)
    }

    fn new(object_only: bool) -> Self {
        Self { frames: Vec::new(), state: State::Value, held: String::new(), object_only, written: false }
    }

    /// Consumes as much of `text` as can be decided, appending output to
    /// `out`. Returns the bytes consumed and the status. With `at_end`, a
    /// scalar that reaches the end of `text` is taken as complete.
    pub(crate) fn feed(&mut self, text: &str, at_end: bool, out: &mut String) -> (usize, JsonStatus) {
        let mut pos = 0;
        loop {
            match self.state {
                State::Done => return (pos, JsonStatus::Complete),
                State::Invalid => return (pos, JsonStatus::Invalid),
                State::InString | State::InKey => {
                    let in_key = self.state == State::InKey;
                    let dest = if in_key { &mut self.held } else { &mut *out };
                    let (used, closed) = string_body(&text[pos..], at_end, dest);
                    pos += used;
                    if !closed {
                        return (pos, JsonStatus::Pending);
                    }
                    if in_key {
                        self.held.push('"');
                        self.state = State::Colon;
                    } else {
                        out.push('"');
                        self.after_value();
                    }
                }
                _ => {
                    pos += text[pos..].len() - text[pos..].trim_start().len();
                    let Some(c) = text[pos..].chars().next() else {
                        return (pos, JsonStatus::Pending);
                    };
                    match self.token(&text[pos..], c, at_end, out) {
                        Some(used) => pos += used,
                        None => return (pos, JsonStatus::Pending),
                    }
                }
            }
        }
    }

    /// Handles one token starting with `c`; `None` when it may be incomplete.
    fn token(&mut self, text: &str, c: char, at_end: bool, out: &mut String) -> Option<usize> {
        let top = self.frames.last().copied();
        match (self.state, c) {
            (State::KeyFirst | State::Key, '"') => {
                self.held.push('"');
                self.state = State::InKey;
                Some(1)
            }
            (State::KeyFirst | State::Key, '}') | (State::AfterValue, '}') if top == Some(Frame::Object) => {
                self.close_container('}', out)
            }
            // `]` after a held comma is a trailing comma, not a missing value.
            (State::ArrayFirst | State::Value | State::AfterValue, ']')
                if top == Some(Frame::Array) && (self.state != State::Value || self.held == ",") =>
            {
                self.close_container(']', out)
            }
            (State::Colon, ':') => {
                self.held.push(':');
                self.state = State::Value;
                Some(1)
            }
            (State::AfterValue, ',') => {
                self.held.clear();
                self.held.push(',');
                self.state = if top == Some(Frame::Object) { State::Key } else { State::Value };
                Some(1)
            }
            (State::Value | State::ArrayFirst, _) => self.value_start(text, c, at_end, out),
            _ => {
                self.state = State::Invalid;
                Some(0)
            }
        }
    }

    fn value_start(&mut self, text: &str, c: char, at_end: bool, out: &mut String) -> Option<usize> {
        if self.object_only && self.frames.is_empty() && c != '{' {
            self.state = State::Invalid;
            return Some(0);
        }
        match c {
            '{' | '[' => {
                if self.frames.len() >= limits::tool_arguments_depth_max {
                    self.state = State::Invalid;
                    return Some(0);
                }
                self.write(&c.to_string(), out);
                if c == '{' {
                    self.frames.push(Frame::Object);
                    self.state = State::KeyFirst;
                } else {
                    self.frames.push(Frame::Array);
                    self.state = State::ArrayFirst;
                }
                Some(1)
            }
            '"' => {
                self.write("\"", out);
                self.state = State::InString;
                Some(1)
            }
            '-' | '0'..='9' => {
                let len =
                    text.find(|ch: char| !matches!(ch, '0'..='9' | '-' | '+' | '.' | 'e' | 'E')).unwrap_or(text.len());
                if len == text.len() && !at_end {
                    return None;
                }
                if !is_json_number(&text[..len]) {
                    self.state = State::Invalid;
                    return Some(0);
                }
                self.write(&text[..len], out);
                self.after_value();
                Some(len)
            }
            _ => {
                const LITERALS: [(&str, &str); 6] = [
                    ("true", "true"),
                    ("false", "false"),
                    ("null", "null"),
                    ("True", "true"),
                    ("False", "false"),
                    ("None", "null"),
                ];
                if let Some((word, json)) = LITERALS.iter().find(|(w, _)| text.starts_with(w)) {
                    self.write(json, out);
                    self.after_value();
                    return Some(word.len());
                }
                if !at_end && LITERALS.iter().any(|(w, _)| w.starts_with(text)) {
                    return None;
                }
                self.state = State::Invalid;
                Some(0)
            }
        }
    }

    fn close_container(&mut self, closer: char, out: &mut String) -> Option<usize> {
        // A held comma (trailing comma) is dropped with the rest of the held text.
        self.held.clear();
        self.frames.pop();
        out.push(closer);
        self.after_value();
        Some(1)
    }

    /// Writes held structure and then `text`.
    fn write(&mut self, text: &str, out: &mut String) {
        out.push_str(&self.held);
        self.held.clear();
        out.push_str(text);
        self.written = true;
    }

    fn after_value(&mut self) {
        self.state = if self.frames.is_empty() { State::Done } else { State::AfterValue };
    }

    /// Finishes the output as a complete JSON value: closes an open string
    /// and every open container; writes `{}` if an object was expected and
    /// nothing was written.
    pub(crate) fn close(&mut self, out: &mut String) {
        if self.state == State::InString {
            out.push('"');
        }
        self.held.clear();
        if !self.written && self.object_only {
            out.push_str("{}");
            self.written = true;
        }
        while let Some(frame) = self.frames.pop() {
            out.push(match frame {
                Frame::Object => '}',
                Frame::Array => ']',
            });
        }
        self.state = State::Done;
    }
}

/// Copies string content up to and including the closing quote's position
/// (the quote itself is consumed but not written). Returns the bytes consumed
/// and whether the string closed. An escape that may be incomplete waits for
/// more text unless `at_end`.
fn string_body(text: &str, at_end: bool, out: &mut String) -> (usize, bool) {
    let mut pos = 0;
    while let Some(c) = text[pos..].chars().next() {
        match c {
            '"' => return (pos + 1, true),
            '\\' => match escape(&text[pos..], out) {
                Some(used) => pos += used,
                None if at_end => return (text.len(), false),
                None => return (pos, false),
            },
            c if (c as u32) < 0x20 => {
                push_control_escape(c, out);
                pos += 1;
            }
            c => {
                out.push(c);
                pos += c.len_utf8();
            }
        }
    }
    (pos, false)
}

/// Writes one escape sequence starting at `text[0] == '\\'`; returns bytes
/// consumed, or `None` if more text is needed to decide.
fn escape(text: &str, out: &mut String) -> Option<usize> {
    let next = text[1..].chars().next()?;
    match next {
        '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' => {
            out.push('\\');
            out.push(next);
            Some(2)
        }
        'u' => unicode_escape(text, out),
        _ => {
            // Not a JSON escape: keep the backslash as a character.
            out.push_str("\\\\");
            Some(1)
        }
    }
}

fn unicode_escape(text: &str, out: &mut String) -> Option<usize> {
    let Some(unit) = hex4(text.get(2..)?)? else {
        out.push_str("\\\\");
        return Some(1);
    };
    if (0xDC00..0xE000).contains(&unit) {
        out.push_str("\\ufffd");
        return Some(6);
    }
    if (0xD800..0xDC00).contains(&unit) {
        // A high surrogate is valid only when a low one follows.
        let rest = &text[6..];
        let low = if rest.starts_with("\\u") {
            hex4(rest.get(2..)?)?
        } else if "\\u".starts_with(rest) {
            return None;
        } else {
            None
        };
        return Some(match low {
            Some(low) if (0xDC00..0xE000).contains(&low) => {
                out.push_str(&text[..12]);
                12
            }
            _ => {
                out.push_str("\\ufffd");
                6
            }
        });
    }
    out.push_str(&text[..6]);
    Some(6)
}

/// Parses four hex digits: `None` while fewer than four characters are there
/// and all of them are hex, `Some(None)` once they are known not to be hex.
fn hex4(text: &str) -> Option<Option<u32>> {
    let mut value = 0u32;
    let mut count = 0;
    for c in text.chars().take(4) {
        let Some(digit) = c.to_digit(16) else {
            return Some(None);
        };
        value = value * 16 + digit;
        count += 1;
    }
    (count == 4).then_some(Some(value))
}

fn push_control_escape(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{08}' => out.push_str("\\b"),
        '\u{0c}' => out.push_str("\\f"),
        _ => out.push_str(&format!("\\u{:04x}", c as u32)),
    }
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
pub(crate) fn is_json_number(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    let int_start = i;
    let int_len = digits(&mut i);
    if int_len == 0 || (int_len > 1 && b[int_start] == b'0') {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams `input` in chunks of `chunk_len` bytes (at char boundaries),
    /// then closes; returns the output.
    fn stream(input: &str, chunk_len: usize) -> (String, JsonStatus) {
        let mut streamer = JsonStreamer::object();
        let mut out = String::new();
        let mut buffer = String::new();
        let mut status = JsonStatus::Pending;
        let chars: Vec<char> = input.chars().collect();
        for chunk in chars.chunks(chunk_len.max(1)) {
            buffer.extend(chunk);
            let (used, s) = streamer.feed(&buffer, false, &mut out);
            buffer.drain(..used);
            status = s;
            if s != JsonStatus::Pending {
                break;
            }
        }
        if status == JsonStatus::Pending {
            let (used, s) = streamer.feed(&buffer, true, &mut out);
            buffer.drain(..used);
            status = s;
        }
        if status != JsonStatus::Complete {
            streamer.close(&mut out);
        }
        (out, status)
    }

    #[test]
    fn table() {
        let cases: &[(&str, &str, JsonStatus)] = &[
            (r#"{"a": 1, "b": [true, null]}"#, r#"{"a":1,"b":[true,null]}"#, JsonStatus::Complete),
            (r#"{"a": "x\ny"}"#, r#"{"a":"x\ny"}"#, JsonStatus::Complete),
            ("{\"a\": \"line\nbreak\"}", r#"{"a":"line\nbreak"}"#, JsonStatus::Complete),
            (r#"{"a": "trunc"#, r#"{"a":"trunc"}"#, JsonStatus::Pending),
            (r#"{"a": 1, "b":"#, r#"{"a":1}"#, JsonStatus::Pending),
            (r#"{"a": [1, 2,"#, r#"{"a":[1,2]}"#, JsonStatus::Pending),
            (r#"{"a": 1,}"#, r#"{"a":1}"#, JsonStatus::Complete),
            (r#"{"a": True, "b": None}"#, r#"{"a":true,"b":null}"#, JsonStatus::Complete),
            (r#"{"a": "\ud83d\ude00 \ud83d x \q"}"#, r#"{"a":"\ud83d\ude00 \ufffd x \\q"}"#, JsonStatus::Complete),
            (r#"{"a" 1}"#, r#"{}"#, JsonStatus::Invalid),
            (r#"[1]"#, r#"{}"#, JsonStatus::Invalid),
            (r#"{"a": 01}"#, r#"{}"#, JsonStatus::Invalid),
            (r#"{"é": "ü"}"#, r#"{"é":"ü"}"#, JsonStatus::Complete),
        ];
        for (input, want, want_status) in cases {
            for chunk_len in [1, 2, 3, 100] {
                let (out, status) = stream(input, chunk_len);
                assert_eq!(&out, want, "input {input:?} chunk {chunk_len}");
                assert_eq!(status, *want_status, "input {input:?} chunk {chunk_len}");
                assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok(), "{out}");
            }
        }
    }

    #[test]
    fn numbers() {
        for ok in ["0", "-1", "1.5", "1e10", "-0.5E-3"] {
            assert!(is_json_number(ok), "{ok}");
        }
        for bad in ["", "-", "01", "1.", ".5", "1e", "+1", "1-2"] {
            assert!(!is_json_number(bad), "{bad}");
        }
    }
}
