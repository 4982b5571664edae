//! What a model needs to take images, read once at load from its directory: the image
//! processor (`preprocessor_config.json`, with `config.json` for the tower's patch size), the
//! image token the placeholders expand, and the placeholder text the template gets. Only the
//! Qwen-VL family's placeholder expansion is ported; another processor is a model that takes
//! no images, said so.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use shardgate_media::ImageProcessor;
use shardgate_text::tokenizer::Tokenizer;

/// The image side of a vision model.
#[derive(Debug)]
pub struct Vision {
    pub processor: ImageProcessor,
    /// The token each image's placeholder expands to copies of.
    pub image_token_id: u32,
    /// What stands for one image in a string-content message (vLLM's
    /// `get_placeholder_str`).
    pub placeholder: &'static str,
    /// The engine's `--model` value, part of vLLM's item hash.
    pub model_id: String,
    /// The engine rescales and normalises on its device: `pixel_values` go as raw `uint8`.
    pub device_normalize: bool,
    /// The video side (`media::video`), where the family has one ported.
    pub video: Option<super::video_support::VideoSupport>,
}

/// A model's vision, or why it takes no images (said in the 400 naming the model).
pub type VisionSupport = Result<Arc<Vision>, String>;

/// The Qwen-VL family's placeholder and image token.
const QWEN_PLACEHOLDER: &str = "<|vision_start|><|image_pad|><|vision_end|>";
const QWEN_IMAGE_TOKEN: &str = "<|image_pad|>";

impl Vision {
    /// `device_normalize` is `--mm-device-do-normalize`; unset, vLLM's default for the
    /// model's architecture.
    pub fn load(
        model_dir: &Path,
        model_id: &str,
        tokenizer: &Tokenizer,
        device_normalize: Option<bool>,
    ) -> VisionSupport {
        let config_text = std::fs::read_to_string(model_dir.join("config.json")).unwrap_or_default();
        let config: Value = serde_json::from_str(&config_text).unwrap_or(Value::Null);
        if config.get("vision_config").is_none() {
            return Err("its config.json has no vision_config".into());
        }
        let preprocessor = std::fs::read_to_string(model_dir.join("preprocessor_config.json"))
            .map_err(|e| format!("its preprocessor_config.json cannot be read: {e}"))?;
        let processor = ImageProcessor::from_configs(&preprocessor, Some(&config_text)).map_err(|e| e.to_string())?;
        if !matches!(processor, ImageProcessor::QwenVl(_)) {
            return Err("only the Qwen-VL family's image processor is served so far".into());
        }
        let image_token_id = config
            .get("image_token_id")
            .and_then(Value::as_u64)
            .and_then(|id| u32::try_from(id).ok())
            .or_else(|| tokenizer.token_to_id(QWEN_IMAGE_TOKEN))
            .ok_or_else(|| format!("its tokenizer has no {QWEN_IMAGE_TOKEN} token"))?;
        let device_normalize = device_normalize.unwrap_or_else(|| normalizes_on_device(&config));
        let video = super::video_support::load(model_dir, &config, &processor, tokenizer, device_normalize)?;
        let processor = if device_normalize { processor.without_normalize() } else { processor };
        Ok(Arc::new(Vision {
            video,
            processor,
            image_token_id,
            placeholder: QWEN_PLACEHOLDER,
            model_id: model_id.to_string(),
            device_normalize,
        }))
    }
}

/// vLLM's default `mm_device_do_normalize` for a model: on where the architecture supports it
/// (`supports_mm_device_do_normalize`: Qwen2-VL and Qwen2.5-VL since 0.28, Qwen3-VL since
/// 0.32); the engine then takes raw pixels and normalises them itself.
fn normalizes_on_device(config: &Value) -> bool {
    const ARCHITECTURES: [&str; 4] = [
        "Qwen2VLForConditionalGeneration",
        "Qwen2_5_VLForConditionalGeneration",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
    ];
    config["architectures"]
        .as_array()
        .is_some_and(|a| a.iter().any(|n| n.as_str().is_some_and(|n| ARCHITECTURES.contains(&n))))
}
