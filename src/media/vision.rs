//! What a model needs to take images, read once at load from its directory: the image
//! processor (`preprocessor_config.json`, with `config.json` for the tower's patch size), the
//! family that decides the image token the placeholders expand, the placeholder text the
//! template gets, how many tokens an image costs and how its tensors are laid out. A processor
//! of no served family is a model that takes no images, said so.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use shardgate_media::{ImageProcessor, Processed};
use shardgate_text::ModelAssets;

/// The image side of a vision model.
#[derive(Debug)]
pub struct Vision {
    pub processor: ImageProcessor,
    pub family: &'static Family,
    /// The token each image's placeholder expands to copies of.
    pub image_token_id: u32,
    /// What stands for one image in a string-content message (vLLM's
    /// `get_placeholder_str`).
    pub placeholder: &'static str,
    /// The engine's `--model` value, part of vLLM's item hash.
    pub model_id: String,
    /// The engine rescales and normalises on its device: `pixel_values` go as raw `uint8`.
    pub device_normalize: bool,
    /// Placeholder tokens per image where the family fixes them from the tower's config
    /// (LLaVA: every image is cropped to the tower's input); `None`: the processor's count.
    tokens_per_image: Option<usize>,
    /// The video side (`media::video`), where the family has one ported.
    pub video: Option<super::video_support::VideoSupport>,
}

/// How an image's tensors go in `mm_features` (vLLM's field config for the family).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorLayout {
    /// Qwen-VL: `pixel_values` flat along patch rows, `image_grid_thw` batched on the CPU.
    PatchRowsWithGrid,
    /// LLaVA: `pixel_values` batched, one `(3, height, width)` image per item.
    BatchedPixels,
}

/// One served family of vision models, as vLLM's model class for it serves images.
#[derive(Debug)]
pub struct Family {
    pub name: &'static str,
    placeholder: &'static str,
    /// The image token's text, looked up in the tokenizer where `config.json` has no id.
    image_token: &'static str,
    /// `config.json`'s key for the image token's id.
    image_token_key: &'static str,
    pub layout: TensorLayout,
    /// Architectures where vLLM normalises on the device by default
    /// (`supports_mm_device_do_normalize`); `None`: the engine never does for this family,
    /// whatever the flag says (vLLM forces it off).
    device_normalize: Option<&'static [&'static str]>,
}

/// vLLM's Qwen-VL classes: Qwen2-VL and Qwen2.5-VL normalise on the device since 0.28, Qwen3-VL
/// since 0.32.
const QWEN_VL: Family = Family {
    name: "Qwen-VL",
    placeholder: "<|vision_start|><|image_pad|><|vision_end|>",
    image_token: "<|image_pad|>",
    image_token_key: "image_token_id",
    layout: TensorLayout::PatchRowsWithGrid,
    device_normalize: Some(&[
        "Qwen2VLForConditionalGeneration",
        "Qwen2_5_VLForConditionalGeneration",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
    ]),
};

/// vLLM's `LlavaForConditionalGeneration` with a CLIP tower (LLaVA-1.5).
const LLAVA: Family = Family {
    name: "LLaVA",
    placeholder: "<image>",
    image_token: "<image>",
    image_token_key: "image_token_index",
    layout: TensorLayout::BatchedPixels,
    device_normalize: None,
};

const LLAVA_ARCHITECTURE: &str = "LlavaForConditionalGeneration";

/// The family serving `processor` for the model of `config`, or why none does.
fn family_of(processor: &ImageProcessor, config: &Value) -> Result<&'static Family, String> {
    match processor {
        ImageProcessor::QwenVl(_) => Ok(&QWEN_VL),
        ImageProcessor::Clip(_) if has_architecture(config, &[LLAVA_ARCHITECTURE]) => {
            // LlavaConfig's tower is CLIP unless its vision_config names another.
            match config["vision_config"]["model_type"].as_str().unwrap_or("clip_vision_model") {
                "clip_vision_model" => Ok(&LLAVA),
                other => Err(format!("its LLaVA vision tower is {other}; only a CLIP tower is served so far")),
            }
        }
        ImageProcessor::Clip(_) => Err(format!(
            "only the Qwen-VL family's image processor, and CLIP's for {LLAVA_ARCHITECTURE}, are served so far"
        )),
    }
}

impl Vision {
    /// `device_normalize` is `--mm-device-do-normalize`; unset, vLLM's default for the
    /// model's architecture. `model` is the loaded model (its tokenizer).
    pub fn load(
        model_dir: &Path,
        model_id: &str,
        model: &Arc<ModelAssets>,
        device_normalize: Option<bool>,
    ) -> VisionSupport {
        let tokenizer = &model.tokenizer;
        let config_text = std::fs::read_to_string(model_dir.join("config.json")).unwrap_or_default();
        let config: Value = serde_json::from_str(&config_text).unwrap_or(Value::Null);
        if config.get("vision_config").is_none() {
            return Err("its config.json has no vision_config".into());
        }
        let preprocessor = std::fs::read_to_string(model_dir.join("preprocessor_config.json"))
            .map_err(|e| format!("its preprocessor_config.json cannot be read: {e}"))?;
        let processor = ImageProcessor::from_configs(&preprocessor, Some(&config_text)).map_err(|e| e.to_string())?;
        let family = family_of(&processor, &config)?;
        let tokens_per_image = match &processor {
            ImageProcessor::Clip(clip) => Some(llava_tokens(&config, clip.crop)?),
            ImageProcessor::QwenVl(_) => None,
        };
        let image_token_id = config
            .get(family.image_token_key)
            .and_then(Value::as_u64)
            .and_then(|id| u32::try_from(id).ok())
            .or_else(|| tokenizer.token_to_id(family.image_token))
            .ok_or_else(|| format!("its tokenizer has no {} token", family.image_token))?;
        let device_normalize = match family.device_normalize {
            None => false,
            Some(architectures) => device_normalize.unwrap_or_else(|| has_architecture(&config, architectures)),
        };
        let video = super::video_support::load(model_dir, &config, &processor, model, device_normalize)?;
        let processor = if device_normalize { processor.without_normalize() } else { processor };
        Ok(Arc::new(Vision {
            video,
            processor,
            family,
            image_token_id,
            placeholder: family.placeholder,
            model_id: model_id.to_string(),
            device_normalize,
            tokens_per_image,
        }))
    }

    /// The placeholder tokens `processed` costs in the prompt.
    pub fn tokens(&self, processed: &Processed) -> usize {
        self.tokens_per_image.unwrap_or(processed.tokens)
    }
}

/// A model's vision, or why it takes no images (said in the 400 naming the model).
pub type VisionSupport = Result<Arc<Vision>, String>;

fn has_architecture(config: &Value, names: &[&str]) -> bool {
    config["architectures"].as_array().is_some_and(|a| a.iter().any(|n| n.as_str().is_some_and(|n| names.contains(&n))))
}

/// The tokens vLLM gives every LLaVA image, whatever its size: the CLIP tower's patch grid
/// (`vision_config.image_size / patch_size`, squared) plus its class token, less what
/// `vision_feature_select_strategy` drops (`default`: the class token; `full`: none). The crop
/// must be the tower's input, as the engine's tower takes no other size.
fn llava_tokens(config: &Value, crop: Option<(u32, u32)>) -> Result<usize, String> {
    let tower = &config["vision_config"];
    // CLIPVisionConfig's defaults.
    let image_size = tower["image_size"].as_u64().unwrap_or(224);
    let patch_size = tower["patch_size"].as_u64().unwrap_or(32);
    if patch_size == 0 || !image_size.is_multiple_of(patch_size) {
        return Err(format!("its vision tower's image_size {image_size} is not a multiple of its patch_size"));
    }
    if crop != Some((image_size as u32, image_size as u32)) {
        return Err(format!("its image processor does not crop to the vision tower's {image_size}x{image_size}"));
    }
    let patches = (image_size / patch_size).pow(2) as usize;
    match config["vision_feature_select_strategy"].as_str().unwrap_or("default") {
        "default" => Ok(patches),
        "full" => Ok(patches + 1),
        other => Err(format!("its vision_feature_select_strategy {other:?} is not default or full")),
    }
}

/// A Qwen-VL vision with the processor's defaults, for tests of what the adapters build.
#[cfg(test)]
pub fn qwen_vl_for_tests() -> VisionSupport {
    let processor = ImageProcessor::from_configs(r#"{"image_processor_type": "Qwen2VLImageProcessor"}"#, None)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(Vision {
        processor,
        family: &QWEN_VL,
        image_token_id: 151655,
        placeholder: QWEN_VL.placeholder,
        model_id: "m".into(),
        device_normalize: false,
        tokens_per_image: None,
        video: None,
    }))
}
