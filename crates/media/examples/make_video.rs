//! Writes a test video (a moving colour pattern, H.264 in MP4, `tests/support/mp4_writer.rs`)
//! for the scripts that need one outside Rust's tests: the real-vLLM differential
//! (tests/real_vllm/video.py) and the fuzz seeds (tests/fuzz/seeds/generate.py).
//!
//! `make_video OUT WIDTH HEIGHT FRAMES FPS`

#[path = "../tests/support/mp4_writer.rs"]
mod mp4_writer;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let numbers: Vec<usize> = args.iter().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (Some(out), [width, height, frames, fps]) = (args.first(), numbers.as_slice()) else {
        eprintln!("usage: make_video OUT WIDTH HEIGHT FRAMES FPS (even sides)");
        std::process::exit(2);
    };
    let spec = mp4_writer::Spec::h264(*width, *height, *frames, *fps as u32);
    if let Err(e) = std::fs::write(out, mp4_writer::make(&spec)) {
        eprintln!("make_video: {out}: {e}");
        std::process::exit(1);
    }
}
