//! Videos for the Qwen-VL family, as vLLM's default loader reads them (OpenCV over FFmpeg):
//! an MP4 file's first video track (`mp4`), its H.264 stream decoded by OpenH264 (`h264`,
//! `openh264`) with B-frames put in display order by their composition times, the frames the
//! model's sampling picks converted to RGB (`yuv`). Anything else (another container, another
//! codec, 4:2:2, 10-bit, interlacing, fragmented MP4) is a refusal that names it.
//!
//! Every limit is checked before the allocation it bounds: the file's size first, the frame
//! count from the sample table's header before the table is read, the frame size from the
//! SPS before the decoder sees a frame, the sampled frames' total bytes before decoding, and
//! the decoding time between frames.

mod error;
mod h264;
mod mp4;
mod openh264;
mod sps;
mod yuv;

use std::time::{Duration, Instant};

pub use error::VideoError;

use crate::decode::RgbImage;
use crate::error::MediaError;
use crate::limits;

/// The bounds one video decode runs under; `default()` is `limits.rs`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VideoLimits {
    pub bytes_max: usize,
    pub frame_pixels_max: u64,
    pub frames_max: usize,
    pub duration_s_max: u64,
    pub frame_bytes_max: usize,
    pub time_max_ms: u64,
}

impl Default for VideoLimits {
    fn default() -> Self {
        VideoLimits {
            bytes_max: limits::video_bytes_max,
            frame_pixels_max: limits::video_frame_pixels_max,
            frames_max: limits::video_frames_max,
            duration_s_max: limits::video_duration_s_max,
            frame_bytes_max: limits::video_frame_bytes_max,
            time_max_ms: limits::video_decode_time_max_ms,
        }
    }
}

/// A video's sampled frames and what vLLM records of its source.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedVideo {
    pub frames: Vec<RgbImage>,
    /// Frames in the file.
    pub total_frames: usize,
    /// The source frame rate (FFmpeg's `avg_frame_rate`).
    pub fps: f64,
    /// The display index of each frame in `frames`.
    pub indices: Vec<usize>,
}

/// What the leading bytes say a non-MP4 file is, for the refusal.
fn container(bytes: &[u8]) -> Result<(), VideoError> {
    let kind = bytes.get(4..8);
    if matches!(kind, Some(b"ftyp" | b"moov" | b"mdat" | b"free" | b"skip" | b"wide")) {
        return Ok(());
    }
    let seen = if bytes.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]) {
        "WebM / Matroska"
    } else if bytes.starts_with(b"RIFF") && bytes.get(8..11) == Some(b"AVI") {
        "AVI"
    } else if bytes.starts_with(b"OggS") {
        "Ogg"
    } else if bytes.first() == Some(&0x47) {
        "MPEG-TS"
    } else if crate::decode::sniff(bytes).is_some() {
        "an image"
    } else {
        "not a container this gateway knows"
    };
    Err(VideoError::Container { seen })
}

/// Decodes the frames `sample(total_frames, fps)` picks (display indices), under `limits`.
pub fn decode_video(
    bytes: &[u8],
    limits: &VideoLimits,
    sample: impl FnOnce(usize, f64) -> Result<Vec<usize>, MediaError>,
) -> Result<DecodedVideo, VideoError> {
    let started = Instant::now();
    if bytes.is_empty() {
        return Err(VideoError::Empty);
    }
    if bytes.len() > limits.bytes_max {
        return Err(VideoError::TooManyBytes { bytes: bytes.len(), max: limits.bytes_max });
    }
    container(bytes)?;
    let track = mp4::first_video_track(bytes, limits.frames_max)?;
    let avc = match (&track.avc, track.codec.as_str()) {
        (Some(avc), _) => avc,
        (None, "avc1" | "avc3") => {
            return Err(VideoError::Malformed { detail: "its H.264 track has no 'avcC'".into() })
        }
        (None, _) => return Err(VideoError::Codec { fourcc: track.codec }),
    };
    let first_sps = avc.sps.first().ok_or_else(|| VideoError::Malformed { detail: "its 'avcC' has no SPS".into() })?;
    let sps = sps::parse(first_sps)?;
    if sps.width as u64 * sps.height as u64 > limits.frame_pixels_max {
        return Err(VideoError::TooManyPixels { width: sps.width, height: sps.height, max: limits.frame_pixels_max });
    }
    let total = track.samples.len();
    if total == 0 {
        return Err(VideoError::Malformed { detail: "its video track has no frames".into() });
    }
    let seconds = total as f64 / track.fps;
    if track.fps > 0.0 && seconds > limits.duration_s_max as f64 {
        return Err(VideoError::TooLong { seconds, max: limits.duration_s_max });
    }
    let mut indices = sample(total, track.fps).map_err(VideoError::Frames)?;
    indices.dedup();
    let frame_bytes = sps.width as usize * sps.height as usize * 3;
    if indices.len().saturating_mul(frame_bytes) > limits.frame_bytes_max {
        let (frames, width, height, max) = (indices.len(), sps.width, sps.height, limits.frame_bytes_max);
        return Err(VideoError::TooManyFrameBytes { frames, width, height, max });
    }
    let deadline = (started + Duration::from_millis(limits.time_max_ms), limits.time_max_ms);
    let frames = h264::decode(avc, &track.samples, &track.display, &indices, (sps.width, sps.height), deadline)?;
    Ok(DecodedVideo { frames, total_frames: total, fps: track.fps, indices })
}
