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

use super::byte_chars::char_to_byte_table;
use super::prefetch::prefetch;
use super::shape::to_json;
use super::Unsupported;

pub struct ByteDecoder {
    /// The bytes of every id, back to back.
    bytes: Box<[u8]>,
    /// Per id: where its bytes end (`END`), whether `tokenizers` knows it (others decode to
    /// nothing), whether it is a special added token (dropped with `skip_special_tokens`), and
    /// whether its token string is its UTF-8 as it is (`LITERAL`) rather than byte stand-ins.
    spans: Box<[u32]>,
}

const KNOWN: u32 = 1 << 31;
const SPECIAL: u32 = 1 << 30;
const LITERAL: u32 = 1 << 29;
const END: u32 = LITERAL - 1;

impl ByteDecoder {
    /// The table for `hf`, or why its decode is not a plain byte-level one.
    pub fn build(hf: &Tokenizer) -> Result<ByteDecoder, Unsupported> {
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
        // ByteLevel's decode_chain: a token whose every char is a byte stand-in gives those
        // bytes, any other token its UTF-8 as it is.
        let token_bytes = |id: usize, out: &mut dyn FnMut(&[u8], bool, bool)| {
            if let Some(token) = hf.id_to_token(id as u32) {
                let mapped: Option<Vec<u8>> = token.chars().map(|c| to_byte.get(&c).copied()).collect();
                out(mapped.as_deref().unwrap_or(token.as_bytes()), added.is_special_token(&token), mapped.is_none());
            }
        };
        // Two passes, so both tables are allocated once at their exact size: a grown or shrunk
        // table left several MiB of the allocator's pages resident around it.
        let mut spans = Vec::with_capacity(n);
        let (mut end, mut known) = (0usize, 0usize);
        for id in 0..n {
            let mut flags = 0;
            token_bytes(id, &mut |bytes, special, literal| {
                end += bytes.len();
                known += 1;
                flags = KNOWN | if special { SPECIAL } else { 0 } | if literal { LITERAL } else { 0 };
            });
            let at = u32::try_from(end).ok().filter(|&e| e <= END).ok_or("vocabulary bytes exceed 512 MiB")?;
            spans.push(at | flags);
        }
        if known != size {
            return Err("token ids are not contiguous".into());
        }
        let mut bytes = Vec::with_capacity(end);
        for id in 0..n {
            token_bytes(id, &mut |b, _, _| bytes.extend_from_slice(b));
        }
        Ok(ByteDecoder { bytes: bytes.into_boxed_slice(), spans: spans.into_boxed_slice() })
    }

    /// `tokenizers`' decode: the ids' bytes, UTF-8 with U+FFFD for broken sequences.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> String {
        let mut out = Vec::with_capacity(ids.len() * 8);
        for &id in ids {
            if let Some((bytes, special)) = self.entry(id) {
                if !(skip_special_tokens && special) {
                    out.extend_from_slice(bytes);
                }
            }
        }
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// The bytes of a token `tokenizers` knows.
    pub(crate) fn token(&self, id: u32) -> Option<&[u8]> {
        self.entry(id).map(|(bytes, _)| bytes)
    }

    /// Whether the id's token string is its bytes as UTF-8, not byte stand-ins (added tokens,
    /// and vocabulary entries not spelled in stand-ins).
    pub(crate) fn is_literal(&self, id: u32) -> bool {
        self.spans.get(id as usize).is_some_and(|s| s & LITERAL != 0)
    }

    /// One more than the largest id the table has a slot for.
    pub(crate) fn id_count(&self) -> usize {
        self.spans.len()
    }

    /// Starts loading what `token(id)` reads first: where the id's bytes start and end.
    pub(super) fn prefetch_span(&self, id: u32) {
        let i = id as usize;
        if let Some(span) = self.spans.get(i) {
            prefetch(span);
            prefetch(&self.spans[i.saturating_sub(1)]);
        }
    }

    /// Starts loading the id's bytes (its span should be in cache by now).
    pub(super) fn prefetch_bytes(&self, id: u32) {
        if let Some((bytes, _)) = self.entry(id) {
            prefetch(bytes.as_ptr());
            prefetch(bytes.as_ptr().wrapping_add(bytes.len().saturating_sub(1)));
        }
    }

    /// A table of these tokens' bytes (ids from `first_id` on, none special; lower ids
    /// unknown), for tests.
    #[cfg(test)]
    pub(super) fn from_tokens(first_id: usize, tokens: &[Vec<u8>]) -> ByteDecoder {
        let spans = tokens.iter().scan(0u32, |end, t| {
            *end += t.len() as u32;
            Some(*end | KNOWN)
        });
        let spans = std::iter::repeat_n(0, first_id).chain(spans).collect();
        ByteDecoder { spans, bytes: tokens.concat().into_boxed_slice() }
    }

    /// A known token's bytes and whether it is special.
    fn entry(&self, id: u32) -> Option<(&[u8], bool)> {
        let i = id as usize;
        let span = *self.spans.get(i)?;
        if span & KNOWN == 0 {
            return None;
        }
        let start = if i == 0 { 0 } else { (self.spans[i - 1] & END) as usize };
        Some((&self.bytes[start..(span & END) as usize], span & SPECIAL != 0))
    }
}
