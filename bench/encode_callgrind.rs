//! Prompt encoding under callgrind: instructions and mispredicted branches, which, unlike
//! time on these noisy machines, repeat exactly from run to run (`perf/callgrind/run.sh`).
//!
//! Encodes distinct chat prompts of random vocabulary tokens (what `shardgate bench` sends) or
//! of prose, once to warm the split's per-char class cache (as in a running gateway), then
//! again inside `measured`, the only function callgrind counts.
//!
//! Usage: encode_callgrind [random|prose] [PROMPTS] [TOKENS]

use std::hint::black_box;

use shardgate::text::model::{ModelAssets, ModelSource};
use shardgate::text::tokenizer::Tokenizer;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let prose = args.first().is_some_and(|a| a == "prose");
    let prompts: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let tokens: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let dir = shardgate::demo::ensure_demo_model().expect("demo model");
    let model = ModelAssets::load(&ModelSource {
        model_path: dir,
        tokenizer_path: None,
        chat_template: None,
        served_name: "bench".into(),
        use_generation_config: true,
    })
    .expect("model");
    let tok = &model.tokenizer;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let texts: Vec<String> = (0..prompts)
        .map(|_| {
            let ids: Vec<u32> = (0..tokens)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 150_000) as u32
                })
                .collect();
            let body = if prose {
                // Distinct prompts of the same prose: a leading number differs.
                let sentence = "The gateway keeps every shard's work on its own core, so a request's tokens \
                                never cross a cache line owned by another thread; caches, sockets and buffers \
                                stay local. ";
                format!("{} {}", ids[0], sentence.repeat(tokens / 28))
            } else {
                tok.decode(&ids, true).expect("decode")
            };
            format!("<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n")
        })
        .collect();
    for t in &texts {
        black_box(tok.encode(t, false).expect("encode"));
    }
    println!("{} ids", measured(tok, &texts));
}

#[inline(never)]
fn measured(tok: &Tokenizer, texts: &[String]) -> usize {
    texts.iter().map(|t| black_box(tok.encode(black_box(t), false).expect("encode")).len()).sum()
}
