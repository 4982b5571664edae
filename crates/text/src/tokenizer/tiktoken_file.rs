//! A tiktoken vocabulary file as a `tokenizers` tokenizer. Kimi checkpoints ship no
//! `tokenizer.json`: their tokenizer is `tiktoken.model` (one `base64(bytes) rank` line per
//! token) read by a Python class (`tokenization_kimi.py`) that adds a split pattern and 256
//! special tokens above the ranks. The same tokenizer is written here in the shape the rest of
//! this module serves (and its fast encoder speeds up), as transformers' `TikTokenConverter`
//! writes it:
//!
//! - each token's bytes spelled in GPT-2's byte characters, its id its rank;
//! - merges read off the ranks: every split of a token into two tokens is a merge, ordered by
//!   the token's rank, then the left and the right part's ranks;
//! - `ignore_merges`: a piece that is itself a token is that token (tiktoken looks the whole
//!   piece up before merging);
//! - the pattern as an isolated `Split`, then a plain `ByteLevel` (no prefix space, no regex),
//!   and a `ByteLevel` decoder;
//! - the special tokens (rank count + 0..256) as added tokens, matched in the text before
//!   the split, as the class's `encode` (`allowed_special="all"`) does; the ones
//!   `tokenizer_config.json`'s `added_tokens_decoder` does not name are
//!   `<|reserved_token_{id}|>`.
//!
//! Not reproduced: the class cuts a text over 400,000 characters, or a run of 25,000
//! whitespace or non-whitespace characters, into separately encoded chunks.

use std::collections::HashMap;

use base64::Engine;
use serde_json::{json, Map, Value};

use super::fast_bpe::byte_chars;

/// `tokenization_kimi.py`'s pattern: o200k's letter branches with Han cut out of them, and a
/// run of Han characters as a piece of its own.
pub const KIMI_PATTERN: &str = concat!(
    r"[\p{Han}]+",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"|\s*[\r\n]+",
    r"|\s+(?!\S)",
    r"|\s+",
);

/// How many special ids the Kimi class reserves above the ranks.
pub const RESERVED_SPECIAL_TOKENS: u32 = 256;

/// The ranks of a tiktoken file, by id (ranks must be 0..n, each once).
fn read_ranks(text: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut by_rank: Vec<Option<Vec<u8>>> = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
        let bad = |why: &str| format!("tiktoken line {}: {why}", n + 1);
        let (token, rank) = line.split_once(' ').ok_or_else(|| bad("not `base64 rank`"))?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(token).map_err(|e| bad(&e.to_string()))?;
        let rank: usize = rank.trim().parse().map_err(|_| bad("rank is not a number"))?;
        if rank >= by_rank.len() {
            by_rank.resize(rank + 1, None);
        }
        if by_rank[rank].replace(bytes).is_some() {
            return Err(bad("rank listed twice"));
        }
    }
    by_rank
        .into_iter()
        .enumerate()
        .map(|(rank, b)| b.ok_or_else(|| format!("tiktoken file has no token of rank {rank}")))
        .collect()
}

/// `tokenizer.json` for the tiktoken file's text, split by `pattern`, with the special tokens
/// `named` (id → text) among the reserved ones.
pub fn tokenizer_json(ranks_text: &str, pattern: &str, named: &HashMap<u32, String>) -> Result<Vec<u8>, String> {
    let tokens = read_ranks(ranks_text)?;
    let rank_of: HashMap<&[u8], usize> = tokens.iter().enumerate().map(|(r, t)| (t.as_slice(), r)).collect();
    let to_char = byte_chars::byte_to_char_table();
    let spell = |b: &[u8]| -> String { b.iter().map(|&x| to_char[x as usize]).collect() };
    let mut vocab = Map::with_capacity(tokens.len());
    let mut merges = Vec::new();
    for (rank, token) in tokens.iter().enumerate() {
        vocab.insert(spell(token), json!(rank));
        let mut splits: Vec<(usize, usize, usize)> = (1..token.len())
            .filter_map(|i| Some((rank_of.get(&token[..i])?.to_owned(), rank_of.get(&token[i..])?.to_owned(), i)))
            .collect();
        splits.sort_unstable();
        merges.extend(splits.into_iter().map(|(_, _, i)| json!([spell(&token[..i]), spell(&token[i..])])));
    }
    let base = tokens.len() as u32;
    let added: Vec<Value> = (base..base + RESERVED_SPECIAL_TOKENS)
        .map(|id| {
            let content = named.get(&id).cloned().unwrap_or_else(|| format!("<|reserved_token_{id}|>"));
            json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": true})
        })
        .collect();
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false});
    let doc = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added, "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false}, byte_level]},
        "post_processor": null,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": true,
                  "vocab": vocab, "merges": merges},
    });
    serde_json::to_vec(&doc).map_err(|e| e.to_string())
}

/// The special tokens `tokenizer_config.json` names (`added_tokens_decoder`: id → content).
pub fn named_special_tokens(tokenizer_config: &Value) -> HashMap<u32, String> {
    let Some(decoder) = tokenizer_config.get("added_tokens_decoder").and_then(Value::as_object) else {
        return HashMap::new();
    };
    decoder.iter().filter_map(|(id, t)| Some((id.parse().ok()?, t.get("content")?.as_str()?.to_string()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(bytes: &[u8], rank: usize) -> String {
        format!("{} {rank}\n", base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    #[test]
    fn broken_files_are_refused_with_the_line() {
        let cases = [
            ("YQ==\n", "line 1: not `base64 rank`"),
            ("!!! 0\n", "line 1: Invalid"),
            ("YQ== x\n", "line 1: rank is not a number"),
            ("YQ== 0\nYg== 0\n", "line 2: rank listed twice"),
            ("YQ== 1\n", "no token of rank 0"),
        ];
        for (text, why) in cases {
            let e = tokenizer_json(text, KIMI_PATTERN, &HashMap::new()).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }

    /// Merges come off the ranks, each split of a token that is two tokens, ordered as
    /// transformers orders them.
    #[test]
    fn merges_are_read_off_the_ranks() {
        let text: String =
            [&b"a"[..], b"b", b"c", b"ab", b"bc", b"abc"].iter().enumerate().map(|(r, t)| line(t, r)).collect();
        let doc: Value = serde_json::from_slice(&tokenizer_json(&text, r"\w+", &HashMap::new()).unwrap()).unwrap();
        assert_eq!(doc["model"]["merges"], json!([["a", "b"], ["b", "c"], ["a", "bc"], ["ab", "c"]]));
        assert_eq!(doc["added_tokens"][0]["content"], "<|reserved_token_6|>");
        assert_eq!(doc["added_tokens"].as_array().map(Vec::len), Some(RESERVED_SPECIAL_TOKENS as usize));
    }
}
