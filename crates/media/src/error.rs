//! The refusals of decoding and processing, typed so the gateway maps each to a 400 naming the
//! request part it came from (the part's path is the caller's; these texts name the image).

use std::fmt;

/// The formats this crate decodes, found from the leading bytes, never from a declared type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Png,
    Jpeg,
    WebP,
    Gif,
}

impl ImageFormat {
    pub fn name(self) -> &'static str {
        match self {
            ImageFormat::Png => "PNG",
            ImageFormat::Jpeg => "JPEG",
            ImageFormat::WebP => "WebP",
            ImageFormat::Gif => "GIF",
        }
    }
}

/// Why an image was refused. Every variant is the client's input, never a gateway fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaError {
    Empty,
    TooManyBytes {
        bytes: usize,
        max: usize,
    },
    UnknownFormat,
    TooManyPixels {
        width: u32,
        height: u32,
        max: u64,
    },
    SideTooLong {
        width: u32,
        height: u32,
        max: u32,
    },
    /// The codec refused the bytes (truncated, corrupt, or a feature it lacks).
    Malformed {
        format: ImageFormat,
        detail: String,
    },
    /// The image cannot be processed for this model (`smart_resize`'s aspect-ratio bound).
    AspectRatio {
        width: u32,
        height: u32,
        max: u32,
    },
    /// Any other reason the model's processor cannot take the image.
    Unprocessable {
        width: u32,
        height: u32,
        detail: String,
    },
    /// The rendered prompt has fewer image placeholders than the request has images.
    Placeholders {
        images: usize,
        found: usize,
    },
}

impl fmt::Display for MediaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MediaError::Empty => f.write_str("the image is empty"),
            MediaError::TooManyBytes { bytes, max } => {
                write!(f, "the image is {bytes} bytes, more than the limit of {max} bytes")
            }
            MediaError::UnknownFormat => f.write_str("the image is not PNG, JPEG, WebP or GIF"),
            MediaError::TooManyPixels { width, height, max } => write!(
                f,
                "the image is {width}x{height} ({} pixels), more than the limit of {max} pixels",
                *width as u64 * *height as u64
            ),
            MediaError::SideTooLong { width, height, max } => {
                write!(f, "the image is {width}x{height}, a side longer than the limit of {max} pixels")
            }
            MediaError::Malformed { format, detail } => {
                write!(f, "the {} image cannot be decoded: {detail}", format.name())
            }
            MediaError::AspectRatio { width, height, max } => {
                write!(f, "the image is {width}x{height}: absolute aspect ratio must be smaller than {max}")
            }
            MediaError::Unprocessable { width, height, detail } => {
                write!(f, "the image is {width}x{height}: {detail}")
            }
            MediaError::Placeholders { images, found } => {
                write!(f, "the request has {images} images but its prompt has {found} image placeholders")
            }
        }
    }
}

impl std::error::Error for MediaError {}

/// Why a model's processor files cannot be used (an operator's problem, found at start-up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "image processor config: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}
