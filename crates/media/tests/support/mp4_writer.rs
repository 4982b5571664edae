//! Test videos made at test time: synthetic frames encoded by OpenH264 (Constrained Baseline,
//! no B-frames) and written as a minimal MP4 that FFmpeg and OpenCV read too. Shared by the
//! media crate's tests and the gateway's (`#[path]`), so no video file is committed.

use openh264::encoder::{BitRate, Encoder, EncoderConfig, FrameRate};
use openh264::formats::YUVBuffer;
use openh264::OpenH264API;

/// A video to make: size, frame count, rate; `fourcc` other than `avc1` relabels the
/// sample entry (a stream a decoder for that codec would not read, for refusals).
pub struct Spec {
    pub width: usize,
    pub height: usize,
    pub frames: usize,
    pub fps: u32,
    pub fourcc: [u8; 4],
}

impl Spec {
    pub fn h264(width: usize, height: usize, frames: usize, fps: u32) -> Spec {
        Spec { width, height, frames, fps, fourcc: *b"avc1" }
    }
}

/// Frame `t` of a moving colour pattern, as I420.
fn frame(width: usize, height: usize, t: usize) -> YUVBuffer {
    let mut yuv = Vec::with_capacity(width * height * 3 / 2);
    for y in 0..height {
        for x in 0..width {
            yuv.push((16 + (x * 3 + y * 2 + t * 9) % 220) as u8);
        }
    }
    for (shift, speed) in [(0usize, 5usize), (37, 11)] {
        for y in 0..height / 2 {
            for x in 0..width / 2 {
                yuv.push((96 + (x * 2 + y + shift + t * speed) % 64) as u8);
            }
        }
    }
    YUVBuffer::from_vec(yuv, width, height)
}

fn nal_body(nal: &[u8]) -> &[u8] {
    let zeros = nal.iter().take_while(|&&b| b == 0).count();
    &nal[zeros + 1..]
}

/// The encoded MP4 file.
pub fn make(spec: &Spec) -> Vec<u8> {
    let config = EncoderConfig::new()
        .max_frame_rate(FrameRate::from_hz(spec.fps as f32))
        .bitrate(BitRate::from_bps(4_000_000))
        .skip_frames(false);
    let mut encoder = Encoder::with_api_config(OpenH264API::from_source(), config).expect("encoder");
    let (mut sps, mut pps, mut samples) = (None, None, Vec::new());
    for t in 0..spec.frames {
        let stream = encoder.encode(&frame(spec.width, spec.height, t)).expect("encode").to_vec();
        let mut sample = Vec::new();
        for nal in openh264::nal_units(&stream) {
            let body = nal_body(nal);
            match body[0] & 0x1f {
                7 => sps = Some(body.to_vec()),
                8 => pps = Some(body.to_vec()),
                _ => {
                    sample.extend_from_slice(&(body.len() as u32).to_be_bytes());
                    sample.extend_from_slice(body);
                }
            }
        }
        samples.push(sample);
    }
    mp4(spec, &sps.expect("an SPS"), &pps.expect("a PPS"), &samples)
}

fn mp4_box(kind: &[u8; 4], parts: &[&[u8]]) -> Vec<u8> {
    let len: usize = 8 + parts.iter().map(|p| p.len()).sum::<usize>();
    let mut out = (len as u32).to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    parts.iter().for_each(|p| out.extend_from_slice(p));
    out
}

fn be32(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

fn mp4(spec: &Spec, sps: &[u8], pps: &[u8], samples: &[Vec<u8>]) -> Vec<u8> {
    let (w, h, n) = (spec.width as u32, spec.height as u32, samples.len() as u32);
    let timescale = spec.fps * 1000;
    let duration = n * 1000;
    let ftyp = mp4_box(b"ftyp", &[b"isom", &be32(&[512]), b"isomiso2avc1mp41"]);
    let mdat_at = ftyp.len() as u32 + 8;
    let payload: Vec<u8> = samples.concat();
    let mdat = mp4_box(b"mdat", &[&payload]);
    let matrix = be32(&[0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x4000_0000]);
    let mvhd = mp4_box(
        b"mvhd",
        &[&be32(&[0, 0, 0, timescale, duration, 0x10000]), &[1, 0], &[0; 10], &matrix, &[0; 24], &be32(&[2])],
    );
    let tkhd = mp4_box(b"tkhd", &[&be32(&[3, 0, 0, 1, 0, duration, 0, 0, 0, 0]), &matrix, &be32(&[w << 16, h << 16])]);
    let mdhd = mp4_box(b"mdhd", &[&be32(&[0, 0, 0, timescale, duration]), &[0x55, 0xc4, 0, 0]]);
    let hdlr = mp4_box(b"hdlr", &[&be32(&[0, 0]), b"vide", &[0; 12], b"video\0"]);
    let mut avcc = vec![1, sps[1], sps[2], sps[3], 0xff, 0xe1];
    avcc.extend_from_slice(&(sps.len() as u16).to_be_bytes());
    avcc.extend_from_slice(sps);
    avcc.push(1);
    avcc.extend_from_slice(&(pps.len() as u16).to_be_bytes());
    avcc.extend_from_slice(pps);
    let avcc = mp4_box(b"avcC", &[&avcc]);
    let mut visual = vec![0u8; 6];
    visual.extend_from_slice(&[0, 1]);
    visual.extend_from_slice(&[0; 16]);
    visual.extend_from_slice(&(w as u16).to_be_bytes());
    visual.extend_from_slice(&(h as u16).to_be_bytes());
    visual.extend_from_slice(&be32(&[0x480000, 0x480000, 0]));
    visual.extend_from_slice(&[0, 1]);
    visual.extend_from_slice(&[0; 32]);
    visual.extend_from_slice(&[0, 0x18, 0xff, 0xff]);
    let entry = mp4_box(&spec.fourcc, &[&visual, &avcc]);
    let stsd = mp4_box(b"stsd", &[&be32(&[0, 1]), &entry]);
    let stts = mp4_box(b"stts", &[&be32(&[0, 1, n, 1000])]);
    let stsc = mp4_box(b"stsc", &[&be32(&[0, 1, 1, n, 1])]);
    let sizes: Vec<u32> = samples.iter().map(|s| s.len() as u32).collect();
    let stsz = mp4_box(b"stsz", &[&be32(&[0, 0, n]), &be32(&sizes)]);
    let stco = mp4_box(b"stco", &[&be32(&[0, 1, mdat_at])]);
    let stss = mp4_box(b"stss", &[&be32(&[0, 1, 1])]);
    let stbl = mp4_box(b"stbl", &[&stsd, &stts, &stss, &stsc, &stsz, &stco]);
    let dref = mp4_box(b"dref", &[&be32(&[0, 1]), &mp4_box(b"url ", &[&be32(&[1])])]);
    let minf = mp4_box(b"minf", &[&mp4_box(b"vmhd", &[&be32(&[1, 0, 0])]), &mp4_box(b"dinf", &[&dref]), &stbl]);
    let mdia = mp4_box(b"mdia", &[&mdhd, &hdlr, &minf]);
    let trak = mp4_box(b"trak", &[&tkhd, &mdia]);
    let moov = mp4_box(b"moov", &[&mvhd, &trak]);
    [ftyp, mdat, moov].concat()
}
