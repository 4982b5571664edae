//! `https://` workers: the gateway verifies the upstream's certificate (issuer, name), offers
//! its own for mutual TLS, and relays through TLS what it relays in the clear. The upstream is
//! a real simulator-backed gateway behind a rustls terminator; a worker whose certificate is
//! refused goes unhealthy and its requests fail cleanly. Bad TLS flags stop the start with a
//! message naming what to fix.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Gateway, Options};
use serde_json::{json, Value};
use shardgate_testkit::tls::{Pki, ServerSetup, Terminator};

fn gateway_with(args: &[&str]) -> Gateway {
    Gateway::start_with(Options { gateway_args: args.iter().map(|a| a.to_string()).collect(), ..Options::default() })
}

fn add(g: &Gateway, url: &str) -> String {
    let r = g.post_json("/workers", &json!({"url": url, "models": [{"id": "remote"}]}));
    assert_eq!(r.status, 202, "{url}: {}", r.text());
    r.json()["id"].as_str().unwrap().to_string()
}

fn status_of(g: &Gateway, id: &str) -> Value {
    g.get(&format!("/workers/{id}")).json()["status"].clone()
}

fn wait_status(g: &Gateway, id: &str, want: &str) {
    common::eventually_within(Duration::from_secs(20), || status_of(g, id) == want, &format!("worker {id} {want}"));
}

fn chat(stream: bool) -> Value {
    json!({"model": "remote", "messages": [{"role": "user", "content": "hello over tls"}], "max_tokens": 6,
           "stream": stream})
}

/// The generated text of a one-shot or streamed chat answer.
fn text_of(r: &common::Response, stream: bool) -> String {
    if stream {
        r.sse_json().iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_string)).collect()
    } else {
        r.json()["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_string()
    }
}

fn pki(name: &str) -> Pki {
    Pki::new(&common::test_dir().join(name), name)
}

fn terminator(leaf: &shardgate_testkit::tls::Leaf, client_ca: Option<&Path>, backend: u16) -> Terminator {
    let setup = ServerSetup {
        leaf: leaf.clone(),
        alpn: vec![b"http/1.1".to_vec()],
        client_ca: client_ca.map(Path::to_path_buf),
    };
    Terminator::start(&setup, format!("127.0.0.1:{backend}"))
}

/// Chat through the gateway (by the worker's alias) and straight at the upstream (by its own
/// name) give the same text, one-shot and streamed.
fn assert_relayed(g: &Gateway, upstream: &Gateway, what: &str) {
    let own_name = upstream.get("/v1/models").json()["data"][0]["id"].clone();
    for stream in [false, true] {
        let through = g.post_json("/v1/chat/completions", &chat(stream));
        assert_eq!(through.status, 200, "{what}: {}", through.text());
        let mut direct_body = chat(stream);
        direct_body["model"] = own_name.clone();
        let direct = upstream.post_json("/v1/chat/completions", &direct_body);
        assert_eq!(direct.status, 200, "{}", direct.text());
        let text = text_of(&through, stream);
        assert!(!text.is_empty(), "{what}: no text in {}", through.text());
        assert_eq!(text, text_of(&direct, stream), "{what} (stream={stream})");
    }
}

fn remove(g: &Gateway, id: &str) {
    let r = g.try_request("DELETE", &format!("/workers/{id}"), None, &[]).unwrap();
    assert_eq!(r.status, 202, "{}", r.text());
    common::eventually(|| g.get(&format!("/workers/{id}")).status == 404, "the worker removed");
}

#[test]
fn an_https_worker_is_verified_and_relayed_through_tls() {
    let upstream = Gateway::start();
    let ours = pki("ours");
    let theirs = pki("theirs");
    let good = terminator(&ours.leaf("upstream", &["localhost", "127.0.0.1"]), None, upstream.port);
    let stranger = terminator(&theirs.leaf("upstream", &["localhost"]), None, upstream.port);
    let misnamed = terminator(&ours.leaf("elsewhere", &["worker.example"]), None, upstream.port);
    let ca = ours.ca_path().display().to_string();
    let g = gateway_with(&["--ca-cert-path", &ca]);

    // By name and by IP: the certificate carries both.
    for url in [format!("https://localhost:{}", good.port), format!("https://127.0.0.1:{}", good.port)] {
        let id = add(&g, &url);
        wait_status(&g, &id, "ready");
        assert_relayed(&g, &upstream, &url);
        remove(&g, &id);
    }

    // A certificate from another CA, and a name the certificate does not carry: the worker
    // never becomes ready, its requests fail cleanly, and the log says why.
    let refused = [
        (format!("https://localhost:{}", stranger.port), "UnknownIssuer"),
        (format!("https://127.0.0.1:{}", misnamed.port), "not valid for name"),
    ];
    for (url, why) in refused {
        let id = add(&g, &url);
        common::eventually_within(
            Duration::from_secs(20),
            || g.logs().contains(&format!("HTTP worker {url} is unhealthy: TLS handshake failed: invalid peer")),
            "the refusal logged",
        );
        assert!(g.logs().contains(why), "{url}: {}", g.logs());
        assert_ne!(status_of(&g, &id), "ready", "{url}");
        let r = g.post_json("/v1/chat/completions", &chat(false));
        assert!(r.status >= 400, "{url}: {}", r.text());
        assert!(r.json()["error"]["message"].is_string(), "{url}: an error envelope: {}", r.text());
        remove(&g, &id);
    }
}

#[test]
fn mutual_tls_offers_the_gateways_certificate() {
    let upstream = Gateway::start();
    let ours = pki("mtls");
    let leaf = ours.leaf("upstream", &["localhost"]);
    let client = ours.leaf("gateway", &["gateway.internal"]);
    let wants_client = terminator(&leaf, Some(&ours.ca_path()), upstream.port);
    let url = format!("https://localhost:{}", wants_client.port);
    let ca = ours.ca_path().display().to_string();

    let anonymous = gateway_with(&["--ca-cert-path", &ca]);
    let id = add(&anonymous, &url);
    // TLS 1.3 completes the client's handshake before the server checks its certificate: the
    // refusal arrives as an alert on the first read.
    common::eventually_within(
        Duration::from_secs(20),
        || {
            anonymous.logs().contains(&format!(
                "HTTP worker {url} is unhealthy: connection broken: received fatal alert: CertificateRequired"
            ))
        },
        "the anonymous gateway refused",
    );
    assert_ne!(status_of(&anonymous, &id), "ready");

    let (cert, key) = (client.cert.display().to_string(), client.key.display().to_string());
    let g = gateway_with(&["--ca-cert-path", &ca, "--client-cert-path", &cert, "--client-key-path", &key]);
    let id = add(&g, &url);
    wait_status(&g, &id, "ready");
    assert_relayed(&g, &upstream, "mutual TLS");
}

#[test]
fn bad_tls_flags_stop_the_start_and_name_the_fix() {
    let dir = common::test_dir();
    let ours = Pki::new(&dir, "flags");
    let client = ours.leaf("gateway", &["gateway.internal"]);
    let missing = dir.join("missing.pem");
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let s = |p: &Path| p.display().to_string();
    let cases: [(Vec<String>, String); 4] = [
        (vec!["--ca-cert-path".into(), s(&missing)], format!("cannot read {}", s(&missing))),
        (vec!["--ca-cert-path".into(), s(&not_pem)], format!("{} holds no PEM certificate", s(&not_pem))),
        (vec!["--client-cert-path".into(), s(&client.cert)], "--client-cert-path needs --client-key-path".into()),
        (
            vec!["--client-cert-path".into(), s(&client.cert), "--client-key-path".into(), s(&client.cert)],
            "holds no PEM private key".into(),
        ),
    ];
    for (flags, says) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_shardgate"))
            .args(["launch", "--worker-urls", "https://127.0.0.1:1", "--model-path"])
            .arg(common::model_dir())
            .args(["--port", &common::free_port().to_string(), "--metrics-port", &common::free_port().to_string()])
            .args(&flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} started");
        assert!(stderr.contains("TLS to workers") && stderr.contains(&says), "{flags:?}: {stderr}");
    }
}
