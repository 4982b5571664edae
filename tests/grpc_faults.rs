//! One gRPC stream's faults, through the gateway: a scripted `VllmEngine` server (what a real
//! servicer cannot be made to do on demand) behind a `grpc://` worker. An error status before
//! any output is the engine's 500; UNAVAILABLE (not admitted) is retried, and with no other
//! worker a 503 with `Retry-After`; a fault after the first token ends the stream with an
//! error event; none of them takes the worker down, and a healthy answer is counted under
//! `router_type="grpc"`.

mod common;

use std::time::Duration;

use common::{Gateway, Options};
use serde_json::{json, Value};
use shardgate_testkit::grpc::{self as scripted, Script};

fn gateway(script: Script) -> Gateway {
    gateway_of(&scripted::start(script, 4096))
}

fn gateway_of(server: &scripted::Server) -> Gateway {
    let url = format!("grpc://127.0.0.1:{}", server.port);
    Gateway::start_with(Options { worker_url: Some(url), ..Options::default() })
}

fn chat(stream: bool) -> Value {
    json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
           "stream": stream})
}

fn worker_status(g: &Gateway) -> Value {
    g.get("/workers").json()["workers"][0]["status"].clone()
}

#[test]
fn a_healthy_stream_is_served_and_counted_as_grpc() {
    let g = gateway(Script::Healthy { tokens: 5 });
    let r = g.post_json("/v1/chat/completions", &chat(false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["usage"]["completion_tokens"], 5, "{}", r.text());
    assert_eq!(r.json()["choices"][0]["finish_reason"], "length");
    let s = g.post_json("/v1/chat/completions", &chat(true));
    assert_eq!(s.status, 200);
    let chunks = s.sse_json();
    let tokens = chunks.iter().filter(|c| c["choices"][0]["delta"]["content"].as_str().is_some_and(|t| !t.is_empty()));
    assert_eq!(tokens.count(), 5, "{chunks:?}");
    let m = g.metrics();
    for streaming in [false, true] {
        let line = format!(
            "smg_router_requests_total{{router_type=\"grpc\",connection_mode=\"grpc\",model=\"test-model\",endpoint=\"chat\",streaming=\"{streaming}\"}} 1"
        );
        assert!(m.lines().any(|l| l == line), "missing {line}");
    }
}

#[test]
fn an_error_before_any_output_is_the_engines_500_and_the_worker_stays() {
    let g = gateway(Script::InternalAtOnce);
    let r = g.post_json("/v1/chat/completions", &chat(false));
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.text().contains(scripted::ERROR_MESSAGE), "{}", r.text());
    // A stream has sent its head already: the error is its last event.
    let s = g.post_json("/v1/chat/completions", &chat(true));
    let events = s.sse();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{events:?}");
    assert!(events[events.len() - 2].contains(scripted::ERROR_MESSAGE), "{events:?}");
    assert_eq!(worker_status(&g), "ready");
    assert!(g.logs().contains(&format!("failed: gRPC status INTERNAL: {}", scripted::ERROR_MESSAGE)), "{}", g.logs());
}

#[test]
fn a_request_the_worker_did_not_admit_is_a_503_with_retry_after() {
    let g = gateway(Script::Unavailable);
    let r = g.post_json("/v1/chat/completions", &chat(false));
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.header("retry-after").is_some(), "{:?}", r.headers);
    assert_eq!(worker_status(&g), "ready");
}

#[test]
fn a_fault_after_the_first_token_ends_the_stream_with_an_error_event() {
    for script in [Script::InternalAfterFirst, Script::ResetAfterFirst] {
        let g = gateway(script);
        let s = g.post_json("/v1/chat/completions", &chat(true));
        assert_eq!(s.status, 200, "{script:?}");
        let events = s.sse();
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{script:?}: {events:?}");
        let error: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
        assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains("gRPC")), "{script:?}: {error}");
        let content: Vec<&String> = events.iter().filter(|e| e.contains("\"content\"")).collect();
        assert!(!content.is_empty(), "{script:?}: the first token reached the client: {events:?}");
        common::eventually_within(Duration::from_secs(5), || worker_status(&g) == "ready", "the worker still ready");
    }
}

/// A servicer that stays up while its engine is dead answers HealthCheck unhealthy: after three
/// such answers in a row the worker is lost (dead, no requests), and it is ready again once the
/// engine is back.
#[test]
fn an_unhealthy_engine_behind_a_live_servicer_takes_the_worker_out() {
    let server = scripted::start(Script::Healthy { tokens: 2 }, 4096);
    let g = gateway_of(&server);
    server.healthy.store(false, std::sync::atomic::Ordering::Relaxed);
    common::eventually_within(Duration::from_secs(15), || worker_status(&g) == "dead", "the worker dead");
    assert!(g.logs().contains("HealthCheck failed (3 in a row)"), "{}", g.logs());
    let r = g.post_json("/v1/chat/completions", &chat(false));
    assert_eq!(r.status, 503, "{}", r.text());
    // The reconnects find the engine still dead: the worker is not ready again in between.
    let until = std::time::Instant::now() + Duration::from_secs(4);
    while std::time::Instant::now() < until {
        assert_ne!(worker_status(&g), "ready", "ready while the engine is dead");
        std::thread::sleep(Duration::from_millis(100));
    }
    server.healthy.store(true, std::sync::atomic::Ordering::Relaxed);
    common::eventually_within(Duration::from_secs(15), || worker_status(&g) == "ready", "the worker ready again");
    assert_eq!(g.post_json("/v1/chat/completions", &chat(false)).status, 200);
}
