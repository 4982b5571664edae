//! Images for the multimodal models: decoding under limits (`decode`), PIL's and torchvision's
//! resampling (`resize`) and the Hugging Face image processors (`processor`), with nothing of HTTP,
//! requests or engines. The gateway maps each `MediaError` to a 400 naming the request part.
//!
//! The codecs are used directly (`png`, libjpeg-turbo's decoder through `mozjpeg-sys`,
//! `image-webp`, `gif`), not through the `image` crate: the workspace patches `image` out with
//! an empty stand-in because `openai-harmony` pulls it with every codec (AVIF through rav1e),
//! most of the minutes it added to a clean build. The four codecs alone build in under a minute
//! on two cores (release), and their own APIs give what the limits need: each reads its header
//! and reports the dimensions before any pixel buffer exists.

pub mod decode;
pub mod error;
pub mod hash;
pub mod limits;
pub mod placeholders;
pub mod processor;
pub mod resize;
pub mod video;

pub use decode::{decode, sniff, DecodeLimits, Decoded, RgbImage};
pub use error::{ConfigError, ImageFormat, MediaError};
pub use hash::{image_hash, video_hash, VideoSource};
pub use processor::{ImageProcessor, Processed};
pub use resize::Backend;
pub use video::{decode_video, DecodedVideo, VideoError, VideoLimits};
