//! The per-token and per-request hot paths, each side by side with the straightforward way to do
//! the same work (the number it must beat), as a ratio measured in one run:
//!
//! | path | ours | baseline | target |
//! |---|---|---|---|
//! | engine output decoding | `vllm::output::decode_batch` (real 0.32 frames) | a generic msgpack tree (`rmpv`) | ≤ 0.5× |
//! | incremental detokenization | `IncrementalDecoder::step` | decode all ids so far (`tokenizers`), emit the new suffix | ≤ 0.1× at 512 tokens |
//! | incremental detokenization | `IncrementalDecoder::step` (byte-table decode) | `tokenizers`' own `DecodeStream` | ≤ 0.5× |
//! | stop matching | `stops::check` on the new text (+ overlap), holdback | search the whole text every token, the same holdback | ≤ 0.5× at 512 tokens |
//! | SSE chunk encoding | `ChatFormat::stream` of an output `Event::Delta` | `serde_json::to_string` of the same chunk | ≤ 0.5× |
//! | request JSON decode | `Body::parse` (sonic-rs; top-level members in a list) | `serde_json::from_slice::<Value>` | ≤ 0.7× |
//! | prompt tokenization, 1,000 tokens (distinct random-token prompts; prose) | `Tokenizer::encode` (fast byte-level BPE) | `tokenizers`' `encode_fast` | ≤ 0.3× |
//! | request validation | `sampling::read` (the OpenAI fields) + `params::validate` (ranges, stop strings tokenized) | — | reported |
//! | one streamed token, all of the above | `ChoiceState::apply` + the parse stage + the `Delta` event rendered | — | ≤ 2 µs |
//!
//! Tokenizer cache hit vs miss: `benches/tokenizer_cache.rs`; rank selection:
//! `benches/rank_selection.rs`; the cross-shard hop: `benches/relay_hop.rs`.
//!
//!     cargo bench --bench token_path        (SHARDGATE_BENCH_QUICK=1 for a smoke run)
//!
//! Medians of repeated rounds, ours and the baseline alternating round by round.

mod common;

// The allocator the `shardgate` binary runs with (src/main.rs), for ours and the baselines:
// what a path allocates costs what it costs in the gateway.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::time::Instant;

use serde_json::{json, Value};
use shardgate::api::fields::Body;
use shardgate::api::invalid::Names;
use shardgate::api::openai::chat_format::ChatFormat;
use shardgate::api::openai::sampling::{self, Api};
use shardgate::api::sink::{Format, SseOut};
use shardgate::pipeline::choice::ChoiceState;
use shardgate::pipeline::events::{Delta, Event};
use shardgate::pipeline::params::{self, OutputOptions};
use shardgate::pipeline::parse::ParsedDelta;
use shardgate_text::detokenize::IncrementalDecoder;
use shardgate_text::model::ModelAssets;
use shardgate_text::stops;
use shardgate_text::tokenizer::Tokenizer;
use shardgate_wire::output::TokenEvent;
use shardgate_wire::vllm::output::decode_batch;

const OUTPUT_TOKENS: usize = 512;

fn rounds() -> usize {
    if std::env::var_os("SHARDGATE_BENCH_QUICK").is_some() {
        3
    } else {
        15
    }
}

/// Median ns per item of `f`, which processes `items` items per call.
fn median_ns(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Ours and the baseline alternately, `rounds()` times; ns per item for each.
fn side_by_side(items: usize, ours: &mut dyn FnMut(), base: &mut dyn FnMut()) -> (f64, f64) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds() {
        let t = Instant::now();
        ours();
        a.push(t.elapsed().as_nanos() as f64 / items as f64);
        let t = Instant::now();
        base();
        b.push(t.elapsed().as_nanos() as f64 / items as f64);
    }
    (median_ns(&mut a), median_ns(&mut b))
}

struct Row {
    name: &'static str,
    ours_ns: f64,
    base_ns: f64,
    target_ratio: f64,
}

/// Output ids of ordinary text: what a model streams.
fn output_ids(tok: &Tokenizer) -> Vec<u32> {
    let text = "The gateway keeps every shard's work on its own core, so a request's tokens never cross a \
                cache line owned by another thread. Caches, sockets and buffers stay local; only the load \
                tables are shared, as atomics. "
        .repeat(16);
    let ids = tok.encode(&text, false).expect("encode");
    assert!(ids.len() >= OUTPUT_TOKENS);
    ids[..OUTPUT_TOKENS].to_vec()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// Every output frame the real engine sent in the captured cases (tokens, logprobs, finishes).
fn captured_outputs() -> Vec<Vec<u8>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/wire/vllm/engine-0.32.0.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json");
    let mut frames = Vec::new();
    for case in ["greedy", "stop_token", "eos", "logprobs_5", "seeded"] {
        for message in fixture["cases"][case]["frames"].as_array().expect("frames") {
            frames.push(hex(message[0].as_str().expect("frame")));
        }
    }
    frames
}

fn decoding() -> Row {
    let frames = captured_outputs();
    let reps = 2_000;
    let (ours, base) = side_by_side(
        reps * frames.len(),
        &mut || {
            for _ in 0..reps {
                for f in &frames {
                    black_box(decode_batch(black_box(f), &[]).expect("decodes").outputs.len());
                }
            }
        },
        &mut || {
            for _ in 0..reps {
                for f in &frames {
                    black_box(rmpv::decode::read_value(&mut &f[..]).expect("msgpack"));
                }
            }
        },
    );
    Row { name: "engine output decode (per batch)", ours_ns: ours, base_ns: base, target_ratio: 0.5 }
}

fn detokenizing(tok: &Tokenizer, hf: &tokenizers::Tokenizer, prompt: &[u32], ids: &[u32]) -> [Row; 2] {
    let mut ours = || {
        let mut d = IncrementalDecoder::new(tok, prompt, true, true);
        for &id in ids {
            black_box(d.step(tok, id));
        }
    };
    let (ours_ns, naive_ns) = side_by_side(ids.len(), &mut ours, &mut || {
        let mut sent = 0;
        for n in 1..=ids.len() {
            let text = hf.decode(&ids[..n], true).expect("decode");
            // Hold back an incomplete character, as a correct naive gateway must.
            if !text.ends_with('\u{fffd}') && text.len() >= sent {
                black_box(&text[sent..]);
                sent = text.len();
            }
        }
    });
    let (ours_ns2, stream_ns) = side_by_side(ids.len(), &mut ours, &mut || {
        let mut stream = hf.decode_stream(true);
        for &id in ids {
            black_box(stream.step(id).expect("decode"));
        }
    });
    [
        Row { name: "incremental detokenize (per token, 512 out)", ours_ns, base_ns: naive_ns, target_ratio: 0.1 },
        Row {
            name: "  the same vs tokenizers' DecodeStream",
            ours_ns: ours_ns2,
            base_ns: stream_ns,
            target_ratio: 0.5,
        },
    ]
}

fn stop_matching(text_pieces: &[String]) -> Row {
    let stop_list = vec!["<|im_end|>".to_string(), "\n\nUser:".to_string(), "END".to_string()];
    let (ours, base) = side_by_side(
        text_pieces.len(),
        &mut || {
            let mut text = String::new();
            for piece in text_pieces {
                let from = text.len();
                text.push_str(piece);
                black_box(stops::check(&text, from, &stop_list, false));
                black_box(stops::holdback_len(&text, &stop_list));
            }
        },
        &mut || {
            let mut text = String::new();
            for piece in text_pieces {
                text.push_str(piece);
                black_box(stop_list.iter().filter_map(|s| text.find(s.as_str())).min());
                black_box(stops::holdback_len(&text, &stop_list));
            }
        },
    );
    Row { name: "stop strings (per token, 512 out)", ours_ns: ours, base_ns: base, target_ratio: 0.5 }
}

fn chunk_encoding(pieces: &[String]) -> Row {
    let mut format = ChatFormat::new(
        "chatcmpl-0123456789abcdef".into(),
        1_764_460_800,
        "qwen3-demo".into(),
        false,
        None,
        Names::chat(false),
    );
    let events: Vec<Event> = pieces
        .iter()
        .map(|p| Event::Delta(Delta { choice: 0, output: ParsedDelta::text(p.clone()), ..Default::default() }))
        .collect();
    let (ours, base) = side_by_side(
        events.len(),
        &mut || {
            let mut out = SseOut::default();
            for e in &events {
                out.clear();
                format.stream(e, &mut out);
                black_box(&out);
            }
        },
        &mut || {
            for p in pieces {
                let chunk = json!({
                    "id": "chatcmpl-0123456789abcdef", "object": "chat.completion.chunk", "created": 1_764_460_800u64,
                    "model": "qwen3-demo",
                    "choices": [{"index": 0, "delta": {"content": p}, "logprobs": null, "finish_reason": null}],
                });
                black_box(serde_json::to_string(&chunk).expect("json"));
            }
        },
    );
    Row { name: "SSE chat chunk encode (per chunk)", ours_ns: ours, base_ns: base, target_ratio: 0.5 }
}

fn request_body() -> Vec<u8> {
    json!({
        "model": "qwen3-demo",
        "messages": [
            {"role": "system", "content": "You are a careful assistant. Answer briefly and cite sources."},
            {"role": "user", "content": "Explain how a thread-per-core gateway keeps tail latency low. ".repeat(20)},
        ],
        "stream": true, "stream_options": {"include_usage": true},
        "max_tokens": 512, "temperature": 0.7, "top_p": 0.95, "stop": ["\n\nUser:"], "seed": 7,
    })
    .to_string()
    .into_bytes()
}

fn request_decoding() -> Row {
    let body = request_body();
    let reps = 200;
    let (ours, base) = side_by_side(
        reps,
        &mut || {
            for _ in 0..reps {
                black_box(Body::parse(black_box(&body)).expect("parse"));
            }
        },
        &mut || {
            for _ in 0..reps {
                black_box(serde_json::from_slice::<Value>(black_box(&body)).expect("parse"));
            }
        },
    );
    Row { name: "chat request JSON parse (per request)", ours_ns: ours, base_ns: base, target_ratio: 0.7 }
}

/// Rendered chat prompts of about 1,000 tokens: distinct ones of random vocabulary tokens
/// (what `shardgate bench` sends: 40 of them, more words than `tokenizers`' 10,000-word cache
/// holds, as with distinct prompts in production), or one of English prose (repeated words).
fn chat_prompts(tok: &Tokenizer, random_tokens: bool) -> Vec<String> {
    let mut random = common::RandomIds::new();
    let mut body = || if random_tokens { random.text(tok, 1000) } else { common::PROSE.repeat(36) };
    (0..if random_tokens { 40 } else { 1 })
        .map(|_| {
            format!(
                "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n",
                body()
            )
        })
        .collect()
}

fn prompt_tokenizing(tok: &Tokenizer, hf: &tokenizers::Tokenizer, random_tokens: bool) -> Row {
    let prompts = chat_prompts(tok, random_tokens);
    for p in &prompts {
        let reference = hf.encode_fast(p.as_str(), false).expect("encode");
        assert_eq!(tok.encode(p, false).expect("encode"), reference.get_ids(), "the fast path is exact");
    }
    let (ours, base) = side_by_side(
        prompts.len(),
        &mut || {
            for p in &prompts {
                black_box(tok.encode(black_box(p), false).expect("encode"));
            }
        },
        &mut || {
            for p in &prompts {
                black_box(hf.encode_fast(black_box(p.as_str()), false).expect("encode"));
            }
        },
    );
    let name = if random_tokens {
        "prompt tokenize, 1k random tokens (per req)"
    } else {
        "prompt tokenize, 1k-token prose (per req)"
    };
    Row { name, ours_ns: ours, base_ns: base, target_ratio: 0.3 }
}

/// Validation of a parsed chat request (the OpenAI fields read, then every sampling range, stop
/// strings tokenized to find single-token stops): absolute, no baseline does the same work.
fn request_validation(model: &ModelAssets) -> f64 {
    let body = Body::parse(request_body().as_slice()).expect("parse");
    let reps = 200;
    let mut samples = Vec::new();
    for _ in 0..rounds() {
        let t = Instant::now();
        for _ in 0..reps {
            let read = sampling::read(&black_box(&body).fields(), Api::Chat).expect("well-formed");
            black_box(params::validate(read.request, model).expect("valid"));
        }
        samples.push(t.elapsed().as_nanos() as f64 / reps as f64);
    }
    median_ns(&mut samples)
}

/// The whole per-token gateway work after the engine frame is decoded: detokenize, stops,
/// holdback, the output event, and its SSE chunk. Absolute, against the paced-regime
/// budget.
fn whole_token(tok: &Tokenizer, prompt: &[u32], ids: &[u32]) -> f64 {
    let mut format = ChatFormat::new(
        "chatcmpl-0123456789abcdef".into(),
        1_764_460_800,
        "qwen3-demo".into(),
        false,
        None,
        Names::chat(false),
    );
    let opts = OutputOptions { stop: vec!["\n\nUser:".into()], ..Default::default() };
    let mut samples = Vec::new();
    for _ in 0..rounds() {
        let mut state = ChoiceState::new(0, tok, prompt, &opts);
        let mut out = SseOut::default();
        let t = Instant::now();
        for &id in ids {
            state.apply(tok, &opts, TokenEvent { token_ids: vec![id], ..Default::default() });
            let logprobs = std::mem::take(&mut state.pending_logprobs);
            let output = state.take_parsed_delta(&opts);
            out.clear();
            format.stream(&Event::Delta(Delta { choice: state.index, output, logprobs, usage: None }), &mut out);
            black_box(&out);
        }
        samples.push(t.elapsed().as_nanos() as f64 / ids.len() as f64);
    }
    median_ns(&mut samples)
}

fn main() {
    let model = common::demo_model();
    let tok = &model.tokenizer;
    let hf = &common::demo_reference_tokenizer();
    let prompt = tok
        .encode("<|im_start|>user\nTell me about gateways.<|im_end|>\n<|im_start|>assistant\n", false)
        .expect("encode");
    let ids = output_ids(tok);
    let mut d = IncrementalDecoder::new(tok, &prompt, true, true);
    let pieces: Vec<String> = ids.iter().map(|&id| d.step(tok, id)).collect();

    let [detok_naive, detok_stream] = detokenizing(tok, hf, &prompt, &ids);
    let rows = [
        decoding(),
        detok_naive,
        detok_stream,
        stop_matching(&pieces),
        chunk_encoding(&pieces),
        request_decoding(),
        // Prose first: `tokenizers` stops adding to its word cache once it holds 10,000 words,
        // so after the random prompts its prose words would never be cached.
        prompt_tokenizing(tok, hf, false),
        prompt_tokenizing(tok, hf, true),
    ];
    println!("{:<46} {:>11} {:>13} {:>7} {:>8}", "path", "ours ns", "baseline ns", "ratio", "target");
    let mut ok = true;
    for r in &rows {
        let ratio = r.ours_ns / r.base_ns;
        let pass = ratio <= r.target_ratio;
        ok &= pass;
        println!(
            "{:<46} {:>11.1} {:>13.1} {:>7.3} {:>7}{} {}",
            r.name,
            r.ours_ns,
            r.base_ns,
            ratio,
            "≤ ",
            r.target_ratio,
            if pass { "ok" } else { "MISSED" }
        );
    }
    println!(
        "{:<46} {:>11.1} {:>13} {:>7} {:>8} info",
        "chat request validation (per request)",
        request_validation(&model),
        "-",
        "-",
        "-"
    );
    let whole = whole_token(tok, &prompt, &ids);
    let pass = whole <= 2_000.0;
    ok &= pass;
    println!(
        "{:<46} {:>11.1} {:>13} {:>7} {:>8} {}",
        "one streamed token (apply + chunk)",
        whole,
        "-",
        "-",
        "≤ 2000",
        if pass { "ok" } else { "MISSED" }
    );
    println!("{}", if ok { "PASS" } else { "FAIL" });
    if !ok {
        std::process::exit(1);
    }
}
