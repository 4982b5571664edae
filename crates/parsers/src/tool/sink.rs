//! Where decoders put tool calls: assigns indices, keeps the delta shape
//! (name once, then fragments) and knows the declared tools.

use serde_json::Value;

use super::{ToolCallDelta, ToolSpec};

pub(crate) struct CallSink {
    tools: Vec<ToolSpec>,
    next_index: usize,
    open: bool,
    /// A call was begun in the current region: from here on the region can
    /// no longer be released as content.
    region_committed: bool,
    deltas: Vec<ToolCallDelta>,
}

impl CallSink {
    pub(crate) fn new(tools: &[ToolSpec]) -> Self {
        Self { tools: tools.to_vec(), next_index: 0, open: false, region_committed: false, deltas: Vec::new() }
    }

    /// The `parameters` schema of a declared function.
    pub(crate) fn schema(&self, function: &str) -> Option<&Value> {
        self.tools.iter().find(|tool| tool.name == function).and_then(|tool| tool.parameters.as_ref())
    }

    /// Whether `function` may be called: any name when no tools are declared.
    pub(crate) fn is_declared(&self, function: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|tool| tool.name == function)
    }

    pub(crate) fn start_region(&mut self) {
        self.region_committed = false;
    }

    pub(crate) fn region_committed(&self) -> bool {
        self.region_committed
    }

    /// Starts the next call. An unfinished previous call is ended first.
    pub(crate) fn begin(&mut self, name: &str) {
        self.end();
        self.deltas.push(ToolCallDelta {
            index: self.next_index,
            name: Some(name.to_string()),
            arguments: String::new(),
        });
        self.next_index += 1;
        self.open = true;
        self.region_committed = true;
    }

    /// Appends argument text to the open call.
    pub(crate) fn args(&mut self, fragment: &str) {
        if fragment.is_empty() || !self.open {
            return;
        }
        let index = self.next_index - 1;
        match self.deltas.last_mut() {
            Some(last) if last.index == index => last.arguments.push_str(fragment),
            _ => self.deltas.push(ToolCallDelta { index, name: None, arguments: fragment.to_string() }),
        }
    }

    pub(crate) fn end(&mut self) {
        self.open = false;
    }

    /// Moves the deltas produced so far into `calls`, merging fragments of the
    /// same call.
    pub(crate) fn drain_into(&mut self, calls: &mut Vec<ToolCallDelta>) {
        for delta in self.deltas.drain(..) {
            match calls.last_mut() {
                Some(last) if last.index == delta.index && delta.name.is_none() => {
                    last.arguments.push_str(&delta.arguments);
                }
                _ => calls.push(delta),
            }
        }
    }
}

/// Whether `name` can be a function name: not empty, at most 256 bytes, no
/// blanks and none of the punctuation that frames calls. Keeps prose from
/// being taken for a call name.
pub(crate) fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 256
        && !name.chars().any(|c| c.is_whitespace() || c.is_control() || "<>{}[]()\"'=,;`".contains(c))
}

/// Writes an arguments object one member at a time, so members reach the
/// client as soon as each is known. A repeated key keeps its first value.
#[derive(Debug, Default)]
pub(crate) struct ObjectWriter {
    keys: Vec<String>,
    opened: bool,
    closed: bool,
}

impl ObjectWriter {
    /// Writes `{"key":` (or `,"key":`); `false` if the key was already written.
    pub(crate) fn key(&mut self, key: &str, sink: &mut CallSink) -> bool {
        if self.closed || self.keys.iter().any(|k| k == key) {
            return false;
        }
        let prefix = if self.opened { "," } else { "{" };
        self.opened = true;
        self.keys.push(key.to_string());
        let quoted = Value::String(key.to_string()).to_string();
        sink.args(&format!("{prefix}{quoted}:"));
        true
    }

    /// Writes a whole member.
    pub(crate) fn member(&mut self, key: &str, value: &Value, sink: &mut CallSink) {
        if self.key(key, sink) {
            sink.args(&value.to_string());
        }
    }

    /// Writes the closing brace (or `{}` for no members).
    pub(crate) fn close(&mut self, sink: &mut CallSink) {
        if !self.closed {
            sink.args(if self.opened { "}" } else { "{}" });
            self.closed = true;
        }
    }
}
