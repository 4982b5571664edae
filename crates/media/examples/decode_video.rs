//! Decodes a video as the gateway does (Qwen2-VL's sampling at 2 fps) and writes its sampled
//! frames as raw RGB, for tools/goldens/video_colour.py to set beside OpenCV's.
//!
//! `decode_video IN OUT` prints `{"indices": [...], "width": W, "height": H, "fps": F,
//! "total_frames": N}`.

use shardgate_media::processor::qwen2_vl_frame_indices;
use shardgate_media::{decode_video, VideoLimits};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        eprintln!("usage: decode_video IN OUT");
        std::process::exit(2);
    };
    let run = || -> Result<String, String> {
        let bytes = std::fs::read(input).map_err(|e| format!("{input}: {e}"))?;
        let video =
            decode_video(&bytes, &VideoLimits::default(), |total, fps| qwen2_vl_frame_indices(total, fps, 2.0, 2))
                .map_err(|e| e.to_string())?;
        let raw: Vec<u8> = video.frames.iter().flat_map(|f| f.pixels.iter().copied()).collect();
        std::fs::write(output, raw).map_err(|e| format!("{output}: {e}"))?;
        let first = &video.frames[0];
        Ok(serde_json::json!({"indices": video.indices, "width": first.width, "height": first.height,
                              "fps": video.fps, "total_frames": video.total_frames})
        .to_string())
    };
    match run() {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("decode_video: {e}");
            std::process::exit(1);
        }
    }
}
