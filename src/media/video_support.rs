//! What a Qwen-VL model needs to take videos, read once at load beside its image side
//! (`vision`): the video processor, the video token and placeholder, and whether its items
//! carry Qwen2.5-VL's `second_per_grid_ts`.

use std::path::Path;

use serde_json::Value;
use shardgate_media::processor::QwenVl;
use shardgate_media::ImageProcessor;
use shardgate_text::tokenizer::Tokenizer;

/// What stands for one video in a string-content message, and the token it expands.
pub const QWEN_VIDEO_PLACEHOLDER: &str = "<|vision_start|><|video_pad|><|vision_end|>";
const QWEN_VIDEO_TOKEN: &str = "<|video_pad|>";

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
    let processor = if device_normalize { processor.without_normalize() } else { processor };
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
