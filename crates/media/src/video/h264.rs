//! H.264 frames out of MP4 samples with OpenH264: the `avcC` parameter sets and each
//! length-prefixed sample rewritten as the Annex B stream the decoder reads, decoded in
//! decode order until every wanted frame has come out, each picture placed at its display
//! index by the sample it was coded in (B-frames come out of the decoder in an order of its
//! own) and the wanted ones converted to RGB as they come out. Nothing is held back here: the
//! reordering delay lives in OpenH264's own picture pool, sized from the SPS.

use std::time::Instant;

use super::error::VideoError;
use super::mp4::AvcConfig;
use super::openh264::{Picture, TaggedDecoder};
use super::yuv::{self, Planes};
use crate::decode::RgbImage;

const START_CODE: [u8; 4] = [0, 0, 0, 1];

fn malformed(detail: impl Into<String>) -> VideoError {
    VideoError::Malformed { detail: detail.into() }
}

/// `sample`'s NAL units (each behind a `nal_length_size`-byte length) behind start codes.
fn annex_b(sample: &[u8], nal_length_size: usize, out: &mut Vec<u8>) -> Result<(), VideoError> {
    let mut rest = sample;
    while !rest.is_empty() {
        let (len, body) =
            rest.split_at_checked(nal_length_size).ok_or_else(|| malformed("a NAL length is cut short"))?;
        let len = len.iter().fold(0usize, |v, &b| v << 8 | b as usize);
        let (nal, tail) = body.split_at_checked(len).ok_or_else(|| malformed("a NAL unit runs past its sample"))?;
        out.extend_from_slice(&START_CODE);
        out.extend_from_slice(nal);
        rest = tail;
    }
    Ok(())
}

/// The wanted frames, filled in as their pictures come out of the decoder.
struct Wanted<'a> {
    /// Ascending display indices.
    indices: &'a [usize],
    /// Each sample's display index (decode order in, display order out).
    display: &'a [usize],
    frames: Vec<Option<RgbImage>>,
    missing: usize,
    size: (u32, u32),
}

impl Wanted<'_> {
    fn take(&mut self, picture: &Picture<'_>) -> Result<(), VideoError> {
        let sample = picture.sample;
        let shown = *self.display.get(sample).ok_or_else(|| malformed(format!("a picture names sample {sample}")))?;
        let Ok(slot) = self.indices.binary_search(&shown) else { return Ok(()) };
        if self.frames[slot].is_some() {
            return Ok(());
        }
        let (width, height) = self.size;
        if (picture.width, picture.height) != (width as usize, height as usize) {
            let (w, h) = (picture.width, picture.height);
            return Err(malformed(format!("frame {sample} is {w}x{h}, not the {width}x{height} its stream declares")));
        }
        let planes = Planes { y: picture.y, u: picture.u, v: picture.v, width, height };
        let rgb = yuv::to_rgb(&planes).ok_or_else(|| malformed(format!("frame {sample}'s planes are cut short")))?;
        self.frames[slot] = Some(rgb);
        self.missing -= 1;
        Ok(())
    }
}

/// The frames at `wanted` (ascending display indices), each `width` x `height` as the SPS
/// said; `display` maps each sample (decode order) to its display index.
pub(super) fn decode(
    avc: &AvcConfig<'_>,
    samples: &[&[u8]],
    display: &[usize],
    wanted: &[usize],
    size: (u32, u32),
    deadline: (Instant, u64),
) -> Result<Vec<RgbImage>, VideoError> {
    let mut decoder = TaggedDecoder::new().map_err(|e| malformed(format!("the H.264 decoder cannot start: {e}")))?;
    let mut stream = Vec::new();
    for set in avc.sps.iter().chain(&avc.pps) {
        stream.extend_from_slice(&START_CODE);
        stream.extend_from_slice(set);
    }
    let mut out = Wanted { indices: wanted, display, frames: vec![None; wanted.len()], missing: wanted.len(), size };
    for (i, sample) in samples.iter().enumerate() {
        if out.missing == 0 {
            break;
        }
        if Instant::now() > deadline.0 {
            return Err(VideoError::TooSlow { max_ms: deadline.1 });
        }
        annex_b(sample, avc.nal_length_size, &mut stream)?;
        let picture =
            decoder.decode(&stream, i).map_err(|e| malformed(format!("H.264 frame {i} cannot be decoded: {e}")))?;
        if let Some(picture) = picture {
            out.take(&picture)?;
        }
        stream.clear();
    }
    // The pictures OpenH264 still holds for reordering: at most its reorder list's 16.
    for _ in 0..16 {
        if out.missing == 0 {
            break;
        }
        let picture =
            decoder.flush().map_err(|e| malformed(format!("the last H.264 frames cannot be decoded: {e}")))?;
        let Some(picture) = picture else { break };
        out.take(&picture)?;
    }
    if out.missing > 0 {
        let decoded = wanted.len() - out.missing;
        return Err(malformed(format!("{decoded} of the {} sampled frames decode", wanted.len())));
    }
    Ok(out.frames.into_iter().flatten().collect())
}
