//! Tool-call parsers: turn each model family's native call syntax into
//! OpenAI-shaped tool-call deltas, leaving the rest of the text as content.
//!
//! One parser instance serves one generated choice, fed the content that the
//! reasoning parser returned. Machinery, shared by every family:
//! - `engine`: content scanning, trigger detection, the "not a call after
//!   all" rewind, end-of-stream release;
//! - `sink`: call indices and delta shapes;
//! - `json_args`: streaming, self-repairing JSON for arguments.
//!
//! One `scanner` finds a family's trigger markers in the content and hands
//! each call region to a decoder (the `region` contract). Families differ in
//! format only, described as data in `formats` and `tag_formats`, and
//! decoded by one of a few decoders: `tagged` (name in markup, arguments as
//! parameters (`markup`, `param_value`), JSON or nested elements
//! (`nested_xml`)), `json_call` (calls as JSON
//! objects), `python_calls` (Python literals), plus the small `mistral`
//! and `inkling` framings.

pub mod forced;
mod formats;
mod ids;
mod inkling;
mod json_args;
mod json_call;
mod markup;
mod mistral;
mod nested_xml;
mod param_value;
mod py_literal;
mod python_calls;
mod region;
mod registry;
mod scanner;
mod schema;
mod sink;
mod tag_formats;
mod tagged;

use std::fmt;

pub use ids::tool_call_id;

/// One piece of one tool call. The first delta of a call carries its `name`
/// (and possibly the first argument text); later ones carry only argument
/// fragments. Concatenated, a call's fragments are one JSON object text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallDelta {
    /// 0-based position of the call in this choice, stable across its deltas.
    pub index: usize,
    pub name: Option<String>,
    pub arguments: String,
}

/// What one `push` or `finish` produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolParseDelta {
    pub content: String,
    pub calls: Vec<ToolCallDelta>,
}

impl ToolParseDelta {
    pub fn is_empty(&self) -> bool {
        self.content.is_empty() && self.calls.is_empty()
    }
}

/// A streaming tool-call extractor for one generated choice.
pub trait ToolParser {
    /// Feeds the next text delta. Text that may be the start of a call is
    /// held back until it is known either way.
    fn push(&mut self, text: &str) -> ToolParseDelta;
    /// Ends the stream: text held as a possible call that never became one
    /// is released as content, and an unterminated call is closed.
    fn finish(&mut self) -> ToolParseDelta;
}

/// A tool the request declared: its name and the JSON schema of its
/// parameters. XML-style formats use the schema to type argument values.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub parameters: Option<serde_json::Value>,
}

/// A parser name that is not registered. Displays as
/// `unknown tool-call parser '<name>'`, the text the gateway prints when it
/// refuses to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownParser(pub String);

impl fmt::Display for UnknownParser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown tool-call parser '{}'", self.0)
    }
}

impl std::error::Error for UnknownParser {}

/// Creates the parser registered as `name` (exact match; aliases included).
/// `tools` are the request's declared tools.
pub fn create_tool_parser(name: &str, tools: &[ToolSpec]) -> Result<Box<dyn ToolParser>, UnknownParser> {
    let family = registry::find(name).ok_or_else(|| UnknownParser(name.to_string()))?;
    Ok(Box::new(scanner::ToolScanner::new(family, tools)))
}

/// The parser for a model name: among all patterns that occur in the name
/// (case-insensitive), the longest wins; on equal length, table order. `None`
/// means tool calls are not parsed.
pub fn detect_tool_parser(model_name: &str) -> Option<&'static str> {
    registry::detect(model_name)
}

/// Every registered tool-call parser name, aliases included.
pub fn tool_parser_names() -> &'static [&'static str] {
    registry::NAMES
}
