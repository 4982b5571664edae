//! Request JSON as `/v1/chat/completions` and `/v1/completions` take it: `Body::parse`, the
//! shared fields read (`api::openai::sampling::read`) and validated (`pipeline::params::validate`)
//! for both endpoints, and the chat prompt (`render_prompt`:
//! conversation normalisation, tools, thinking switches, the Qwen3 chat template, then the
//! tokenizer).
//!
//! Inputs starting with `{` (or whitespace) are raw bodies; anything else is turned into a
//! request object by `arbitrary` from the fields the endpoints read, so the fuzzer gets past
//! JSON syntax into validation.
//!
//! Oracles:
//! - sonic-rs (what the gateway parses with) and serde_json agree on every body both accept.
//! - Errors are client errors (400), never a panic or a 5xx.
//! - Whatever validation accepts is safe for an engine (the reason validation exists: one bad
//!   ADD kills a vLLM engine's input thread): every range vLLM's `_verify_args` checks, every
//!   token id inside the vocabulary, stop strings non-empty, bounded and distinct.
//! - The accepted parameters encode to a well-formed ADD for both wires (vLLM always;
//!   TokenSpeed unless its own check refuses them), readable to the end by the msgpack reader.

use crate::model;
use arbitrary::Unstructured;
use serde_json::{json, Map, Value};
use shardgate::api::fields::Body;
use shardgate::api::invalid::Names;
use shardgate::api::openai::chat::render_prompt;
use shardgate::api::openai::sampling::{self, Api};
use shardgate::limits;
use shardgate::pipeline::params::{self, RequestParams};
use shardgate_text::render::RenderedPrompt;
use shardgate_wire::msgpack::Reader;
use shardgate_wire::EngineRequest;
use shardgate_wire::{tokenspeed, vllm};

/// Longest prompt text handed to the tokenizer: the template can multiply a small body, and
/// tokenizing megabytes would only slow the fuzzer down.
const PROMPT_BYTES_MAX: usize = 64 * 1024;

/// One input: panics (an oracle failed) or returns.
pub fn run(data: &[u8]) {
    let body: Vec<u8> = match data.first() {
        None => Vec::new(),
        Some(b'{' | b' ' | b'\t' | b'\n' | b'\r' | b'[' | b'"') => data.to_vec(),
        Some(_) => {
            let mut u = Unstructured::new(&data[1..]);
            match request_object(&mut u) {
                Ok(v) => serde_json::to_vec(&v).expect("a Value serialises"),
                Err(_) => return,
            }
        }
    };
    check_body(&body);
}

fn check_body(body: &[u8]) {
    let parsed = match Body::parse(body) {
        Ok(v) => v,
        Err(e) => {
            assert_eq!(e.status, 400, "Body::parse: {}", e.message);
            return;
        }
    };
    // Differential: serde_json is the reference JSON reader. A depth error there is its own
    // recursion limit (the same 128 sonic-rs enforces), not a disagreement. The body's object
    // (the last of duplicate keys wins) must be serde_json's.
    if let Ok(reference) = serde_json::from_slice::<Value>(body) {
        assert_eq!(Value::Object(parsed.to_object()), reference, "sonic-rs and serde_json read the body differently");
    }
    let f = parsed.fields();
    let m = model();
    for (api, names) in
        [(Api::Chat, Names::chat(f.has("max_completion_tokens"))), (Api::Completion, Names::COMPLETIONS)]
    {
        let validated = sampling::read(&f, api)
            .and_then(|read| params::validate(read.request, &m.assets).map_err(|e| names.invalid(e)));
        match validated {
            Ok(p) => check_params(&p, api),
            Err(e) => assert_eq!(e.status, 400, "{api:?} request values: {}", e.message),
        }
    }
    // The demo model takes no images: an image part must be a 400 naming the model.
    let no_vision: shardgate::media::VisionSupport = Err("the fuzz model has no vision tower".into());
    let mut media = shardgate::media::Collector::new(&no_vision, "fuzz");
    match render_prompt(&m.assets, &m.renderer, &f, &mut media) {
        Ok(chat) => {
            let RenderedPrompt::Text(prompt) = &chat.prompt else {
                panic!("the demo model's prompt is a chat template's text")
            };
            if prompt.len() <= PROMPT_BYTES_MAX {
                let ids = m.assets.tokenizer.encode(prompt, false).expect("tokenizing a rendered prompt");
                assert!(ids.iter().all(|&id| (id as usize) < m.assets.vocab_size), "prompt ids in vocabulary");
            }
        }
        Err(e) => assert_eq!(e.status, 400, "render_prompt: {}", e.message),
    }
    // Token-id prompts as `/v1/completions` takes them: in-vocabulary ids decode (echo) even
    // where the tokenizer has no token for an id (the config's vocabulary is padded).
    if let Some(Value::Array(items)) = f.get("prompt") {
        let ids: Vec<u32> = items
            .iter()
            .filter_map(Value::as_u64)
            .filter(|&id| id < m.assets.vocab_size as u64)
            .map(|id| id as u32)
            .collect();
        let _ = m.assets.tokenizer.decode(&ids, false);
        let _ = m.assets.tokenizer.decode(&ids, true);
    }
}

fn check_params(p: &RequestParams, api: Api) {
    let vocab = model().assets.vocab_size;
    let s = &p.sampling;
    assert!(p.n >= 1 && p.n <= limits::choices_per_request_max, "n {}", p.n);
    assert!(s.temperature.is_finite() && (0.0..=2.0).contains(&s.temperature), "temperature {}", s.temperature);
    assert!(s.top_p > 0.0 && s.top_p <= 1.0, "top_p {}", s.top_p);
    assert!(s.top_k >= -1, "top_k {}", s.top_k);
    assert!((0.0..=1.0).contains(&s.min_p), "min_p {}", s.min_p);
    assert!((-2.0..=2.0).contains(&s.presence_penalty), "presence_penalty {}", s.presence_penalty);
    assert!((-2.0..=2.0).contains(&s.frequency_penalty), "frequency_penalty {}", s.frequency_penalty);
    assert!(s.repetition_penalty.is_finite() && s.repetition_penalty > 0.0, "rep {}", s.repetition_penalty);
    let in_vocab = |ids: &[u32], what: &str| {
        for &id in ids {
            assert!((id as usize) < vocab, "{what}: id {id} outside the vocabulary of {vocab}");
        }
    };
    in_vocab(&s.stop_token_ids, "stop_token_ids");
    in_vocab(&s.all_stop_token_ids, "all_stop_token_ids");
    in_vocab(s.eos_token_id.as_slice(), "eos_token_id");
    if let Some(a) = &s.allowed_token_ids {
        assert!(!a.is_empty(), "allowed_token_ids empty");
        in_vocab(a, "allowed_token_ids");
    }
    for word in &s.bad_words_token_ids {
        assert!(!word.is_empty(), "empty bad word");
        in_vocab(word, "bad_words");
    }
    for &(id, bias) in &s.logit_bias {
        in_vocab(&[id], "logit_bias");
        assert!((-100.0..=100.0).contains(&bias), "logit_bias {bias}");
    }
    for k in [s.logprobs, s.prompt_logprobs].into_iter().flatten() {
        assert!((0..=limits::logprobs_max as i32).contains(&k), "logprobs {k}");
    }
    if api == Api::Chat {
        assert!(s.prompt_logprobs.is_none(), "chat never asks for prompt logprobs");
    }
    if let Some(max) = p.max_tokens_requested {
        assert!(max >= 1, "max_tokens {max}");
        assert!(s.min_tokens <= max, "min_tokens {} > max_tokens {max}", s.min_tokens);
    }
    let o = &p.output;
    assert!(o.stop.len() <= limits::stop_strings_max, "{} stop strings", o.stop.len());
    for (i, stop) in o.stop.iter().enumerate() {
        assert!(!stop.is_empty() && stop.len() <= limits::stop_string_bytes_max, "stop {stop:?}");
        assert!(!o.stop[..i].contains(stop), "duplicate stop {stop:?}");
    }
    for &(id, i) in &o.stop_string_tokens {
        assert!(i < o.stop.len(), "stop_string_tokens index {i}");
        assert!(s.stop_token_ids.contains(&id), "single-token stop {id} is sent as a stop token id");
    }
    assert_eq!(o.min_tokens, s.min_tokens);
    assert_eq!(o.logprobs.map(|k| k as i32), s.logprobs);

    // The engine request as `pipeline::generate` builds it.
    let mut sampling = s.clone();
    sampling.max_tokens = params::resolve_max_tokens(p.max_tokens_requested, 8192, 7);
    let req = EngineRequest {
        request_id: "cmpl-fuzz-0-0".to_string(),
        prompt_token_ids: std::rc::Rc::from(vec![1u32, 2, 3, 4, 5, 6, 7]),
        sampling,
        arrival_time: 1_700_000_000.5,
        cache_salt: p.cache_salt.clone(),
        priority: p.priority,
        mm_features: Default::default(),
    };
    let mut add = Vec::new();
    vllm::request::encode_add(&req, 0, &mut add, &mut Vec::new());
    check_add(&add, 22, "vLLM ADD");
    let mut add = Vec::new();
    match tokenspeed::request::encode_add(&req, p.stream, &mut add) {
        Ok(()) => check_add(&add, 0, "TokenSpeed ADD"),
        Err(_) => assert!(add.is_empty(), "a refused TokenSpeed ADD writes nothing"),
    }
}

/// An ADD is one msgpack array (of `fields` elements when given) with nothing after it.
fn check_add(bytes: &[u8], fields: usize, what: &str) {
    let mut r = Reader::new(bytes);
    let n = r.array_len().unwrap_or_else(|e| panic!("{what}: {e}"));
    if fields > 0 {
        assert_eq!(n, fields, "{what} fields");
    }
    for i in 0..n {
        r.skip().unwrap_or_else(|e| panic!("{what} field {i}: {e}"));
    }
    assert!(r.is_at_end(), "{what}: {} trailing bytes", bytes.len() - r.position());
}

// ---------------------------------------------------------------------------------------------
// Structured requests: the fields the endpoints read, each usually well-typed.

fn request_object(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    let mut obj = Map::new();
    if u.ratio(7u8, 8u8)? {
        obj.insert("model".into(), if u.ratio(7u8, 8u8)? { json!("qwen3-demo") } else { any_value(u, 0)? });
    }
    if u.ratio(3u8, 4u8)? {
        obj.insert("messages".into(), messages(u)?);
    } else if u.ratio(1u8, 2u8)? {
        obj.insert("prompt".into(), prompt(u)?);
    }
    let extra = u.int_in_range(0..=8u8)?;
    for _ in 0..extra {
        let (key, value) = field(u)?;
        obj.insert(key.to_string(), value);
    }
    Ok(Value::Object(obj))
}

fn field(u: &mut Unstructured<'_>) -> arbitrary::Result<(&'static str, Value)> {
    const NUMBERS: &[&str] =
        &["temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"];
    const INTS: &[&str] = &[
        "n",
        "best_of",
        "top_k",
        "seed",
        "min_tokens",
        "max_tokens",
        "max_completion_tokens",
        "top_logprobs",
        "priority",
        "logprobs",
        "prompt_logprobs",
    ];
    const BOOLS: &[&str] = &[
        "stream",
        "use_beam_search",
        "ignore_eos",
        "include_stop_str_in_output",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "echo",
        "logprobs",
        "add_generation_prompt",
        "continue_final_message",
        "separate_reasoning",
    ];
    const ID_LISTS: &[&str] = &["stop_token_ids", "allowed_token_ids"];
    const STRINGS: &[&str] = &["cache_salt", "reasoning_effort", "suffix"];
    Ok(match u.int_in_range(0..=11u8)? {
        0 => (*u.choose(NUMBERS)?, number(u)?),
        1 => (*u.choose(INTS)?, integer(u)?),
        2 => (*u.choose(BOOLS)?, json!(u.arbitrary::<bool>()?)),
        3 => (
            *u.choose(ID_LISTS)?,
            Value::Array((0..u.int_in_range(0..=4u8)?).map(|_| token_id(u)).collect::<Result<_, _>>()?),
        ),
        4 => ("stop", strings(u)?),
        5 => ("bad_words", strings(u)?),
        6 => (*u.choose(STRINGS)?, json!(text(u)?)),
        7 => ("logit_bias", {
            let mut m = Map::new();
            for _ in 0..u.int_in_range(0..=3u8)? {
                let key = if u.ratio(3u8, 4u8)? { token_id(u)?.to_string() } else { text(u)? };
                m.insert(key, number(u)?);
            }
            Value::Object(m)
        }),
        8 => ("tools", tools(u)?),
        9 => ("tool_choice", tool_choice(u)?),
        10 => {
            let key = *u.choose(&["chat_template_kwargs", "stream_options", "thinking", "response_format"])?;
            let mut m = Map::new();
            for _ in 0..u.int_in_range(0..=2u8)? {
                let k = *u.choose(&[
                    "enable_thinking",
                    "thinking",
                    "type",
                    "effort",
                    "include_usage",
                    "continuous_usage_stats",
                    "tools",
                ])?;
                let v = match u.int_in_range(0..=2u8)? {
                    0 => json!(u.arbitrary::<bool>()?),
                    1 => json!(*u.choose(&["enabled", "disabled", "text", "json_object", "low", "none"])?),
                    _ => any_value(u, 1)?,
                };
                m.insert(k.into(), v);
            }
            (key, Value::Object(m))
        }
        _ => (*u.choose(&["documents", "response_format", "messages", "prompt"])?, any_value(u, 0)?),
    })
}

fn messages(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    let n = u.int_in_range(0..=5u8)?;
    let mut list = Vec::with_capacity(n as usize);
    for _ in 0..n {
        if u.ratio(1u8, 20u8)? {
            list.push(any_value(u, 1)?);
            continue;
        }
        let role = *u.choose(&["system", "user", "assistant", "tool", "developer", "function", ""])?;
        let mut m = Map::new();
        m.insert("role".into(), json!(role));
        let content = match u.int_in_range(0..=4u8)? {
            0 => Value::Null,
            1 | 2 => json!(text(u)?),
            3 => {
                let parts = (0..u.int_in_range(0..=3u8)?)
                    .map(|_| Ok(json!({"type": *u.choose(&["text", "image_url", "input_text"])?, "text": text(u)?})))
                    .collect::<arbitrary::Result<Vec<_>>>()?;
                Value::Array(parts)
            }
            _ => any_value(u, 1)?,
        };
        m.insert("content".into(), content);
        if role == "assistant" && u.ratio(1u8, 3u8)? {
            let calls = (0..u.int_in_range(0..=2u8)?)
                .map(|_| {
                    let arguments =
                        if u.ratio(3u8, 4u8)? { json!(r#"{"city": "Paris", "n": 2}"#) } else { json!(text(u)?) };
                    Ok(json!({
                        "id": text(u)?,
                        "type": "function",
                        "function": {"name": name(u)?, "arguments": arguments},
                    }))
                })
                .collect::<arbitrary::Result<Vec<_>>>()?;
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        if u.ratio(1u8, 6u8)? {
            let key = *u.choose(&["reasoning", "reasoning_content", "name", "tool_call_id", "refusal"])?;
            m.insert(key.into(), if u.ratio(3u8, 4u8)? { json!(text(u)?) } else { any_value(u, 1)? });
        }
        list.push(Value::Object(m));
    }
    Ok(Value::Array(list))
}

fn prompt(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 => json!(text(u)?),
        1 => Value::Array((0..u.int_in_range(0..=3u8)?).map(|_| text(u).map(Value::from)).collect::<Result<_, _>>()?),
        2 => Value::Array((0..u.int_in_range(0..=8u8)?).map(|_| token_id(u)).collect::<Result<_, _>>()?),
        _ => any_value(u, 0)?,
    })
}

fn tools(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    let list = (0..u.int_in_range(0..=3u8)?)
        .map(|_| {
            let parameters = match u.int_in_range(0..=3u8)? {
                0 => Value::Null,
                1 => json!({"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}}),
                2 => json!({"type": "object", "properties": {}}),
                _ => any_value(u, 2)?,
            };
            Ok(json!({
                "type": *u.choose(&["function", "function", "function", "code_interpreter"])?,
                "function": {"name": name(u)?, "description": text(u)?, "parameters": parameters},
            }))
        })
        .collect::<arbitrary::Result<Vec<_>>>()?;
    Ok(Value::Array(list))
}

fn tool_choice(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 => json!(*u.choose(&["none", "auto", "required", "any"])?),
        1 => json!({"type": "function", "function": {"name": name(u)?}}),
        2 => {
            json!({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "function": {"name": name(u)?}}]})
        }
        _ => any_value(u, 1)?,
    })
}

fn name(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    if u.ratio(3u8, 4u8)? {
        Ok((*u.choose(&["get_weather", "search", "f", ""])?).to_string())
    } else {
        text(u)
    }
}

/// Text, often containing the template's and parsers' markers.
fn text(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    const PIECES: &[&str] = &[
        "Hello",
        " world",
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<|im_start|>",
        "<|im_end|>",
        "<|endoftext|>",
        "{{",
        "}}",
        "{%",
        "\n",
        "日本語",
        "🎉",
        "\u{FFFD}",
        "\"",
        "\\",
    ];
    let mut s = String::new();
    for _ in 0..u.int_in_range(0..=4u8)? {
        if u.ratio(1u8, 2u8)? {
            s.push_str(u.choose(PIECES)?);
        } else {
            s.push_str(u.arbitrary::<&str>()?);
        }
    }
    Ok(s)
}

fn strings(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 => json!(text(u)?),
        1 | 2 => {
            Value::Array((0..u.int_in_range(0..=4u8)?).map(|_| text(u).map(Value::from)).collect::<Result<_, _>>()?)
        }
        _ => any_value(u, 1)?,
    })
}

fn token_id(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    let vocab = model().assets.vocab_size as i64;
    Ok(match u.int_in_range(0..=5u8)? {
        0..=2 => json!(u.int_in_range(0..=vocab - 1)?),
        3 => json!(*u.choose(&[vocab - 1, vocab, -1, 151643, 151645, 151668, u32::MAX as i64 + 1])?),
        4 => json!(u.arbitrary::<i64>()?),
        _ => json!(u.arbitrary::<f64>()?),
    })
}

fn integer(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0..=5u8)? {
        0..=2 => json!(u.int_in_range(-2..=200i64)?),
        3 => json!(*u.choose(&[i32::MAX as i64, i32::MIN as i64, u32::MAX as i64, i64::MAX, i64::MIN])?),
        4 => number(u)?,
        _ => json!(u.arbitrary::<u64>()?),
    })
}

fn number(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0..=4u8)? {
        0..=1 => json!(u.int_in_range(-300..=300i32)? as f64 / 100.0),
        2 => json!(*u.choose(&[0.0, -0.0, 1.0, 2.0, 1e-300, 5e-324, 1e300, f64::MAX, 9.2e18, 9.3e18])?),
        3 => json!(u.int_in_range(-3..=3i64)?),
        _ => serde_json::Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
    })
}

/// Any JSON value, for a field of the wrong type.
fn any_value(u: &mut Unstructured<'_>, depth: u8) -> arbitrary::Result<Value> {
    let kinds = if depth >= 3 { 5 } else { 7 };
    Ok(match u.int_in_range(0..=kinds - 1)? {
        0 => Value::Null,
        1 => json!(u.arbitrary::<bool>()?),
        2 => integer(u)?,
        3 => number(u)?,
        4 => json!(text(u)?),
        5 => Value::Array((0..u.int_in_range(0..=3u8)?).map(|_| any_value(u, depth + 1)).collect::<Result<_, _>>()?),
        _ => {
            let mut m = Map::new();
            for _ in 0..u.int_in_range(0..=3u8)? {
                m.insert(text(u)?, any_value(u, depth + 1)?);
            }
            Value::Object(m)
        }
    })
}
