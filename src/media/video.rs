//! Videos for the Qwen-VL family: what a media pool thread does for one `video_url` part
//! (what the model needs for it is `video_support`): fetch under the
//! operator's `--max-media-bytes` (as an image), decode the frames vLLM's `qwen2_vl` loader
//! samples (2 fps), process them with Qwen2-VL's video processor, hash the item as vLLM does.

use shardgate_fetch::FetchPolicy;
use shardgate_media::processor::qwen2_vl_frame_indices;
use shardgate_media::{VideoLimits, VideoSource};
use shardgate_wire::mm::{Modality, Tensor};

use super::item::{pixel_tensor, Item, Refused};
use super::vision::Vision;

/// vLLM's `qwen2_vl` loader's default sampling rate, frames per second.
const SAMPLING_FPS: f64 = 2.0;

/// What a pool thread does for one video part.
pub(super) fn process_one(url: &str, policy: &FetchPolicy, vision: &Vision) -> Result<Item, Refused> {
    let video = vision.video.as_ref().ok_or(Refused::NoVideo)?;
    let limits = VideoLimits::default();
    let fetched = shardgate_fetch::fetch(url, policy).map_err(Refused::Fetch)?;
    let t = video.processor.temporal_patch_size;
    let decoded = shardgate_media::decode_video(&fetched.bytes, &limits, |total, fps| {
        qwen2_vl_frame_indices(total, fps, SAMPLING_FPS, t)
    })
    .map_err(Refused::Video)?;
    let processed = video
        .processor
        .process_video(&decoded.frames)
        .map_err(|e| Refused::Video(shardgate_media::VideoError::Frames(e)))?;
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
    // Qwen2.5-VL's processor: each temporal patch spans `temporal_patch_size` sampled frames,
    // at the rate they were sampled (transformers' `VideoMetadata.sampled_fps`).
    let sampled_fps = decoded.indices.len() as f64 / decoded.total_frames as f64 * decoded.fps;
    let seconds = video.seconds_per_grid.then(|| Tensor::f32(vec![], &[(t as f64 / sampled_fps) as f32]));
    Ok(Item {
        modality: Modality::Video,
        pixel_values: pixel_tensor(&processed, vision.device_normalize),
        grid_thw: processed.grid_thw,
        tokens: processed.tokens,
        hash,
        seconds_per_grid: seconds,
    })
}
