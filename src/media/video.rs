//! Videos for the Qwen-VL family: what a media pool thread does for one `video_url` part
//! (what the model needs for it is `video_support`): fetch under the operator's
//! `--max-media-bytes` (as an image), decode the frames vLLM's loader for the model's video
//! processor samples (2 fps: `qwen2_vl`'s or `qwen3_vl`'s), process them, hash the item as
//! vLLM does. A Qwen3-VL video also gets its prompt replacement here: per frame group, the
//! group's `<t seconds>` text (tokenized on its own, as vLLM does) and its video tokens between
//! `<|vision_start|>` and `<|vision_end|>`; the times go with the item as `timestamps`.

use shardgate_fetch::FetchPolicy;
use shardgate_media::processor::{
    qwen2_vl_frame_indices, qwen3_vl_frame_indices, qwen3_vl_timestamp_text, qwen3_vl_timestamps, VideoProcessor,
};
use shardgate_media::{MediaError, Processed, VideoError, VideoLimits, VideoSource};
use shardgate_wire::mm::{FieldData, Modality, Tensor};

use super::item::{pixel_tensor, Item, Refused};
use super::video_support::{FrameGroups, VideoSupport};
use super::vision::Vision;

/// The default sampling rate of vLLM's `qwen2_vl` and `qwen3_vl` loaders, frames per second.
const SAMPLING_FPS: f64 = 2.0;

/// What a pool thread does for one video part.
pub(super) fn process_one(url: &str, policy: &FetchPolicy, vision: &Vision) -> Result<Item, Refused> {
    let video = vision.video.as_ref().ok_or(Refused::NoVideo)?;
    let limits = VideoLimits::default();
    let fetched = shardgate_fetch::fetch(url, policy).map_err(Refused::Fetch)?;
    let t = video.processor.frames().temporal_patch_size;
    let decoded = shardgate_media::decode_video(&fetched.bytes, &limits, |total, fps| match video.processor {
        VideoProcessor::Qwen2Vl(_) => qwen2_vl_frame_indices(total, fps, SAMPLING_FPS, t),
        VideoProcessor::Qwen3Vl(_) => qwen3_vl_frame_indices(total, fps, SAMPLING_FPS),
    })
    .map_err(Refused::Video)?;
    let frames_refused = |e| Refused::Video(VideoError::Frames(e));
    let processed = video.processor.process_video(&decoded.frames).map_err(frames_refused)?;
    let first = &decoded.frames[0];
    let source = VideoSource {
        total_frames: decoded.total_frames,
        fps: decoded.fps,
        indices: &decoded.indices,
        shape: [decoded.frames.len(), first.height as usize, first.width as usize],
    };
    let hash = shardgate_media::video_hash(&vision.model_id, &fetched.bytes, &source, || {
        decoded.frames.iter().flat_map(|f| f.pixels.iter().copied()).collect()
    });
    let mut item = Item {
        modality: Modality::Video,
        pixel_values: pixel_tensor(&processed, vision.device_normalize),
        grid_thw: processed.grid_thw,
        tokens: processed.tokens,
        replacement: None,
        hash,
        batched: Vec::new(),
    };
    if video.seconds_per_grid {
        // Qwen2.5-VL's processor: each temporal patch spans `temporal_patch_size` sampled
        // frames, at the rate they were sampled (transformers' `VideoMetadata.sampled_fps`).
        let sampled_fps = decoded.indices.len() as f64 / decoded.total_frames as f64 * decoded.fps;
        item.batched.push(("second_per_grid_ts", Tensor::f32(vec![], &[(t as f64 / sampled_fps) as f32]).into()));
    }
    if let Some(groups) = &video.frame_groups {
        let timestamps = qwen3_vl_timestamps(&decoded.indices, decoded.fps, t);
        item.replacement = Some(frame_group_tokens(groups, video, &processed, &timestamps).map_err(frames_refused)?);
        item.batched.push(("timestamps", FieldData::Floats(timestamps.into())));
    }
    Ok(item)
}

/// A Qwen3-VL video's replacement: per frame group, its timestamp text, `<|vision_start|>`,
/// the group's video tokens, `<|vision_end|>`.
fn frame_group_tokens(
    groups: &FrameGroups,
    video: &VideoSupport,
    processed: &Processed,
    timestamps: &[f64],
) -> Result<Vec<u32>, MediaError> {
    let [grid_t, ..] = processed.grid_thw.unwrap_or_default();
    let per_group = processed.tokens / grid_t.max(1) as usize;
    let mut ids = Vec::with_capacity(processed.tokens + timestamps.len() * 10);
    for &seconds in timestamps {
        let text = qwen3_vl_timestamp_text(seconds);
        let encoded = groups.model.tokenizer.encode(&text, false).map_err(|e| MediaError::Unprocessable {
            width: 0,
            height: 0,
            detail: format!("the timestamp text {text} cannot be tokenized: {e}"),
        })?;
        ids.extend(encoded);
        ids.push(groups.vision_start);
        ids.resize(ids.len() + per_group, video.token_id);
        ids.push(groups.vision_end);
    }
    Ok(ids)
}
