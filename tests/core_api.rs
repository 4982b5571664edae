//! End to end through real sockets: shardgate-sim behind shardgate, OpenAI chat and
//! completions, streamed and not, checked byte for byte on the SSE framing.

mod common;

use common::{Gateway, Options};
use serde_json::{json, Value};

const SCRIPT_TEXT: &str = "Hello, wörld! 日本語のテキスト 🙂 and done.";

fn chat(content: &str, extra: Value) -> Value {
    let mut body = json!({"model": "test-model", "messages": [{"role": "user", "content": content}]});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    body
}

#[test]
fn chat_non_streaming_returns_the_engine_text_and_usage() {
    let g = Gateway::with_script(&[("", SCRIPT_TEXT)]);
    let r = g.post_json("/v1/chat/completions", &chat("hi", json!({})));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "test-model");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["message"]["content"], SCRIPT_TEXT);
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["choices"][0]["stop_reason"], Value::Null);
    let tok = common::tokenizer();
    let expected_completion = tok.encode(SCRIPT_TEXT, false).unwrap().len() as u64 + 1; // + EOS
    assert_eq!(v["usage"]["completion_tokens"], expected_completion);
    let adds = g.adds();
    assert_eq!(adds.len(), 1);
    assert_eq!(v["usage"]["prompt_tokens"], adds[0]["prompt_len"]);
    assert_eq!(
        v["usage"]["total_tokens"].as_u64().unwrap(),
        adds[0]["prompt_len"].as_u64().unwrap() + expected_completion
    );
    // EOS reaches the engine: the primary one as _eos_token_id, the generation-config extras
    // as stop token ids.
    assert_eq!(adds[0]["eos_token_id"], 151645);
    assert_eq!(adds[0]["stop_token_ids"], json!([151643]));
    // Default max_tokens = context - prompt.
    assert_eq!(adds[0]["max_tokens"].as_u64().unwrap(), 8192 - adds[0]["prompt_len"].as_u64().unwrap());
}

#[test]
fn chat_streaming_framing_and_content() {
    let g = Gateway::with_script(&[("", SCRIPT_TEXT)]);
    let r = g.post_json("/v1/chat/completions", &chat("hi", json!({"stream": true})));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert!(r.header("content-length").is_none());
    let events = r.sse_json();
    let id = events[0]["id"].as_str().unwrap().to_string();
    // Role chunk first, exactly once.
    assert_eq!(events[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
    assert_eq!(events.iter().filter(|e| e["choices"][0]["delta"].get("role").is_some()).count(), 1);
    let mut text = String::new();
    let mut finishes = 0;
    for e in &events {
        assert_eq!(e["id"], id.as_str());
        assert_eq!(e["object"], "chat.completion.chunk");
        assert!(e.get("usage").is_none(), "usage present without include_usage: {e}");
        let c = &e["choices"][0];
        if let Some(t) = c["delta"]["content"].as_str() {
            assert!(!t.contains('\u{FFFD}'), "broken UTF-8 reached the client: {t:?}");
            text.push_str(t);
        }
        if !c["finish_reason"].is_null() {
            finishes += 1;
            assert_eq!(c["finish_reason"], "stop");
            assert_eq!(c["delta"], json!({}));
        }
    }
    assert_eq!(finishes, 1);
    assert_eq!(text, SCRIPT_TEXT);
    // Every chunk of the body is one write: `<hex>\r\ndata: …\n\n…\r\n`, and the body ends
    // with the terminating chunk.
    assert!(
        r.raw_body.ends_with(b"data: [DONE]\n\n\r\n0\r\n\r\n"),
        "{:?}",
        String::from_utf8_lossy(&r.raw_body[r.raw_body.len().saturating_sub(40)..])
    );
}

#[test]
fn stream_usage_chunk_only_when_asked() {
    let g = Gateway::with_script(&[("", "a b c")]);
    let r = g.post_json(
        "/v1/chat/completions",
        &chat("hi", json!({"stream": true, "stream_options": {"include_usage": true}})),
    );
    let events = r.sse_json();
    let last = events.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert!(last["usage"]["completion_tokens"].as_u64().unwrap() >= 3);
    for e in &events[..events.len() - 1] {
        assert_eq!(e["usage"], Value::Null, "earlier chunks carry usage: null");
        assert_eq!(e["choices"].as_array().unwrap().len(), 1);
    }
}

#[test]
fn completions_prompt_forms() {
    let g = Gateway::with_script(&[("", "done")]);
    let tok = common::tokenizer();
    let ids = tok.encode("Say hi", true).unwrap();
    for prompt in [json!("Say hi"), json!(["Say hi"]), json!(ids.clone()), json!([ids.clone(), ids.clone()])] {
        let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": prompt, "max_tokens": 8}));
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        assert_eq!(v["object"], "text_completion");
        let n = if prompt.get(0).is_some_and(Value::is_array) { 2 } else { 1 };
        assert_eq!(v["choices"].as_array().unwrap().len(), n);
        for (i, c) in v["choices"].as_array().unwrap().iter().enumerate() {
            assert_eq!(c["index"], i);
            assert_eq!(c["text"], "done");
        }
        assert_eq!(v["usage"]["prompt_tokens"].as_u64().unwrap(), (ids.len() * n) as u64);
    }
    // Streaming completions: text pieces, one finish per choice, [DONE].
    let r = g.post_json(
        "/v1/completions",
        &json!({"model": "test-model", "prompt": "Say hi", "stream": true, "max_tokens": 8}),
    );
    let events = r.sse_json();
    let text: String = events.iter().filter_map(|e| e["choices"][0]["text"].as_str()).collect();
    assert_eq!(text, "done");
    assert_eq!(events.iter().filter(|e| !e["choices"][0]["finish_reason"].is_null()).count(), 1);
}

#[test]
fn stop_strings_are_trimmed_and_never_leak_into_a_stream() {
    let text = "alpha beta <END> gamma delta";
    let g = Gateway::with_script(&[("", text)]);
    for stream in [false, true] {
        let body = chat("x", json!({"stream": stream, "stop": ["<END>"]}));
        let r = g.post_json("/v1/chat/completions", &body);
        let (content, finish, stop_reason) = if stream {
            let events = r.sse_json();
            let mut content = String::new();
            for e in &events {
                if let Some(t) = e["choices"][0]["delta"]["content"].as_str() {
                    assert!(!t.contains('<'), "partial stop text leaked: {t:?}");
                    content.push_str(t);
                }
            }
            let fin = events.iter().find(|e| !e["choices"][0]["finish_reason"].is_null()).unwrap();
            (content, fin["choices"][0]["finish_reason"].clone(), fin["choices"][0]["stop_reason"].clone())
        } else {
            let v = r.json();
            let c = &v["choices"][0];
            (
                c["message"]["content"].as_str().unwrap().to_string(),
                c["finish_reason"].clone(),
                c["stop_reason"].clone(),
            )
        };
        assert_eq!(content, "alpha beta ");
        assert_eq!(finish, "stop");
        assert_eq!(stop_reason, "<END>");
    }
    // The engine was told to stop each request (it would have gone on generating).
    let ids: Vec<String> = g.adds().iter().map(|a| a["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 2);
    common::eventually(|| ids.iter().all(|id| g.aborted_ids().contains(id)), "an ABORT for every stopped request");
}

#[test]
fn stop_at_the_very_end_and_include_stop_str() {
    let g = Gateway::with_script(&[("", "one two END")]);
    let r =
        g.post_json("/v1/chat/completions", &chat("x", json!({"stop": ["END"], "include_stop_str_in_output": true})));
    let v = r.json();
    assert_eq!(v["choices"][0]["message"]["content"], "one two END");
    assert_eq!(v["choices"][0]["stop_reason"], "END");
    let r = g.post_json("/v1/chat/completions", &chat("x", json!({"stop": ["END"]})));
    assert_eq!(r.json()["choices"][0]["message"]["content"], "one two ");
}

#[test]
fn bad_parameters_get_400_and_never_reach_the_engine() {
    let g = Gateway::with_script(&[("", "ok")]);
    let cases: Vec<(Value, u16, Option<&str>)> = vec![
        (chat("x", json!({"top_p": 2.0})), 400, Some("top_p")),
        (chat("x", json!({"top_p": 0})), 400, Some("top_p")),
        (chat("x", json!({"temperature": -1})), 400, Some("temperature")),
        (chat("x", json!({"temperature": "hot"})), 400, Some("temperature")),
        (chat("x", json!({"n": 0})), 400, Some("n")),
        (chat("x", json!({"max_tokens": 0})), 400, Some("max_tokens")),
        (chat("x", json!({"min_tokens": 10, "max_tokens": 5})), 400, Some("min_tokens")),
        (chat("x", json!({"stop": [""]})), 400, Some("stop")),
        (chat("x", json!({"top_k": -5})), 400, Some("top_k")),
        (chat("x", json!({"logit_bias": {"99999999": 1}})), 400, Some("logit_bias")),
        (chat("x", json!({"stop_token_ids": [-1]})), 400, Some("stop_token_ids")),
        // Lists past their count limit (each was quadratic work on a shard's thread).
        (chat("x", json!({"stop_token_ids": vec![5; 4097]})), 400, Some("stop_token_ids")),
        (
            chat("x", json!({"bad_words": (0..4097).map(|i| format!("w{i}")).collect::<Vec<_>>()})),
            400,
            Some("bad_words"),
        ),
        (chat("x", json!({"bad_words": ["x".repeat(1025)]})), 400, Some("bad_words")),
        (chat("x", json!({"allowed_token_ids": vec![5; (1 << 20) + 1]})), 400, Some("allowed_token_ids")),
        (chat("x", json!({"stream_options": {"include_usage": true}})), 400, Some("stream_options")),
        (chat("x", json!({"presence_penalty": 5})), 400, Some("presence_penalty")),
        (chat("x", json!({"repetition_penalty": 0})), 400, Some("repetition_penalty")),
        (chat("x", json!({"top_logprobs": 3})), 400, Some("top_logprobs")),
        (chat("x", json!({"model": "other"})), 404, Some("model")),
        (json!({"model": "test-model", "messages": []}), 400, Some("messages")),
        (json!({"model": "test-model"}), 400, Some("messages")),
        (
            json!({"model": "test-model", "messages": [{"role": "user", "content": 3}]}),
            400,
            Some("messages.[0].content"),
        ),
    ];
    for (body, status, param) in &cases {
        let r = g.post_json("/v1/chat/completions", body);
        assert_eq!(r.status, *status, "{body} -> {}", r.text());
        let e = r.json();
        assert!(e["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{e}");
        assert!(e["error"]["type"].is_string());
        assert_eq!(e["error"]["param"].as_str(), *param, "{body} -> {e}");
    }
    let completion_cases = [
        json!({"model": "test-model", "prompt": [999999999]}),
        json!({"model": "test-model", "prompt": []}),
        json!({"model": "test-model", "prompt": "x", "suffix": "y"}),
        json!({"model": "test-model", "prompt": "x", "logprobs": 21}),
    ];
    for body in &completion_cases {
        let r = g.post_json("/v1/completions", body);
        assert_eq!(r.status, 400, "{body} -> {}", r.text());
    }
    assert!(g.adds().is_empty(), "a rejected request reached the engine: {:?}", g.adds());
    // And the engine is still fine.
    let r = g.post_json("/v1/chat/completions", &chat("x", json!({})));
    assert_eq!(r.status, 200);
}

#[test]
fn prompt_longer_than_the_context_is_400() {
    let g =
        Gateway::start_with(Options { sim_args: vec!["--max-model-len".into(), "64".into()], ..Default::default() });
    let long = "word ".repeat(200);
    let r = g.post_json("/v1/chat/completions", &chat(&long, json!({})));
    assert_eq!(r.status, 400);
    let e = r.json();
    assert!(
        e["error"]["message"].as_str().unwrap().starts_with("This model's maximum context length is 64 tokens"),
        "{e}"
    );
    assert_eq!(e["error"]["code"], "context_length_exceeded");
    // An output bound the window holds is clamped to what the prompt leaves of it.
    let r = g.post_json(
        "/v1/completions",
        &json!({"model": "test-model", "prompt": "hi", "max_tokens": 64, "ignore_eos": true}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let add = g.adds().pop().unwrap();
    assert_eq!(add["max_tokens"].as_u64().unwrap() + add["prompt_len"].as_u64().unwrap(), 64);
    // One it cannot hold is refused (as `vllm serve` does), streamed or not, before any byte of
    // a stream and before anything reaches the engine.
    let sent = g.adds().len();
    let over = [
        ("/v1/completions", json!({"prompt": "hi", "max_tokens": 65}), "max_tokens", 65_i64),
        ("/v1/completions", json!({"prompt": "hi", "max_tokens": 1000, "stream": true}), "max_tokens", 1000),
        ("/v1/chat/completions", chat("hi", json!({"max_tokens": 65})), "max_tokens", 65),
        ("/v1/chat/completions", chat("hi", json!({"max_tokens": 65, "stream": true})), "max_tokens", 65),
        (
            "/v1/chat/completions",
            chat("hi", json!({"max_completion_tokens": 10_000_000_000_i64})),
            "max_completion_tokens",
            10_000_000_000_i64,
        ),
    ];
    for (path, mut body, param, value) in over {
        body["model"] = json!("test-model");
        let r = g.post_json(path, &body);
        assert_eq!(r.status, 400, "{body} -> {}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"));
        let e = r.json();
        assert_eq!(
            e["error"]["message"],
            format!(
                "{param}={value} cannot be greater than max_model_len=64. Please request fewer output tokens. \
                 (parameter={param}, value={value})"
            )
        );
        assert_eq!(e["error"]["param"], param);
    }
    assert_eq!(g.adds().len(), sent, "a refused request reached the engine");
}

#[test]
fn n_samples_get_distinct_seeds_and_indexes() {
    let g = Gateway::start();
    let r = g
        .post_json("/v1/chat/completions", &chat("x", json!({"n": 3, "seed": 7, "max_tokens": 6, "temperature": 0.8})));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3);
    let mut seeds: Vec<i64> = g.adds().iter().map(|a| a["seed"].as_i64().unwrap()).collect();
    seeds.sort();
    assert_eq!(seeds, vec![7, 8, 9]);
    assert_eq!(v["usage"]["completion_tokens"], 18);
    let r =
        g.post_json("/v1/chat/completions", &chat("x", json!({"n": 2, "seed": 1, "max_tokens": 4, "stream": true})));
    let events = r.sse_json();
    for idx in 0..2 {
        let mine: Vec<&Value> = events.iter().filter(|e| e["choices"][0]["index"] == idx).collect();
        assert_eq!(mine.iter().filter(|e| e["choices"][0]["delta"].get("role").is_some()).count(), 1);
        assert_eq!(mine.iter().filter(|e| !e["choices"][0]["finish_reason"].is_null()).count(), 1);
    }
}

#[test]
fn models_health_tokenize() {
    let g = Gateway::start();
    assert_eq!(g.get("/health").status, 200);
    assert_eq!(g.get("/liveness").status, 200);
    assert_eq!(g.get("/readiness").status, 200);
    let m = g.get("/v1/models").json();
    assert_eq!(m["object"], "list");
    assert_eq!(m["data"][0]["id"], "test-model");
    assert_eq!(m["data"][0]["max_model_len"], 8192);
    assert_eq!(g.get("/v1/models/test-model").json()["id"], "test-model");
    assert_eq!(g.get("/v1/models/nope").status, 404);
    let t = g.post_json("/v1/tokenize", &json!({"model": "test-model", "prompt": "Hello world"})).json();
    let tok = common::tokenizer();
    let ids = tok.encode("Hello world", true).unwrap();
    assert_eq!(t["tokens"], json!(ids));
    assert_eq!(t["count"], ids.len());
    let d = g.post_json("/v1/detokenize", &json!({"model": "test-model", "tokens": ids})).json();
    assert_eq!(d["prompt"], "Hello world");
    let e = g.post_json("/v1/embeddings", &json!({"model": "test-model", "input": "x"}));
    assert_eq!(e.status, 501);
    assert_eq!(e.json()["error"]["code"], "unsupported_backend");
    assert_eq!(e.json()["error"]["message"], "ZMQ backend does not support embeddings yet");
}

#[test]
fn large_bodies_arrive_whole() {
    // Bodies far above one read's worth: the read buffer must append, never overwrite.
    let g = Gateway::start_with(Options {
        sim_args: vec!["--max-model-len".into(), "200000".into()],
        ..Default::default()
    });
    let long = "lorem ipsum dolor sit amet ".repeat(8000); // ~216 KB of JSON
    let r = g.post_json("/v1/tokenize", &json!({"model": "test-model", "prompt": long}));
    assert_eq!(r.status, 200, "{}", r.text());
    let expected = common::tokenizer().encode(&long, true).unwrap().len();
    assert_eq!(r.json()["count"], expected);
    let r = g.post_json("/v1/chat/completions", &chat(&long, json!({"max_tokens": 2})));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["usage"]["prompt_tokens"].as_u64().unwrap() > expected as u64);
}

#[test]
fn tokenizer_caches_change_nothing_end_to_end() {
    let cached = Gateway::start_with(Options {
        gateway_args: vec!["--tokenizer-cache-enable-l0".into(), "--tokenizer-cache-enable-l1".into()],
        ..Default::default()
    });
    let plain = Gateway::start();
    let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
    for turn in 0..4 {
        messages.push(json!({"role": "user", "content": format!("turn {turn}: how are you? 日本語")}));
        for _ in 0..2 {
            let body = json!({"model": "test-model", "messages": messages, "max_tokens": 4, "temperature": 0});
            let a = cached.post_json("/v1/chat/completions", &body).json();
            let b = plain.post_json("/v1/chat/completions", &body).json();
            assert_eq!(a["usage"]["prompt_tokens"], b["usage"]["prompt_tokens"]);
            assert_eq!(a["choices"][0]["message"]["content"], b["choices"][0]["message"]["content"]);
        }
        messages.push(json!({"role": "assistant", "content": "fine"}));
    }
    let prompts = |g: &Gateway| g.adds().iter().map(|a| a["prompt_len"].clone()).collect::<Vec<_>>();
    assert_eq!(prompts(&cached), prompts(&plain));
}

#[test]
fn completions_echo_with_logprobs_covers_the_prompt() {
    let g = Gateway::with_script(&[("", "done here")]);
    let body = json!({"model": "test-model", "prompt": "Say it twice", "max_tokens": 3, "echo": true, "logprobs": 1});
    let v = g.post_json("/v1/completions", &body).json();
    let text = v["choices"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Say it twice"), "{text}");
    let lp = &v["choices"][0]["logprobs"];
    // Prompt tokens then generated ones; the first prompt token is unscored (null).
    let prompt_len = g.adds()[0]["prompt_len"].as_u64().unwrap() as usize;
    assert_eq!(lp["tokens"].as_array().unwrap().len(), prompt_len + 3);
    assert_eq!(lp["token_logprobs"][0], Value::Null);
    assert!(lp["token_logprobs"][1].is_number());
    assert_eq!(lp["top_logprobs"][0], Value::Null);
    assert_eq!(lp["text_offset"][0], 0);
    // Streaming: the prompt goes out with the first chunk.
    let mut stream_body = body.clone();
    stream_body["stream"] = json!(true);
    let events = g.post_json("/v1/completions", &stream_body).sse_json();
    let first = events[0]["choices"][0]["text"].as_str().unwrap();
    assert!(first.starts_with("Say it twice"), "{first}");
    let all: String = events.iter().filter_map(|e| e["choices"][0]["text"].as_str()).collect();
    assert_eq!(all, text);
}

#[test]
fn malformed_bodies_are_refused_and_unknown_fields_ignored() {
    let g = Gateway::with_script(&[("", "ok")]);
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let invalid_utf8 = "{\"model\": \"test-model\", \"prompt\": \"\u{FFFD}\"}".replace('\u{FFFD}', "\\udc80");
    let cases: Vec<(String, &str)> = vec![
        ("{\"model\": \"test-model\", \"prompt\": ".to_string(), "invalid JSON"),
        (format!("{{\"model\": \"test-model\", \"prompt\": \"x\", \"deep\": {deep}}}"), "nest"),
        ("[1, 2, 3]".to_string(), "object"),
        // Not an object and deep: the depth limit still holds on the way to saying so.
        ("[".repeat(100_000), "nest"),
        (invalid_utf8, "surrogate"),
        ("{\"model\": \"test-model\", \"prompt\": \"x\", \"n\": 100000}".to_string(), "n must be at most"),
        // Above the context is clamped as vLLM does; below 1 is refused.
        ("{\"model\": \"test-model\", \"prompt\": \"x\", \"max_tokens\": -1}".to_string(), "max_tokens"),
    ];
    for (body, hint) in &cases {
        let r = g.post("/v1/completions", body);
        assert_eq!(r.status, 400, "{hint}: {}", r.text());
        let message = r.json()["error"]["message"].as_str().unwrap().to_lowercase();
        assert!(message.contains(&hint.to_lowercase()), "{hint}: {message}");
    }
    // Raw bytes that are not UTF-8 at all.
    let mut raw = b"{\"model\": \"test-model\", \"prompt\": \"".to_vec();
    raw.extend_from_slice(&[0xff, 0xfe]);
    raw.extend_from_slice(b"\"}");
    let mut s = g.connect();
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        raw.len()
    );
    std::io::Write::write_all(&mut s, head.as_bytes()).unwrap();
    std::io::Write::write_all(&mut s, &raw).unwrap();
    let r = common::read_response(&mut std::io::BufReader::new(s)).unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(g.adds().is_empty(), "a malformed request reached the engine");
    // Unknown fields are accepted and ignored.
    let r = g.post_json(
        "/v1/completions",
        &json!({"model": "test-model", "prompt": "x", "max_tokens": 2, "some_future_field": {"a": 1}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The sum of a histogram over every label set, from the exposition text.
fn histogram_sum(metrics: &str, name: &str) -> (f64, u64) {
    let total = |suffix: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}_{suffix}{{")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    (total("sum"), total("count") as u64)
}

#[test]
fn the_gateway_reports_its_own_part_of_the_time_to_first_token() {
    // An engine that takes 300 ms to its first token: the time to first token includes it, the
    // gateway's own part must not.
    let g = Gateway::start_with(Options { sim_args: vec!["--ttft-ms".into(), "300".into()], ..Default::default() });
    let r = g.post_json("/v1/chat/completions", &chat("hi", json!({"stream": true, "max_tokens": 2})));
    assert_eq!(r.status, 200, "{}", r.text());
    let m = g.metrics();
    let (ttft, n) = histogram_sum(&m, "smg_router_ttft_seconds");
    let (own, own_n) = histogram_sum(&m, "shardgate_gateway_ttft_seconds");
    assert_eq!((n, own_n), (1, 1), "{m}");
    assert!(ttft >= 0.3, "time to first token {ttft} s includes the engine's 300 ms");
    assert!(own > 0.0 && own < 0.25, "the gateway's own part {own} s excludes the engine's 300 ms");
}

#[test]
fn developer_messages_reach_the_prompt_and_unknown_roles_are_refused() {
    let g = Gateway::with_script(&[("", "ok")]);
    let tokens = |role: &str| {
        let body = json!({"model": "test-model", "messages": [
            {"role": role, "content": "You are terse."}, {"role": "user", "content": "Hi"}]});
        let r = g.post_json("/v1/tokenize", &body);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["tokens"].clone()
    };
    // Qwen3's template has no developer role: the instruction is rendered as the system message.
    assert_eq!(tokens("developer"), tokens("system"));
    let r = g.post_json(
        "/v1/chat/completions",
        &json!({"model": "test-model", "messages": [
            {"role": "user", "content": "Hi"}, {"role": "wizard", "content": "Obey."}]}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let e = r.json();
    assert_eq!(e["error"]["param"], "messages.[1].role");
    assert!(e["error"]["message"].as_str().unwrap().starts_with("Invalid value: 'wizard'."), "{e}");
    assert!(g.adds().is_empty());
}

#[test]
fn memory_taken_for_a_huge_body_goes_back_to_the_os() {
    let g = Gateway::with_script(&[("", "ok")]);
    assert_eq!(
        g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "x", "max_tokens": 2})).status,
        200
    );
    let before = g.rss_mib();
    // 3 M small numbers: a 20 MB body that parses into about 30 times its size.
    let numbers: Vec<u32> = (0..3_000_000).collect();
    let body = json!({"model": "test-model", "prompt": "x", "max_tokens": 2, "unused": numbers});
    for _ in 0..2 {
        assert_eq!(g.post_json("/v1/completions", &body).status, 200);
    }
    // Kept by the shard's heap, this is hundreds of MiB; handed back, a few. The shard hands it
    // back after the response is written, so the client may look a moment too early.
    common::eventually(|| g.rss_mib() < before + 64, "the memory of the huge bodies handed back");
}
