//! A request's images (or videos: one modality per request), from URLs to the engine's
//! `mm_features`: each item fetched, decoded, processed and hashed on the side pool (all items
//! at once), then, back on the shard, the image (video) token of the tokenized prompt expanded
//! once per item (`placeholders::expand`) and each item's tensors laid out as vLLM's field
//! config for the model's family lays them out.

use std::rc::Rc;
use std::sync::Arc;

use shardgate_fetch::FetchPolicy;
use shardgate_media::placeholders::Replacement;
use shardgate_media::{placeholders, DecodeLimits, MediaError};
use shardgate_wire::mm::{Feature, Field, Layout, Modality, Tensor};

use super::collect::{MediaItem, MediaKind};
use super::item::{pixel_tensor, Item, Refused};
use super::refusal;
use super::vision::{TensorLayout, Vision};
use crate::error::ApiError;
use crate::pipeline::request::Prompt;
use crate::shard::ShardCtx;

/// A request's images, processed and ready to attach to its prompt (once, or again for each
/// turn of a tool loop: the tensors are shared, not copied).
#[derive(Default)]
pub struct Processed(Vec<Item>);

/// The prompt with its images: the placeholders expanded and the items in `mm_features`. An
/// image the client can fix is a 400 naming its part; a full pool a 503.
pub async fn attach(
    ctx: &ShardCtx,
    vision: &Arc<Vision>,
    items: &[MediaItem],
    prompt: Prompt,
) -> Result<Prompt, ApiError> {
    let images = process(ctx, vision, items).await?;
    expand(vision, items, &images, prompt)
}

/// `prompt`, tokenized with one image token per item, with each expanded and the items attached.
pub fn expand(vision: &Vision, items: &[MediaItem], images: &Processed, prompt: Prompt) -> Result<Prompt, ApiError> {
    let Processed(images) = images;
    if images.is_empty() {
        return Ok(prompt);
    }
    let replacements: Vec<Replacement<'_>> = images
        .iter()
        .map(|i| match &i.replacement {
            Some(ids) => Replacement::Tokens(ids),
            None => Replacement::Copies(i.tokens),
        })
        .collect();
    // One modality per request (checked first): the first item's says which token expands.
    let token = match (images[0].modality, &vision.video) {
        (Modality::Video, Some(video)) => video.token_id,
        _ => vision.image_token_id,
    };
    let (ids, ranges) = placeholders::expand(&prompt.token_ids, token, &replacements).map_err(|e| match e {
        MediaError::Placeholders { found, .. } => refusal::media(&items[found.min(items.len() - 1)].at, &e),
        other => refusal::media(&items[0].at, &other),
    })?;
    let features = match vision.family.layout {
        TensorLayout::PatchRowsWithGrid => patch_row_features(images, &ranges),
        TensorLayout::BatchedPixels => batched_features(images, &ranges),
    };
    Ok(Prompt { token_ids: Rc::from(ids), mm_features: features, ..prompt })
}

/// Every item on the pool at once, the answers awaited in order; the first refusal (in
/// request order) is the answer.
pub async fn process(ctx: &ShardCtx, vision: &Arc<Vision>, items: &[MediaItem]) -> Result<Processed, ApiError> {
    if items.is_empty() {
        return Ok(Processed::default());
    }
    let mut pending = Vec::with_capacity(items.len());
    for item in items {
        let (url, policy, vision) = (item.url.clone(), ctx.shared.config.media_fetch.clone(), vision.clone());
        let kind = item.kind;
        let rx = ctx.shared.media_pool.submit(move || match kind {
            MediaKind::Image => process_one(&url, &policy, &vision),
            MediaKind::Video => super::video::process_one(&url, &policy, &vision),
        });
        let rx = rx.map_err(|_| {
            tracing::warn!("image refused: {}: the media pool's queue is full", item.at);
            ApiError::unavailable("the gateway is busy processing images; retry shortly")
        })?;
        pending.push(rx);
    }
    let mut images = Vec::with_capacity(items.len());
    for (item, rx) in items.iter().zip(pending) {
        match rx.recv().await {
            Some(Ok(image)) => images.push(image),
            Some(Err(Refused::Fetch(e))) => return Err(refusal::fetch(&item.at, &e)),
            Some(Err(Refused::Media(e))) => return Err(refusal::media(&item.at, &e)),
            Some(Err(Refused::Video(e))) => return Err(refusal::video(&item.at, &e)),
            Some(Err(Refused::NoVideo)) => return Err(refusal::no_video(&item.at)),
            None => return Err(ApiError::internal(format!("{}: the image was not processed", item.at))),
        }
    }
    Ok(Processed(images))
}

/// What a pool thread does for one item.
fn process_one(url: &str, policy: &FetchPolicy, vision: &Vision) -> Result<Item, Refused> {
    let fetched = shardgate_fetch::fetch(url, policy).map_err(Refused::Fetch)?;
    let decoded = shardgate_media::decode(&fetched.bytes, &DecodeLimits::default()).map_err(Refused::Media)?;
    let processed = vision.processor.process(&decoded.image).map_err(Refused::Media)?;
    if vision.family.layout == TensorLayout::PatchRowsWithGrid && processed.grid_thw.is_none() {
        return Err(unprocessable(&decoded.image));
    }
    Ok(Item {
        modality: Modality::Image,
        pixel_values: pixel_tensor(&processed, vision.device_normalize),
        grid_thw: processed.grid_thw,
        tokens: vision.tokens(&processed),
        replacement: None,
        hash: shardgate_media::image_hash(&vision.model_id, &fetched.bytes, decoded.converted),
        batched: Vec::new(),
    })
}

fn unprocessable(image: &shardgate_media::RgbImage) -> Refused {
    Refused::Media(MediaError::Unprocessable {
        width: image.width,
        height: image.height,
        detail: "the model's processor gives no image grid".into(),
    })
}

/// The items as vLLM's Qwen2-VL field factory makes them: `pixel_values` (`_videos`) flat
/// along rows (each item carries every item's row slice of the request's concatenation),
/// `image_grid_thw` (`video_grid_thw`, Qwen2.5-VL's `second_per_grid_ts`, Qwen3-VL's
/// `timestamps`) batched and kept on the CPU.
fn patch_row_features(images: &[Item], ranges: &[placeholders::PlaceholderRange]) -> Rc<[Feature]> {
    let mut slices = Vec::with_capacity(images.len());
    let mut start = 0;
    for image in images {
        let rows = image.pixel_values.shape.first().copied().unwrap_or(0);
        slices.push((start, start + rows));
        start += rows;
    }
    images
        .iter()
        .zip(ranges)
        .map(|(image, range)| {
            let (pixels_key, grid_key) = match image.modality {
                Modality::Image => ("pixel_values", "image_grid_thw"),
                Modality::Video => ("pixel_values_videos", "video_grid_thw"),
            };
            let pixel_values = Field {
                key: pixels_key,
                data: image.pixel_values.clone().into(),
                layout: Layout::Flat { slices: slices.clone(), dim: 0 },
                keep_on_cpu: false,
            };
            let grid = image.grid_thw.unwrap_or_default().map(i64::from);
            let batched = |key, data| Field { key, data, layout: Layout::Batched, keep_on_cpu: true };
            let mut fields = vec![pixel_values, batched(grid_key, Tensor::i64(vec![3], &grid).into())];
            fields.extend(image.batched.iter().map(|(key, data)| batched(key, data.clone())));
            feature(image, range, fields)
        })
        .collect()
}

/// The items as vLLM's LLaVA processor makes them: each item's `pixel_values` is its own
/// `(3, height, width)` entry of the batch.
fn batched_features(images: &[Item], ranges: &[placeholders::PlaceholderRange]) -> Rc<[Feature]> {
    images
        .iter()
        .zip(ranges)
        .map(|(image, range)| {
            let pixel_values = Field {
                key: "pixel_values",
                data: image.pixel_values.clone().into(),
                layout: Layout::Batched,
                keep_on_cpu: false,
            };
            feature(image, range, vec![pixel_values])
        })
        .collect()
}

fn feature(image: &Item, range: &placeholders::PlaceholderRange, fields: Vec<Field>) -> Feature {
    Feature {
        modality: image.modality,
        fields: Some(Arc::from(fields)),
        hash: image.hash.clone(),
        offset: range.offset as u32,
        length: range.length as u32,
        is_embed: range.is_embed.as_deref().map(Tensor::bool),
    }
}
