//! Prompt encoding under callgrind: instructions and mispredicted branches, which, unlike
//! time on these noisy machines, repeat exactly from run to run (`perf/callgrind/run.sh`).
//!
//! Encodes distinct chat prompts of random vocabulary tokens (what `shardgate bench` sends) or
//! of prose, once to warm the split's per-char class cache (as in a running gateway), then
//! again inside `measured`, the only function callgrind counts.
//!
//! Usage: encode_callgrind [random|prose] [PROMPTS] [TOKENS]

mod common;

use std::hint::black_box;

use shardgate_text::tokenizer::Tokenizer;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let prose = args.first().is_some_and(|a| a == "prose");
    let prompts: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let tokens: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let model = common::demo_model();
    let tok = &model.tokenizer;
    let mut random = common::RandomIds::new();
    let texts: Vec<String> = (0..prompts)
        .map(|i| {
            // Distinct prose prompts: a leading number differs.
            let body =
                if prose { format!("{i} {}", common::PROSE.repeat(tokens / 28)) } else { random.text(tok, tokens) };
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
