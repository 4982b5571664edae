//! The client's tokenizer: builds prompts of exact token lengths and cross-checks the
//! server's token counts. Loaded from a `tokenizer.json` (the `tokenizers` crate); by default
//! the demo model's Qwen3 tokenizer.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::error::WorkloadError;
use crate::limits;
use rand::rngs::SmallRng;
use rand::Rng;
use tokenizers::Tokenizer;

pub struct BenchTokenizer {
    inner: Tokenizer,
    /// Ordinary vocabulary ids (no added or special tokens): what random prompts draw from.
    allowed_ids: Vec<u32>,
    /// Where it was loaded from (the result's `tokenizer_id`).
    pub id: String,
}

impl BenchTokenizer {
    /// `--tokenizer`, else `--model` when it is a local directory, else the demo model.
    pub fn load(tokenizer: Option<&Path>, model: Option<&str>) -> Result<BenchTokenizer, WorkloadError> {
        let file = match (tokenizer, model) {
            (Some(p), _) => tokenizer_file(p)?,
            (None, Some(m)) if Path::new(m).join("tokenizer.json").is_file() => Path::new(m).join("tokenizer.json"),
            _ => shardgate_text::demo_model::ensure()?.join("tokenizer.json"),
        };
        let inner = Tokenizer::from_file(&file)
            .map_err(|source| WorkloadError::LoadTokenizer { path: file.clone(), source })?;
        Ok(BenchTokenizer::new(inner, file.display().to_string()))
    }

    pub fn new(inner: Tokenizer, id: String) -> BenchTokenizer {
        let added: HashSet<u32> = inner.get_added_tokens_decoder().into_keys().collect();
        let vocab_size = u32::try_from(inner.get_vocab_size(false)).unwrap_or(u32::MAX);
        let allowed_ids = (0..vocab_size).filter(|id| !added.contains(id)).collect();
        BenchTokenizer { inner, allowed_ids, id }
    }

    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.inner.encode(text, false).map(|e| e.get_ids().to_vec()).unwrap_or_default()
    }

    pub fn count(&self, text: &str) -> usize {
        self.inner.encode(text, false).map(|e| e.len()).unwrap_or(0)
    }

    pub fn decode(&self, ids: &[u32]) -> String {
        self.inner.decode(ids, false).unwrap_or_default()
    }

    pub fn random_ids(&self, rng: &mut SmallRng, count: usize) -> Vec<u32> {
        if self.allowed_ids.is_empty() {
            return Vec::new();
        }
        (0..count).map(|_| self.allowed_ids[rng.random_range(0..self.allowed_ids.len())]).collect()
    }

    /// Text that encodes to exactly `target` tokens, starting from `ids`: decode, re-encode,
    /// trim or pad with random ids, repeat. Returns the text and its token ids (whose length
    /// can still differ from `target` in rare cases: it is the truth the caller records).
    pub fn text_of_len(&self, mut ids: Vec<u32>, target: usize, rng: &mut SmallRng) -> (String, Vec<u32>) {
        let mut round = 0;
        loop {
            let text = self.decode(&ids);
            let encoded = self.encode(&text);
            round += 1;
            if encoded.len() == target || round >= limits::prompt_length_fix_rounds_max {
                return (text, encoded);
            }
            ids = encoded;
            if ids.len() > target {
                ids.truncate(target);
            } else {
                let pad = self.random_ids(rng, target - ids.len());
                ids.extend(pad);
            }
        }
    }
}

fn tokenizer_file(p: &Path) -> Result<PathBuf, WorkloadError> {
    let file = if p.is_dir() { p.join("tokenizer.json") } else { p.to_path_buf() };
    if file.is_file() {
        Ok(file)
    } else {
        Err(WorkloadError::NoTokenizerFile(p.to_path_buf()))
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use rand::SeedableRng;

    /// A word-level tokenizer built in memory: ids 0..=5 are words, 6 is a special token.
    pub fn tiny_tokenizer() -> BenchTokenizer {
        let json = r###"{
          "version": "1.0",
          "added_tokens": [{"id": 6, "content": "<eos>", "single_word": false, "lstrip": false,
                            "rstrip": false, "normalized": false, "special": true}],
          "normalizer": null,
          "pre_tokenizer": {"type": "Whitespace"},
          "post_processor": null,
          "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": false},
          "model": {"type": "WordLevel", "unk_token": "unk",
                    "vocab": {"unk": 0, "red": 1, "green": 2, "blue": 3, "cyan": 4, "pink": 5, "<eos>": 6}}
        }"###;
        let inner: Tokenizer = json.parse().unwrap_or_else(|e| panic!("tiny tokenizer: {e}"));
        BenchTokenizer::new(inner, "tiny".into())
    }

    #[test]
    fn exact_lengths_and_no_special_ids() {
        let tok = tiny_tokenizer();
        let mut rng = SmallRng::seed_from_u64(1);
        let ids = tok.random_ids(&mut rng, 500);
        assert!(ids.iter().all(|&id| id < 6), "special token drawn");
        for target in [1, 7, 64] {
            let start = tok.random_ids(&mut rng, target + 3);
            let (text, ids) = tok.text_of_len(start, target, &mut rng);
            assert_eq!(ids.len(), target);
            assert_eq!(tok.count(&text), target, "{text}");
        }
    }
}
