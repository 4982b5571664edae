//! The Hugging Face image processors, ported: chosen from a model's `preprocessor_config.json`
//! (and `config.json` for the vision tower's patch size), they turn a decoded image into the
//! tensors and grid the engine's vision tower takes, and say how many placeholder tokens the
//! image stands for in the prompt.

mod clip;
mod config;
mod frames;
mod normalize;
mod qwen2_vl;
mod qwen3_vl_video;

pub use clip::{Clip, ClipSize};
pub use frames::qwen2_vl_frame_indices;
pub use normalize::Normalize;
pub use qwen2_vl::{smart_resize, QwenVl};
pub use qwen3_vl_video::{qwen3_vl_frame_indices, qwen3_vl_timestamp_text, qwen3_vl_timestamps, Qwen3VlVideo};

use crate::decode::RgbImage;
use crate::error::{ConfigError, MediaError};
use crate::resize::Backend;

/// One image, processed.
#[derive(Debug, Clone, PartialEq)]
pub struct Processed {
    /// `pixel_values`, row-major in `shape`.
    pub pixel_values: Vec<f32>,
    pub shape: Vec<usize>,
    /// `image_grid_thw` for the Qwen family; `None` for CLIP.
    pub grid_thw: Option<[u32; 3]>,
    /// Placeholder tokens the image expands to in the prompt.
    pub tokens: usize,
}

/// A model's video processor: Qwen2-VL's (also Qwen2.5-VL's) or Qwen3-VL's.
#[derive(Debug, Clone, PartialEq)]
pub enum VideoProcessor {
    Qwen2Vl(QwenVl),
    Qwen3Vl(Qwen3VlVideo),
}

impl VideoProcessor {
    /// From the text of `video_preprocessor_config.json` (the class its `video_processor_type`
    /// names); frames are resized as the torchvision backend does (the only one transformers
    /// has for video).
    pub fn from_config(config: &str) -> Result<VideoProcessor, ConfigError> {
        config::video_from_config(config)
    }

    /// The per-frame processor: patch sizes, resize and normalisation.
    pub fn frames(&self) -> &QwenVl {
        match self {
            VideoProcessor::Qwen2Vl(p) | VideoProcessor::Qwen3Vl(Qwen3VlVideo { frames: p }) => p,
        }
    }

    /// The same processor leaving rescaling and normalisation to the engine's device.
    pub fn without_normalize(self) -> VideoProcessor {
        match self {
            VideoProcessor::Qwen2Vl(p) => VideoProcessor::Qwen2Vl(p.without_normalize()),
            VideoProcessor::Qwen3Vl(v) => {
                VideoProcessor::Qwen3Vl(Qwen3VlVideo { frames: v.frames.without_normalize() })
            }
        }
    }

    pub fn process_video(&self, frames: &[RgbImage]) -> Result<Processed, MediaError> {
        match self {
            VideoProcessor::Qwen2Vl(p) => p.process_video(frames),
            VideoProcessor::Qwen3Vl(p) => p.process_video(frames),
        }
    }
}

impl QwenVl {
    /// The same processor leaving rescaling and normalisation to the engine's device: its
    /// samples stay the exact integers they were decoded as.
    pub fn without_normalize(self) -> QwenVl {
        QwenVl { normalize: Normalize { rescale_factor: None, mean_std: None }, ..self }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ImageProcessor {
    QwenVl(QwenVl),
    Clip(Clip),
}

impl ImageProcessor {
    /// From the text of `preprocessor_config.json` and, where the model has one, `config.json`,
    /// resizing as the torchvision-backed processor does (what vLLM runs; `with_backend` for
    /// the PIL-backed one).
    pub fn from_configs(preprocessor: &str, model: Option<&str>) -> Result<ImageProcessor, ConfigError> {
        config::from_configs(preprocessor, model)
    }

    /// The same processor, resizing and normalising in `backend`'s arithmetic.
    pub fn with_backend(self, backend: Backend) -> ImageProcessor {
        match self {
            ImageProcessor::QwenVl(p) => ImageProcessor::QwenVl(QwenVl { backend, ..p }),
            ImageProcessor::Clip(p) => ImageProcessor::Clip(Clip { backend, ..p }),
        }
    }

    /// The same processor with its rescale and normalisation off: `pixel_values` are the
    /// resized samples themselves (exact integers 0..=255), for an engine that normalises on
    /// its device (vLLM's `mm_device_do_normalize`, which takes them as `uint8`).
    pub fn without_normalize(self) -> ImageProcessor {
        match self {
            ImageProcessor::QwenVl(p) => ImageProcessor::QwenVl(p.without_normalize()),
            ImageProcessor::Clip(p) => {
                ImageProcessor::Clip(Clip { normalize: Normalize { rescale_factor: None, mean_std: None }, ..p })
            }
        }
    }

    pub fn process(&self, image: &RgbImage) -> Result<Processed, MediaError> {
        match self {
            ImageProcessor::QwenVl(p) => p.process(image),
            ImageProcessor::Clip(p) => p.process(image),
        }
    }
}
