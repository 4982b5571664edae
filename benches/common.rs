//! What several benches share (`mod common;` in each): the demo model, and prompt text of
//! random vocabulary tokens as `shardgate bench` sends it, and the median-of-runs timer. Not
//! every bench uses every item.
#![allow(dead_code)]

use shardgate_text::model::{ModelAssets, ModelSource};
use shardgate_text::tokenizer::Tokenizer;

/// The embedded default model (real Qwen3 tokenizer and chat template).
pub fn demo_model() -> ModelAssets {
    let dir = shardgate_text::demo_model::ensure().expect("demo model");
    ModelAssets::load(&ModelSource {
        model_path: dir,
        tokenizer_path: None,
        chat_template: None,
        served_name: "bench".into(),
        use_generation_config: true,
    })
    .expect("model")
}

/// `tokenizers` itself on the demo model's `tokenizer.json`: the side-by-side reference (the
/// gateway drops its own copy after load).
pub fn demo_reference_tokenizer() -> tokenizers::Tokenizer {
    let dir = shardgate_text::demo_model::ensure().expect("demo model");
    tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).expect("tokenizers loads it")
}

/// A sentence of ordinary prose, repeated to make prompts of known shape.
pub const PROSE: &str = "The gateway keeps every shard's work on its own core, so a request's tokens never cross \
                         a cache line owned by another thread; caches, sockets and buffers stay local. ";

/// Seeded random vocabulary ids (xorshift, so every bench and run draws the same ones).
pub struct RandomIds(u64);

impl RandomIds {
    pub fn new() -> RandomIds {
        RandomIds(0x2545_f491_4f6c_dd1d)
    }

    pub fn ids(&mut self, count: usize) -> Vec<u32> {
        (0..count)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                (self.0 % 150_000) as u32
            })
            .collect()
    }

    /// `count` random ids decoded to text.
    pub fn text(&mut self, tok: &Tokenizer, count: usize) -> String {
        tok.decode(&self.ids(count), true).expect("decode")
    }
}

/// The median wall time of `f` over `iterations` runs.
pub fn median_time(iterations: usize, f: &mut dyn FnMut()) -> std::time::Duration {
    let mut runs: Vec<std::time::Duration> = (0..iterations)
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    runs.sort();
    runs[runs.len() / 2]
}
