//! The model's tokenizer (`tokenizer.json`, via the `tokenizers` crate, or a tiktoken
//! vocabulary file turned into one: `tiktoken_file`) and the special-token facts the rest of
//! the gateway needs.
//!
//! Where the fast encoder, the decode table and the vocabulary lookups serve everything (the
//! byte-level BPE families), the `tokenizers::Tokenizer` they were built from is dropped after
//! load: it is most of the gateway's idle memory (about 28 MiB for Qwen3's vocabulary).

pub mod cache;
mod fast_bpe;
mod lru;
pub mod tiktoken_file;
mod vocab;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::error::TokenizerError;

/// A loaded tokenizer. Shared read-only by all shards.
pub struct Tokenizer {
    tables: Tables,
    /// Added tokens (id → content), for `spaces_between_special_tokens`.
    added_tokens: HashMap<u32, String>,
    /// Token ids of added tokens marked `special` (skipped by `skip_special_tokens`).
    special_ids: Vec<u32>,
    vocab_size_with_added: usize,
    /// Metaspace replacement char (`▁`) when decode strips a leading one (SentencePiece style).
    leading_space_marker: Option<char>,
    /// `clean_up_tokenization_spaces` from `tokenizer_config.json` (transformers' decode).
    clean_up_tokenization_spaces: bool,
}

/// What answers encode, decode and vocabulary lookups.
enum Tables {
    /// The gateway's own tables serve all of it (`tokenizers`' object dropped after load).
    Own { fast: fast_bpe::FastBpe, decode: Arc<fast_bpe::ByteDecoder>, vocab: vocab::Vocab },
    /// `tokenizers` serves what the fast encoder (the same encoding at a fraction of the cost,
    /// for the shapes it knows) and the decode table (a flat id → bytes table, when the
    /// decoder is byte-level; the encoder shares it to confirm whole-token lookups) do not.
    Hf { hf: Box<tokenizers::Tokenizer>, fast: Option<fast_bpe::FastBpe>, decode: Option<Arc<fast_bpe::ByteDecoder>> },
}

impl Tokenizer {
    pub fn from_file(path: &Path) -> Result<Self, TokenizerError> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| TokenizerError::LoadFile { path: path.to_path_buf(), reason: e.to_string() })?;
        Ok(Self::from_inner(inner))
    }

    /// A tiktoken vocabulary file (`tiktoken.model`) with Kimi's pattern and special tokens,
    /// those `tokenizer_config.json` names among them (`tiktoken_file`).
    pub fn from_tiktoken_file(path: &Path, tokenizer_config: &serde_json::Value) -> Result<Self, TokenizerError> {
        let load_error = |reason: String| TokenizerError::LoadFile { path: path.to_path_buf(), reason };
        let text = std::fs::read_to_string(path).map_err(|e| load_error(e.to_string()))?;
        let named = tiktoken_file::named_special_tokens(tokenizer_config);
        let json = tiktoken_file::tokenizer_json(&text, tiktoken_file::KIMI_PATTERN, &named).map_err(load_error)?;
        drop(text);
        let inner = tokenizers::Tokenizer::from_bytes(&json).map_err(|e| load_error(e.to_string()))?;
        Ok(Self::from_inner(inner))
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, TokenizerError> {
        let inner = tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| TokenizerError::Load(e.to_string()))?;
        Ok(Self::from_inner(inner))
    }

    fn from_inner(inner: tokenizers::Tokenizer) -> Self {
        // What parsing `tokenizer.json` left behind is garbage; what is built below is kept.
        shardgate_util::memory::release_freed();
        let decoder = inner.get_added_tokens_decoder();
        let mut special_ids: Vec<u32> = decoder.iter().filter(|(_, t)| t.special).map(|(&id, _)| id).collect();
        special_ids.sort_unstable();
        let added_tokens = decoder.into_iter().map(|(id, t)| (id, t.content)).collect();
        let vocab_size_with_added = inner.get_vocab_size(true);
        let leading_space_marker = metaspace_marker(&inner);
        let tables = Tables::build(inner, &added_tokens);
        Tokenizer {
            tables,
            added_tokens,
            special_ids,
            vocab_size_with_added,
            leading_space_marker,
            clean_up_tokenization_spaces: false,
        }
    }

    pub fn set_clean_up_tokenization_spaces(&mut self, on: bool) {
        self.clean_up_tokenization_spaces = on;
    }

    /// transformers' `tokenizer.decode(ids)`: special tokens kept, then the configured
    /// clean-up of spaces before punctuation.
    pub fn decode_like_transformers(&self, ids: &[u32]) -> String {
        let text = self.decode(ids, false).unwrap_or_default();
        if self.clean_up_tokenization_spaces {
            clean_up_tokenization(&text)
        } else {
            text
        }
    }

    /// A token's text for logprobs, as vLLM shows it: the single token decoded, with leading
    /// spaces a SentencePiece decode strips put back; a token that ends in half a UTF-8
    /// character is completed from up to four preceding sampled tokens (`context`, oldest
    /// first), or shown as "" when the character is not complete yet.
    pub fn logprob_token_text(&self, id: u32, context: &[u32]) -> String {
        let text = self.decode_like_transformers(&[id]);
        let text = match (self.leading_space_marker, self.id_to_token(id)) {
            (Some(marker), Some(raw)) => restore_leading_spaces(&raw, text, marker),
            _ => text,
        };
        if !text.ends_with('\u{FFFD}') {
            return text;
        }
        self.complete_partial_token(id, context)
    }

    /// vLLM's `_correct_decoded_token`.
    fn complete_partial_token(&self, id: u32, context: &[u32]) -> String {
        let max_ctx = context.len().min(4);
        for n in 1..=max_ctx {
            let ctx = &context[context.len() - n..];
            let mut window = ctx.to_vec();
            window.push(id);
            let full = self.decode_like_transformers(&window);
            if full.ends_with('\u{FFFD}') {
                continue;
            }
            // Byte-fallback context tokens showed as "" and their bytes belong to this token.
            let mut clean_end = ctx.len();
            for j in (0..ctx.len()).rev() {
                if self.decode_like_transformers(&[ctx[j]]).ends_with('\u{FFFD}') {
                    clean_end = j;
                } else {
                    break;
                }
            }
            let clean_prefix =
                if clean_end > 0 { self.decode_like_transformers(&ctx[..clean_end]) } else { String::new() };
            if let Some(rest) = full.strip_prefix(clean_prefix.as_str()) {
                return rest.to_string();
            }
            let common: usize =
                clean_prefix.chars().zip(full.chars()).take_while(|(a, b)| a == b).map(|(a, _)| a.len_utf8()).sum();
            return full[common..].to_string();
        }
        String::new()
    }

    /// Encodes text. `add_special_tokens` adds BOS/EOS per the tokenizer's post-processor (true
    /// for completions prompts, false for rendered chat templates, as vLLM does).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, TokenizerError> {
        match &self.tables {
            Tables::Own { fast, .. } => Ok(fast.encode(text, add_special_tokens)),
            Tables::Hf { fast: Some(fast), .. } if fast.serves(add_special_tokens) => {
                Ok(fast.encode(text, add_special_tokens))
            }
            Tables::Hf { hf, .. } => hf
                .encode_fast(text, add_special_tokens)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| TokenizerError::Encode(e.to_string())),
        }
    }

    /// Whether `encode` takes the fast byte-level BPE path (for this flag).
    pub fn fast_encode_active(&self, add_special_tokens: bool) -> bool {
        match &self.tables {
            Tables::Own { .. } => true,
            Tables::Hf { fast, .. } => fast.as_ref().is_some_and(|f| f.serves(add_special_tokens)),
        }
    }

    /// Whether `decode` takes the byte-table path.
    pub fn fast_decode_active(&self) -> bool {
        matches!(&self.tables, Tables::Own { .. } | Tables::Hf { decode: Some(_), .. })
    }

    /// Whether the `tokenizers::Tokenizer` was dropped after load (the gateway's own tables
    /// serve everything).
    pub fn own_tables_only(&self) -> bool {
        matches!(&self.tables, Tables::Own { .. })
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, TokenizerError> {
        match &self.tables {
            Tables::Own { decode, .. } | Tables::Hf { decode: Some(decode), .. } => {
                Ok(decode.decode(ids, skip_special_tokens))
            }
            Tables::Hf { hf, .. } => {
                hf.decode(ids, skip_special_tokens).map_err(|e| TokenizerError::Decode(e.to_string()))
            }
        }
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        match &self.tables {
            Tables::Own { vocab, .. } => {
                self.added_tokens.iter().find(|(_, t)| *t == token).map(|(&id, _)| id).or_else(|| vocab.model_id(token))
            }
            Tables::Hf { hf, .. } => hf.token_to_id(token),
        }
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        match &self.tables {
            Tables::Own { vocab, .. } => self.added_tokens.get(&id).cloned().or_else(|| vocab.model_token(id)),
            Tables::Hf { hf, .. } => hf.id_to_token(id),
        }
    }

    pub fn added_token(&self, id: u32) -> Option<&str> {
        self.added_tokens.get(&id).map(String::as_str)
    }

    /// Added tokens marked special, as (id, text).
    pub fn special_tokens(&self) -> Vec<(u32, String)> {
        self.special_ids.iter().filter_map(|&id| self.added_token(id).map(|t| (id, t.to_string()))).collect()
    }

    pub fn is_special(&self, id: u32) -> bool {
        self.special_ids.binary_search(&id).is_ok()
    }

    /// Vocabulary size including added tokens (the largest valid id + 1 as the tokenizer knows it).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size_with_added
    }

    /// A byte-level BPE vocabulary (added tokens left out) as (bytes, id), ordered by id:
    /// what a tiktoken vocabulary file lists. `None` when a token is not spelled in GPT-2's
    /// byte characters (not a byte-level vocabulary).
    pub fn byte_level_vocab(&self) -> Option<Vec<(Vec<u8>, u32)>> {
        let hf = match &self.tables {
            Tables::Own { vocab, .. } => return vocab.byte_level(),
            Tables::Hf { hf, .. } => hf,
        };
        let to_byte = fast_bpe::byte_chars::char_to_byte_table();
        let mut vocab: Vec<(Vec<u8>, u32)> = hf
            .get_vocab(false)
            .into_iter()
            .filter(|(_, id)| !self.added_tokens.contains_key(id))
            .map(|(token, id)| {
                token.chars().map(|c| to_byte.get(&c).copied()).collect::<Option<Vec<u8>>>().map(|b| (b, id))
            })
            .collect::<Option<_>>()?;
        vocab.sort_unstable_by_key(|&(_, id)| id);
        Some(vocab)
    }
}

impl Tables {
    /// The gateway's own tables where they serve everything, else `tokenizers` beside what of
    /// them can be built (`SHARDGATE_FAST_BPE=0`: `tokenizers` alone, for comparisons).
    fn build(hf: tokenizers::Tokenizer, added: &HashMap<u32, String>) -> Tables {
        if !fast_bpe::enabled() {
            return Tables::Hf { hf: Box::new(hf), fast: None, decode: None };
        }
        let decode = fast_bpe::ByteDecoder::build(&hf)
            .map_err(|why| tracing::debug!("tokenizer: decoding with `tokenizers` ({why})"))
            .ok()
            .map(Arc::new);
        let fast = fast_bpe::FastBpe::build(&hf, decode.clone())
            .map_err(|why| tracing::debug!("tokenizer: encoding with `tokenizers` ({why})"))
            .ok();
        if let Some(why) = fast.as_ref().and_then(|f| f.specials_unsupported()) {
            tracing::debug!("tokenizer: encoding with special tokens added by `tokenizers` ({why})");
        }
        match (fast, decode) {
            (Some(fast), Some(decode)) if fast.serves(true) => {
                let vocab = vocab::Vocab::new(decode.clone(), added);
                drop(hf);
                shardgate_util::memory::release_freed();
                Tables::Own { fast, decode, vocab }
            }
            (fast, decode) => Tables::Hf { hf: Box::new(hf), fast, decode },
        }
    }
}

/// The Metaspace replacement char, if the pre-tokenizer (or one in a sequence) is Metaspace.
fn metaspace_marker(inner: &tokenizers::Tokenizer) -> Option<char> {
    let pre = serde_json::to_value(inner.get_pre_tokenizer()?).ok()?;
    let find = |v: &serde_json::Value| -> Option<char> {
        (v.get("type")?.as_str()? == "Metaspace")
            .then(|| v.get("replacement").and_then(|r| r.as_str()).and_then(|r| r.chars().next()).unwrap_or('\u{2581}'))
    };
    find(&pre).or_else(|| pre.get("pretokenizers")?.as_array()?.iter().find_map(find))
}

/// Puts back leading spaces that decoding a single SentencePiece piece strips.
fn restore_leading_spaces(raw: &str, text: String, marker: char) -> String {
    let markers = raw.chars().take_while(|&c| c == marker).count();
    let existing = text.len() - text.trim_start_matches(' ').len();
    if markers > existing {
        " ".repeat(markers - existing) + &text
    } else {
        text
    }
}

/// transformers' `clean_up_tokenization`.
fn clean_up_tokenization(text: &str) -> String {
    text.replace(" .", ".")
        .replace(" ?", "?")
        .replace(" !", "!")
        .replace(" ,", ",")
        .replace(" ' ", "'")
        .replace(" n't", "n't")
        .replace(" 'm", "'m")
        .replace(" 's", "'s")
        .replace(" 've", "'ve")
        .replace(" 're", "'re")
}
