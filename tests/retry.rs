//! A generation whose engine fails before producing anything for it is sent once more to
//! another ready worker (`pipeline::retry`); after the first output it never is, and with no
//! other worker the client gets the error it always got. Driven by the simulator's faults:
//! `die@1` (ENGINE_CORE_DEAD when the first request arrives), `die-silent@1` (exit without a
//! word), `die@1:3` (after the first request's third token went out).
//!
//! Routing: `round_robin` on one shard sends two requests in a row to the two workers, in an
//! order the test does not need to know: whichever request meets the faulty worker is the one
//! retried, and the counts (records of each simulator, the retry counter) say the same either
//! way.

mod common;

use std::path::{Path, PathBuf};

use common::{ChildGuard, Gateway, Options};
use serde_json::{json, Value};

/// A gateway on one shard with `round_robin`, its own simulator (worker A) started with
/// `a_args`, and more workers registered at runtime, each with its own simulator and record.
fn gateway(a_args: &[&str], more: &[&[&str]]) -> (Gateway, Vec<(ChildGuard, PathBuf, String)>) {
    let g = Gateway::start_with(Options {
        shards: 1,
        gateway_args: vec!["--policy".into(), "round_robin".into()],
        sim_args: a_args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    });
    let mut workers = Vec::new();
    for (k, extra) in more.iter().enumerate() {
        let url = format!("ipc://{}/engine-{k}", g.dir.display());
        let record = g.dir.join(format!("record-{k}.jsonl"));
        let r = g.post_json("/workers", &json!({"url": url, "runtime": "vllm"}));
        assert_eq!(r.status, 202, "{}", r.text());
        let mut args = vec!["--record", record.to_str().unwrap()];
        args.extend_from_slice(extra);
        workers.push((g.spawn_sim(&url, &args), record, url));
    }
    common::eventually_within(
        std::time::Duration::from_secs(30),
        || {
            g.get("/workers").json()["workers"]
                .as_array()
                .is_some_and(|w| w.len() == 1 + more.len() && w.iter().all(|w| w["status"] == "ready"))
        },
        "every worker ready",
    );
    (g, workers)
}

fn adds_in(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["type"] == "add")
        .count()
}

/// `smg_worker_retries_total`, all endpoints.
fn retries(g: &Gateway) -> u64 {
    g.metrics()
        .lines()
        .filter(|l| l.starts_with("smg_worker_retries_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Api {
    Chat,
    Completions,
}

fn request(api: Api, stream: bool, n: u32, max_tokens: u32) -> (&'static str, Value) {
    match api {
        Api::Chat => (
            "/v1/chat/completions",
            json!({"model": "test-model", "messages": [{"role": "user", "content": "Hello"}],
                   "max_tokens": max_tokens, "n": n, "stream": stream, "ignore_eos": true}),
        ),
        Api::Completions => (
            "/v1/completions",
            json!({"model": "test-model", "prompt": "Hello", "max_tokens": max_tokens, "n": n,
                   "stream": stream, "ignore_eos": true}),
        ),
    }
}

/// Asserts a complete, error-free answer with `n` finished choices (and, for a chat stream,
/// exactly one role chunk per choice: what was written before the retry is not written again).
fn assert_served(api: Api, stream: bool, n: u32, r: &common::Response, what: &str) {
    assert_eq!(r.status, 200, "{what}: {}", r.text());
    if !stream {
        let v = r.json();
        let choices = v["choices"].as_array().unwrap();
        assert_eq!(choices.len(), n as usize, "{what}: {v}");
        assert!(choices.iter().all(|c| c["finish_reason"] == "length"), "{what}: {v}");
        return;
    }
    let events = r.sse_json();
    assert!(events.iter().all(|e| e.get("error").is_none()), "{what}: {events:?}");
    for index in 0..n {
        let of = |e: &&Value| e["choices"][0]["index"] == index;
        let finished = events.iter().filter(of).filter(|e| e["choices"][0]["finish_reason"] == "length").count();
        assert_eq!(finished, 1, "{what}: choice {index}: {events:?}");
        if api == Api::Chat {
            let roles = events.iter().filter(of).filter(|e| e["choices"][0]["delta"]["role"] == "assistant").count();
            assert_eq!(roles, 1, "{what}: choice {index}: {events:?}");
        }
    }
}

/// (a) Worker A dies when its first request arrives; worker B is ready. Two requests, one of
/// which meets A: both are served, that one by B after one retry, counted once and logged with
/// the cause and both workers.
#[test]
fn a_request_whose_engine_dies_before_any_output_is_served_by_another_worker() {
    // (fault of A, API, streamed, n)
    let cases = [
        ("die@1", Api::Completions, false, 1),
        ("die@1", Api::Chat, true, 1),
        ("die-silent@1", Api::Completions, true, 2),
        ("die-silent@1", Api::Chat, false, 2),
    ];
    for (fault, api, stream, n) in cases {
        let what = format!("{fault} {api:?} stream={stream} n={n}");
        let (g, workers) = gateway(&["--fault", fault], &[&[]]);
        let (_, record_b, url_b) = &workers[0];
        for _ in 0..2 {
            let (path, body) = request(api, stream, n, 4);
            assert_served(api, stream, n, &g.post_json(path, &body), &what);
        }
        assert_eq!(retries(&g), 1, "{what}");
        // A received one request (and died); B the other and the retried one, `n` ADDs each.
        assert_eq!(g.adds().len(), 1, "{what}");
        assert_eq!(adds_in(record_b), 2 * n as usize, "{what}");
        let logs = g.logs();
        let line = logs
            .lines()
            .find(|l| l.contains("failed before any output"))
            .unwrap_or_else(|| panic!("{what}: no retry line in\n{logs}"));
        eprintln!("{what}: {line}");
        // A silent death is seen as the engine's connection closing, as the engine being
        // unreachable (when the liveness ping gets there first), or as no connection to send
        // on: with n = 2, A exits on the first choice's ADD, and its close may be read before
        // the second choice's is sent ("engine not connected" on A, the first request after
        // B, added at runtime, became ready; never on B). All mean it is gone.
        let causes: &[&str] = if fault.starts_with("die-silent") {
            &["closed its connection", "unreachable", "engine not connected"]
        } else {
            &["ENGINE_CORE_DEAD"]
        };
        assert!(causes.iter().any(|c| line.contains(c)), "{what}: {line}");
        assert!(line.contains(&format!("worker {} rank 0", g.worker_url)), "{what}: {line}");
        assert!(line.contains(&format!("retrying once on worker {url_b} rank 0")), "{what}: {line}");
        assert_eq!(logs.matches("failed before any output").count(), 1, "{what}");
    }
}

/// (b) Both workers die after the third token of their first request. A stream that has
/// written tokens is never retried: it ends with an error event as before; a non-streamed
/// request whose engine produced output is not retried either (500), though the other worker
/// is ready.
#[test]
fn a_request_is_not_retried_once_its_engine_produced_output() {
    for stream in [true, false] {
        let (g, _workers) = gateway(&["--fault", "die@1:3"], &[&["--fault", "die@1:3"]]);
        let (path, body) = request(Api::Completions, stream, 1, 200);
        let r = g.post_json(path, &body);
        if stream {
            assert_eq!(r.status, 200);
            let events = r.sse();
            assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
            let error = &events[events.len() - 2];
            assert!(error.contains("\"error\"") && error.contains("ENGINE_CORE_DEAD"), "{error}");
            let text: String = events[..events.len() - 2]
                .iter()
                .filter_map(|e| serde_json::from_str::<Value>(e).ok())
                .filter_map(|e| e["choices"][0]["text"].as_str().map(str::to_string))
                .collect();
            assert!(!text.is_empty(), "tokens went out before the fault: {events:?}");
        } else {
            assert_eq!(r.status, 500, "{}", r.text());
            assert!(r.json()["error"]["message"].as_str().unwrap().contains("ENGINE_CORE_DEAD"), "{}", r.text());
        }
        assert_eq!(retries(&g), 0, "stream={stream}");
        assert!(!g.logs().contains("failed before any output"), "stream={stream}: {}", g.logs());
    }
}

/// (c) One worker only: the request fails as it always did, nothing is counted, and the log
/// says why it was not retried.
#[test]
fn with_no_other_worker_the_error_is_todays() {
    for stream in [false, true] {
        let (g, _) = gateway(&["--fault", "die@1"], &[]);
        let (path, body) = request(Api::Completions, stream, 1, 4);
        let r = g.post_json(path, &body);
        if stream {
            assert_eq!(r.status, 200);
            let events = r.sse();
            assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
            assert!(events[events.len() - 2].contains("ENGINE_CORE_DEAD"), "{events:?}");
        } else {
            assert_eq!(r.status, 500, "{}", r.text());
            let v = r.json();
            assert_eq!(v["error"]["code"], "engine_error", "{v}");
            assert!(v["error"]["message"].as_str().unwrap().contains("ENGINE_CORE_DEAD"), "{v}");
        }
        assert_eq!(retries(&g), 0);
        assert!(g.logs().contains("no other ready worker to retry on"), "{}", g.logs());
    }
}

/// An engine's request-scoped error (vLLM 0.33's `RequestError`, the simulator's `error@1` and
/// `error-retryable@1`), on the only worker: a retryable one is looked to resend (the log says
/// no other worker was ready) and answered 503 with Retry-After; any other is a 500 with the
/// engine's description and is never looked to resend. The resend itself is the one the tests
/// above check.
#[test]
fn an_engine_request_error_is_resent_only_when_retryable() {
    // (fault, status, text of the answer, a resend looked for)
    let cases = [
        (
            "error-retryable@1",
            503,
            "the engine failed the request: kv_load_failed: KV cache load failed (simulated)",
            true,
        ),
        ("error@1", 500, "the engine failed the request: internal_error: simulated request failure", false),
    ];
    for (fault, status, text, looked) in cases {
        let (g, _) = gateway(&["--fault", fault], &[]);
        let (path, body) = request(Api::Completions, false, 1, 4);
        let r = g.post_json(path, &body);
        assert_eq!(r.status, status, "{fault}: {}", r.text());
        let v = r.json();
        assert_eq!((v["error"]["code"].as_str(), v["error"]["message"].as_str()), (Some("engine_error"), Some(text)));
        assert_eq!(r.header("retry-after").is_some(), status == 503, "{fault}");
        assert_eq!(g.logs().contains("no other ready worker to retry on"), looked, "{fault}: {}", g.logs());
        assert_eq!(retries(&g), 0);
    }
}

/// Exactly once more: three workers that all die on their first request. The request meets
/// one, is retried on a second, which dies too, and fails although a third is ready.
#[test]
fn a_request_is_retried_at_most_once() {
    let (g, workers) = gateway(&["--fault", "die@1"], &[&["--fault", "die@1"], &["--fault", "die@1"]]);
    let (path, body) = request(Api::Completions, false, 1, 4);
    let r = g.post_json(path, &body);
    assert_eq!(r.status, 500, "{}", r.text());
    assert_eq!(retries(&g), 1);
    let attempts = g.adds().len() + workers.iter().map(|(_, record, _)| adds_in(record)).sum::<usize>();
    assert_eq!(attempts, 2, "one request, one retry");
    assert_eq!(g.logs().matches("failed before any output").count(), 1, "{}", g.logs());
}
