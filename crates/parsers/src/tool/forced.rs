//! Forced tool calls (`tool_choice` `required` or a named function). The engine then decodes
//! under a JSON-schema constraint (`pipeline::constraint::tool_schema`), so the output is plain
//! JSON rather than the model's own call syntax:
//! - named: the output *is* the arguments object of that one function, streamed as it comes;
//! - required: `[{"name": …, "parameters": {…}}, …]`; each call is emitted once its object is
//!   complete (name, then the arguments as Python's `json.dumps` writes them, as vLLM does).
//!
//! Output is emitted only at points that do not depend on how the text was split (argument
//! text as it arrives; whole array elements), so streamed and one-shot results are equal.

use serde_json::Value;

use super::{ToolCallDelta, ToolParseDelta, ToolParser};

/// `tool_choice: {"type": "function", "function": {"name": …}}`.
pub struct NamedCall {
    name: String,
    started: bool,
}

impl NamedCall {
    pub fn new(name: &str) -> Self {
        NamedCall { name: name.to_string(), started: false }
    }

    fn piece(&mut self, arguments: &str) -> ToolParseDelta {
        let name = (!self.started).then(|| self.name.clone());
        self.started = true;
        ToolParseDelta {
            content: String::new(),
            calls: vec![ToolCallDelta { index: 0, name, arguments: arguments.into() }],
        }
    }
}

impl ToolParser for NamedCall {
    fn push(&mut self, text: &str) -> ToolParseDelta {
        if text.is_empty() {
            return ToolParseDelta::default();
        }
        self.piece(text)
    }

    fn finish(&mut self) -> ToolParseDelta {
        // A call was forced: even an empty output is that call (with empty arguments).
        if self.started {
            ToolParseDelta::default()
        } else {
            self.piece("")
        }
    }
}

/// `tool_choice: "required"`: scans the JSON array and emits each element when it closes.
#[derive(Default)]
pub struct RequiredCalls {
    buf: String,
    /// Bytes of `buf` already scanned.
    scanned: usize,
    depth: u32,
    in_string: bool,
    escaped: bool,
    element_start: usize,
    emitted: usize,
    /// Everything up to here became calls.
    consumed: usize,
}

impl RequiredCalls {
    pub fn new() -> Self {
        Self::default()
    }

    fn call(&mut self, element: &str) -> Option<ToolCallDelta> {
        let v: Value = serde_json::from_str(element).ok()?;
        let name = v.get("name")?.as_str()?.to_string();
        let params =
            v.get("parameters").or_else(|| v.get("arguments")).cloned().unwrap_or(Value::Object(Default::default()));
        let opts = shardgate_text::template::PyJsonOptions::default();
        let arguments =
            shardgate_text::template::py_json_dumps(&minijinja::Value::from(minijinja::value::Serde(&params)), &opts)
                .ok()?;
        let index = self.emitted;
        self.emitted += 1;
        Some(ToolCallDelta { index, name: Some(name), arguments })
    }
}

impl ToolParser for RequiredCalls {
    fn push(&mut self, text: &str) -> ToolParseDelta {
        self.buf.push_str(text);
        let mut out = ToolParseDelta::default();
        let bytes = self.buf.as_bytes();
        let mut completed: Vec<(usize, usize)> = Vec::new();
        for (i, &b) in bytes.iter().enumerate().skip(self.scanned) {
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'[' | b'{' => {
                    if self.depth == 1 && b == b'{' {
                        self.element_start = i;
                    }
                    self.depth += 1;
                }
                b']' | b'}' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 1 && b == b'}' {
                        completed.push((self.element_start, i + 1));
                    }
                }
                _ => {}
            }
        }
        self.scanned = bytes.len();
        for (start, end) in completed {
            let element = self.buf[start..end].to_string();
            if let Some(call) = self.call(&element) {
                out.calls.push(call);
                self.consumed = end;
            }
        }
        out
    }

    fn finish(&mut self) -> ToolParseDelta {
        // Under the constraint the array is complete; anything else (no grammar backend on the
        // engine, a length cut) comes back as it was generated.
        let content = if self.emitted == 0 {
            std::mem::take(&mut self.buf)
        } else {
            self.buf[self.consumed..].trim_matches(|c: char| c == ']' || c == ',' || c.is_whitespace()).to_string()
        };
        ToolParseDelta { content, calls: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(parser: &mut dyn ToolParser, chunks: &[&str]) -> (String, Vec<(usize, Option<String>, String)>) {
        let mut content = String::new();
        let mut calls: Vec<(usize, Option<String>, String)> = Vec::new();
        let mut take = |d: ToolParseDelta| {
            content.push_str(&d.content);
            for c in d.calls {
                match calls.iter_mut().find(|(i, _, _)| *i == c.index) {
                    Some(existing) => existing.2.push_str(&c.arguments),
                    None => calls.push((c.index, c.name, c.arguments)),
                }
            }
        };
        for c in chunks {
            take(parser.push(c));
        }
        take(parser.finish());
        (content, calls)
    }

    fn every_split(text: &str, make: impl Fn() -> Box<dyn ToolParser>) {
        let whole = run(&mut *make(), &[text]);
        for cut in (0..=text.len()).filter(|&c| text.is_char_boundary(c)) {
            let split = run(&mut *make(), &[&text[..cut], &text[cut..]]);
            assert_eq!(split, whole, "split at {cut}");
        }
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(run(&mut *make(), &pieces), whole, "char by char");
    }

    #[test]
    fn required_calls_come_out_whole_and_in_order() {
        let text = r#"[{"name": "get_weather", "parameters": {"city": "Paris, \"FR\" {x}"}}, {"name": "ping", "parameters": {}}]"#;
        let (content, calls) = run(&mut RequiredCalls::new(), &[text]);
        assert_eq!(content, "");
        assert_eq!(
            calls,
            vec![
                (0, Some("get_weather".into()), r#"{"city": "Paris, \"FR\" {x}"}"#.into()),
                (1, Some("ping".into()), "{}".into())
            ]
        );
        every_split(text, || Box::new(RequiredCalls::new()));
        every_split("[{\"name\": \"日本\", \"parameters\": {\"q\": \"🙂\"}}]", || Box::new(RequiredCalls::new()));
    }

    #[test]
    fn unconstrained_text_is_released_as_content() {
        let (content, calls) = run(&mut RequiredCalls::new(), &["I would call a tool."]);
        assert_eq!((content.as_str(), calls.len()), ("I would call a tool.", 0));
        every_split("[{\"name\": \"a\", \"parameters\": {}}, {\"name\": ", || Box::new(RequiredCalls::new()));
    }

    #[test]
    fn a_named_call_streams_its_arguments() {
        let (content, calls) = run(&mut NamedCall::new("get_weather"), &["{\"city\"", ": \"Paris\"}"]);
        assert_eq!(content, "");
        assert_eq!(calls, vec![(0, Some("get_weather".into()), "{\"city\": \"Paris\"}".into())]);
        every_split("{\"city\": \"Paris\"}", || Box::new(NamedCall::new("f")));
        assert_eq!(run(&mut NamedCall::new("f"), &[]).1, vec![(0, Some("f".into()), String::new())]);
    }
}
