//! Placeholder expansion as vLLM does it for the Qwen-VL family (its `PromptReplacement` of the
//! image or video token): in the tokenized prompt, the token's occurrences are taken in order,
//! one per item, and each becomes the item's replacement: copies of the token, one per
//! embedding (images; Qwen2-VL videos), or a sequence of its own (a Qwen3-VL video: each frame
//! group's timestamp text and vision markers around its copies of the token), where only the
//! copies of the token are embedding positions (`is_embed`). The engine learns where each
//! item's embeddings go from the `PlaceholderRange`s. Occurrences beyond the items stay as they
//! are; fewer occurrences than items is vLLM's refusal.

use crate::error::MediaError;

/// What one item's placeholder token becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replacement<'a> {
    /// This many copies of the token, every one an embedding position.
    Copies(usize),
    /// These tokens; the embedding positions are those holding the token (vLLM's
    /// `PromptUpdateDetails.select_token_id`).
    Tokens(&'a [u32]),
}

impl Replacement<'_> {
    fn len(&self) -> usize {
        match self {
            Replacement::Copies(n) => *n,
            Replacement::Tokens(ids) => ids.len(),
        }
    }
}

/// Where one item's replacement sits in the expanded prompt (vLLM's `PlaceholderRange`):
/// `is_embed` marks its embedding positions, `None` when every token is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceholderRange {
    pub offset: usize,
    pub length: usize,
    pub is_embed: Option<Vec<bool>>,
}

/// The prompt with each item's token replaced, and each item's range.
pub fn expand(
    prompt: &[u32],
    token: u32,
    replacements: &[Replacement<'_>],
) -> Result<(Vec<u32>, Vec<PlaceholderRange>), MediaError> {
    let extra: usize = replacements.iter().map(|r| r.len().saturating_sub(1)).sum();
    let mut ids = Vec::with_capacity(prompt.len() + extra);
    let mut ranges = Vec::with_capacity(replacements.len());
    let mut items = replacements.iter();
    for &id in prompt {
        let next = if id == token { items.next() } else { None };
        let offset = ids.len();
        match next {
            Some(Replacement::Copies(length)) => {
                ranges.push(PlaceholderRange { offset, length: *length, is_embed: None });
                ids.resize(offset + length, token);
            }
            Some(Replacement::Tokens(tokens)) => {
                let is_embed = tokens.iter().map(|&t| t == token).collect();
                ranges.push(PlaceholderRange { offset, length: tokens.len(), is_embed: Some(is_embed) });
                ids.extend_from_slice(tokens);
            }
            None => ids.push(id),
        }
    }
    // vLLM records no placeholder for an item that expands to nothing.
    ranges.retain(|r| r.length > 0);
    if ranges.len() != replacements.len() {
        return Err(MediaError::Placeholders { images: replacements.len(), found: ranges.len() });
    }
    Ok((ids, ranges))
}
