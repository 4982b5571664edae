//! Incremental detokenization, as vLLM's `FastIncrementalDetokenizer` does it: a `DecodeStream`
//! (decode the window of ids, emit the part after the previously decoded prefix, hold tokens
//! while the text ends in an incomplete UTF-8 sequence) primed with the end of the prompt, so a
//! first output token gets the same leading space it would get in context.
//!
//! Invariant: emitted text never contains a broken UTF-8 sequence that a later token completes;
//! the concatenation of emitted pieces equals what the stream has decoded so far.

use super::tokenizer::Tokenizer;

/// Prompt tokens used to prime the stream: enough context for a leading space or a byte-level
/// merge to come out right, without decoding a whole long prompt.
const PRIME_TOKENS_MIN: usize = 4;
const PRIME_TOKENS_MAX: usize = 24;

pub struct IncrementalDecoder {
    skip_special_tokens: bool,
    /// `spaces_between_special_tokens` as it takes effect (only without skipping specials).
    spaces_between_special_tokens: bool,
    last_was_special: bool,
    ids: Vec<u32>,
    prefix: String,
    prefix_index: usize,
}

impl IncrementalDecoder {
    pub fn new(
        tokenizer: &Tokenizer,
        prompt: &[u32],
        skip_special_tokens: bool,
        spaces_between_special_tokens: bool,
    ) -> Self {
        IncrementalDecoder {
            skip_special_tokens,
            spaces_between_special_tokens: skip_special_tokens || spaces_between_special_tokens,
            last_was_special: false,
            ids: prime_window(tokenizer, prompt, skip_special_tokens),
            prefix: String::new(),
            prefix_index: 0,
        }
    }

    /// Decodes one more token; returns the text it completes (possibly empty).
    pub fn step(&mut self, tokenizer: &Tokenizer, id: u32) -> String {
        let mut text = self.stream_step(tokenizer, id).unwrap_or_default();
        if !self.spaces_between_special_tokens {
            let special = tokenizer.added_token(id);
            if let (Some(content), true) = (special, self.last_was_special) {
                // Two added tokens in a row: no separating space.
                text = content.to_string();
            }
            self.last_was_special = special.is_some();
        }
        text
    }

    fn stream_step(&mut self, tokenizer: &Tokenizer, id: u32) -> Option<String> {
        match self.decode_stream_step(tokenizer, id) {
            Ok(text) => text,
            Err(()) => {
                // vLLM resets the stream on an "invalid prefix" (a tokenizer whose decode of a
                // longer window rewrites earlier text) and carries on from this token.
                self.ids.clear();
                self.prefix.clear();
                self.prefix_index = 0;
                self.decode_stream_step(tokenizer, id).ok().flatten()
            }
        }
    }

    /// `tokenizers::step_decode_stream`, step for step, over `Tokenizer::decode` (so the
    /// byte-table decoder serves it when it can); `Err` is its `InvalidPrefix`.
    fn decode_stream_step(&mut self, tokenizer: &Tokenizer, id: u32) -> Result<Option<String>, ()> {
        let skip = self.skip_special_tokens;
        let decode = |ids: &[u32]| tokenizer.decode(ids, skip).map_err(|_| ());
        if self.prefix.is_empty() && !self.ids.is_empty() {
            let prefix = decode(&self.ids)?;
            if !prefix.ends_with('\u{FFFD}') {
                self.prefix = prefix;
                self.prefix_index = self.ids.len();
            }
        }
        self.ids.push(id);
        let text = decode(&self.ids)?;
        if text.len() <= self.prefix.len() || text.ends_with('\u{FFFD}') {
            return Ok(None);
        }
        let Some(new_text) = text.strip_prefix(self.prefix.as_str()) else { return Err(()) };
        let new_text = new_text.to_string();
        let new_prefix_index = self.ids.len() - self.prefix_index;
        self.ids.drain(..self.prefix_index);
        self.prefix = decode(&self.ids)?;
        self.prefix_index = new_prefix_index;
        Ok(Some(new_text))
    }
}

/// The shortest prompt suffix (at least `PRIME_TOKENS_MIN` tokens) that decodes without a
/// replacement character, so the stream's first prefix is clean text.
fn prime_window(tokenizer: &Tokenizer, prompt: &[u32], skip_special_tokens: bool) -> Vec<u32> {
    let n = prompt.len();
    if n <= PRIME_TOKENS_MIN {
        return prompt.to_vec();
    }
    for len in PRIME_TOKENS_MIN..=n.min(PRIME_TOKENS_MAX) {
        let suffix = &prompt[n - len..];
        match tokenizer.decode(suffix, skip_special_tokens) {
            Ok(s) if !s.contains('\u{FFFD}') => return suffix.to_vec(),
            _ => {}
        }
    }
    prompt[n - n.min(PRIME_TOKENS_MAX)..].to_vec()
}
