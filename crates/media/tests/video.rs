//! Video decoding on videos made at test time (`support/mp4_writer.rs`): sizes, aspect
//! ratios and frame counts odd and even, sampled as vLLM's `qwen2_vl` loader samples, and
//! every refusal, each limit met before the allocation it bounds.

#[path = "support/mp4_writer.rs"]
mod mp4_writer;

use mp4_writer::{make, Spec};
use shardgate_media::processor::qwen2_vl_frame_indices;
use shardgate_media::{decode_video, VideoError, VideoLimits};

fn qwen_sampling(total: usize, fps: f64) -> Result<Vec<usize>, shardgate_media::MediaError> {
    qwen2_vl_frame_indices(total, fps, 2.0, 2)
}

/// The pattern `mp4_writer` encodes, converted with BT.601 limited range as the decoder does.
fn source_rgb(width: usize, height: usize, t: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(width * height * 3);
    for y in 0..height {
        for x in 0..width {
            let luma = (16 + (x * 3 + y * 2 + t * 9) % 220) as f32;
            let cb = (96 + (x / 2 * 2 + y / 2 + t * 5) % 64) as f32 - 128.0;
            let cr = (96 + (x / 2 * 2 + y / 2 + 37 + t * 11) % 64) as f32 - 128.0;
            let l = (luma - 16.0) * 255.0 / 219.0;
            let k = 255.0 / 224.0;
            let rgb = [
                l + k * 1.402 * cr,
                l - k * 1.772 * 0.114 / 0.587 * cb - k * 1.402 * 0.299 / 0.587 * cr,
                l + k * 1.772 * cb,
            ];
            out.extend(rgb.map(|v| v.round().clamp(0.0, 255.0) as u8));
        }
    }
    out
}

#[test]
fn videos_decode_at_the_sampled_frames() {
    // (width, height, frames, fps)
    let cases = [(64, 48, 20, 10), (100, 60, 9, 4), (36, 90, 16, 8), (320, 240, 31, 30), (128, 32, 7, 2)];
    for (width, height, frames, fps) in cases {
        let bytes = make(&Spec::h264(width, height, frames, fps));
        let video = decode_video(&bytes, &VideoLimits::default(), qwen_sampling)
            .unwrap_or_else(|e| panic!("{width}x{height}x{frames}: {e}"));
        assert_eq!((video.total_frames, video.fps), (frames, fps as f64), "{width}x{height}x{frames}");
        assert_eq!(video.indices, qwen_sampling(frames, fps as f64).unwrap(), "{width}x{height}x{frames}");
        assert_eq!(video.frames.len(), video.indices.len());
        for (frame, &t) in video.frames.iter().zip(&video.indices) {
            assert_eq!((frame.width as usize, frame.height as usize), (width, height));
            // Lossy coding at a high rate: the mean error against the source pattern is small;
            // a wrong frame index, plane or chroma position gives tens of levels.
            let expected = source_rgb(width, height, t);
            let mean = frame.pixels.iter().zip(&expected).map(|(&a, &b)| a.abs_diff(b) as f64).sum::<f64>()
                / expected.len() as f64;
            assert!(mean < 4.0, "{width}x{height} frame {t}: mean abs error {mean:.2}");
        }
    }
}

#[test]
fn refusals_name_the_cause() {
    let good = make(&Spec::h264(64, 48, 8, 4));
    let hevc = make(&Spec { fourcc: *b"hvc1", ..Spec::h264(64, 48, 4, 4) });
    let webm = [&[0x1a, 0x45, 0xdf, 0xa3][..], &[0; 60]].concat();
    let lim = VideoLimits::default();
    let cases: Vec<(&str, &[u8], VideoLimits, &str)> = vec![
        ("empty", b"", lim, "the video is empty"),
        ("bytes", &good, VideoLimits { bytes_max: 100, ..lim }, "more than the limit of 100 bytes"),
        ("webm", &webm, lim, "the video is WebM / Matroska; only MP4 (ISO-BMFF) with H.264 is decoded"),
        ("png", b"\x89PNG\r\n\x1a\n0000", lim, "the video is an image"),
        ("hevc", &hevc, lim, "the video's codec is 'hvc1'; only H.264 ('avc1') is decoded"),
        ("cut", &good[..good.len() - 40], lim, "the video cannot be decoded"),
        ("frames", &good, VideoLimits { frames_max: 7, ..lim }, "the video has 8 frames, more than the limit of 7"),
        ("pixels", &good, VideoLimits { frame_pixels_max: 3071, ..lim }, "64x48 (3072 pixels), more than"),
        ("seconds", &good, VideoLimits { duration_s_max: 1, ..lim }, "the video lasts 2.0 s"),
        ("frame bytes", &good, VideoLimits { frame_bytes_max: 4 * 9215, ..lim }, "4 sampled frames of 64x48"),
    ];
    for (name, bytes, limits, expected) in cases {
        let e = decode_video(bytes, &limits, qwen_sampling).expect_err(name);
        assert!(e.to_string().contains(expected), "{name}: {e}");
    }
    // A stream with fewer frames than one temporal patch: the sampling's refusal.
    let one = make(&Spec::h264(64, 48, 1, 4));
    let e = decode_video(&one, &lim, qwen_sampling).expect_err("one frame");
    assert!(matches!(e, VideoError::Frames(_)), "{e}");
}
