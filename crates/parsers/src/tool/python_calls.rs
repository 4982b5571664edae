//! Tool calls written as Python literals: `pythonic` (`[f(a=1), g()]`, as
//! Llama 4 emits) and `sarashina` (`[{'name': 'f', 'arguments': {...}}]`).
//!
//! The list is buffered until its brackets balance and then parsed whole, so
//! calls are emitted together when the list closes. A candidate is rejected
//! (released as content) as soon as its opening cannot be a call list.

use serde_json::{Map, Value};

use super::py_literal::{self, Balance, BalanceStatus, PyCall};
use super::region::{Decision, RegionDecoder};
use super::sink::{is_valid_name, CallSink};
use crate::limits;
use crate::stream_core::floor_char_boundary;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PyShape {
    /// `[name(key=value, ...), ...]`
    CallList,
    /// `[{'name': ..., 'arguments': {...}}, ...]` or one such dict.
    DictList,
}

pub(crate) struct PySyntax {
    pub shape: PyShape,
    /// Names must be declared tools (bare lists, which prose can resemble).
    pub strict_names: bool,
}

pub(crate) struct PythonCallsDecoder {
    syntax: &'static PySyntax,
    text: String,
    balance: Balance,
    opening_confirmed: bool,
}

impl PythonCallsDecoder {
    pub(crate) fn new(syntax: &'static PySyntax) -> Self {
        Self { syntax, text: String::new(), balance: Balance::default(), opening_confirmed: false }
    }

    /// Checks the buffered opening: `Some(true)` once it is a plausible list
    /// start, `Some(false)` once it cannot be, `None` while undecided.
    fn check_opening(&self) -> Option<bool> {
        let text = self.text.trim_start();
        let mut chars = text.chars();
        let first = chars.next()?;
        match self.syntax.shape {
            PyShape::DictList => {
                if first == '{' {
                    return Some(true);
                }
                if first != '[' {
                    return Some(false);
                }
                let second = chars.as_str().trim_start().chars().next()?;
                Some(second == '{')
            }
            PyShape::CallList => {
                if first != '[' {
                    return Some(false);
                }
                let rest = chars.as_str().trim_start();
                let name_len =
                    rest.find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))).unwrap_or(rest.len());
                if name_len == rest.len() {
                    return None;
                }
                let after = rest[name_len..].trim_start().chars().next()?;
                Some(name_len > 0 && after == '(')
            }
        }
    }

    fn calls(&self) -> Option<Vec<PyCall>> {
        match self.syntax.shape {
            PyShape::CallList => py_literal::parse_call_list(self.text.trim()).ok(),
            PyShape::DictList => {
                let value = py_literal::parse_value(self.text.trim()).ok()?;
                let items = match value {
                    Value::Array(items) => items,
                    single @ Value::Object(_) => vec![single],
                    _ => return None,
                };
                items.into_iter().map(dict_call).collect()
            }
        }
    }

    fn accepts(&self, calls: &[PyCall], sink: &CallSink) -> bool {
        !calls.is_empty()
            && calls.iter().all(|c| is_valid_name(&c.name))
            && (!self.syntax.strict_names || calls.iter().all(|c| sink.is_declared(&c.name)))
    }
}

fn emit(calls: Vec<PyCall>, sink: &mut CallSink) {
    for call in calls {
        sink.begin(&call.name);
        sink.args(&Value::Object(call.arguments).to_string());
        sink.end();
    }
}

/// `{'name': str, 'arguments': dict}` (also `parameters`, or arguments given
/// as a JSON string) as a call.
fn dict_call(item: Value) -> Option<PyCall> {
    let Value::Object(mut dict) = item else {
        return None;
    };
    let name = match dict.remove("name") {
        Some(Value::String(name)) if !name.is_empty() => name,
        _ => return None,
    };
    let arguments = match dict.remove("arguments").or_else(|| dict.remove("parameters")) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments,
        Some(Value::String(text)) => match serde_json::from_str(&text) {
            Ok(Value::Object(arguments)) => arguments,
            _ => return None,
        },
        Some(_) => return None,
    };
    Some(PyCall { name, arguments })
}

impl RegionDecoder for PythonCallsDecoder {
    fn step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        let room = limits::tool_call_list_bytes_max.saturating_sub(self.text.len());
        let window = &text[..floor_char_boundary(text, room)];
        let (used, status) = self.balance.feed(window, at_end);
        self.text.push_str(&window[..used]);
        if !self.opening_confirmed {
            match self.check_opening() {
                Some(true) => self.opening_confirmed = true,
                Some(false) => return Decision::Reject,
                None if at_end => return Decision::Reject,
                None => {}
            }
        }
        match status {
            BalanceStatus::Closed => match self.calls() {
                Some(calls) if self.accepts(&calls, sink) => {
                    emit(calls, sink);
                    Decision::Done(used)
                }
                _ => Decision::Reject,
            },
            BalanceStatus::Open if at_end || self.text.len() >= limits::tool_call_list_bytes_max => Decision::Reject,
            BalanceStatus::Open if used == 0 => Decision::Wait,
            BalanceStatus::Open => Decision::Advance(used),
        }
    }
}
