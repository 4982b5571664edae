//! The ports against PIL and the Hugging Face processors, on the goldens
//! `tools/goldens/images.py` writes (gitignored; where they are absent this test says so and
//! passes, unless `SHARDGATE_MEDIA_GOLDENS_REQUIRED` is set, as tools/test.sh sets it after
//! writing them).
//!
//! Tolerances: decoding of lossless images (PNG, GIF, lossless WebP) and of every JPEG (decoded
//! by libjpeg-turbo's own code, as PIL's), every processor output of both backends
//! (torchvision's and PIL's) and torchvision's resize alone must be identical to the reference
//! (max abs error 0: the resize reproduces each library's integer arithmetic, and rescale /
//! normalise the same float operations); grids and placeholder counts exactly. The lossy WebP
//! decoder differs from libwebp in its chroma upsampling: its pixels may differ by
//! `LOSSY_DECODE_MAX_ABS` levels.

use std::path::PathBuf;

use serde_json::Value;
use shardgate_media::processor::{qwen2_vl_frame_indices, qwen3_vl_frame_indices, VideoProcessor};
use shardgate_media::resize::{resize, Filter};
use shardgate_media::{decode, image_hash, Backend, DecodeLimits, ImageProcessor, MediaError, RgbImage};

const LOSSY_DECODE_MAX_ABS: u8 = 8;
const PROCESSOR_MAX_ABS: f32 = 0.0;

/// The manifest layout this test reads (`GOLDENS_FORMAT` in `tools/goldens/images.py`).
const GOLDENS_FORMAT: u64 = 4;

/// The goldens' directory, or `None` (the test passes, saying why) when there are none or they
/// are of another layout (written by an older checkout); with `SHARDGATE_MEDIA_GOLDENS_REQUIRED`
/// either is a failure.
fn goldens() -> Option<PathBuf> {
    let dir = std::env::var_os("SHARDGATE_MEDIA_GOLDENS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/media-goldens"));
    let why = match std::fs::read(dir.join("manifest.json")) {
        Err(_) => "no goldens",
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes).ok().and_then(|m| m["format"].as_u64()) {
            Some(GOLDENS_FORMAT) => return Some(dir),
            _ => "stale goldens (another layout)",
        },
    };
    assert!(
        std::env::var_os("SHARDGATE_MEDIA_GOLDENS_REQUIRED").is_none(),
        "{why} in {} (run tools/goldens/images.py)",
        dir.display()
    );
    eprintln!("skipped: {why} in {} (tools/goldens/images.py writes them)", dir.display());
    None
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn read(dir: &std::path::Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn manifest(dir: &std::path::Path) -> Value {
    serde_json::from_slice(&read(dir, "manifest.json")).expect("manifest")
}

#[test]
fn decoding_and_item_hashes_match_vllm() {
    let Some(dir) = goldens() else { return };
    let manifest = manifest(&dir);
    let images = manifest["images"].as_array().expect("images");
    let model_id = manifest["hash_model_id"].as_str().expect("hash_model_id");
    for image in images {
        let file = image["file"].as_str().expect("file");
        let bytes = read(&dir, file);
        let decoded = decode(&bytes, &DecodeLimits::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
        // The hash also checks `converted`: vLLM hashes the loader's settings only then.
        assert_eq!(image_hash(model_id, &bytes, decoded.converted), image["hash"].as_str().expect("hash"), "{file}");
        let decoded = decoded.image;
        let size = (image["width"].as_u64().expect("width") as u32, image["height"].as_u64().expect("height") as u32);
        assert_eq!((decoded.width, decoded.height), size, "{file}");
        let expected = read(&dir, image["rgb"].as_str().expect("rgb"));
        let max_abs = decoded.pixels.iter().zip(&expected).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0);
        let tolerance = if image["exact"].as_bool() == Some(true) { 0 } else { LOSSY_DECODE_MAX_ABS };
        eprintln!("decode {file:40} max abs {max_abs}");
        assert!(max_abs <= tolerance, "{file}: max abs error {max_abs} > {tolerance}");
    }
    assert!(images.len() >= 20, "the goldens hold {} images", images.len());
}

/// PIL's accept-or-refuse on JPEGs cut short or corrupted: where vLLM's loader decodes one, the
/// same pixels; where it refuses, a refusal (the texts differ: PIL's are its own).
#[test]
fn damaged_jpegs_as_pil_takes_them() {
    let Some(dir) = goldens() else { return };
    let manifest = manifest(&dir);
    let cases = manifest["damaged"].as_array().expect("damaged");
    for case in cases {
        let file = case["file"].as_str().expect("file");
        let got = decode(&read(&dir, file), &DecodeLimits::default());
        match (got, case["rgb"].as_str()) {
            (Ok(decoded), Some(rgb)) => assert!(decoded.image.pixels == read(&dir, rgb), "{file}: pixels differ"),
            (Err(error), None) => eprintln!("damaged {file:40} refused: {error} (PIL: {})", case["error"]),
            (Ok(_), None) => panic!("{file}: decoded, but vLLM's loader refuses it: {}", case["error"]),
            (Err(error), Some(_)) => panic!("{file}: {error}, but vLLM's loader decodes it"),
        }
    }
    assert!(cases.len() >= 8, "the goldens hold {} damaged JPEGs", cases.len());
}

fn backend(name: &str) -> Backend {
    match name {
        "pil" => Backend::Pil,
        "torchvision" => Backend::Torchvision,
        other => panic!("backend {other}"),
    }
}

fn processor(config: &str, backend: Backend) -> ImageProcessor {
    let configs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/configs");
    let preprocessor = std::fs::read_to_string(configs.join(format!("{config}.json"))).expect("config");
    let model = std::fs::read_to_string(configs.join(format!("{config}.config.json"))).ok();
    let processor =
        ImageProcessor::from_configs(&preprocessor, model.as_deref()).unwrap_or_else(|e| panic!("{config}: {e}"));
    processor.with_backend(backend)
}

#[test]
fn processors_match_hugging_face() {
    let Some(dir) = goldens() else { return };
    let manifest = manifest(&dir);
    let cases = manifest["cases"].as_array().expect("cases");
    let mut worst: Vec<(String, f32, usize)> = Vec::new();
    for case in cases {
        let (file, config) = (case["image"].as_str().expect("image"), case["config"].as_str().expect("config"));
        let backend_name = case["backend"].as_str().expect("backend");
        let image = decode(&read(&dir, file), &DecodeLimits::default()).expect("decode").image;
        let got = processor(config, backend(backend_name)).process(&image);
        let (file, config) = (file, format!("{config} {backend_name}"));
        let config = config.as_str();
        if let Some(error) = case["error"].as_str() {
            assert!(
                matches!(got, Err(MediaError::AspectRatio { .. })),
                "{file} {config}: HF refused ({error}), we gave {got:?}"
            );
            continue;
        }
        let got = got.unwrap_or_else(|e| panic!("{file} {config}: {e}"));
        let shape: Vec<usize> =
            case["shape"].as_array().expect("shape").iter().map(|v| v.as_u64().expect("dim") as usize).collect();
        assert_eq!(got.shape, shape, "{file} {config}");
        let grid = case["grid_thw"].as_array().map(|g| [0, 1, 2].map(|i| g[i].as_u64().expect("grid") as u32));
        assert_eq!(got.grid_thw, grid, "{file} {config}");
        assert_eq!(got.tokens as u64, case["tokens"].as_u64().expect("tokens"), "{file} {config}");
        let expected = floats(&read(&dir, case["pixel_values"].as_str().expect("tensor")));
        assert_eq!(got.pixel_values.len(), expected.len(), "{file} {config}");
        let max_abs = got.pixel_values.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        match worst.iter_mut().find(|(name, ..)| name == config) {
            Some(entry) => {
                entry.1 = entry.1.max(max_abs);
                entry.2 += 1;
            }
            None => worst.push((config.to_string(), max_abs, 1)),
        }
        assert!(max_abs <= PROCESSOR_MAX_ABS, "{file} {config}: max abs error {max_abs}");
    }
    for (config, max_abs, count) in &worst {
        eprintln!("processor {config:20} {count:3} images, max abs error {max_abs}");
    }
    assert!(worst.len() >= 10, "the goldens cover {} configs and backends", worst.len());
}

#[test]
fn resize_matches_torchvision() {
    let Some(dir) = goldens() else { return };
    let manifest = manifest(&dir);
    let resizes = manifest["resizes"].as_array().expect("resizes");
    for case in resizes {
        let file = case["image"].as_str().expect("image");
        let image: RgbImage = decode(&read(&dir, file), &DecodeLimits::default()).expect("decode").image;
        let (width, height) =
            (case["width"].as_u64().expect("width") as u32, case["height"].as_u64().expect("height") as u32);
        let filter = match case["filter"].as_str().expect("filter") {
            "bilinear" => Filter::Bilinear,
            "bicubic" => Filter::Bicubic,
            other => panic!("filter {other}"),
        };
        let got = resize(&image, width, height, filter, Backend::Torchvision);
        let expected = read(&dir, case["rgb"].as_str().expect("rgb"));
        let differing = got.pixels.iter().zip(&expected).filter(|(a, b)| a != b).count();
        assert_eq!(got.pixels.len(), expected.len(), "{file} to {width}x{height} {filter:?}");
        assert_eq!(differing, 0, "{file} to {width}x{height} {filter:?}: {differing} samples differ");
    }
    assert!(resizes.len() >= 10, "the goldens hold {} resizes", resizes.len());
}

#[test]
fn videos_match_hugging_face() {
    let Some(dir) = goldens() else { return };
    let manifest = manifest(&dir);
    let videos = manifest["videos"].as_array().expect("videos");
    for case in videos {
        let (file, config) = (case["frames"].as_str().expect("frames"), case["config"].as_str().expect("config"));
        let [count, width, height] = ["count", "width", "height"].map(|k| case[k].as_u64().expect(k) as u32);
        let raw = read(&dir, file);
        let frames: Vec<RgbImage> = raw
            .chunks_exact(width as usize * height as usize * 3)
            .map(|pixels| RgbImage { width, height, pixels: pixels.to_vec() })
            .collect();
        assert_eq!(frames.len(), count as usize, "{file}");
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/configs/{config}.video.json"));
        let processor = VideoProcessor::from_config(&std::fs::read_to_string(path).expect("config")).expect("config");
        if let Some(error) = case["error"].as_str() {
            assert!(processor.process_video(&frames).is_err(), "{file} {config}: the reference refuses: {error}");
            continue;
        }
        let got = processor.process_video(&frames).unwrap_or_else(|e| panic!("{file} {config}: {e}"));
        let grid: Vec<u32> =
            case["grid_thw"].as_array().expect("grid").iter().map(|v| v.as_u64().expect("g") as u32).collect();
        assert_eq!(got.grid_thw.map(Vec::from), Some(grid), "{file} {config}");
        assert_eq!(got.tokens as u64, case["tokens"].as_u64().expect("tokens"), "{file} {config}");
        let shape: Vec<usize> =
            case["shape"].as_array().expect("shape").iter().map(|v| v.as_u64().expect("d") as usize).collect();
        assert_eq!(got.shape, shape, "{file} {config}");
        let expected = floats(&read(&dir, case["pixel_values"].as_str().expect("tensor")));
        let max_abs = got.pixel_values.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        eprintln!("video {file:28} {config:16} max abs error {max_abs}");
        assert!(max_abs <= PROCESSOR_MAX_ABS, "{file} {config}: max abs error {max_abs}");
    }
    assert!(videos.len() >= 12, "the goldens hold {} videos", videos.len());
}

#[test]
fn frame_sampling_matches_vllm() {
    let Some(dir) = goldens() else { return };
    let manifest = manifest(&dir);
    let samplings = manifest["samplings"].as_array().expect("samplings");
    for case in samplings {
        let total = case["total"].as_u64().expect("total") as usize;
        let (source_fps, fps) = (case["source_fps"].as_f64().expect("fps"), case["fps"].as_f64().expect("fps"));
        let expected: Vec<usize> =
            case["indices"].as_array().expect("indices").iter().map(|v| v.as_u64().expect("i") as usize).collect();
        let loader = case["loader"].as_str().expect("loader");
        let got = match loader {
            "qwen2_vl" => qwen2_vl_frame_indices(total, source_fps, fps, 2),
            _ => qwen3_vl_frame_indices(total, source_fps, fps),
        };
        let got = got.unwrap_or_else(|e| panic!("{loader} {total}: {e}"));
        assert_eq!(got, expected, "{loader}: {total} frames at {source_fps} fps sampled at {fps}");
    }
    assert!(samplings.len() >= 16, "the goldens hold {} samplings", samplings.len());
}
