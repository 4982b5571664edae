//! The tool-call parser registry: names, aliases and detection patterns.
//! Detection takes the longest pattern found in the model name, so
//! `deepseek-v4.1` beats `deepseek-v4` and `meta-llama-4` beats `llama-`.

use super::formats::Family;
use super::{formats, tag_formats};

pub(crate) struct Entry {
    pub name: &'static str,
    pub patterns: &'static [&'static str],
    pub family: &'static Family,
}

const fn entry(name: &'static str, patterns: &'static [&'static str], family: &'static Family) -> Entry {
    Entry { name, patterns, family }
}

pub(crate) static ENTRIES: [Entry; 24] = [
    entry("passthrough", &[], &formats::PASSTHROUGH),
    entry(
        "json",
        &["gpt-4", "gpt-3.5", "claude-", "gemini-", "gemma-", "palm-", "llama-", "meta-llama-", "glm-"],
        &formats::JSON,
    ),
    entry("mistral", &["mistral-", "mixtral-"], &formats::MISTRAL),
    entry("qwen", &["qwen"], &formats::QWEN),
    entry("qwen_xml", &["qwen3.5", "qwen3.6", "qwen3.8", "qwen3-coder", "nemotron-3"], &tag_formats::QWEN_XML),
    entry("qwen_coder", &[], &tag_formats::QWEN_XML),
    entry("nemotron", &[], &tag_formats::QWEN_XML),
    entry("pythonic", &["llama-4", "meta-llama-4", "deepseek-"], &formats::PYTHONIC),
    entry("llama", &["llama-3.2", "meta-llama-3.2"], &formats::LLAMA),
    entry("deepseek", &["deepseek-v3"], &tag_formats::DEEPSEEK_V3),
    entry("deepseek31", &["deepseek-v3.1", "deepseek-v3.2-exp"], &tag_formats::DEEPSEEK_V31),
    entry("deepseek32", &["deepseek-v3.2"], &tag_formats::DEEPSEEK32),
    entry("deepseek_v4", &["deepseek-v4"], &tag_formats::DEEPSEEK_V4),
    entry("deepseek_v41", &["deepseek-v4.1", "deepseek-v41", "deepseek_v41"], &tag_formats::DEEPSEEK_V41),
    entry("glm45_moe", &["glm-4.5", "glm-4.6"], &tag_formats::GLM),
    entry("glm47_moe", &["glm-4.7", "glm-5"], &tag_formats::GLM),
    entry("step3", &["step3", "step-3"], &tag_formats::STEP3),
    entry("kimik2", &["kimi-k2"], &tag_formats::KIMI_K2),
    entry("kimi_k3", &["kimi-k3", "kimi_k3"], &tag_formats::KIMI_K3),
    entry("inkling", &["inkling"], &formats::INKLING),
    entry("minimax_m2", &["minimax"], &tag_formats::MINIMAX_M2),
    entry("minimax_m3", &["minimax-m3", "mm-m3"], &tag_formats::MINIMAX_M3),
    entry("cohere", &["command-r", "command-a", "c4ai-command", "cohere"], &formats::COHERE),
    entry("sarashina", &["sarashina"], &formats::SARASHINA),
];

pub(crate) static NAMES: &[&str] = &[
    "passthrough",
    "json",
    "mistral",
    "qwen",
    "qwen_xml",
    "qwen_coder",
    "nemotron",
    "pythonic",
    "llama",
    "deepseek",
    "deepseek31",
    "deepseek32",
    "deepseek_v4",
    "deepseek_v41",
    "glm45_moe",
    "glm47_moe",
    "step3",
    "kimik2",
    "kimi_k3",
    "inkling",
    "minimax_m2",
    "minimax_m3",
    "cohere",
    "sarashina",
];

pub(crate) fn find(name: &str) -> Option<&'static Family> {
    ENTRIES.iter().find(|e| e.name == name).map(|e| e.family)
}

pub(crate) fn detect(model_name: &str) -> Option<&'static str> {
    let model = model_name.to_lowercase();
    let mut best: Option<(usize, &'static str)> = None;
    for entry in &ENTRIES {
        for pattern in entry.patterns {
            // Strictly longer wins, so equal lengths keep table order.
            if model.contains(pattern) && best.is_none_or(|(len, _)| pattern.len() > len) {
                best = Some((pattern.len(), entry.name));
            }
        }
    }
    best.map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_table() {
        let names: Vec<&str> = ENTRIES.iter().map(|e| e.name).collect();
        assert_eq!(names, NAMES);
    }
}
