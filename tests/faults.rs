//! Every way SMG documents an engine as lost, driven by the simulator's `--fault KIND@N`: the
//! in-flight requests end with an error (a 5xx envelope, or an error event then `[DONE]`),
//! readiness flips to 503, a restarted engine reconnects without a gateway restart, and no
//! per-request state is left behind (the in-flight gauges return to 0). Also an engine that
//! starts slowly (`--slow-start-s`).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use common::{Gateway, Options};
use serde_json::json;

/// What the first request (a stream already running when the fault fires) should see.
#[derive(Clone, Copy, PartialEq, Debug)]
enum First {
    /// An error event, then `[DONE]`.
    Fails,
    /// It runs to its end (the engine still produces output for it).
    Completes,
}

fn lost_engine(kind: &str, first_tokens: u32, first: First) {
    lost_engine_on(kind, first_tokens, first, 2)
}

fn lost_engine_on(kind: &str, first_tokens: u32, first: First, shards: usize) {
    let mut g = Gateway::start_with(Options {
        shards,
        gateway_args: vec!["--engine-silence-timeout-secs".into(), "2".into()],
        sim_args: ["--itl-ms", "20", "--output-len", "5000", "--fault", &format!("{kind}@2")]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        ..Default::default()
    });
    let body = json!({"model": "test-model", "prompt": "go", "max_tokens": first_tokens, "ignore_eos": true,
                      "stream": true})
    .to_string();
    let mut s = g.connect();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(&common::raw_request("POST", "/v1/completions", Some(&body), &[], false)).unwrap();
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    while !line.starts_with("data: ") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0);
    }
    // The second request fires the fault.
    let second = std::thread::scope(|scope| {
        let h = scope
            .spawn(|| g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "x", "max_tokens": 3})));
        let mut events = Vec::new();
        // Keep-alive comments keep the socket busy, so the read timeout alone cannot end a
        // stream the gateway never fails.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                events.push(data.to_string());
                if data == "[DONE]" {
                    break;
                }
            }
        }
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{kind}: the stream must end with [DONE]");
        let before_done = &events[events.len() - 2];
        match first {
            First::Fails => assert!(before_done.contains("\"error\""), "{kind}: {before_done}"),
            First::Completes => assert!(before_done.contains("\"finish_reason\":\"length\""), "{kind}: {before_done}"),
        }
        h.join().unwrap()
    });
    assert!(second.status >= 500, "{kind}: {} {}", second.status, second.text());
    assert!(second.json()["error"]["message"].is_string());
    g.wait_status("/readiness", 503, Duration::from_secs(15));
    // Nothing left behind.
    common::eventually(
        || g.get("/workers").json()["workers"][0]["load"]["in_flight"] == 0,
        "the worker's in-flight count back to 0",
    );
    assert!(g.metrics().contains("smg_worker_requests_active{"), "gauge present");
    // The engine comes back (a fresh process) and the gateway reconnects on its own.
    g.kill_sim();
    g.start_sim();
    g.wait_ready(Duration::from_secs(30));
    let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "again", "max_tokens": 3}));
    assert_eq!(r.status, 200, "{kind} after reconnect: {}", r.text());
    let m = g.metrics();
    let active = m.lines().find(|l| l.starts_with("smg_worker_requests_active{")).unwrap();
    assert!(active.ends_with(" 0"), "{active}");
}

#[test]
fn die_sends_engine_core_dead() {
    lost_engine("die", 3000, First::Fails);
}

#[test]
fn die_silent_is_noticed_by_the_liveness_ping() {
    lost_engine("die-silent", 3000, First::Fails);
}

#[test]
fn stall_is_noticed_by_the_silence_watchdog() {
    // One shard: the stream shares its link with the liveness pings, whose replies must not
    // count as the engine making progress.
    lost_engine_on("stall", 3000, First::Fails, 1);
}

#[test]
fn deaf_engines_fail_what_they_never_read() {
    // A deaf engine still finishes what it was running; the request it never read times out.
    lost_engine("deaf", 60, First::Completes);
}

#[test]
fn garbage_outputs_fail_after_three_in_a_row() {
    lost_engine("garbage", 3000, First::Fails);
}

#[test]
fn a_slow_starting_engine_is_waited_for() {
    let g = Gateway::start_with(Options {
        sim_args: vec!["--slow-start-s".into(), "3".into()],
        wait_ready: false,
        ..Default::default()
    });
    std::thread::sleep(Duration::from_millis(1500));
    let r = g.get("/readiness");
    assert_eq!(r.status, 503);
    assert!(r.text().contains("insufficient healthy workers"), "{}", r.text());
    g.wait_ready(Duration::from_secs(30));
    let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "x", "max_tokens": 2}));
    assert_eq!(r.status, 200);
}

#[test]
fn frames_a_lost_engine_queued_do_not_fail_the_next_one() {
    // The garbage engine outlives its connection: libzmq reconnects it to the sockets the
    // gateway binds for the next attempt, and its frames queue there until a clean engine
    // registers. They must not count against the clean engine.
    let mut g =
        Gateway::start_with(Options { sim_args: vec!["--fault".into(), "garbage@1".into()], ..Default::default() });
    let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "x", "max_tokens": 3}));
    assert!(r.status >= 500, "{} {}", r.status, r.text());
    g.wait_status("/readiness", 503, Duration::from_secs(15));
    std::thread::sleep(Duration::from_secs(4));
    g.kill_sim();
    g.start_sim();
    g.wait_ready(Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(g.get("/readiness").status, 200, "the clean engine's worker was dropped:\n{}", g.logs());
}
