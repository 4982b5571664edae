//! Token strings ↔ ids without `tokenizers`, for byte-level vocabularies, from the decode table:
//! a token's string is its bytes spelled in GPT-2's byte stand-ins, or its UTF-8 as it is where
//! the table marks it literal (added tokens, entries not spelled in stand-ins).
//!
//! Why: these lookups are rare (special tokens at load, logprob texts), and answering them from
//! the decode table lets the `tokenizers::Tokenizer` (most of the gateway's idle memory) be
//! dropped after load.

use std::collections::HashMap;
use std::sync::Arc;

use super::fast_bpe::byte_chars::{byte_to_char_table, char_to_byte_table};
use super::fast_bpe::ByteDecoder;

pub(super) struct Vocab {
    decoder: Arc<ByteDecoder>,
    /// The model's ids (added tokens left out), ordered by their bytes.
    by_bytes: Box<[u32]>,
}

impl Vocab {
    /// `added` are the added tokens (answered before the model's vocabulary, as `tokenizers`
    /// does).
    pub(super) fn new(decoder: Arc<ByteDecoder>, added: &HashMap<u32, String>) -> Vocab {
        let mut by_bytes: Vec<u32> = (0..decoder.id_count() as u32)
            .filter(|id| !added.contains_key(id) && decoder.token(*id).is_some())
            .collect();
        by_bytes.sort_unstable_by(|&a, &b| decoder.token(a).cmp(&decoder.token(b)));
        Vocab { decoder, by_bytes: by_bytes.into_boxed_slice() }
    }

    /// `tokenizers`' `id_to_token` for an id that is not an added token.
    pub(super) fn model_token(&self, id: u32) -> Option<String> {
        let bytes = self.decoder.token(id)?;
        if self.decoder.is_literal(id) {
            return Some(String::from_utf8_lossy(bytes).into_owned());
        }
        let to_char = byte_to_char_table();
        Some(bytes.iter().map(|&b| to_char[usize::from(b)]).collect())
    }

    /// `tokenizers`' `token_to_id` in the model's vocabulary (added tokens are the caller's).
    pub(super) fn model_id(&self, token: &str) -> Option<u32> {
        let from_char = char_to_byte_table();
        let stand_ins: Option<Vec<u8>> = token.chars().map(|c| from_char.get(&c).copied()).collect();
        let bytes = stand_ins.as_deref().unwrap_or(token.as_bytes());
        let start = self.by_bytes.partition_point(|&id| self.decoder.token(id) < Some(bytes));
        // Ids with these bytes: a stand-in entry and a literal one may share them.
        self.by_bytes[start..]
            .iter()
            .take_while(|&&id| self.decoder.token(id) == Some(bytes))
            .copied()
            .find(|&id| self.model_token(id).as_deref() == Some(token))
    }

    /// The vocabulary as (bytes, id) in id order, or `None` when an entry is not spelled in
    /// byte stand-ins.
    pub(super) fn byte_level(&self) -> Option<Vec<(Vec<u8>, u32)>> {
        let mut vocab: Vec<(Vec<u8>, u32)> = self
            .by_bytes
            .iter()
            .map(|&id| {
                (!self.decoder.is_literal(id)).then(|| (self.decoder.token(id).unwrap_or_default().to_vec(), id))
            })
            .collect::<Option<_>>()?;
        vocab.sort_unstable_by_key(|&(_, id)| id);
        Some(vocab)
    }
}
