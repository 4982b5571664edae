//! Per-image CPU cost of shardgate-media: decoding alone, then decoding and processing with
//! each processor and backend, on the images `image_cost.py` writes. That script runs the
//! Python stack vLLM uses (its loader, the Hugging Face processors) on the same files in the
//! same run and prints both side by side as ratios:
//!
//!     ~/.cache/real-vllm/venv/bin/python crates/media/benches/image_cost.py
//!
//! Alone, on a directory the script wrote (all its images, or the one named):
//!
//!     cargo bench -p shardgate-media --bench image_cost -- DIR [IMAGE]
//!
//! One JSON object per line on stdout: `image`, `step` (`decode`, or `CONFIG BACKEND` for
//! decode + process), `median_ms` over the manifest's iterations for that image.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use shardgate_media::{decode, Backend, DecodeLimits, ImageProcessor};

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

/// The median of `iterations` runs of `work`, after one warm-up run.
fn time(iterations: usize, mut work: impl FnMut()) -> f64 {
    work();
    median(
        (0..iterations)
            .map(|_| {
                let start = Instant::now();
                work();
                start.elapsed()
            })
            .collect(),
    )
}

fn processor(config: &str, backend: Backend) -> ImageProcessor {
    let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/configs");
    let read = |name: String| std::fs::read_to_string(configs.join(name));
    let preprocessor = read(format!("{config}.json")).unwrap_or_else(|e| panic!("{config}: {e}"));
    let model = read(format!("{config}.config.json")).ok();
    ImageProcessor::from_configs(&preprocessor, model.as_deref())
        .unwrap_or_else(|e| panic!("{config}: {e}"))
        .with_backend(backend)
}

fn main() {
    // `cargo bench` passes `--bench` to harness-less benches; the directory and image are the
    // other words.
    let words: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let Some(dir) = words.first().map(PathBuf::from) else {
        eprintln!("usage: cargo bench -p shardgate-media --bench image_cost -- DIR [IMAGE] (image_cost.py writes DIR)");
        std::process::exit(2)
    };
    let only = words.get(1);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest.json")).expect("manifest");
    let steps: Vec<(String, ImageProcessor)> = manifest["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|step| {
            let (config, backend) =
                (step["config"].as_str().expect("config"), step["backend"].as_str().expect("backend"));
            let backend = if backend == "pil" { Backend::Pil } else { Backend::Torchvision };
            (format!("{config} {}", step["backend"].as_str().expect("backend")), processor(config, backend))
        })
        .collect();
    let limits = DecodeLimits::default();
    for image in manifest["images"].as_array().expect("images") {
        let file = image["file"].as_str().expect("file");
        if only.is_some_and(|only| only != file) {
            continue;
        }
        let iterations = image["iterations"].as_u64().expect("iterations") as usize;
        let bytes = std::fs::read(dir.join(file)).expect("image");
        let decode_ms = time(iterations, || {
            std::hint::black_box(decode(&bytes, &limits).expect("decode"));
        });
        println!("{}", json!({"image": file, "step": "decode", "median_ms": decode_ms}));
        for (step, processor) in &steps {
            let ms = time(iterations, || {
                let image = decode(&bytes, &limits).expect("decode").image;
                std::hint::black_box(processor.process(&image).expect("process"));
            });
            println!("{}", json!({"image": file, "step": step, "median_ms": ms}));
        }
    }
}
