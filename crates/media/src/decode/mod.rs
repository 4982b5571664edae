//! Encoded bytes to 8-bit RGB under limits, as vLLM's image loader does it with PIL: transparent
//! images (an alpha channel, a PNG `tRNS` chunk, a GIF transparent index) are laid over white,
//! everything else converted to RGB; a GIF or animated WebP gives its first frame. A JPEG, PNG
//! or WebP whose EXIF (or XMP) orientation says so is turned as displayed (`orientation.rs`).
//!
//! Each codec reads the header first and `DecodeLimits::check_size` refuses the dimensions
//! before a pixel buffer exists, so a small file claiming a huge image costs nothing. Decoding
//! work is linear in the bytes and pixels, both bounded; a wall-clock bound is the caller's
//! (decoding runs off the shard threads).

mod gif;
mod jpeg;
mod libjpeg;
mod orientation;
mod png;
mod rgb;
mod webp;

pub use rgb::{Decoded, RgbImage};

use crate::error::{ImageFormat, MediaError};
use crate::limits;

/// The bounds one decode runs under; `default()` is `limits.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    pub bytes_max: usize,
    pub pixels_max: u64,
    pub side_px_max: u32,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            bytes_max: limits::image_bytes_max,
            pixels_max: limits::image_pixels_max,
            side_px_max: limits::image_side_px_max,
        }
    }
}

impl DecodeLimits {
    /// Refuses dimensions read from a header; called before any pixel is decoded.
    pub(crate) fn check_size(&self, format: ImageFormat, width: u32, height: u32) -> Result<(), MediaError> {
        if width == 0 || height == 0 {
            return Err(MediaError::Malformed { format, detail: format!("its header says {width}x{height}") });
        }
        if width > self.side_px_max || height > self.side_px_max {
            return Err(MediaError::SideTooLong { width, height, max: self.side_px_max });
        }
        if width as u64 * height as u64 > self.pixels_max {
            return Err(MediaError::TooManyPixels { width, height, max: self.pixels_max });
        }
        Ok(())
    }

    /// What a codec may allocate for an image of this many pixels at `channels` bytes each, plus
    /// its bounded scratch.
    pub(crate) fn codec_bytes(&self, width: u32, height: u32, channels: usize) -> usize {
        (width as usize * height as usize).saturating_mul(channels).saturating_add(limits::codec_scratch_bytes_max)
    }
}

/// The format the leading bytes announce.
pub fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageFormat::Png)
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(ImageFormat::Jpeg)
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(ImageFormat::WebP)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(ImageFormat::Gif)
    } else {
        None
    }
}

/// Decodes one image to RGB, or says why not.
pub fn decode(bytes: &[u8], limits: &DecodeLimits) -> Result<Decoded, MediaError> {
    if bytes.is_empty() {
        return Err(MediaError::Empty);
    }
    if bytes.len() > limits.bytes_max {
        return Err(MediaError::TooManyBytes { bytes: bytes.len(), max: limits.bytes_max });
    }
    match sniff(bytes).ok_or(MediaError::UnknownFormat)? {
        ImageFormat::Png => png::decode(bytes, limits),
        ImageFormat::Jpeg => jpeg::decode(bytes, limits),
        ImageFormat::WebP => webp::decode(bytes, limits),
        ImageFormat::Gif => gif::decode(bytes, limits),
    }
}

pub(crate) fn malformed(format: ImageFormat, error: impl std::fmt::Display) -> MediaError {
    MediaError::Malformed { format, detail: error.to_string() }
}
