//! Per-request CPU cost of an image: what the gateway does for each image part before the
//! request reaches an engine (decode, the Qwen2-VL processor, vLLM's item hash, the tensors
//! into `mm_features`), on PNG photos-like images of common sizes, against tokenizing a
//! ~1,000-token chat prompt, the text work every request already pays.
//!
//!     cargo bench --bench image_cost
//!
//! Medians of repeated runs, each stage also as a ratio to the tokenization within one run.
//! The images are made here (a smooth gradient with seeded noise, PNG-encoded), so nothing is
//! fetched; the processor configs are the Qwen2-VL model card's values (as in the media
//! crate's tests): the default `max_pixels` and the capped one the card suggests.

mod common;

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use shardgate_media::{decode, image_hash, DecodeLimits, ImageProcessor};
use shardgate_wire::mm::{Feature, Field, Layout, Modality, Tensor};
use shardgate_wire::{EngineRequest, SamplingParams};

const ITERATIONS: usize = 15;
const QWEN2_VL: &str = include_str!("../crates/media/tests/configs/qwen2-vl.json");
const QWEN2_VL_CAPPED: &str = include_str!("../crates/media/tests/configs/qwen2-vl-capped.json");

fn time(f: &mut dyn FnMut()) -> Duration {
    common::median_time(ITERATIONS, f)
}

/// An RGB PNG of `w`×`h`: a gradient with noise, so the deflate stream is photo-sized.
fn png(w: u32, h: u32) -> Vec<u8> {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut pixels = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let noise = (seed % 24) as u32;
            pixels.extend([(x * 255 / w + noise) as u8, (y * 255 / h + noise) as u8, ((x + y) % 256) as u8]);
        }
    }
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().expect("png header");
    writer.write_image_data(&pixels).expect("png data");
    writer.finish().expect("png end");
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let model = common::demo_model();
    let prompt = common::PROSE.repeat(24);
    let tokens = model.tokenizer.encode(&prompt, false).unwrap().len();
    let tokenize = time(&mut || {
        std::hint::black_box(model.tokenizer.encode(std::hint::black_box(&prompt), false).unwrap());
    });
    println!("tokenize a {tokens}-token prompt: {:.3} ms (the unit below)", ms(tokenize));
    println!(
        "{:<22} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}  (ms; x = ratio to tokenizing)",
        "image / config", "png KiB", "tokens", "decode", "process", "hash", "encode", "total"
    );
    let limits = DecodeLimits::default();
    for (name, config) in [("qwen2-vl", QWEN2_VL), ("qwen2-vl capped", QWEN2_VL_CAPPED)] {
        let processor = ImageProcessor::from_configs(config, None).expect("config");
        for (w, h) in [(640, 480), (1280, 720), (1920, 1080)] {
            let bytes = png(w, h);
            let decoded = decode(&bytes, &limits).expect("decode");
            let processed = processor.process(&decoded.image).expect("process");
            let d = time(&mut || {
                std::hint::black_box(decode(std::hint::black_box(&bytes), &limits).unwrap());
            });
            let p = time(&mut || {
                std::hint::black_box(processor.process(std::hint::black_box(&decoded.image)).unwrap());
            });
            let hsh = time(&mut || {
                std::hint::black_box(image_hash("model", std::hint::black_box(&bytes), decoded.converted));
            });
            let e = time(&mut || {
                std::hint::black_box(encode(&processed.pixel_values, &processed.shape, processed.tokens));
            });
            let total = d + p + hsh + e;
            let x = |t: Duration| t.as_secs_f64() / tokenize.as_secs_f64();
            println!(
                "{:<22} {:>9.0} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2}  x {:.1} / {:.1} / {:.2} / {:.2} / {:.1}",
                format!("{w}x{h} {name}"),
                bytes.len() as f64 / 1024.0,
                processed.tokens,
                ms(d),
                ms(p),
                ms(hsh),
                ms(e),
                ms(total),
                x(d),
                x(p),
                x(hsh),
                x(e),
                x(total)
            );
        }
    }
}

/// The tensors into a `Feature` and an ADD, as the gateway sends them (the pixel values are
/// copied once into the shared buffer the aux frame carries).
fn encode(pixels: &[f32], shape: &[usize], tokens: usize) -> (Vec<u8>, Vec<Arc<[u8]>>) {
    let rows = shape[0] as u64;
    let fields = vec![
        Field {
            key: "pixel_values",
            data: Tensor::f32(shape.iter().map(|&d| d as u64).collect(), pixels).into(),
            layout: Layout::Flat { slices: vec![(0, rows)], dim: 0 },
            keep_on_cpu: false,
        },
        Field {
            key: "image_grid_thw",
            data: Tensor::i64(vec![3], &[1, 2, 2]).into(),
            layout: Layout::Batched,
            keep_on_cpu: true,
        },
    ];
    let feature = Feature {
        modality: Modality::Image,
        fields: Some(fields.into()),
        hash: "0".repeat(64),
        offset: 0,
        length: tokens as u32,
        is_embed: None,
    };
    let req = EngineRequest {
        request_id: "bench".into(),
        prompt_token_ids: Rc::from(vec![151655u32; tokens]),
        sampling: SamplingParams::default(),
        arrival_time: 0.0,
        cache_salt: None,
        priority: 0,
        mm_features: vec![feature].into(),
    };
    let (mut main, mut aux) = (Vec::new(), Vec::new());
    shardgate_wire::vllm::request::encode_add(&req, 0, &mut main, &mut aux);
    (main, aux)
}
