//! Inkling (TML) reasoning: the output is a sequence of typed blocks rather
//! than a marker pair. `<|content_thinking|>` opens reasoning,
//! `<|content_text|>` opens answer text, `<|end_message|>` (or
//! `<|content_model_end_sampling|>`) closes a block, and `<|message_model|>`
//! starts a header (author or tool name) that is protocol metadata.
//!
//! JSON tool blocks (`<|content_invoke_tool_json|>` up to the end token) are
//! passed through to content verbatim, markers included, for the tool-call
//! parser. Text-mode tool blocks cannot be expressed as OpenAI calls and are
//! suppressed as protocol data. Requires decoding with special tokens kept.

use super::{ReasoningDelta, ReasoningParser};
use crate::stream_core::{scan, Machine, Scan, Step, Streamed};

const MESSAGE_MODEL: &str = "<|message_model|>";
const CONTENT_TEXT: &str = "<|content_text|>";
const CONTENT_THINKING: &str = "<|content_thinking|>";
const INVOKE_TOOL_JSON: &str = "<|content_invoke_tool_json|>";
const INVOKE_TOOL_TEXT: &str = "<|content_invoke_tool_text|>";
const END_MESSAGE: &str = "<|end_message|>";
const END_SAMPLING: &str = "<|content_model_end_sampling|>";

/// The tokenizer's control tokens. Those without a role here are dropped.
const CONTROL_TOKENS: &[&str] = &[
    "<|endoftext|>",
    "<|message_user|>",
    MESSAGE_MODEL,
    "<|message_system|>",
    "<|message_tool|>",
    CONTENT_TEXT,
    "<|content_image|>",
    END_SAMPLING,
    CONTENT_THINKING,
    "<|content_audio_input|>",
    "<|content_tool_error|>",
    "<|content_xml|>",
    INVOKE_TOOL_JSON,
    INVOKE_TOOL_TEXT,
    END_MESSAGE,
    "<|audio_end|>",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Content,
    Reasoning,
    Header,
    ToolJson,
    ToolText,
}

pub(crate) struct InklingParser {
    block: Block,
}

impl InklingParser {
    pub(crate) fn new(force_reasoning_start: bool) -> Self {
        let block = if force_reasoning_start { Block::Reasoning } else { Block::Content };
        Self { block }
    }

    fn emit(&self, text: &str, out: &mut ReasoningDelta) {
        match self.block {
            Block::Reasoning => out.reasoning.push_str(text),
            Block::Content | Block::ToolJson => out.content.push_str(text),
            Block::Header | Block::ToolText => {}
        }
    }

    /// Applies a control token; returns the new block.
    fn on_token(&self, token: &str, out: &mut ReasoningDelta) -> Block {
        let is_end = token == END_MESSAGE || token == END_SAMPLING;
        match self.block {
            // Inside a JSON tool block every token is the tool parser's.
            Block::ToolJson => {
                out.content.push_str(token);
                if is_end {
                    Block::Content
                } else {
                    Block::ToolJson
                }
            }
            Block::ToolText if is_end => Block::Content,
            Block::ToolText => Block::ToolText,
            _ => match token {
                MESSAGE_MODEL => Block::Header,
                CONTENT_THINKING => Block::Reasoning,
                CONTENT_TEXT => Block::Content,
                INVOKE_TOOL_JSON => {
                    out.content.push_str(token);
                    Block::ToolJson
                }
                INVOKE_TOOL_TEXT => Block::ToolText,
                END_MESSAGE | END_SAMPLING => Block::Content,
                _ => self.block,
            },
        }
    }

    fn split(&mut self, text: &str, at_end: bool, out: &mut ReasoningDelta) -> Step {
        let found = scan(text, CONTROL_TOKENS);
        let text_len = found.text_len(text, at_end);
        self.emit(&text[..text_len], out);
        match found {
            Scan::Found { index, .. } => {
                let token = CONTROL_TOKENS[index];
                self.block = self.on_token(token, out);
                Step::Advance(text_len + token.len())
            }
            Scan::Partial { .. } if text_len == 0 => Step::Wait,
            Scan::Partial { .. } => Step::Advance(text_len),
        }
    }
}

impl Machine for InklingParser {
    type Output = ReasoningDelta;

    fn step(&mut self, text: &str, _offset: usize, at_end: bool, out: &mut ReasoningDelta) -> Step {
        self.split(text, at_end, out)
    }
}

impl ReasoningParser for Streamed<InklingParser> {
    fn push(&mut self, text: &str) -> ReasoningDelta {
        Streamed::push(self, text)
    }

    fn finish(&mut self) -> ReasoningDelta {
        Streamed::finish(self)
    }
}
