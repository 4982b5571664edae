//! The TokenSpeed wire end to end with the simulator in TokenSpeed mode: one socket pair held by
//! an owner shard and every other shard relayed through it; chat and completions, streaming,
//! abort, engine death and reconnect, a 2-rank group with an engine-index base, SMG's
//! refusals, and a burst from all shards with nothing lost.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use common::{Gateway, Options};
use serde_json::{json, Value};

fn tokenspeed(shards: usize, gateway_args: &[&str], sim_args: &[&str]) -> Gateway {
    let mut g = vec!["--backend".to_string(), "tokenspeed".to_string()];
    g.extend(gateway_args.iter().map(|s| s.to_string()));
    let mut s = vec!["--backend".to_string(), "tokenspeed".to_string()];
    s.extend(sim_args.iter().map(|a| a.to_string()));
    Gateway::start_with(Options { gateway_args: g, sim_args: s, shards, ..Default::default() })
}

fn chat(stream: bool, max_tokens: u32) -> Value {
    json!({"model": "test-model", "messages": [{"role": "user", "content": "hello"}], "max_tokens": max_tokens,
           "stream": stream})
}

#[test]
fn chat_and_completions_stream_and_not_through_every_shard() {
    let g = tokenspeed(3, &[], &[]);
    // Enough requests that every shard (the owner and the relayed ones) serves some.
    for _ in 0..9 {
        let r = g.post_json("/v1/chat/completions", &chat(false, 5));
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        assert_eq!(v["usage"]["completion_tokens"], 5);
        let r = g.post_json("/v1/chat/completions", &chat(true, 4));
        let events = r.sse_json();
        let text: String = events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect();
        assert!(!text.is_empty());
        assert_eq!(events.iter().filter(|e| e["choices"][0]["finish_reason"] == "length").count(), 1);
    }
    let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "a b c", "max_tokens": 3, "n": 2}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["choices"].as_array().unwrap().len(), 2);
    let adds = g.adds();
    assert!(adds.iter().all(|a| a["backend"] == "tokenspeed" && a["n"] == 1), "n is 1 on the wire");
    // Request ids carry their shard ("...-{shard}.{seq}-{hex}").
    let shards: std::collections::BTreeSet<String> = adds
        .iter()
        .filter_map(|a| a["id"].as_str())
        .filter_map(|id| id.rsplit('-').nth(1)?.split('.').next().map(str::to_string))
        .collect();
    assert!(shards.len() > 1, "requests came from one shard only: {shards:?}");
}

#[test]
fn smgs_refusals_come_back_as_400() {
    let g = tokenspeed(2, &[], &[]);
    let r = g.post_json(
        "/v1/chat/completions",
        &json!({"model": "test-model", "messages": [{"role": "user", "content": "x"}], "logprobs": true,
                "top_logprobs": 2}),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["message"], "top_logprobs are not supported over the TokenSpeed ZMQ backend");
    let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "x", "logprobs": 3}));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["param"], "logprobs");
    // One sampled-token logprob is fine.
    let r = g.post_json(
        "/v1/completions",
        &json!({"model": "test-model", "prompt": "x", "logprobs": 1,
                                                   "max_tokens": 2}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(g.adds().iter().all(|a| a["top_logprobs_num"] == 0 || a["top_logprobs_num"].is_null()));
}

#[test]
fn a_client_that_leaves_is_aborted_on_the_engine() {
    let g = tokenspeed(2, &[], &["--itl-ms", "20", "--output-len", "5000"]);
    for _ in 0..4 {
        let before = g.adds().len();
        let mut s = g.connect();
        let body = json!({"model": "test-model", "prompt": "go", "max_tokens": 4000, "stream": true}).to_string();
        s.write_all(&common::raw_request("POST", "/v1/completions", Some(&body), &[], false)).unwrap();
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        while !line.starts_with("data: ") {
            line.clear();
            reader.read_line(&mut line).unwrap();
        }
        drop(reader);
        drop(s);
        common::eventually(|| g.adds().len() > before, "the ADD");
        let id = g.adds()[before]["id"].as_str().unwrap().to_string();
        common::eventually(|| g.aborted_ids().contains(&id), "the ABORT after the client left");
    }
    common::eventually(|| g.get("/workers").json()["workers"][0]["load"]["in_flight"] == 0, "nothing in flight");
}

#[test]
fn engine_death_fails_requests_and_a_restarted_engine_reconnects() {
    let mut g = tokenspeed(2, &[], &["--itl-ms", "20", "--output-len", "5000", "--fault", "die@2"]);
    let first = std::thread::scope(|s| {
        let slow = s.spawn(|| {
            g.post_json(
                "/v1/completions",
                &json!({"model": "test-model", "prompt": "a",
                                                                      "max_tokens": 3000}),
            )
        });
        common::eventually(|| g.adds().len() == 1, "the first ADD");
        // The second request kills the engine.
        let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "b", "max_tokens": 3}));
        assert!(r.status >= 500, "{}", r.text());
        slow.join().unwrap()
    });
    assert!(first.status >= 500, "{}", first.text());
    assert!(first.json()["error"]["message"].as_str().unwrap().contains("engine"));
    assert!(g.wait_sim_exit(Duration::from_secs(10)));
    g.wait_status("/readiness", 503, Duration::from_secs(10));
    g.start_sim();
    g.wait_ready(Duration::from_secs(30));
    let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "c", "max_tokens": 3}));
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn a_two_rank_group_with_an_engine_index_base_serves_on_both_ranks() {
    let g = tokenspeed(2, &["--zmq-engine-count", "2"], &["--data-parallel-size", "2", "--zmq-engine-index", "4"]);
    for i in 0..12 {
        let r = g.post_json(
            "/v1/completions",
            &json!({"model": "test-model", "prompt": format!("p{i}"),
                                                       "max_tokens": 3}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let mut ranks: Vec<u64> = g.adds().iter().map(|a| a["rank"].as_u64().unwrap()).collect();
    ranks.sort();
    ranks.dedup();
    assert_eq!(ranks, vec![0, 1], "both ranks served");
    let w = &g.get("/workers").json()["workers"][0];
    assert_eq!(w["runtime_type"], "tokenspeed");
    assert_eq!(w["load"]["ranks"].as_array().unwrap().len(), 2);
}

#[test]
fn a_burst_from_every_shard_through_the_owner_loses_nothing() {
    let g = tokenspeed(4, &[], &["--itl-ms", "2"]);
    let ok = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for c in 0..16 {
            let (g, ok) = (&g, &ok);
            s.spawn(move || {
                for i in 0..25 {
                    let stream = (c + i) % 2 == 0;
                    let body = json!({"model": "test-model", "prompt": format!("c{c} r{i}"), "max_tokens": 8,
                                      "stream": stream});
                    let r = g.post_json("/v1/completions", &body);
                    assert_eq!(r.status, 200, "{}", r.text());
                    if stream {
                        assert_eq!(r.sse().last().map(String::as_str), Some("[DONE]"));
                    } else {
                        assert_eq!(r.json()["usage"]["completion_tokens"], 8);
                    }
                    ok.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(ok.into_inner(), 400);
    common::eventually(|| g.adds().len() == 400, "400 ADDs recorded");
    common::eventually(|| g.get("/workers").json()["workers"][0]["load"]["in_flight"] == 0, "nothing in flight");
}

#[test]
fn the_eos_token_tokenspeed_sends_is_not_in_the_text() {
    let script = json!({"text": "Hello from TokenSpeed."}).to_string();
    let g = Gateway::start_with(Options {
        gateway_args: vec!["--backend".into(), "tokenspeed".into()],
        sim_args: vec!["--backend".into(), "tokenspeed".into()],
        script: Some(script),
        ..Default::default()
    });
    for stream in [false, true] {
        let r = g.post_json("/v1/chat/completions", &chat(stream, 50));
        assert_eq!(r.status, 200, "{}", r.text());
        let (text, finish) = if stream {
            let events = r.sse_json();
            let text: String = events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect();
            let finish = events.iter().find_map(|e| e["choices"][0]["finish_reason"].as_str().map(str::to_string));
            (text, finish.unwrap_or_default())
        } else {
            let v = r.json();
            let m = &v["choices"][0];
            (m["message"]["content"].as_str().unwrap().to_string(), m["finish_reason"].as_str().unwrap().to_string())
        };
        assert_eq!(text, "Hello from TokenSpeed.");
        assert_eq!(finish, "stop");
    }
}

#[test]
fn media_for_an_mrope_model_is_refused_with_smgs_text() {
    // The demo model, with a Qwen2-VL style rope_scaling.
    let dir =
        common::model_dir_with("mrope", &json!({"rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}));
    let g = Gateway::start_with(Options {
        gateway_args: vec!["--backend".into(), "tokenspeed".into()],
        sim_args: vec!["--backend".into(), "tokenspeed".into()],
        model_path: Some(dir.clone()),
        ..Default::default()
    });
    let image = json!({"model": "test-model", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "data:,"}}]}]});
    let r = g.post_json("/v1/chat/completions", &image);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["error"]["message"],
        "MRoPE position tensors are not derivable over the TokenSpeed ZMQ wire yet; use the gRPC transport for this model"
    );
    // Text alone is fine.
    assert_eq!(g.post_json("/v1/chat/completions", &chat(false, 2)).status, 200);
}
