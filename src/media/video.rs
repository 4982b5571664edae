//! Videos for the Qwen-VL family: what a model needs to take them (read once at load beside
//! its image side) and what a media pool thread does for one `video_url` part: fetch under the
//! operator's `--max-media-bytes` (as an image), decode the frames vLLM's `qwen2_vl` loader
//! samples (2 fps), process them with Qwen2-VL's video processor, hash the item as vLLM does.

use std::path::Path;

use serde_json::Value;
use shardgate_fetch::FetchPolicy;
use shardgate_media::processor::{qwen2_vl_frame_indices, Normalize, QwenVl};
use shardgate_media::{ImageProcessor, VideoLimits, VideoSource};
use shardgate_text::tokenizer::Tokenizer;
use shardgate_wire::mm::{Modality, Tensor};

use super::attach::{pixel_tensor, Item, Refused};
use super::vision::Vision;

/// What stands for one video in a string-content message, and the token it expands.
pub const QWEN_VIDEO_PLACEHOLDER: &str = "<|vision_start|><|video_pad|><|vision_end|>";
const QWEN_VIDEO_TOKEN: &str = "<|video_pad|>";

/// vLLM's `qwen2_vl` loader's default sampling rate, frames per second.
const SAMPLING_FPS: f64 = 2.0;

/// The video side of a Qwen-VL model.
#[derive(Debug)]
pub struct VideoSupport {
    pub processor: QwenVl,
    pub token_id: u32,
    /// Qwen2.5-VL's `second_per_grid_ts` (seconds per temporal patch) goes with each video.
    pub seconds_per_grid: bool,
}

/// The model's video side: `video_preprocessor_config.json` where the model has one, else
/// (as transformers falls back) the image processor's own configuration; `None` for a model
/// whose image processor is not Qwen2-VL's.
pub fn load(
    model_dir: &Path,
    config: &Value,
    image: &ImageProcessor,
    tokenizer: &Tokenizer,
    device_normalize: bool,
) -> Result<Option<VideoSupport>, String> {
    let ImageProcessor::QwenVl(image) = image else { return Ok(None) };
    let processor = match std::fs::read_to_string(model_dir.join("video_preprocessor_config.json")) {
        Ok(text) => QwenVl::from_video_config(&text).map_err(|e| e.to_string())?,
        Err(_) => image.clone(),
    };
    let processor = if device_normalize {
        QwenVl { normalize: Normalize { rescale_factor: None, mean_std: None }, ..processor }
    } else {
        processor
    };
    let token_id = config
        .get("video_token_id")
        .and_then(Value::as_u64)
        .and_then(|id| u32::try_from(id).ok())
        .or_else(|| tokenizer.token_to_id(QWEN_VIDEO_TOKEN))
        .ok_or_else(|| format!("its tokenizer has no {QWEN_VIDEO_TOKEN} token"))?;
    let seconds_per_grid = config["architectures"]
        .as_array()
        .is_some_and(|a| a.iter().any(|n| n.as_str() == Some("Qwen2_5_VLForConditionalGeneration")));
    Ok(Some(VideoSupport { processor, token_id, seconds_per_grid }))
}

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
    let grid_thw = processed.grid_thw.unwrap_or([0; 3]);
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
        grid_thw,
        tokens: processed.tokens,
        hash,
        seconds_per_grid: seconds,
    })
}
