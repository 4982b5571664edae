//! The nghttp2 project's clients against the gateway, cleartext (h2c, prior knowledge) and TLS
//! (ALPN h2): `nghttp` (one request, every frame printed) and `h2load` (many streams
//! multiplexed over a few connections). Needs `nghttp` and `h2load` (`tools/nghttp2/install.sh`).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Gateway, Options};
use serde_json::json;
use shardgate_testkit::tls::Pki;

/// The gateway's TLS flags, with a certificate for 127.0.0.1 from a throwaway CA (nghttp and
/// h2load do not verify it).
fn tls_flags(dir: &Path) -> Vec<String> {
    let leaf = Pki::new(dir, "front").leaf("server", &["127.0.0.1"]);
    let p = |p: &Path| p.display().to_string();
    vec!["--tls-cert-path".into(), p(&leaf.cert), "--tls-key-path".into(), p(&leaf.key)]
}

fn tool(name: &str, args: &[&str]) -> String {
    let out = Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{name}: {e} (install it with tools/nghttp2/install.sh)"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} {args:?} failed: {text}");
    text
}

#[test]
fn nghttp_and_h2load_are_served_over_h2c_and_tls() {
    let dir = common::test_dir();
    let body_file = dir.join("body.json");
    let body = json!({"model": "test-model", "prompt": "go", "max_tokens": 8, "stream": true});
    std::fs::write(&body_file, body.to_string()).unwrap();
    let body_path = body_file.display().to_string();
    for scheme in ["http", "https"] {
        let args = if scheme == "https" { tls_flags(&dir) } else { Vec::new() };
        let g = Gateway::start_with(Options { gateway_args: args, wait_ready: false, ..Default::default() });
        let base = format!("{scheme}://127.0.0.1:{}", g.port);
        common::eventually_within(
            Duration::from_secs(30),
            || {
                // The status line of the response, not any "200" in the body or the timings.
                let out = Command::new("nghttp").args(["-nv", &format!("{base}/readiness")]).output().unwrap();
                out.status.success() && String::from_utf8_lossy(&out.stdout).contains(":status: 200")
            },
            "readiness over HTTP/2",
        );
        // One streamed request with every frame shown: SETTINGS both ways and acknowledged,
        // the response's HEADERS, its events as DATA frames, END_STREAM.
        let trace = tool(
            "nghttp",
            &["-nv", "-d", &body_path, "-H", "content-type: application/json", &format!("{base}/v1/completions")],
        );
        for expected in [
            "recv SETTINGS frame",
            "recv SETTINGS frame <length=0, flags=0x01",
            ":status: 200",
            "content-type: text/event-stream",
            "recv DATA frame",
            "; END_STREAM",
            "send GOAWAY frame",
        ] {
            assert!(trace.contains(expected), "{scheme}: no {expected:?} in\n{trace}");
        }
        let events = tool("nghttp", &["-d", &body_path, &format!("{base}/v1/completions")]);
        assert_eq!(events.matches("data: ").count(), 8 + 2, "{scheme}: 8 tokens, the final chunk, [DONE]: {events}");
        // 400 streamed requests, 20 at a time on each of 4 connections.
        let load =
            tool("h2load", &["-n", "400", "-c", "4", "-m", "20", "-d", &body_path, &format!("{base}/v1/completions")]);
        assert!(load.contains("400 succeeded, 0 failed, 0 errored"), "{scheme}: {load}");
        assert!(load.contains("400 2xx"), "{scheme}: {load}");
        if scheme == "https" {
            assert!(load.contains("Application protocol: h2"), "{load}");
        }
    }
}
