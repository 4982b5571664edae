//! The reasoning-parser registry: names, detection patterns and markers, as
//! data. Order matters: detection takes the first entry with a matching
//! pattern, so specific patterns (`deepseek-v4.1`, `qwen3-thinking`,
//! `kimi-k3`, `minimax-m3`) come before the broad ones they contain.

use super::inkling::InklingParser;
use super::think::{ThinkParser, ThinkSyntax};
use super::ReasoningParser;
use crate::stream_core::Streamed;

/// How a registered parser splits text.
pub(crate) enum Format {
    /// A start/end marker pair (plus per-family extras).
    Think(&'static ThinkSyntax),
    /// Inkling's TML typed content blocks.
    Inkling,
}

impl Format {
    pub(crate) fn build(&self, force_reasoning_start: bool) -> Box<dyn ReasoningParser> {
        match self {
            Format::Think(syntax) => Box::new(Streamed::new(ThinkParser::new(syntax, force_reasoning_start))),
            Format::Inkling => Box::new(Streamed::new(InklingParser::new(force_reasoning_start))),
        }
    }
}

pub(crate) struct Entry {
    pub name: &'static str,
    pub patterns: &'static [&'static str],
    pub format: Format,
}

const THINK_START: &[&str] = &["<think>"];
const THINK_END: &[&str] = &["</think>"];

/// `<think>` / `</think>` with the given default.
const fn think(starts_in_reasoning: bool) -> ThinkSyntax {
    ThinkSyntax {
        start: THINK_START,
        end: THINK_END,
        end_kept: &[],
        starts_in_reasoning,
        content_strip: &[],
        drop_stray_end: false,
    }
}

static THINK_DEFAULT_ON: ThinkSyntax = think(true);
static THINK_DEFAULT_OFF: ThinkSyntax = think(false);

static DEEPSEEK_V41: ThinkSyntax = ThinkSyntax {
    // A tool block may follow the thought directly; it ends reasoning and is
    // left in content for the tool-call parser.
    end_kept: &["<｜DSML｜ calls>"],
    ..think(false)
};

static KIMI_K3: ThinkSyntax = ThinkSyntax {
    start: &["<|open|>think<|sep|>"],
    end: &["<|close|>think<|sep|>"],
    // A sibling channel opening also ends the thought (a forced tool call can
    // jump from the prefilled think channel straight into `tools`).
    end_kept: &["<|open|>response<|sep|>", "<|open|>tools<|sep|>"],
    starts_in_reasoning: false,
    // Channel wrappers around the answer are framing, not answer text. The
    // `tools` channel stays for the tool-call parser.
    content_strip: &[
        "<|open|>message<|sep|>",
        "<|close|>message<|sep|>",
        "<|open|>response<|sep|>",
        "<|close|>response<|sep|>",
    ],
    drop_stray_end: false,
};

static KIMI: ThinkSyntax = ThinkSyntax { start: &["◁think▷"], end: &["◁/think▷"], ..think(false) };

static MINIMAX_M3: ThinkSyntax =
    ThinkSyntax { start: &["<mm:think>"], end: &["</mm:think>"], drop_stray_end: true, ..think(false) };

static COHERE_CMD: ThinkSyntax =
    ThinkSyntax { start: &["<|START_THINKING|>"], end: &["<|END_THINKING|>"], ..think(false) };

static PASSTHROUGH: ThinkSyntax = ThinkSyntax { start: &[], end: &[], ..think(false) };

pub(crate) static ENTRIES: [Entry; 19] = [
    entry("deepseek_r1", &["deepseek-r1"], &THINK_DEFAULT_ON),
    entry("deepseek_v41", &["deepseek-v4.1", "deepseek_v41", "deepseek-v41"], &DEEPSEEK_V41),
    entry("deepseek_v4", &["deepseek-v4", "deepseek_v4"], &THINK_DEFAULT_OFF),
    entry("deepseek_v31", &["deepseek-v3.1", "deepseek-v3-1"], &THINK_DEFAULT_OFF),
    entry("qwen3_thinking", &["qwen3-thinking", "qwen-thinking"], &THINK_DEFAULT_ON),
    entry("qwen3", &["qwen3", "qwen"], &THINK_DEFAULT_OFF),
    entry("glm45", &["glm45", "glm47", "glm-5"], &THINK_DEFAULT_OFF),
    entry("kimi_thinking", &["kimi-k2-thinking"], &THINK_DEFAULT_ON),
    entry("kimi_k25", &["kimi-k2.5"], &THINK_DEFAULT_OFF),
    entry("kimi_k3", &["kimi-k3", "kimi_k3"], &KIMI_K3),
    entry("kimi", &["kimi"], &KIMI),
    entry("step3", &["step3"], &THINK_DEFAULT_ON),
    entry("minimax_m3", &["minimax-m3", "mm-m3"], &MINIMAX_M3),
    entry("minimax", &["minimax", "minimax-m2", "mm-m2"], &THINK_DEFAULT_ON),
    entry("cohere_cmd", &["command-r", "command-a", "c4ai-command", "cohere"], &COHERE_CMD),
    entry("nano_v3", &["nemotron-nano", "nemotron-super", "nano-v3", "nemotron-3"], &THINK_DEFAULT_OFF),
    Entry { name: "inkling", patterns: &["inkling"], format: Format::Inkling },
    entry("base", &[], &THINK_DEFAULT_OFF),
    entry("passthrough", &[], &PASSTHROUGH),
];

const fn entry(name: &'static str, patterns: &'static [&'static str], syntax: &'static ThinkSyntax) -> Entry {
    Entry { name, patterns, format: Format::Think(syntax) }
}

pub(crate) static NAMES: &[&str] = &[
    "deepseek_r1",
    "deepseek_v41",
    "deepseek_v4",
    "deepseek_v31",
    "qwen3_thinking",
    "qwen3",
    "glm45",
    "kimi_thinking",
    "kimi_k25",
    "kimi_k3",
    "kimi",
    "step3",
    "minimax_m3",
    "minimax",
    "cohere_cmd",
    "nano_v3",
    "inkling",
    "base",
    "passthrough",
];

pub(crate) fn find(name: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|entry| entry.name == name)
}

pub(crate) fn detect(model_name: &str) -> Option<&'static str> {
    let model = model_name.to_lowercase();
    ENTRIES.iter().find(|entry| entry.patterns.iter().any(|p| model.contains(p))).map(|entry| entry.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_table() {
        let names: Vec<&str> = ENTRIES.iter().map(|e| e.name).collect();
        assert_eq!(names, NAMES);
    }

    #[test]
    fn patterns_are_lowercase() {
        for entry in &ENTRIES {
            for pattern in entry.patterns {
                assert_eq!(*pattern, pattern.to_lowercase(), "{}", entry.name);
            }
        }
    }
}
