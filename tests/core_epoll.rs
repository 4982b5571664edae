//! The same gateway on monoio's epoll driver (what runs where io_uring is blocked, as under
//! default container seccomp profiles): ZMQ readiness, streaming, client-gone detection and
//! engine loss must all work there too.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use common::{Gateway, Options};
use serde_json::json;

fn epoll(script: &str, sim_args: &[&str]) -> Gateway {
    Gateway::start_with(Options {
        gateway_env: vec![("MONOIO_FORCE_LEGACY_DRIVER".into(), "1".into())],
        script: Some(json!({"text": script}).to_string()),
        sim_args: sim_args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
}

#[test]
fn serves_streams_and_aborts_on_the_epoll_driver() {
    let text = "epoll path: bytes and 日本語 arrive intact 🙂";
    let g = epoll(text, &[]);
    assert!(g.logs().contains("(epoll)"), "the gateway did not run on epoll:\n{}", g.logs());
    let body = json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(g.post_json("/v1/chat/completions", &body).json()["choices"][0]["message"]["content"], text);
    let mut stream_body = body.clone();
    stream_body["stream"] = json!(true);
    let events = g.post_json("/v1/chat/completions", &stream_body).sse_json();
    let streamed: String = events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(streamed, text);
    let long = "lorem ipsum ".repeat(20_000);
    let r = g.post_json("/v1/tokenize", &json!({"model": "test-model", "prompt": long}));
    assert_eq!(r.status, 200);
}

#[test]
fn disconnect_and_engine_death_on_the_epoll_driver() {
    let mut g = epoll("word ", &["--itl-ms", "20", "--output-len", "5000"]);
    let body = json!({"model": "test-model", "messages": [{"role": "user", "content": "go"}], "stream": true,
                      "max_tokens": 5000, "ignore_eos": true})
    .to_string();
    let mut s = g.connect();
    s.write_all(&common::raw_request("POST", "/v1/chat/completions", Some(&body), &[], false)).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    while !line.starts_with("data: {\"id\"") {
        line.clear();
        reader.read_line(&mut line).unwrap();
    }
    common::eventually(|| !g.adds().is_empty(), "the ADD");
    drop(reader);
    drop(s);
    let id = g.adds()[0]["id"].as_str().unwrap().to_string();
    common::eventually(|| g.aborted_ids().contains(&id), "the ABORT after the client left");
    g.kill_sim();
    g.wait_status("/readiness", 503, Duration::from_secs(5));
    g.start_sim();
    g.wait_ready(Duration::from_secs(15));
}
