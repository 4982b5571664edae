//! TLS on the API port (`--tls-cert-path` / `--tls-key-path`): HTTP/2 and HTTP/1.1 chosen by
//! ALPN, checked with curl (a real client, its own TLS and HTTP/2 stacks) against a
//! certificate from a throwaway CA (`shardgate_testkit::tls`); a client leaving a TLS stream aborts
//! its request on the engine; bad files are refused at startup with a message naming them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Gateway, Options};
use serde_json::json;
use shardgate_testkit::tls::Pki;

/// A certificate for `localhost`, its key, and the CA that signed it (what clients trust),
/// in `dir`.
fn certificate(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let pki = Pki::new(dir, "front");
    let leaf = pki.leaf("server", &["localhost"]);
    (leaf.cert, leaf.key, pki.ca_path())
}

fn tls_gateway() -> (Gateway, PathBuf) {
    tls_gateway_with(Options::default())
}

fn tls_gateway_with(opts: Options) -> (Gateway, PathBuf) {
    let dir = common::test_dir();
    let (cert, key, ca) = certificate(&dir);
    let args = vec![
        "--tls-cert-path".to_string(),
        cert.display().to_string(),
        "--tls-key-path".to_string(),
        key.display().to_string(),
    ];
    let g = Gateway::start_with(Options { gateway_args: args, wait_ready: false, ..opts });
    // The harness's own readiness probe speaks cleartext.
    common::eventually_within(
        Duration::from_secs(30),
        || curl(g.port, &ca, "--http1.1", "/readiness", None, &[]).1 == "1.1 200",
        "readiness over TLS",
    );
    (g, ca)
}

/// curl against the gateway's TLS port as `https://localhost`, trusting only the CA `ca`; its
/// stdout, and the HTTP version and status it reports last.
fn curl(port: u16, ca: &Path, protocol: &str, path: &str, body: Option<&str>, extra: &[&str]) -> (String, String) {
    let mut c = Command::new("curl");
    c.args(["-sS", protocol, "--cacert"]).arg(ca);
    c.args(["--resolve", &format!("localhost:{port}:127.0.0.1"), "-w", "\n%{http_version} %{http_code}"]);
    if let Some(body) = body {
        c.args(["-H", "content-type: application/json", "-d", body]);
    }
    let out = c.args(extra).arg(format!("https://localhost:{port}{path}")).output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, last) = text.rsplit_once('\n').unwrap_or(("", &text));
    (body.to_string(), last.to_string())
}

/// An HTTP/1.1 connection inside TLS holds three descriptors (its socket and the socket pair
/// that bridges it to the HTTP/1.1 server), and the connection budget counts three for every
/// connection of a TLS port, so the cap it logs fits the descriptor limit.
#[test]
fn the_connection_budget_counts_the_descriptors_of_a_tls_connection() {
    // One shard, one engine: 256 + 64 + 16 + 4 = 340 descriptors reserved (`http::fd_budget`);
    // 300 more hold 100 TLS connections, where 300 plain ones would fit.
    let (g, ca) = tls_gateway_with(Options { nofile: Some(340 + 300), shards: 1, ..Default::default() });
    assert!(g.logs().contains("up to 100 connections per shard (3 descriptor(s) each)"), "{}", g.logs());
    // The readiness probe's connection is closed by then on curl's side; its three descriptors
    // are counted until the gateway has seen it go (and io_uring has closed them).
    common::eventually(
        || g.metrics().contains("smg_http_connections_active 1\n"),
        "the probe's connection closed (the scrape is the one open)",
    );
    let mut before = g.open_fds();
    common::eventually(
        || {
            std::thread::sleep(Duration::from_millis(100));
            let now = g.open_fds();
            std::mem::replace(&mut before, now) == now
        },
        "a steady descriptor count",
    );
    let clients: Vec<common::ChildGuard> = (0..10)
        .map(|_| {
            let child = Command::new("openssl")
                .args(["s_client", "-quiet", "-alpn", "http/1.1", "-connect", &format!("127.0.0.1:{}", g.port)])
                .arg("-CAfile")
                .arg(&ca)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("openssl");
            common::ChildGuard(child)
        })
        .collect();
    let held = clients.len() * 3;
    common::eventually_within(
        Duration::from_secs(20),
        || g.open_fds() >= before + held,
        "every TLS connection bridged",
    );
    std::thread::sleep(Duration::from_millis(200));
    let after = g.open_fds();
    assert!(after - before <= held + 4, "{} TLS connections took {} descriptors", clients.len(), after - before);
}

#[test]
fn alpn_chooses_http2_or_http1_and_both_serve_every_kind_of_response() {
    let (g, ca) = tls_gateway();
    let stream = json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
                        "stream": true})
    .to_string();
    let one_shot = json!({"model": "test-model", "prompt": "go", "max_tokens": 3}).to_string();
    // (curl's protocol flag, the version it must report)
    for (flag, version) in [("--http2", "2"), ("--http1.1", "1.1")] {
        let (body, last) = curl(g.port, &ca, flag, "/v1/models", None, &[]);
        assert_eq!(last, format!("{version} 200"), "{flag}: {body}");
        assert!(body.contains("test-model"), "{flag}: {body}");
        let (body, last) = curl(g.port, &ca, flag, "/v1/chat/completions", Some(&stream), &[]);
        assert_eq!(last, format!("{version} 200"), "{flag}: {body}");
        assert_eq!(body.matches("data: ").count(), 5 + 3, "{flag}: role, 5 tokens, finish, [DONE]: {body}");
        assert!(body.trim_end().ends_with("data: [DONE]"), "{flag}: {body}");
        let (body, last) = curl(g.port, &ca, flag, "/v1/completions", Some(&one_shot), &[]);
        assert_eq!(last, format!("{version} 200"), "{flag}: {body}");
        let (body, last) = curl(g.port, &ca, flag, "/v1/completions", Some("{"), &[]);
        assert_eq!(last, format!("{version} 400"), "{flag}: {body}");
    }
    // Cleartext on the TLS port gets no HTTP answer, and the failed handshake is logged.
    let plain = Command::new("curl")
        .args(["-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://127.0.0.1:{}/health", g.port))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "000");
    common::eventually(|| g.logs().contains("TLS handshake failed"), "the failed handshake's log line");
    assert!(g.logs().contains(&format!("listening on https://127.0.0.1:{}", g.port)));
}

#[test]
fn a_client_leaving_a_tls_stream_aborts_its_request_on_the_engine() {
    let (g, ca) = tls_gateway();
    let body = json!({"model": "test-model", "prompt": "go", "max_tokens": 5000, "ignore_eos": true, "stream": true})
        .to_string();
    for (n, flag) in ["--http2", "--http1.1"].into_iter().enumerate() {
        // curl gives up after a second, well before the 5,000 tokens.
        let (_, last) = curl(g.port, &ca, flag, "/v1/completions", Some(&body), &["-m", "1"]);
        assert!(last.ends_with(" 200"), "{flag}: {last}");
        common::eventually(|| g.aborted_ids().len() > n, "the abandoned request's ABORT");
    }
}

#[test]
fn bad_certificate_or_key_files_are_refused_at_startup() {
    let dir = common::test_dir();
    let (cert, key, _) = certificate(&dir);
    let (_, other_key, _) = certificate(&dir.join("other"));
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let missing = dir.join("missing.pem");
    let p = |p: &Path| p.display().to_string();
    // (flags, what the error says)
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["--tls-cert-path".into(), p(&missing), "--tls-key-path".into(), p(&key)],
            format!("cannot read --tls-cert-path {}", missing.display()),
        ),
        (
            vec!["--tls-cert-path".into(), p(&garbage), "--tls-key-path".into(), p(&key)],
            format!("--tls-cert-path {}: no PEM certificate in the file", garbage.display()),
        ),
        (
            vec!["--tls-cert-path".into(), p(&cert), "--tls-key-path".into(), p(&cert)],
            format!("--tls-key-path {}: no PEM private key in the file", cert.display()),
        ),
        (
            vec!["--tls-cert-path".into(), p(&cert), "--tls-key-path".into(), p(&other_key)],
            "--tls-cert-path / --tls-key-path refused".into(),
        ),
        (vec!["--tls-cert-path".into(), p(&cert)], "--tls-cert-path needs its pair".into()),
        (vec!["--tls-key-path".into(), p(&key)], "--tls-key-path needs its pair".into()),
    ];
    for (flags, message) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_shardgate"))
            .args(["launch", "--worker-urls", "ipc:///tmp/sg-nowhere/engine", "--host", "127.0.0.1"])
            .args(["--port", &common::free_port().to_string(), "--metrics-port", &common::free_port().to_string()])
            .arg("--model-path")
            .arg(common::model_dir())
            .args(&flags)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} started");
        assert!(err.contains(&message), "{flags:?}: {err}");
    }
}
