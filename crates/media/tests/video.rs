//! Video decoding on videos made at test time (`support/mp4_writer.rs`): sizes, aspect
//! ratios and frame counts odd and even, sampled as vLLM's `qwen2_vl` loader samples, and
//! every refusal, each limit met before the allocation it bounds. Videos with B-frames come
//! from libx264, which no crate offers: two tiny ones are committed (`videos/`, below).

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
    // A B-frame stream with 24 bytes of its coded data overwritten: OpenH264's state, named.
    let path = format!("{}/tests/videos/{}", env!("CARGO_MANIFEST_DIR"), BFRAME_VIDEOS[0].0);
    let mut broken = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mdat = broken.windows(4).position(|w| w == b"mdat").expect("an mdat box");
    broken[mdat + 1200..mdat + 1224].fill(0xff);
    let e = decode_video(&broken, &lim, qwen_sampling).expect_err("a damaged B-frame stream");
    assert!(e.to_string().contains("cannot be decoded: OpenH264 state 0x"), "{e}");
    // A stream with fewer frames than one temporal patch: the sampling's refusal.
    let one = make(&Spec::h264(64, 48, 1, 4));
    let e = decode_video(&one, &lim, qwen_sampling).expect_err("one frame");
    assert!(matches!(e, VideoError::Frames(_)), "{e}");
}

/// FNV-1a over a frame's RGB samples.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// `videos/`: our own moving pattern encoded by libx264 with B-frames
/// (`tools/video/make_bframes.py OUT W H N 2 --bf 3` and `... --bf 2 --profile main --cavlc`,
/// in the venv `tools/video/setup-encoder.sh` makes). Each frame's hash, in display order, is
/// of the RGB that `tools/goldens/video_colour.py` finds identical to vLLM's OpenCV loader's.
const BFRAME_VIDEOS: [(&str, &[u64]); 2] = [
    (
        "high-cabac-bf3-64x48x12.mp4",
        &[
            0x27f1c0dabd9574bf,
            0x6a3a8f0e55be115a,
            0x96f6812b7bf77dab,
            0xf5950145628df138,
            0xcbc5130dc416f3b4,
            0xbfad69b6fc567b2c,
            0x15856fc4c6e56e30,
            0xbaa1a68a15404310,
            0x0d86896f68e87c22,
            0x82f653adebe740ee,
            0xd1a6348db898243e,
            0xe7d09b58eb7e8183,
        ],
    ),
    (
        "main-cavlc-bf2-48x32x10.mp4",
        &[
            0xe92a8a909a165622,
            0xc34a5719fb212fe8,
            0xfc9d1a95f144df19,
            0xacc047cfa5076364,
            0xcebac40faaf80db2,
            0x9da9ed9b5a45dd65,
            0x1d3caf4c53d64a13,
            0xa86a1b37d78548e1,
            0x3b953466a7b07623,
            0x693aed4ad0d37056,
        ],
    ),
];

#[test]
fn bframe_videos_come_out_in_display_order() {
    // Every frame; a B-frame alone; frames whose pictures OpenH264 releases late (after the
    // P-frame that follows them in decode order); the last (only from the final flush).
    let picks: [&[usize]; 4] = [&[], &[2], &[1, 3, 6], &[9]];
    for (name, hashes) in BFRAME_VIDEOS {
        let path = format!("{}/tests/videos/{name}", env!("CARGO_MANIFEST_DIR"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        for pick in picks {
            let wanted = |total: usize, _| Ok(if pick.is_empty() { (0..total).collect() } else { pick.to_vec() });
            let video = decode_video(&bytes, &VideoLimits::default(), wanted).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((video.total_frames, video.fps), (hashes.len(), 2.0), "{name}");
            let got: Vec<u64> = video.frames.iter().map(|f| fnv(&f.pixels)).collect();
            let expected: Vec<u64> = video.indices.iter().map(|&i| hashes[i]).collect();
            assert_eq!(got, expected, "{name} at {:?}", video.indices);
        }
    }
}
