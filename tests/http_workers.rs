//! HTTP workers against real upstreams: another shardgate (simulator-backed) as the worker, and
//! a small misbehaving server for the faults a real server cannot be made to do.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{Gateway, Options, Response};
use serde_json::{json, Value};

/// Registers an HTTP worker and waits until `GET /workers` shows it ready.
fn add_http_worker(g: &Gateway, body: Value) -> String {
    let r = g.post_json("/workers", &body);
    assert_eq!(r.status, 202, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    common::eventually_within(
        Duration::from_secs(20),
        || g.get(&format!("/workers/{id}")).json()["status"] == "ready",
        "the HTTP worker to become ready",
    );
    id
}

/// A counter's value in the gateway's `/metrics`.
fn metric(g: &Gateway, series: &str) -> u64 {
    let text = g.metrics();
    let line = text.lines().find(|l| l.starts_with(series)).unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line[series.len()..].trim().parse().unwrap()
}

fn delete(g: &Gateway, id: &str) -> u16 {
    g.try_request("DELETE", &format!("/workers/{id}"), None, &[]).unwrap().status
}

/// Values the upstream makes per request (ids, timestamps), blanked for comparison.
fn normalize(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if matches!(k.as_str(), "id" | "created" | "created_at") {
                        *x = Value::Null;
                    } else {
                        walk(x);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

fn stream_events(r: &Response) -> Vec<Value> {
    r.sse_json().into_iter().map(normalize).collect()
}

/// Chat and completions, one-shot and streamed, through the gateway (by the worker's alias)
/// and straight at the upstream: the same bodies but for per-request ids and timestamps, and
/// the headers of a passthrough (no hop-by-hop ones, the stream chunked).
#[test]
fn passthrough_answers_are_the_upstreams_own() {
    let upstream = Gateway::start();
    let gateway = Gateway::start();
    add_http_worker(
        &gateway,
        json!({"url": format!("http://127.0.0.1:{}", upstream.port), "models": [{"id": "remote"}]}),
    );
    let cases = [
        ("/v1/chat/completions", json!({"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8})),
        ("/v1/completions", json!({"prompt": "once upon a time", "max_tokens": 8, "logprobs": 2})),
    ];
    for (path, body) in cases {
        for stream in [false, true] {
            let mut direct = body.clone();
            direct["model"] = json!("test-model");
            direct["stream"] = json!(stream);
            let mut routed = direct.clone();
            routed["model"] = json!("remote");
            let a = upstream.post_json(path, &direct);
            let b = gateway.post_json(path, &routed);
            assert_eq!((a.status, b.status), (200, 200), "{path}: {} / {}", a.text(), b.text());
            assert_eq!(a.header("content-type"), b.header("content-type"), "{path}");
            if stream {
                assert_eq!(b.header("transfer-encoding"), Some("chunked"));
                assert_eq!(stream_events(&a), stream_events(&b), "{path} streamed");
            } else {
                assert_eq!(normalize(a.json()), normalize(b.json()), "{path}");
            }
        }
    }
    // The upstream knows no model "remote": a 200 means the splice put its own name in.
    let counted = |endpoint: &str, streaming: bool| {
        let labels =
            format!("router_type=\"http\",connection_mode=\"http\",endpoint=\"{endpoint}\",streaming=\"{streaming}\"");
        metric(&gateway, &format!("smg_router_requests_total{{{labels}}}"))
    };
    assert_eq!((counted("chat", false), counted("chat", true), counted("completions", true)), (1, 1, 1));
    let models = gateway.get("/v1/models").json();
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["test-model", "remote"], "the HTTP worker's model is listed by its alias");
    let bad = gateway.post_json("/v1/chat/completions", &json!({"model": "remote", "messages": "nope"}));
    assert_eq!(bad.status, 400, "an upstream 4xx passes through as is: {}", bad.text());
    assert_eq!(
        bad.json(),
        upstream.post_json("/v1/chat/completions", &json!({"model": "test-model", "messages": "nope"})).json()
    );
}

/// Workers of the same model, engine and HTTP, share the load by `--policy`; a model only an
/// HTTP worker serves goes there; `GET /workers` tells the kinds apart.
#[test]
fn mixed_engine_and_http_workers_share_a_model_by_policy() {
    let upstream = Gateway::start();
    // One shard: one round-robin cursor, whichever connection the kernel hands it.
    let gateway = Gateway::start_with(Options {
        gateway_args: vec!["--policy".into(), "round_robin".into()],
        shards: 1,
        ..Default::default()
    });
    let id = add_http_worker(&gateway, json!({"url": format!("http://127.0.0.1:{}", upstream.port)}));
    let request = json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4});
    for _ in 0..6 {
        let r = gateway.post_json("/v1/chat/completions", &request);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(
        (gateway.adds().len(), upstream.adds().len()),
        (3, 3),
        "round robin over one engine and one HTTP worker"
    );
    let w = gateway.get(&format!("/workers/{id}")).json();
    assert_eq!((w["connection_mode"].as_str(), w["models"][0].as_str()), (Some("http"), Some("test-model")));
    let other = gateway.post_json("/v1/chat/completions", &json!({"model": "nobody", "messages": []}));
    assert_eq!(other.status, 404, "{}", other.text());
}

/// How the misbehaving server answers generation requests (its `/health` and `/v1/models`
/// answer well, so the worker is ready).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Misbehaviour {
    Reset,
    Stall,
    Garbage,
    ServerError,
    BrokenChunks,
    Good,
}

/// A one-thread HTTP server on `port` (0: any) that serves model `bad-model`.
struct Misbehaving {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Misbehaving {
    fn start(port: u16, how: Misbehaviour) -> Misbehaving {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let s = s.clone();
                        std::thread::spawn(move || serve(conn, how, &s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Misbehaving { port, stop, thread: Some(thread) }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Misbehaving {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(conn: TcpStream, how: Misbehaviour, stop: &AtomicBool) {
    conn.set_nonblocking(false).unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h).unwrap();
            if h.trim().is_empty() {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let ok = |body: &str| {
            format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len())
        };
        let answer = if line.starts_with("GET /health") {
            ok("")
        } else if line.starts_with("GET /v1/models") {
            ok(r#"{"object":"list","data":[{"id":"bad-model","object":"model"}]}"#)
        } else {
            match how {
                Misbehaviour::Good => ok(r#"{"answer":"fine"}"#),
                Misbehaviour::Reset => return,
                Misbehaviour::Stall => {
                    while !stop.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    return;
                }
                Misbehaviour::Garbage => "HTTP/1.1 2x0 what\r\n\r\n".into(),
                Misbehaviour::ServerError => "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nbusy".into(),
                Misbehaviour::BrokenChunks => "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                     transfer-encoding: chunked\r\n\r\nf\r\ndata: {\"a\":1}\n\n\r\nzz\r\n"
                    .into(),
            }
        };
        if conn.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// Each fault fails the request cleanly in the served API's envelope (502, 504 for a stall,
/// 503 when no worker of the model is healthy), logs why, and the worker goes unhealthy after
/// failures in a row. An upstream that breaks a stream it started cuts the client's stream off.
#[test]
fn upstream_faults_fail_cleanly_in_each_apis_envelope() {
    let gateway = Gateway::start_with(Options {
        gateway_args: vec!["--http-worker-timeout-secs".into(), "1".into()],
        ..Default::default()
    });
    let cases = [
        (Misbehaviour::Reset, 502, "connection broken"),
        (Misbehaviour::Stall, 504, "no response within 1 s"),
        (Misbehaviour::Garbage, 502, "malformed response"),
        (Misbehaviour::ServerError, 502, "answered 503"),
    ];
    for (how, status, says) in cases {
        let server = Misbehaving::start(0, how);
        let id = add_http_worker(&gateway, json!({"url": server.url()}));
        let chat = gateway.post_json("/v1/chat/completions", &json!({"model": "bad-model", "messages": []}));
        assert_eq!(chat.status, status, "{how:?}: {}", chat.text());
        let message = chat.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains(says), "{how:?}: {message}");
        let messages =
            gateway.post_json("/v1/messages", &json!({"model": "bad-model", "messages": [], "max_tokens": 1}));
        assert_eq!(messages.status, status, "{how:?}");
        assert_eq!(messages.json()["type"], "error", "{how:?}: Anthropic's envelope: {}", messages.text());
        let third = gateway.post_json("/v1/completions", &json!({"model": "bad-model", "prompt": "x"}));
        assert_eq!(third.status, status, "{how:?}");
        // Its /health still answers, so the next probe brings it back: the log says it went.
        let logs = gateway.logs();
        assert!(
            logs.contains(&format!("HTTP worker {} marked unhealthy after 3 failed requests", server.url())),
            "{how:?}"
        );
        assert_eq!(delete(&gateway, &id), 202);
        common::eventually(|| gateway.get(&format!("/workers/{id}")).status == 404, "the worker to be removed");
    }
    let server = Misbehaving::start(0, Misbehaviour::BrokenChunks);
    let id = add_http_worker(&gateway, json!({"url": server.url()}));
    let mut s = TcpStream::connect(("127.0.0.1", gateway.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = json!({"model": "bad-model", "messages": [], "stream": true}).to_string();
    s.write_all(&common::raw_request("POST", "/v1/chat/completions", Some(&body), &[], false)).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.contains("data: {\"a\":1}") && !got.ends_with("0\r\n\r\n"), "the stream is cut off, not ended: {got}");
    assert_eq!(delete(&gateway, &id), 202);
    // Refused: a worker nobody listens for never becomes ready, and its model gets a 503.
    let closed = Misbehaving::start(0, Misbehaviour::Good);
    let url = closed.url();
    drop(closed);
    let r = gateway.post_json("/workers", &json!({"url": url}));
    assert_eq!(r.status, 202);
    std::thread::sleep(Duration::from_millis(1500));
    let workers = gateway.get("/workers").json();
    let refused = workers["workers"].as_array().unwrap().iter().find(|w| w["url"] == url.as_str()).unwrap().clone();
    assert_eq!(refused["status"], "dead", "{refused}");
}

/// A fault before anything reached the client sends the request to another worker of its
/// model once; the client never sees the fault.
#[test]
fn a_failed_upstream_is_retried_on_another_worker() {
    let gateway = Gateway::start();
    let bad = Misbehaving::start(0, Misbehaviour::Reset);
    let good = Misbehaving::start(0, Misbehaviour::Good);
    add_http_worker(&gateway, json!({"url": bad.url(), "models": [{"id": "shared"}]}));
    add_http_worker(&gateway, json!({"url": good.url(), "models": [{"id": "shared"}]}));
    for _ in 0..4 {
        let r = gateway.post_json("/v1/chat/completions", &json!({"model": "shared", "messages": []}));
        assert_eq!((r.status, r.text()), (200, r#"{"answer":"fine"}"#.to_string()));
    }
    let resent = metric(
        &gateway,
        "smg_worker_retries_total{worker_type=\"regular\",connection_mode=\"http\",endpoint=\"chat\"}",
    );
    assert!(resent >= 1, "resends are counted: {resent}");
}

/// An upstream that goes away makes its worker unhealthy; once it is back on the same port the
/// worker is ready again without a gateway restart.
#[test]
fn a_restarted_upstream_is_served_again() {
    let gateway = Gateway::start();
    let server = Misbehaving::start(0, Misbehaviour::Good);
    let port = server.port;
    let id = add_http_worker(&gateway, json!({"url": server.url()}));
    let request = json!({"model": "bad-model", "messages": []});
    assert_eq!(gateway.post_json("/v1/chat/completions", &request).status, 200);
    drop(server);
    common::eventually(
        || gateway.get(&format!("/workers/{id}")).json()["status"] == "dead",
        "the worker to go unhealthy",
    );
    assert_eq!(gateway.post_json("/v1/chat/completions", &request).status, 503);
    let _server = Misbehaving::start(port, Misbehaviour::Good);
    common::eventually(
        || gateway.get(&format!("/workers/{id}")).json()["status"] == "ready",
        "the worker to come back",
    );
    assert_eq!(gateway.post_json("/v1/chat/completions", &request).status, 200);
}
