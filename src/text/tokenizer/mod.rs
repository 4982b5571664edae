//! The model's tokenizer (`tokenizer.json`, via the `tokenizers` crate) and the special-token
//! facts the rest of the gateway needs.

use std::collections::HashMap;
use std::path::Path;

/// A loaded tokenizer. Shared read-only by all shards (`tokenizers::Tokenizer` is `Sync`).
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// Added tokens (id → content), for `spaces_between_special_tokens`.
    added_tokens: HashMap<u32, String>,
    /// Token ids of added tokens marked `special` (skipped by `skip_special_tokens`).
    special_ids: Vec<u32>,
    vocab_size_with_added: usize,
}

impl Tokenizer {
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| format!("cannot load tokenizer {}: {e}", path.display()))?;
        Ok(Self::from_inner(inner))
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let inner = tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| format!("cannot load tokenizer: {e}"))?;
        Ok(Self::from_inner(inner))
    }

    fn from_inner(inner: tokenizers::Tokenizer) -> Self {
        let decoder = inner.get_added_tokens_decoder();
        let mut special_ids: Vec<u32> = decoder.iter().filter(|(_, t)| t.special).map(|(&id, _)| id).collect();
        special_ids.sort_unstable();
        let added_tokens = decoder.into_iter().map(|(id, t)| (id, t.content)).collect();
        let vocab_size_with_added = inner.get_vocab_size(true);
        Tokenizer { inner, added_tokens, special_ids, vocab_size_with_added }
    }

    /// Encodes text. `add_special_tokens` adds BOS/EOS per the tokenizer's post-processor (true
    /// for completions prompts, false for rendered chat templates, as vLLM does).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, String> {
        self.inner
            .encode_fast(text, add_special_tokens)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| format!("tokenization failed: {e}"))
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, String> {
        self.inner.decode(ids, skip_special_tokens).map_err(|e| format!("detokenization failed: {e}"))
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    pub fn added_token(&self, id: u32) -> Option<&str> {
        self.added_tokens.get(&id).map(String::as_str)
    }

    pub fn is_special(&self, id: u32) -> bool {
        self.special_ids.binary_search(&id).is_ok()
    }

    /// Vocabulary size including added tokens (the largest valid id + 1 as the tokenizer knows it).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size_with_added
    }

    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}
