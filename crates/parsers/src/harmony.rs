//! gpt-oss's output, parsed by channel: the official `openai-harmony` crate's
//! `StreamableParser` reads the generated token ids, and each message's text goes where vLLM's
//! Harmony parser sends it (`vllm/parser/harmony.py`):
//!
//! - a message to a function (`functions.NAME`, or a bare recipient that is not a built-in tool
//!   or `assistant`) is a tool call named NAME, its text the call's arguments as written;
//! - `analysis` is reasoning;
//! - `final`, and `commentary` without a recipient (a preamble), are content;
//! - anything else (a built-in tool's call, an unknown channel) is left out.
//!
//! Two messages that go to the same field are joined by a newline, as vLLM joins them in a
//! whole response; streamed, the newline comes with the second one's first piece, so the
//! deltas add up to exactly the whole answer (streamed == one-shot, at every split). A token
//! the parser rejects is skipped, as vLLM skips it; a message still open at the end is closed
//! as the stream ends. Whatever a message's end adds to its streamed text (bytes that only
//! decoded at the end) is released when it ends.

use openai_harmony::chat::{Message, Role};
use openai_harmony::{HarmonyEncoding, StreamableParser};

use crate::tool::ToolCallDelta;

/// Built-in tools whose calls are not function calls (vLLM's `BUILTIN_TOOL_TO_MCP_SERVER_LABEL`).
const BUILTIN_TOOLS: [&str; 3] = ["python", "browser", "container"];

/// What one step produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HarmonyDelta {
    pub reasoning: String,
    pub content: String,
    pub calls: Vec<ToolCallDelta>,
}

/// Where the text of the message being parsed goes.
#[derive(Debug, Clone, PartialEq)]
enum Route {
    Reasoning,
    Content,
    Call(usize),
    Ignored,
}

pub struct HarmonyStream {
    parser: StreamableParser,
    /// The current message's route, once its first text (or its end) arrived.
    route: Option<Route>,
    /// The current message's text handed out so far.
    emitted: String,
    completed: usize,
    reasoning_seen: bool,
    content_seen: bool,
    calls: usize,
    delta: HarmonyDelta,
}

/// Why a Harmony stream cannot start (the encoding lacks its stop tokens).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarmonyError(pub String);

impl std::fmt::Display for HarmonyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot parse Harmony output: {}", self.0)
    }
}

impl std::error::Error for HarmonyError {}

impl HarmonyStream {
    /// A stream of the assistant's turn (the prompt ended with `<|start|>assistant`).
    pub fn new(encoding: &HarmonyEncoding) -> Result<Self, HarmonyError> {
        let parser = StreamableParser::new(encoding.clone(), Some(Role::Assistant))
            .map_err(|e| HarmonyError(format!("{e:#}")))?;
        Ok(HarmonyStream {
            parser,
            route: None,
            emitted: String::new(),
            completed: 0,
            reasoning_seen: false,
            content_seen: false,
            calls: 0,
            delta: HarmonyDelta::default(),
        })
    }

    /// One generated token.
    pub fn push(&mut self, token: u32) {
        if self.parser.process(token).is_err() {
            return;
        }
        if self.parser.messages().len() > self.completed {
            self.close_messages();
        } else if let Ok(Some(piece)) = self.parser.last_content_delta() {
            self.emit(&piece);
        }
    }

    /// The end of the output: a message still open is closed.
    pub fn finish(&mut self) {
        if self.parser.process_eos().is_ok() {
            self.close_messages();
        }
    }

    /// What was produced since the last call.
    pub fn take(&mut self) -> HarmonyDelta {
        std::mem::take(&mut self.delta)
    }

    /// Every message that completed: the rest of its text, then a fresh route for the next.
    fn close_messages(&mut self) {
        while let Some(message) = self.parser.messages().get(self.completed).cloned() {
            self.completed += 1;
            let text = message_text(&message);
            if self.route.is_none() {
                self.route =
                    Some(self.open(message.channel.as_deref(), message.recipient.as_deref(), !text.is_empty()));
            }
            if let Some(rest) = text.strip_prefix(self.emitted.as_str()).filter(|r| !r.is_empty()) {
                let rest = rest.to_string();
                self.write(&rest);
            }
            self.route = None;
            self.emitted.clear();
        }
    }

    /// A piece of the current message's text.
    fn emit(&mut self, piece: &str) {
        if self.route.is_none() {
            let channel = self.parser.current_channel();
            let recipient = self.parser.current_recipient();
            self.route = Some(self.open(channel.as_deref(), recipient.as_deref(), true));
        }
        self.emitted.push_str(piece);
        self.write(piece);
    }

    /// The route of a message to `recipient` on `channel`; a call's first piece names it, and
    /// a field that already has text gets the newline between two messages (`has_text`).
    fn open(&mut self, channel: Option<&str>, recipient: Option<&str>, has_text: bool) -> Route {
        let recipient = recipient.and_then(normalize_recipient);
        if let Some(name) = recipient.and_then(function_name) {
            let index = self.calls;
            self.calls += 1;
            self.delta.calls.push(ToolCallDelta { index, name: Some(name.to_string()), arguments: String::new() });
            return Route::Call(index);
        }
        let (route, seen, field) = match channel {
            Some("analysis") => (Route::Reasoning, &mut self.reasoning_seen, &mut self.delta.reasoning),
            Some("final") => (Route::Content, &mut self.content_seen, &mut self.delta.content),
            Some("commentary") if recipient.is_none() => {
                (Route::Content, &mut self.content_seen, &mut self.delta.content)
            }
            _ => return Route::Ignored,
        };
        if has_text {
            if *seen {
                field.push('\n');
            }
            *seen = true;
        }
        route
    }

    fn write(&mut self, piece: &str) {
        match self.route {
            Some(Route::Reasoning) => self.delta.reasoning.push_str(piece),
            Some(Route::Content) => self.delta.content.push_str(piece),
            Some(Route::Call(index)) => match self.delta.calls.last_mut().filter(|c| c.index == index) {
                Some(call) => call.arguments.push_str(piece),
                None => self.delta.calls.push(ToolCallDelta { index, name: None, arguments: piece.to_string() }),
            },
            Some(Route::Ignored) | None => {}
        }
    }
}

fn message_text(message: &Message) -> String {
    message
        .content
        .iter()
        .filter_map(|c| match c {
            openai_harmony::chat::Content::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

/// A recipient without the constrained format older Harmony parsed into it (vLLM's
/// `_normalize_recipient`); `None` when nothing is left.
fn normalize_recipient(recipient: &str) -> Option<&str> {
    let recipient = match recipient.find("<|constrain|>") {
        Some(i) => recipient[..i].trim_end(),
        None => recipient,
    };
    (!recipient.is_empty()).then_some(recipient)
}

/// The function a recipient calls (vLLM's `is_function_recipient` for chat).
fn function_name(recipient: &str) -> Option<&str> {
    if recipient.starts_with("<|") || recipient == "assistant" {
        return None;
    }
    if let Some(name) = recipient.strip_prefix("functions.") {
        return (!name.is_empty()).then_some(name);
    }
    let first = recipient.split('.').next().unwrap_or(recipient);
    (!BUILTIN_TOOLS.contains(&first)).then_some(recipient)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipients() {
        let cases = [
            ("functions.get_weather", Some("get_weather")),
            ("functions.", None),
            ("get_weather", Some("get_weather")),
            ("assistant", None),
            ("browser.search", None),
            ("python", None),
            ("functions.f <|constrain|>json", Some("f")),
            ("<|constrain|>json", None),
        ];
        for (recipient, name) in cases {
            assert_eq!(normalize_recipient(recipient).and_then(function_name), name, "{recipient}");
        }
    }
}
