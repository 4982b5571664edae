//! H.264 frames out of MP4 samples with OpenH264: the `avcC` parameter sets and each
//! length-prefixed sample rewritten as the Annex B stream the decoder reads, decoded in order
//! up to the last wanted frame, the wanted ones converted to RGB.

use std::time::Instant;

use openh264::decoder::Decoder;
use openh264::formats::YUVSource;

use super::error::VideoError;
use super::mp4::AvcConfig;
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

/// The frames at `wanted` (ascending display indices; display order is decode order, the
/// caller refuses reordered streams), each `width` x `height` as the SPS said.
pub(super) fn decode(
    avc: &AvcConfig<'_>,
    samples: &[&[u8]],
    wanted: &[usize],
    (width, height): (u32, u32),
    deadline: (Instant, u64),
) -> Result<Vec<RgbImage>, VideoError> {
    let mut decoder = Decoder::new().map_err(|e| malformed(format!("the H.264 decoder cannot start: {e}")))?;
    let mut stream = Vec::new();
    for set in avc.sps.iter().chain(&avc.pps) {
        stream.extend_from_slice(&START_CODE);
        stream.extend_from_slice(set);
    }
    let mut frames = Vec::with_capacity(wanted.len());
    let mut shown = 0usize;
    let mut next = wanted.iter().peekable();
    for (i, sample) in samples.iter().enumerate() {
        let Some(&&target) = next.peek() else { break };
        if Instant::now() > deadline.0 {
            return Err(VideoError::TooSlow { max_ms: deadline.1 });
        }
        annex_b(sample, avc.nal_length_size, &mut stream)?;
        let picture =
            decoder.decode(&stream).map_err(|e| malformed(format!("H.264 frame {i} cannot be decoded: {e}")))?;
        stream.clear();
        let Some(picture) = picture else { continue };
        if shown == target {
            let (w, h) = picture.dimensions();
            if (w, h) != (width as usize, height as usize) {
                return Err(malformed(format!("frame {i} is {w}x{h}, not the {width}x{height} its stream declares")));
            }
            let (sy, su, sv) = picture.strides();
            let planes = Planes { y: (picture.y(), sy), u: (picture.u(), su), v: (picture.v(), sv), width, height };
            frames.push(yuv::to_rgb(&planes).ok_or_else(|| malformed(format!("frame {i}'s planes are cut short")))?);
            next.next();
        }
        shown += 1;
    }
    if frames.len() < wanted.len() {
        return Err(malformed(format!("{shown} of its {} frames decode", samples.len())));
    }
    Ok(frames)
}
