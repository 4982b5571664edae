//! Backpressure end to end: the global concurrency limit with its queue (429 when full, 503 when
//! the wait runs out, both with Retry-After), SSE keep-alive comments while a stream waits, and
//! a client that stops reading being cut off with its request aborted on the engine.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use common::{Gateway, Options};
use serde_json::json;

fn gateway(gateway_args: &[&str], sim_args: &[&str]) -> Gateway {
    Gateway::start_with(Options {
        gateway_args: gateway_args.iter().map(|s| s.to_string()).collect(),
        sim_args: sim_args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
}

fn slow_completion(max_tokens: u32) -> String {
    json!({"model": "test-model", "prompt": "go", "max_tokens": max_tokens, "ignore_eos": true}).to_string()
}

#[test]
fn a_full_queue_answers_429_and_waiting_requests_run_in_turn() {
    let g = gateway(&["--max-concurrent-requests", "1", "--queue-size", "1"], &["--itl-ms", "20"]);
    std::thread::scope(|s| {
        // A holds the only slot for about a second; B waits for it.
        let a = s.spawn(|| g.post("/v1/completions", &slow_completion(50)));
        common::eventually(|| g.adds().len() == 1, "A on the engine");
        let b = s.spawn(|| g.post("/v1/completions", &slow_completion(2)));
        common::eventually(|| g.metrics().contains("shardgate_admission_queued 1"), "B queued");
        // C finds the queue full.
        let c = g.post("/v1/completions", &slow_completion(2));
        assert_eq!(c.status, 429, "{}", c.text());
        assert_eq!(c.header("retry-after"), Some("1"));
        assert_eq!(c.json()["error"]["code"], "rate_limit_exceeded");
        assert_eq!(a.join().unwrap().status, 200);
        let b = b.join().unwrap();
        assert_eq!(b.status, 200, "{}", b.text());
    });
    // B reached the engine only after A finished.
    let adds = g.adds();
    assert_eq!(adds.len(), 2);
    let m = g.metrics();
    assert!(m.contains("shardgate_admission_rejected_total{reason=\"queue_full\"} 1"), "{m}");
    assert!(m.contains("shardgate_admission_running 0"), "{m}");
    assert!(m.contains("shardgate_admission_queued 0"), "{m}");
    assert!(m.contains("error_type=\"overloaded\"} 1"), "{m}");
}

#[test]
fn a_wait_past_the_queue_timeout_answers_503() {
    let g = gateway(&["--max-concurrent-requests", "1", "--queue-timeout-secs", "1"], &["--itl-ms", "20"]);
    std::thread::scope(|s| {
        let a = s.spawn(|| g.post("/v1/completions", &slow_completion(150)));
        common::eventually(|| g.adds().len() == 1, "A on the engine");
        let started = Instant::now();
        let b = g.post("/v1/completions", &slow_completion(2));
        assert_eq!(b.status, 503, "{}", b.text());
        assert!(started.elapsed() >= Duration::from_millis(900), "answered before the timeout");
        assert!(b.header("retry-after").is_some());
        assert_eq!(b.json()["error"]["code"], "overloaded");
        assert_eq!(a.join().unwrap().status, 200);
    });
    assert_eq!(g.adds().len(), 1, "the refused request never reached the engine");
    let m = g.metrics();
    assert!(m.contains("shardgate_admission_rejected_total{reason=\"queue_timeout\"} 1"), "{m}");
    // The slot came back: a new request runs.
    assert_eq!(g.post("/v1/completions", &slow_completion(2)).status, 200);
}

#[test]
fn a_stream_waiting_for_its_first_token_gets_keepalive_comments() {
    // First token after 16 s: one keep-alive comment (every 15 s) must come before it.
    let g = gateway(&[], &["--ttft-ms", "16000"]);
    let body = json!({"model": "test-model", "prompt": "go", "max_tokens": 1, "stream": true}).to_string();
    let r = g.try_request("POST", "/v1/completions", Some(&body), &[]).unwrap();
    assert_eq!(r.status, 200);
    let raw = String::from_utf8_lossy(&r.body).into_owned();
    let keepalive = raw.find(": keepalive\n\n").unwrap_or_else(|| panic!("no keep-alive comment: {raw:?}"));
    let first_data = raw.find("data: {").expect("a data event");
    assert!(keepalive < first_data, "{raw:?}");
    assert!(raw.ends_with("data: [DONE]\n\n"));
}

#[test]
fn a_stream_that_is_never_silent_for_the_interval_gets_no_keepalive() {
    // Tokens 10 s apart: the stream's one keep-alive timer fires 15 s in, 5 s after the last
    // write, and must move itself instead of sending a comment.
    let g = gateway(&[], &["--ttft-ms", "0", "--itl-ms", "10000"]);
    let body =
        json!({"model": "test-model", "prompt": "go", "max_tokens": 3, "ignore_eos": true, "stream": true}).to_string();
    let r = g.try_request("POST", "/v1/completions", Some(&body), &[]).unwrap();
    assert_eq!(r.status, 200);
    let raw = String::from_utf8_lossy(&r.body).into_owned();
    assert!(!raw.contains(": keepalive"), "{raw:?}");
    // Three tokens, then the finish chunk.
    assert_eq!(raw.matches("\"text\"").count(), 4, "{raw:?}");
    assert!(raw.ends_with("data: [DONE]\n\n"));
}

#[test]
fn a_client_that_stops_reading_is_cut_off_and_its_request_aborted() {
    let g = gateway(&["--stream-write-timeout-secs", "2"], &["--itl-ms", "1", "--max-model-len", "2000000"]);
    // 16 fast streams in one response fill the socket buffers within seconds.
    let body = json!({"model": "test-model", "prompt": "go", "max_tokens": 1000000, "ignore_eos": true,
                      "n": 16, "stream": true})
    .to_string();
    let mut s = g.connect();
    // A small receive window (this disables the kernel's autotuning up to tens of MB), so the
    // gateway's writes block soon after the client stops reading.
    let size: libc::c_int = 4096;
    // SAFETY: setsockopt on our own open socket with a c_int option value.
    unsafe {
        use std::os::fd::AsRawFd;
        let p = (&size as *const libc::c_int).cast();
        libc::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, p, 4);
    }
    s.write_all(&common::raw_request("POST", "/v1/completions", Some(&body), &[], false)).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.contains("200"), "{status}");
    // Never read again.
    common::eventually_within(
        Duration::from_secs(40),
        || g.aborted_ids().len() == 16,
        "16 ABORTs once the client is cut off",
    );
    assert!(g.logs().contains("cutting it off"), "the cut-off is logged");
    drop(reader);
    // Nothing is left running.
    common::eventually(|| g.get("/workers").json()["workers"][0]["load"]["in_flight"] == 0, "in-flight back to 0");
}
