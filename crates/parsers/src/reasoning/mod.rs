//! Reasoning parsers: split a choice's text into chain-of-thought
//! (`reasoning_content`) and the answer (`content`).
//!
//! One parser instance serves one generated choice. It is fed decoded text
//! deltas with [`ReasoningParser::push`] and closed with
//! [`ReasoningParser::finish`]; see the crate-level streaming contract in
//! [`crate::parsers`]. Families differ only in their markers, which live as
//! data in `registry`; the machinery is `think` (marker pairs) and
//! `inkling` (TML typed blocks).

mod inkling;
mod registry;
mod think;

use std::fmt;

/// What one `push` or `finish` produced, split by destination field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReasoningDelta {
    pub reasoning: String,
    pub content: String,
}

impl ReasoningDelta {
    pub fn is_empty(&self) -> bool {
        self.reasoning.is_empty() && self.content.is_empty()
    }
}

/// A streaming reasoning splitter for one generated choice.
pub trait ReasoningParser {
    /// Feeds the next decoded text delta. May hold back a trailing partial
    /// marker (such as `</thi`) until the next call.
    fn push(&mut self, text: &str) -> ReasoningDelta;
    /// Ends the stream: releases everything held back to the field it belongs
    /// to. Further pushes after `finish` are not meaningful.
    fn finish(&mut self) -> ReasoningDelta;
}

/// A parser name that is not registered. Displays as
/// `unknown reasoning parser '<name>'`, the text the gateway prints when it
/// refuses to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownParser(pub String);

impl fmt::Display for UnknownParser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown reasoning parser '{}'", self.0)
    }
}

impl std::error::Error for UnknownParser {}

/// Creates the parser registered as `name` (exact match, e.g. `deepseek_r1`).
///
/// `force_reasoning_start`: the request has thinking on for a template that
/// opens the reasoning block in the prompt, so the model's first tokens are
/// reasoning whatever the parser's own default is.
pub fn create_reasoning_parser(
    name: &str,
    force_reasoning_start: bool,
) -> Result<Box<dyn ReasoningParser>, UnknownParser> {
    let entry = registry::find(name).ok_or_else(|| UnknownParser(name.to_string()))?;
    Ok(entry.format.build(force_reasoning_start))
}

/// The parser for a model name: the first entry, in registry order, with a
/// pattern that occurs in the name (case-insensitive). `None` leaves
/// reasoning in `content`.
pub fn detect_reasoning_parser(model_name: &str) -> Option<&'static str> {
    registry::detect(model_name)
}

/// Every registered reasoning parser name, in auto-detection order.
pub fn reasoning_parser_names() -> &'static [&'static str] {
    registry::NAMES
}
