//! `tcp://` workers: engines that dial the gateway over TCP (vLLM's multi-node data
//! parallelism) serve exactly as `ipc://` ones, at startup and when added at runtime; a bind
//! on a public address is refused unless `--allow-public-engine-bind` says otherwise.

mod common;

use std::process::Command;

use common::{rest_of_stream, start_stream, Gateway, Options};
use serde_json::{json, Value};

/// A free port in this suite's range (20000-20999), for a handshake address.
fn engine_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let base = 20_000 + (std::process::id() % 500) as u16;
    loop {
        let port = base + NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 500;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn gateway(transport: &str, sim_args: &[&str], gateway_args: &[&str]) -> Gateway {
    Gateway::start_with(Options {
        worker_url: (transport == "tcp").then(|| format!("tcp://127.0.0.1:{}", engine_port())),
        sim_args: sim_args.iter().map(|s| s.to_string()).collect(),
        gateway_args: gateway_args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
}

fn completion(g: &Gateway, n: u32) -> Value {
    let body = json!({"model": "test-model", "prompt": "Say hi", "max_tokens": 5, "n": n, "ignore_eos": true});
    let r = g.post_json("/v1/completions", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// The core paths (a completion, n > 1, a chat stream, a grouped worker's two ranks) over
/// each transport.
#[test]
fn a_tcp_worker_serves_as_an_ipc_worker_does() {
    for transport in ["ipc", "tcp"] {
        let g = gateway(transport, &[], &[]);
        assert!(g.worker_url.starts_with(transport), "{}", g.worker_url);
        let one = completion(&g, 1);
        assert_eq!(one["usage"]["completion_tokens"], 5, "{transport}: {one}");
        let two = completion(&g, 2);
        assert_eq!(two["choices"].as_array().map(Vec::len), Some(2), "{transport}: {two}");
        let mut stream = start_stream(&g, 8);
        let events = rest_of_stream(&mut stream);
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{transport}: {events:?}");
        let workers = g.get("/workers").json();
        assert_eq!(workers["workers"][0]["url"], g.worker_url.as_str(), "{transport}: {workers}");
        if transport == "tcp" {
            assert_eq!(workers["workers"][0]["handshake_address"], g.worker_url.as_str(), "{workers}");
        }
    }
    let grouped = gateway("tcp", &["--data-parallel-size", "2"], &["--zmq-engine-count", "2"]);
    for _ in 0..4 {
        completion(&grouped, 1);
    }
    let m = grouped.metrics();
    for rank in 0..2 {
        let served = m
            .lines()
            .find(|l| l.starts_with("shardgate_worker_rank_requests_total{") && l.contains(&format!("rank=\"{rank}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
        assert!(served.is_some_and(|n| n > 0.0), "rank {rank} served: {m}");
    }
}

#[test]
fn a_tcp_worker_added_at_runtime_serves() {
    let g = Gateway::start();
    let url = format!("tcp://127.0.0.1:{}", engine_port());
    let r = g.post_json("/workers", &json!({"url": url, "runtime": "vllm"}));
    assert_eq!(r.status, 202, "{}", r.text());
    let _sim = g.spawn_sim(&url, &[]);
    common::eventually(
        || g.get("/workers").json()["workers"].as_array().is_some_and(|w| w.iter().all(|w| w["status"] == "ready")),
        "the tcp worker ready",
    );
    for _ in 0..4 {
        completion(&g, 1);
    }
    let again = g.post_json("/workers", &json!({"url": url, "runtime": "vllm"}));
    assert_eq!(again.status, 400, "the same address twice: {}", again.text());
}

#[test]
fn a_public_or_unusable_bind_is_refused() {
    let g = Gateway::start();
    // (URL, what the refusal says)
    let cases = [
        ("tcp://203.0.113.7:20999", "is not a loopback or private address"),
        ("tcp://[2001:db8::1]:20999", "--allow-public-engine-bind"),
        ("tcp://0.0.0.0:20999", "must be tcp://IP:PORT"),
        ("tcp://engines.example:20999", "must be tcp://IP:PORT"),
    ];
    for (url, says) in cases {
        let r = g.post_json("/workers", &json!({"url": url, "runtime": "vllm"}));
        assert_eq!(r.status, 400, "{url}: {}", r.text());
        assert!(r.text().contains(says), "{url}: {}", r.text());
        let out = Command::new(env!("CARGO_BIN_EXE_shardgate"))
            .args(["launch", "--worker-urls", url, "--model-path"])
            .arg(common::model_dir())
            .args(["--port", "20998", "--metrics-port", "20997"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "launch {url}: {stderr}");
    }
    assert!(g.logs().contains("Failed job: type=AddWorker, worker=tcp://203.0.113.7:20999"), "{}", g.logs());
}
