//! Placeholder expansion as vLLM does it for Qwen2-VL (its `PromptReplacement` of the image
//! token): in the tokenized prompt, the image token's occurrences are taken in order, one per
//! image, and each becomes as many copies as the image has placeholder tokens
//! (`Processed::tokens`); the engine learns where each image's embeddings go from the
//! `PlaceholderRange`s. Occurrences beyond the images stay as they are; fewer occurrences than
//! images is vLLM's refusal.

use crate::error::MediaError;

/// Where one image's placeholder tokens sit in the expanded prompt (vLLM's `PlaceholderRange`,
/// `is_embed` unset: every token is an embedding position).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaceholderRange {
    pub offset: usize,
    pub length: usize,
}

/// The prompt with each image's token expanded, and each image's range.
pub fn expand(
    prompt: &[u32],
    image_token: u32,
    tokens_per_image: &[usize],
) -> Result<(Vec<u32>, Vec<PlaceholderRange>), MediaError> {
    let extra: usize = tokens_per_image.iter().map(|n| n.saturating_sub(1)).sum();
    let mut ids = Vec::with_capacity(prompt.len() + extra);
    let mut ranges = Vec::with_capacity(tokens_per_image.len());
    let mut images = tokens_per_image.iter();
    for &id in prompt {
        let next = if id == image_token { images.next() } else { None };
        match next {
            Some(&length) => {
                ranges.push(PlaceholderRange { offset: ids.len(), length });
                ids.resize(ids.len() + length, image_token);
            }
            None => ids.push(id),
        }
    }
    // vLLM records no placeholder for an item that expands to nothing.
    ranges.retain(|r| r.length > 0);
    if ranges.len() != tokens_per_image.len() {
        return Err(MediaError::Placeholders { images: tokens_per_image.len(), found: ranges.len() });
    }
    Ok((ids, ranges))
}
