//! The refusals of a video, typed like `MediaError` for images: each is the client's input,
//! mapped by the gateway to a 400 naming the request part.

use std::fmt;

use crate::error::MediaError;

#[derive(Debug, Clone, PartialEq)]
pub enum VideoError {
    Empty,
    TooManyBytes {
        bytes: usize,
        max: usize,
    },
    /// Not an ISO-BMFF file: what the leading bytes look like, where known.
    Container {
        seen: &'static str,
    },
    /// A codec other than H.264, by its sample entry's four-character code.
    Codec {
        fourcc: String,
    },
    /// A form of the container or codec the decoder does not take (named).
    Unsupported {
        what: String,
    },
    Malformed {
        detail: String,
    },
    TooManyPixels {
        width: u32,
        height: u32,
        max: u64,
    },
    TooManyFrames {
        frames: u64,
        max: usize,
    },
    TooLong {
        seconds: f64,
        max: u64,
    },
    /// The sampled frames would take more memory than allowed, before decoding.
    TooManyFrameBytes {
        frames: usize,
        width: u32,
        height: u32,
        max: usize,
    },
    /// Decoding ran past its time limit.
    TooSlow {
        max_ms: u64,
    },
    /// Frame sampling or the processor refused the frames.
    Frames(MediaError),
}

impl fmt::Display for VideoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VideoError::Empty => f.write_str("the video is empty"),
            VideoError::TooManyBytes { bytes, max } => {
                write!(f, "the video is {bytes} bytes, more than the limit of {max} bytes")
            }
            VideoError::Container { seen } => {
                write!(f, "the video is {seen}; only MP4 (ISO-BMFF) with H.264 is decoded")
            }
            VideoError::Codec { fourcc } => {
                write!(f, "the video's codec is '{fourcc}'; only H.264 ('avc1') is decoded")
            }
            VideoError::Unsupported { what } => write!(f, "the video is {what}, which is not decoded"),
            VideoError::Malformed { detail } => write!(f, "the video cannot be decoded: {detail}"),
            VideoError::TooManyPixels { width, height, max } => write!(
                f,
                "the video's frames are {width}x{height} ({} pixels), more than the limit of {max} pixels",
                *width as u64 * *height as u64
            ),
            VideoError::TooManyFrames { frames, max } => {
                write!(f, "the video has {frames} frames, more than the limit of {max}")
            }
            VideoError::TooLong { seconds, max } => {
                write!(f, "the video lasts {seconds:.1} s, more than the limit of {max} s")
            }
            VideoError::TooManyFrameBytes { frames, width, height, max } => write!(
                f,
                "the video's {frames} sampled frames of {width}x{height} take more than the limit of {max} bytes"
            ),
            VideoError::TooSlow { max_ms } => write!(f, "the video took longer than {max_ms} ms to decode"),
            VideoError::Frames(e) => write!(f, "the video's frames cannot be processed: {e}"),
        }
    }
}

impl std::error::Error for VideoError {}
