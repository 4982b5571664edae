//! Tokenizer cache: cost of an L0 hit and an L1 hit against a miss, on a ~6,000-token chat
//! prompt rendered with the real Qwen3 chat template and tokenizer.
//! Targets (issue "Text fidelity"): L0 hit ≤ 10% of a miss, L1 hit ≤ 40%.
//!
//!     cargo bench --bench tokenizer_cache
//!
//! Medians of repeated runs, compared as ratios within one run.

mod common;

use std::time::Duration;

use serde_json::{json, Value};
use shardgate_text::model::ModelAssets;
use shardgate_text::template::{ChatTemplate, RenderInput};
use shardgate_text::tokenizer::cache::{CacheConfig, TokenizerCache};

const ITERATIONS: usize = 60;

fn render(model: &ModelAssets, template: &ChatTemplate, messages: &[Value]) -> String {
    let extra: Vec<(String, Value)> =
        model.special_tokens.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    template
        .render(&RenderInput {
            messages: &Value::Array(messages.to_vec()),
            tools: None,
            documents: None,
            add_generation_prompt: true,
            continue_final_message: false,
            extra: &extra,
        })
        .expect("render")
}

fn main() {
    let model = common::demo_model();
    let template = ChatTemplate::compile(model.chat_template.as_deref().expect("template")).expect("compile");
    let tok = &model.tokenizer;

    // A conversation of ~6,000 tokens, and its next turn (~10% new text).
    let paragraph = common::PROSE;
    let mut messages = vec![json!({"role": "system", "content": "You are a careful assistant."})];
    let mut turn = 0;
    while tok.encode(&render(&model, &template, &messages), false).unwrap().len() < 5_400 {
        messages.push(json!({"role": "user", "content": format!("Question {turn}: {}", paragraph.repeat(3))}));
        messages.push(json!({"role": "assistant", "content": format!("Answer {turn}: {}", paragraph.repeat(3))}));
        turn += 1;
    }
    let prompt = render(&model, &template, &messages);
    let mut next_turn = messages.clone();
    next_turn.push(json!({"role": "user", "content": paragraph.repeat(18)}));
    let next_prompt = render(&model, &template, &next_turn);
    let n_prompt = tok.encode(&prompt, false).unwrap().len();
    let n_next = tok.encode(&next_prompt, false).unwrap().len();

    let time = |f: &mut dyn FnMut()| -> Duration { common::median_time(ITERATIONS, f) };
    let miss = time(&mut || {
        std::hint::black_box(tok.encode(std::hint::black_box(&next_prompt), false).unwrap());
    });
    let l0_config = CacheConfig {
        l0_enabled: true,
        l0_bytes_max: 64 << 20,
        l0_entries_max: 1000,
        l1_enabled: false,
        l1_bytes_max: 0,
    };
    let mut l0 = TokenizerCache::new(l0_config, tok);
    l0.encode(tok, &next_prompt, false).unwrap();
    let l0_hit = time(&mut || {
        std::hint::black_box(l0.encode(tok, std::hint::black_box(&next_prompt), false).unwrap());
    });
    let l1_config =
        CacheConfig { l0_enabled: false, l0_bytes_max: 0, l0_entries_max: 1, l1_enabled: true, l1_bytes_max: 64 << 20 };
    let mut l1 = TokenizerCache::new(l1_config, tok);
    l1.encode(tok, &prompt, false).unwrap();
    let l1_hit = time(&mut || {
        let ids = l1.encode(tok, std::hint::black_box(&next_prompt), false).unwrap();
        std::hint::black_box(ids);
    });
    assert!(l1.stats().l1_hits >= ITERATIONS as u64, "the L1 path was not taken");
    assert_eq!(l1.encode(tok, &next_prompt, false).unwrap(), tok.encode(&next_prompt, false).unwrap());

    let l0_ratio = l0_hit.as_secs_f64() / miss.as_secs_f64();
    let l1_ratio = l1_hit.as_secs_f64() / miss.as_secs_f64();
    println!("prompt: {n_next} tokens ({} new since the cached turn of {n_prompt})", n_next - n_prompt);
    println!("miss (plain encode)   {:>9.1} µs", miss.as_secs_f64() * 1e6);
    println!(
        "L0 hit                {:>9.1} µs   {:.1}% of a miss (target ≤ 10%)",
        l0_hit.as_secs_f64() * 1e6,
        l0_ratio * 100.0
    );
    println!(
        "L1 hit (prefix)       {:>9.1} µs   {:.1}% of a miss (target ≤ 40%)",
        l1_hit.as_secs_f64() * 1e6,
        l1_ratio * 100.0
    );
    let ok = l0_ratio <= 0.10 && l1_ratio <= 0.40;
    println!("{}", if ok { "PASS" } else { "FAIL" });
    if !ok {
        std::process::exit(1);
    }
}
