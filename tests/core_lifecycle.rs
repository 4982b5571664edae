//! Engine and client lifecycles end to end: client disconnect aborts on the engine, engine
//! death fails in-flight requests cleanly and flips readiness, and a restarted engine
//! reconnects without restarting the gateway.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use common::{Gateway, Options};
use serde_json::json;

fn long_stream_body() -> String {
    json!({"model": "test-model", "messages": [{"role": "user", "content": "go"}], "stream": true,
           "max_tokens": 5000, "ignore_eos": true})
    .to_string()
}

fn slow_engine(extra: &[&str]) -> Options {
    let mut sim_args: Vec<String> = vec!["--itl-ms".into(), "20".into(), "--output-len".into(), "5000".into()];
    sim_args.extend(extra.iter().map(|s| s.to_string()));
    Options { sim_args, ..Default::default() }
}

/// Reads SSE events from a raw socket until `n` data events arrived.
fn read_events(reader: &mut BufReader<std::net::TcpStream>, n: usize) -> Vec<String> {
    let mut events = Vec::new();
    let mut line = String::new();
    while events.len() < n {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            events.push(data.to_string());
        }
    }
    events
}

#[test]
fn client_disconnect_aborts_the_request_on_the_engine() {
    let g = Gateway::start_with(slow_engine(&[]));
    for stream in [true, false] {
        let before = g.adds().len();
        let mut s = g.connect();
        let body = json!({"model": "test-model", "messages": [{"role": "user", "content": "go"}], "stream": stream,
                          "max_tokens": 5000, "ignore_eos": true})
        .to_string();
        s.write_all(&common::raw_request("POST", "/v1/chat/completions", Some(&body), &[], false)).unwrap();
        if stream {
            let mut reader = BufReader::new(s.try_clone().unwrap());
            assert_eq!(read_events(&mut reader, 3).len(), 3);
        } else {
            common::eventually(|| g.adds().len() > before, "the ADD");
        }
        drop(s);
        let id = g.adds()[before]["id"].as_str().unwrap().to_string();
        common::eventually(|| g.aborted_ids().contains(&id), "the ABORT after the client left");
    }
    // The gateway still serves.
    let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "x", "max_tokens": 2}));
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn engine_core_dead_ends_streams_with_an_error_then_done() {
    // The second request kills the engine with ENGINE_CORE_DEAD.
    let mut g = Gateway::start_with(slow_engine(&["--fault", "die@2"]));
    let mut first = g.connect();
    first
        .write_all(&common::raw_request("POST", "/v1/chat/completions", Some(&long_stream_body()), &[], false))
        .unwrap();
    let mut reader = BufReader::new(first.try_clone().unwrap());
    assert_eq!(read_events(&mut reader, 2).len(), 2);
    // Trigger the death with a second request, non-streamed: it gets a 5xx envelope.
    let r = g.post(
        "/v1/chat/completions",
        &json!({"model": "test-model", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5}).to_string(),
    );
    assert!(r.status >= 500, "{} {}", r.status, r.text());
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("engine"), "{}", r.text());
    // The stream in flight ends with an error event, then [DONE].
    let data = common::rest_of_stream(&mut reader);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    let err: serde_json::Value = serde_json::from_str(&data[data.len() - 2]).unwrap();
    assert!(err["error"]["message"].as_str().unwrap().contains("ENGINE_CORE_DEAD"), "{err}");
    assert!(g.wait_sim_exit(Duration::from_secs(5)));
    let r = g.wait_status("/readiness", 503, Duration::from_secs(5));
    assert_eq!(r.json()["error"]["message"], "insufficient healthy workers");
    // A restarted engine reconnects on a later probe; no gateway restart.
    g.start_sim();
    g.wait_ready(Duration::from_secs(15));
    let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "x", "max_tokens": 2}));
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn silent_engine_death_is_detected_and_in_flight_requests_fail() {
    let mut g = Gateway::start_with(slow_engine(&[]));
    let mut s = g.connect();
    s.write_all(&common::raw_request("POST", "/v1/chat/completions", Some(&long_stream_body()), &[], false)).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    assert_eq!(read_events(&mut reader, 2).len(), 2);
    let killed = Instant::now();
    g.kill_sim();
    let data = common::rest_of_stream(&mut reader);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    assert!(data[data.len() - 2].contains("\"error\""), "{data:?}");
    assert!(killed.elapsed() < Duration::from_secs(5), "death noticed after {:?}", killed.elapsed());
    g.wait_status("/readiness", 503, Duration::from_secs(5));
    let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "x", "max_tokens": 2}));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
}

#[test]
fn readiness_waits_for_the_engine_handshake() {
    let mut g = Gateway::start_with(Options { wait_ready: false, ..Default::default() });
    g.kill_sim();
    let r = loop {
        match g.try_request("GET", "/readiness", None, &[]) {
            Ok(r) => break r,
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    // Either no handshake yet, or the sim we killed registered first: both must turn to 503.
    if r.status == 200 {
        g.wait_status("/readiness", 503, Duration::from_secs(5));
    } else {
        assert_eq!(r.status, 503);
        assert_eq!(r.json()["error"]["message"], "insufficient healthy workers");
    }
    g.start_sim();
    g.wait_ready(Duration::from_secs(15));
}

#[test]
fn a_port_already_in_use_is_refused_not_shared() {
    // SO_REUSEPORT would otherwise let this gateway take part of another server's traffic.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["launch", "--worker-urls", "ipc:///tmp/sg-nowhere/engine", "--host", "127.0.0.1", "--port", &port])
        .arg("--model-path")
        .arg(common::model_dir())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("cannot listen on 127.0.0.1:{port} (--port)")), "{err}");
}

#[test]
fn a_restart_on_the_same_port_right_after_a_stop_works() {
    // A stopped gateway's io_uring keeps its listener open for a moment after the process is
    // gone; the next gateway must wait that out, not refuse the port.
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        let mut g = Gateway::start_with(Options { shards: 1, ..Default::default() });
        // Open keep-alive connections at the stop, as a load generator leaves them.
        let body = json!({"model": "test-model", "prompt": "x", "max_tokens": 2}).to_string();
        let open: Vec<_> = (0..64)
            .map(|_| {
                let mut s = g.connect();
                s.write_all(&common::raw_request("POST", "/v1/completions", Some(&body), &[], false)).unwrap();
                s
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        g.signal_gateway(signal);
        assert!(g.wait_gateway_exit(Duration::from_secs(20)).is_some(), "the gateway did not exit");
        let mut next = std::process::Command::new(env!("CARGO_BIN_EXE_shardgate"))
            .args(["launch", "--worker-urls", &g.worker_url, "--host", "127.0.0.1", "--port", &g.port.to_string()])
            .args(["--metrics-port", &common::free_port().to_string(), "--model-path"])
            .arg(common::model_dir())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let live = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            g.try_request("GET", "/liveness", None, &[]).is_ok_and(|r| r.status == 200)
        });
        let exited = next.try_wait().unwrap();
        let _ = next.kill();
        let out = next.wait_with_output().unwrap();
        assert!(live && exited.is_none(), "signal {signal}: {}", String::from_utf8_lossy(&out.stderr));
        drop(open);
    }
}
