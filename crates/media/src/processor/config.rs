//! Reading `preprocessor_config.json` as `transformers` does for the ported processors: the
//! class named by `image_processor_type` (its `Fast` and `Pil` variants alike), each field the
//! config leaves out at that class's default.

use serde_json::{Map, Value};

use super::clip::{Clip, ClipSize};
use super::normalize::Normalize;
use super::qwen2_vl::QwenVl;
use super::{ImageProcessor, Qwen3VlVideo, VideoProcessor};
use crate::error::ConfigError;
use crate::limits;
use crate::resize::{Backend, Filter};

/// OpenAI CLIP's mean and std, the default of both processors.
const CLIP_MEAN: [f64; 3] = [0.48145466, 0.4578275, 0.40821073];
const CLIP_STD: [f64; 3] = [0.26862954, 0.26130258, 0.27577711];
/// transformers' `IMAGENET_STANDARD_MEAN` and `_STD`, Qwen3-VL's video processor's default.
const IMAGENET_STANDARD: ([f64; 3], [f64; 3]) = ([0.5; 3], [0.5; 3]);

/// A Qwen-VL processor class's defaults: its `size` (`shortest_edge`, `longest_edge`: min and
/// max pixels), patch size and mean and std, and whether it takes top-level `min_pixels` /
/// `max_pixels` (Qwen2-VL's classes do; Qwen3-VL's video processor reads only `size`).
struct QwenDefaults {
    pixels: (u64, u64),
    patch_size: u64,
    mean_std: ([f64; 3], [f64; 3]),
    pixel_keys: bool,
}

const QWEN2_VL_IMAGE: QwenDefaults = QwenDefaults {
    pixels: (56 * 56, 28 * 28 * 1280),
    patch_size: 14,
    mean_std: (CLIP_MEAN, CLIP_STD),
    pixel_keys: true,
};
/// Per frame.
const QWEN2_VL_VIDEO: QwenDefaults =
    QwenDefaults { pixels: (128 * 28 * 28, 28 * 28 * 768), pixel_keys: true, ..QWEN2_VL_IMAGE };
/// Of `frames * height * width`.
const QWEN3_VL_VIDEO: QwenDefaults = QwenDefaults {
    pixels: (128 * 32 * 32, 32 * 32 * 768),
    patch_size: 16,
    mean_std: IMAGENET_STANDARD,
    pixel_keys: false,
};
const BICUBIC: u64 = 3;

fn error(text: impl Into<String>) -> ConfigError {
    ConfigError(text.into())
}

struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn get(&self, path: &[&str]) -> Option<&Value> {
        let (last, parents) = path.split_last()?;
        let mut map = self.0;
        for key in parents {
            map = map.get(*key)?.as_object()?;
        }
        map.get(*last).filter(|v| !v.is_null())
    }

    fn uint(&self, path: &[&str], default: u64, max: u64) -> Result<u64, ConfigError> {
        let Some(value) = self.get(path) else { return Ok(default) };
        match value.as_u64() {
            Some(v) if v > 0 && v <= max => Ok(v),
            _ => Err(error(format!("`{}` is {value}, not a whole number from 1 to {max}", path.join(".")))),
        }
    }

    fn flag(&self, key: &str) -> Result<bool, ConfigError> {
        match self.get(&[key]) {
            None => Ok(true),
            Some(v) => v.as_bool().ok_or_else(|| error(format!("`{key}` is {v}, not a boolean"))),
        }
    }

    fn triple(&self, key: &str, default: [f64; 3]) -> Result<[f32; 3], ConfigError> {
        let Some(value) = self.get(&[key]) else { return Ok(default.map(|v| v as f32)) };
        let bad = || error(format!("`{key}` is {value}, not three numbers (or one)"));
        let numbers: Vec<f64> = match value {
            Value::Array(items) => items.iter().map(Value::as_f64).collect::<Option<_>>().ok_or_else(bad)?,
            other => vec![other.as_f64().ok_or_else(bad)?],
        };
        match numbers[..] {
            [v] => Ok([v as f32; 3]),
            [a, b, c] => Ok([a as f32, b as f32, c as f32]),
            _ => Err(bad()),
        }
    }

    fn normalize(&self, (mean, std): ([f64; 3], [f64; 3])) -> Result<Normalize, ConfigError> {
        let rescale_factor = match self.flag("do_rescale")? {
            false => None,
            true => Some(match self.get(&["rescale_factor"]) {
                None => 1.0 / 255.0,
                Some(v) => v.as_f64().ok_or_else(|| error(format!("`rescale_factor` is {v}, not a number")))?,
            }),
        };
        let mean_std = match self.flag("do_normalize")? {
            false => None,
            true => {
                let std = self.triple("image_std", std)?;
                if std.contains(&0.0) {
                    return Err(error("`image_std` has a zero"));
                }
                Some((self.triple("image_mean", mean)?, std))
            }
        };
        Ok(Normalize { rescale_factor, mean_std })
    }

    fn filter(&self) -> Result<Option<Filter>, ConfigError> {
        if !self.flag("do_resize")? {
            return Ok(None);
        }
        let resample = self.uint(&["resample"], BICUBIC, u64::MAX)?;
        Filter::from_pil(resample)
            .map(Some)
            .ok_or_else(|| error(format!("`resample` {resample} is not PIL's bilinear (2) or bicubic (3)")))
    }
}

/// A Qwen-VL image or video processor of the class whose defaults are `defaults`.
fn qwen(fields: &Fields, defaults: &QwenDefaults) -> Result<QwenVl, ConfigError> {
    let patch_max = limits::config_patch_px_max as u64;
    let pixels_max = limits::image_pixels_max;
    let pixels = defaults.pixels;
    let top_level = |key: &str| if defaults.pixel_keys { fields.get(&[key]) } else { None };
    // A top-level `min_pixels` / `max_pixels` overrides `size`, as the processor's constructor does.
    let min_pixels = match top_level("min_pixels") {
        Some(_) => fields.uint(&["min_pixels"], 0, pixels_max)?,
        None => fields.uint(&["size", "shortest_edge"], pixels.0, pixels_max)?,
    };
    let max_pixels = match top_level("max_pixels") {
        Some(_) => fields.uint(&["max_pixels"], 0, u64::MAX)?,
        None => fields.uint(&["size", "longest_edge"], pixels.1, u64::MAX)?,
    };
    let processor = QwenVl {
        patch_size: fields.uint(&["patch_size"], defaults.patch_size, patch_max)? as u32,
        temporal_patch_size: fields.uint(&["temporal_patch_size"], 2, patch_max)? as u32,
        merge_size: fields.uint(&["merge_size"], 2, patch_max)? as u32,
        min_pixels,
        max_pixels,
        resize: fields.filter()?,
        normalize: fields.normalize(defaults.mean_std)?,
        backend: Backend::default(),
    };
    let factor = (processor.patch_size * processor.merge_size) as u64;
    if min_pixels < factor * factor || max_pixels < min_pixels {
        return Err(error(format!("pixel bounds {min_pixels}..{max_pixels} do not hold one {factor}x{factor} block")));
    }
    Ok(processor)
}

fn side(fields: &Fields, path: &[&str], default: u64) -> Result<u32, ConfigError> {
    Ok(fields.uint(path, default, limits::config_side_px_max as u64)? as u32)
}

fn clip(fields: &Fields, model: &Fields) -> Result<Clip, ConfigError> {
    let size = match fields.get(&["size"]) {
        Some(Value::Object(map)) if map.contains_key("shortest_edge") => {
            ClipSize::ShortestEdge(side(fields, &["size", "shortest_edge"], 224)?)
        }
        Some(Value::Object(_)) => ClipSize::Exact {
            height: side(fields, &["size", "height"], 224)?,
            width: side(fields, &["size", "width"], 224)?,
        },
        Some(_) => ClipSize::ShortestEdge(side(fields, &["size"], 224)?),
        None => ClipSize::ShortestEdge(224),
    };
    let crop = match fields.flag("do_center_crop")? {
        false => None,
        true => match fields.get(&["crop_size"]) {
            Some(Value::Object(_)) | None => {
                Some((side(fields, &["crop_size", "height"], 224)?, side(fields, &["crop_size", "width"], 224)?))
            }
            Some(_) => Some((side(fields, &["crop_size"], 224)?, side(fields, &["crop_size"], 224)?)),
        },
    };
    let resize = fields.filter()?.map(|filter| (size, filter));
    if let (Some((ClipSize::ShortestEdge(edge), _)), Some((h, w))) = (resize, crop) {
        if h > edge || w > edge {
            return Err(error(format!("the {w}x{h} crop is larger than the {edge} shortest edge")));
        }
    }
    let patch_size = model.uint(&["vision_config", "patch_size"], 14, limits::config_patch_px_max as u64)? as u32;
    Ok(Clip {
        resize,
        crop,
        normalize: fields.normalize((CLIP_MEAN, CLIP_STD))?,
        patch_size,
        backend: Backend::default(),
    })
}

fn parse(text: &str, name: &str) -> Result<Map<String, Value>, ConfigError> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(error(format!("{name} is not a JSON object"))),
        Err(e) => Err(error(format!("{name}: {e}"))),
    }
}

pub(super) fn from_configs(preprocessor: &str, model: Option<&str>) -> Result<ImageProcessor, ConfigError> {
    let preprocessor = parse(preprocessor, "preprocessor_config.json")?;
    let model = model.map(|m| parse(m, "config.json")).transpose()?.unwrap_or_default();
    let fields = Fields(&preprocessor);
    let class = fields.get(&["image_processor_type"]).and_then(Value::as_str).unwrap_or("");
    let base = class.strip_suffix("Fast").or_else(|| class.strip_suffix("Pil")).unwrap_or(class);
    match base {
        "Qwen2VLImageProcessor" => Ok(ImageProcessor::QwenVl(qwen(&fields, &QWEN2_VL_IMAGE)?)),
        "CLIPImageProcessor" => Ok(ImageProcessor::Clip(clip(&fields, &Fields(&model))?)),
        "" => Err(error("no `image_processor_type`")),
        other => Err(error(format!(
            "`{other}` is not a supported image processor (Qwen2VLImageProcessor, CLIPImageProcessor)"
        ))),
    }
}

/// A `video_preprocessor_config.json` (or a `preprocessor_config.json` naming a video processor).
pub(super) fn video_from_config(text: &str) -> Result<VideoProcessor, ConfigError> {
    let config = parse(text, "video_preprocessor_config.json")?;
    let fields = Fields(&config);
    let class = fields.get(&["video_processor_type"]).and_then(Value::as_str).unwrap_or("");
    match class.strip_suffix("Fast").unwrap_or(class) {
        "Qwen2VLVideoProcessor" => Ok(VideoProcessor::Qwen2Vl(qwen(&fields, &QWEN2_VL_VIDEO)?)),
        "Qwen3VLVideoProcessor" => {
            Ok(VideoProcessor::Qwen3Vl(Qwen3VlVideo { frames: qwen(&fields, &QWEN3_VL_VIDEO)? }))
        }
        "" => Err(error("no `video_processor_type`")),
        other => Err(error(format!(
            "`{other}` is not a supported video processor (Qwen2VLVideoProcessor, Qwen3VLVideoProcessor)"
        ))),
    }
}
