//! SIGTERM: new connections are refused, running streams finish, and what outlives
//! `--shutdown-timeout-secs` is aborted on the engine and ended cleanly for its client.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use common::{Gateway, Options};
use serde_json::json;

fn gateway(gateway_args: &[&str]) -> Gateway {
    Gateway::start_with(Options {
        gateway_args: gateway_args.iter().map(|s| s.to_string()).collect(),
        sim_args: vec!["--itl-ms".into(), "20".into()],
        ..Default::default()
    })
}

/// Starts a stream of `max_tokens` and returns its reader once the first event arrived.
fn start_stream(g: &Gateway, max_tokens: u32) -> BufReader<std::net::TcpStream> {
    let body = json!({"model": "test-model", "prompt": "go", "max_tokens": max_tokens, "ignore_eos": true,
                      "stream": true})
    .to_string();
    let mut s = g.connect();
    s.write_all(&common::raw_request("POST", "/v1/completions", Some(&body), &[], false)).unwrap();
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    while !line.starts_with("data: ") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "stream closed before its first event");
    }
    reader
}

/// The remaining `data:` payloads up to and including `[DONE]`.
fn rest_of_stream(reader: &mut BufReader<std::net::TcpStream>) -> Vec<String> {
    let mut events = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return events;
        }
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            events.push(data.to_string());
            if data == "[DONE]" {
                return events;
            }
        }
    }
}

#[test]
fn sigterm_lets_running_streams_finish_then_exits() {
    let mut g = gateway(&["--shutdown-timeout-secs", "30"]);
    // About a second of tokens still to come.
    let mut reader = start_stream(&g, 50);
    g.signal_gateway(libc::SIGTERM);
    // The listener closes promptly.
    common::eventually(
        || std::net::TcpStream::connect(("127.0.0.1", g.port)).is_err(),
        "new connections refused after SIGTERM",
    );
    let events = rest_of_stream(&mut reader);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let finish = &events[events.len() - 2];
    assert!(finish.contains("\"finish_reason\":\"length\""), "the stream ran to its end: {finish}");
    let status = g.wait_gateway_exit(Duration::from_secs(10)).expect("the gateway exits once drained");
    assert!(status.success(), "{status:?}");
    assert!(g.aborted_ids().is_empty(), "nothing needed aborting");
    assert!(g.logs().contains("received SIGTERM"));
}

#[test]
fn sigterm_aborts_what_outlives_the_shutdown_timeout() {
    let mut g = gateway(&["--shutdown-timeout-secs", "1"]);
    // Far longer than the timeout.
    let mut reader = start_stream(&g, 2000);
    let id_on_engine = g.adds()[0]["id"].as_str().unwrap().to_string();
    let signalled = Instant::now();
    g.signal_gateway(libc::SIGTERM);
    let events = rest_of_stream(&mut reader);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "the stream ends cleanly");
    let error = &events[events.len() - 2];
    assert!(error.contains("\"error\"") && error.contains("shutting down"), "{error}");
    let status = g.wait_gateway_exit(Duration::from_secs(10)).expect("the gateway exits");
    assert!(status.success(), "{status:?}");
    assert!(signalled.elapsed() < Duration::from_secs(5));
    common::eventually(|| g.aborted_ids().contains(&id_on_engine), "the ABORT on the engine");
}
