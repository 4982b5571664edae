//! Byte-level decoding from one flat table: id → the bytes its token stands for.
//!
//! Why: streaming decodes a small window of ids for every output token. Through `tokenizers`
//! that is a hash lookup per id (added vocabulary, then the model's reverse vocabulary), a
//! clone of each token string, a set lookup to test "special", a hash lookup per char to map
//! it back to its byte, and three allocations. With a `ByteLevel` decoder the result is only a
//! function of each id's bytes, so they are computed once at load.
//!
//! Invariant: `decode` equals `tokenizers::Tokenizer::decode` for every id sequence (it is
//! built from the loaded tokenizer's own id → token answers; tests compare the two).

use tokenizers::Tokenizer;

use super::index::char_to_byte_table;
use super::shape::to_json;

pub struct ByteDecoder {
    /// The bytes of every id, back to back; id `i` is `bytes[ends[i - 1]..ends[i]]`.
    bytes: Vec<u8>,
    ends: Vec<u32>,
    /// Ids that `tokenizers` knows (others decode to nothing).
    known: Vec<bool>,
    /// Ids whose token is a special added token (dropped with `skip_special_tokens`).
    special: Vec<bool>,
}

impl ByteDecoder {
    /// The table for `hf`, or why its decode is not a plain byte-level one.
    pub fn build(hf: &Tokenizer) -> Result<ByteDecoder, String> {
        let decoder = hf.get_decoder().ok_or("no decoder")?;
        if to_json(decoder)?.get("type").and_then(|t| t.as_str()) != Some("ByteLevel") {
            return Err("the decoder is not ByteLevel".into());
        }
        // Ids are expected to run 0..size (checked below); asking for the vocabulary map instead
        // would clone every token string just to find the largest id.
        let size = hf.get_vocab_size(true);
        let n = hf.get_added_tokens_decoder().keys().map(|&id| id as usize + 1).fold(size, usize::max);
        let to_byte = char_to_byte_table();
        let added = hf.get_added_vocabulary();
        let mut table = ByteDecoder {
            bytes: Vec::with_capacity(n * 7),
            ends: Vec::with_capacity(n),
            known: vec![false; n],
            special: vec![false; n],
        };
        for id in 0..n {
            if let Some(token) = hf.id_to_token(id as u32) {
                table.known[id] = true;
                table.special[id] = added.is_special_token(&token);
                // ByteLevel's decode_chain: a token whose every char is a byte stand-in gives
                // those bytes, any other token its UTF-8 as it is.
                let mapped: Option<Vec<u8>> = token.chars().map(|c| to_byte.get(&c).copied()).collect();
                table.bytes.extend_from_slice(mapped.as_deref().unwrap_or(token.as_bytes()));
            }
            let end = u32::try_from(table.bytes.len()).map_err(|_| "vocabulary bytes exceed 4 GiB")?;
            table.ends.push(end);
        }
        if table.known.iter().filter(|&&k| k).count() != size {
            return Err("token ids are not contiguous".into());
        }
        table.bytes.shrink_to_fit();
        Ok(table)
    }

    /// `tokenizers`' decode: the ids' bytes, UTF-8 with U+FFFD for broken sequences.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> String {
        let mut out = Vec::with_capacity(ids.len() * 8);
        for &id in ids {
            let i = id as usize;
            if i >= self.known.len() || !self.known[i] || (skip_special_tokens && self.special[i]) {
                continue;
            }
            let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
            out.extend_from_slice(&self.bytes[start..self.ends[i] as usize]);
        }
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}
