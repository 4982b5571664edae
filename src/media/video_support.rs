//! What a Qwen-VL model needs to take videos, read once at load beside its image side
//! (`vision`): the video processor, the video token and placeholder, whether its items carry
//! Qwen2.5-VL's `second_per_grid_ts`, and for Qwen3-VL what its frame groups' timestamp text
//! is tokenized with and wrapped in.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use shardgate_media::processor::VideoProcessor;
use shardgate_media::ImageProcessor;
use shardgate_text::model::ModelAssets;
use shardgate_text::tokenizer::Tokenizer;

/// What stands for one video in a string-content message, and the token it expands.
pub const QWEN_VIDEO_PLACEHOLDER: &str = "<|vision_start|><|video_pad|><|vision_end|>";
const QWEN_VIDEO_TOKEN: &str = "<|video_pad|>";
const VISION_START: (&str, &str) = ("vision_start_token_id", "<|vision_start|>");
const VISION_END: (&str, &str) = ("vision_end_token_id", "<|vision_end|>");

/// The video side of a Qwen-VL model.
#[derive(Debug)]
pub struct VideoSupport {
    pub processor: VideoProcessor,
    pub token_id: u32,
    /// Qwen2.5-VL's `second_per_grid_ts` (seconds per temporal patch) goes with each video.
    pub seconds_per_grid: bool,
    /// Qwen3-VL: each frame group's replacement is its timestamp text, then the group's video
    /// tokens between these.
    pub frame_groups: Option<FrameGroups>,
}

/// How a Qwen3-VL video's frame groups are written in the prompt.
pub struct FrameGroups {
    /// The model, whose tokenizer encodes each group's `<t seconds>` on the pool thread.
    pub model: Arc<ModelAssets>,
    pub vision_start: u32,
    pub vision_end: u32,
}

impl std::fmt::Debug for FrameGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FrameGroups({}, {})", self.vision_start, self.vision_end)
    }
}

/// The id `config.json` gives under `key`, else the tokenizer's for `token`.
fn config_token(config: &Value, tokenizer: &Tokenizer, (key, token): (&str, &str)) -> Result<u32, String> {
    config
        .get(key)
        .and_then(Value::as_u64)
        .and_then(|id| u32::try_from(id).ok())
        .or_else(|| tokenizer.token_to_id(token))
        .ok_or_else(|| format!("its tokenizer has no {token} token"))
}

/// The model's video side: `video_preprocessor_config.json` where the model has one, else
/// (as transformers falls back) the image processor's own configuration as Qwen2-VL's video
/// processor; `None` for a model whose image processor is not Qwen2-VL's.
pub fn load(
    model_dir: &Path,
    config: &Value,
    image: &ImageProcessor,
    model: &Arc<ModelAssets>,
    device_normalize: bool,
) -> Result<Option<VideoSupport>, String> {
    let ImageProcessor::QwenVl(image) = image else { return Ok(None) };
    let processor = match std::fs::read_to_string(model_dir.join("video_preprocessor_config.json")) {
        Ok(text) => VideoProcessor::from_config(&text).map_err(|e| e.to_string())?,
        Err(_) => VideoProcessor::Qwen2Vl(image.clone()),
    };
    let processor = if device_normalize { processor.without_normalize() } else { processor };
    let tokenizer = &model.tokenizer;
    let token_id = config_token(config, tokenizer, ("video_token_id", QWEN_VIDEO_TOKEN))?;
    let seconds_per_grid = config["architectures"]
        .as_array()
        .is_some_and(|a| a.iter().any(|n| n.as_str() == Some("Qwen2_5_VLForConditionalGeneration")));
    let frame_groups = match processor {
        VideoProcessor::Qwen3Vl(_) => Some(FrameGroups {
            model: model.clone(),
            vision_start: config_token(config, tokenizer, VISION_START)?,
            vision_end: config_token(config, tokenizer, VISION_END)?,
        }),
        VideoProcessor::Qwen2Vl(_) => None,
    };
    Ok(Some(VideoSupport { processor, token_id, seconds_per_grid, frame_groups }))
}
