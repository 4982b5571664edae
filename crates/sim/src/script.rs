//! What the simulated model says: scripted text (`--script`), or deterministic seeded words.

use std::path::Path;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shardgate_text::tokenizer::Tokenizer;

use crate::error::ScriptError;

#[derive(Debug, Clone)]
pub struct ScriptLine {
    pub prompt_contains: Option<String>,
    pub text: String,
}

pub fn load(path: &Path) -> Result<Vec<ScriptLine>, ScriptError> {
    let raw = std::fs::read_to_string(path).map_err(|source| ScriptError::Read { path: path.to_path_buf(), source })?;
    let mut lines = Vec::new();
    for (n, line) in raw.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line).map_err(|source| ScriptError::Json {
            path: path.to_path_buf(),
            line: n + 1,
            source,
        })?;
        let text = v
            .get("text")
            .and_then(|t| t.as_str())
            .ok_or_else(|| ScriptError::NoText { path: path.to_path_buf(), line: n + 1 })?;
        let prompt_contains = v.get("prompt_contains").and_then(|p| p.as_str()).map(str::to_string);
        lines.push(ScriptLine { prompt_contains, text: text.to_string() });
    }
    Ok(lines)
}

/// Words the seeded mode strings together (readable, and multi-token for most tokenizers).
const WORDS: &[&str] = &[
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "engines", "stream", "tokens",
    "through", "sockets", "and", "shards", "answer", "every", "request", "with", "care", "é", "日本", "🙂",
];

/// The planned output tokens of one request (EOS is added by the scheduler).
pub fn plan(
    tokenizer: Option<&Tokenizer>,
    script: &[ScriptLine],
    prompt: &[u32],
    seed: u64,
    request_seed: Option<i64>,
    output_len: usize,
) -> Vec<u32> {
    if let Some(tok) = tokenizer {
        if !script.is_empty() {
            let decoded = tok.decode(prompt, false).unwrap_or_default();
            let line = script.iter().find(|l| l.prompt_contains.as_deref().is_none_or(|p| decoded.contains(p)));
            if let Some(line) = line {
                return tok.encode(&line.text, false).unwrap_or_default();
            }
        }
    }
    // Seeded: the same prompt and seeds give the same tokens.
    let mut h: u64 = seed ^ 0x9e37_79b9_7f4a_7c15;
    for &t in prompt {
        h = (h ^ t as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    if let Some(s) = request_seed {
        h ^= (s as u64).rotate_left(17);
    }
    let mut rng = SmallRng::seed_from_u64(h);
    let mut out = Vec::with_capacity(output_len + 8);
    while out.len() < output_len {
        match tokenizer {
            Some(tok) => {
                let word = WORDS[rng.random_range(0..WORDS.len())];
                let text = if out.is_empty() { word.to_string() } else { format!(" {word}") };
                out.extend(tok.encode(&text, false).unwrap_or_default());
            }
            None => out.push(rng.random_range(100..1000)),
        }
    }
    out.truncate(output_len);
    out
}
