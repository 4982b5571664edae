//! HTTP/2 on the API port (cleartext, prior knowledge): every kind of route answers the same
//! as over HTTP/1.1, streams are DATA frames under flow control, a client's RST_STREAM aborts
//! the request on the engine, and drain sends GOAWAY while open streams finish.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::Bytes;
use common::h2c::{self, block_on};
use common::{Gateway, Options, Response};
use serde_json::{json, Value};

const KEY: &str = "sk-h2-5d1c";
const ORIGIN: &str = "https://app.example";

fn with_args(args: &[&str]) -> Gateway {
    Gateway::start_with(Options { gateway_args: args.iter().map(|s| s.to_string()).collect(), ..Default::default() })
}

/// A JSON value without what differs between two runs of the same request (ids, times).
fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "id" | "created" | "created_at" | "system_fingerprint"))
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        v => v.clone(),
    }
}

/// A response's body for comparison: JSON normalized, SSE event by event, text as it is.
fn comparable(r: &Response) -> Vec<Value> {
    let text = r.text();
    if r.header("content-type") == Some("text/event-stream") {
        return text
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let lines: Vec<Value> = e
                    .lines()
                    .map(|l| match l.strip_prefix("data: ").and_then(|d| serde_json::from_str(d).ok()) {
                        Some(v) => normalized(&v),
                        None => Value::String(l.to_string()),
                    })
                    .collect();
                Value::Array(lines)
            })
            .collect();
    }
    vec![serde_json::from_str(&text).map(|v| normalized(&v)).unwrap_or(Value::String(text))]
}

/// The headers a client acts on, which both protocols must send alike.
fn comparable_headers(r: &Response) -> Vec<(&'static str, Option<String>)> {
    ["content-type", "access-control-allow-origin", "retry-after", "cache-control"]
        .into_iter()
        .map(|h| (h, r.header(h).map(str::to_string)))
        .collect()
}

/// (method, path, headers, body, status)
type RouteCase<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Option<&'a str>, u16);

/// (headers, status, what the error message says)
type RefusalCase<'a> = (Vec<(&'a str, &'a str)>, u16, &'a str);

#[test]
fn every_kind_of_route_answers_the_same_over_both_protocols() {
    let g = with_args(&["--api-key", KEY, "--cors-allow-origin", ORIGIN]);
    let bearer = format!("Bearer {KEY}");
    let auth = [("authorization", bearer.as_str()), ("origin", ORIGIN)];
    let chat = json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4});
    let mut chat_stream = chat.clone();
    chat_stream["stream"] = json!(true);
    let completion_stream = json!({"model": "test-model", "prompt": "go", "max_tokens": 5, "stream": true}).to_string();
    let messages = json!({"model": "test-model", "max_tokens": 4, "stream": true,
                          "messages": [{"role": "user", "content": "hi"}]})
    .to_string();
    let responses = json!({"model": "test-model", "input": "hi", "max_output_tokens": 4, "store": false}).to_string();
    let preflight = [("origin", ORIGIN), ("access-control-request-method", "POST")];
    let (chat, chat_stream) = (chat.to_string(), chat_stream.to_string());
    let cases: Vec<RouteCase> = vec![
        ("GET", "/health", &[], None, 200),
        ("GET", "/v1/models", &auth, None, 200),
        ("GET", "/v1/models", &[], None, 401),
        ("POST", "/v1/chat/completions", &auth, Some(&chat), 200),
        ("POST", "/v1/chat/completions", &auth, Some(&chat_stream), 200),
        ("POST", "/v1/completions", &auth, Some(&completion_stream), 200),
        ("POST", "/v1/messages", &auth, Some(&messages), 200),
        ("POST", "/v1/responses", &auth, Some(&responses), 200),
        ("POST", "/v1/chat/completions", &auth, Some("{not json"), 400),
        ("POST", "/v1/chat/completions", &auth, Some(r#"{"model":"test-model","messages":[],"max_tokens":-1}"#), 400),
        ("GET", "/no/such/route", &auth, None, 404),
        ("DELETE", "/v1/models", &auth, None, 405),
        ("OPTIONS", "/v1/chat/completions", &preflight, None, 204),
    ];
    let before = g.metrics();
    for (method, path, headers, body, status) in &cases {
        let one = g.try_request(method, path, *body, headers).unwrap();
        let two = h2c::request_once(g.port, method, path, headers, *body);
        let what = format!("{method} {path} {body:?}");
        assert_eq!(one.status, *status, "{what} over HTTP/1.1: {}", one.text());
        assert_eq!(two.status, *status, "{what} over HTTP/2: {}", two.text());
        assert_eq!(comparable_headers(&two), comparable_headers(&one), "{what}");
        assert_eq!(comparable(&two), comparable(&one), "{what}");
        assert!(two.header("connection").is_none() && two.header("transfer-encoding").is_none(), "{what}");
    }
    // Both protocols are counted alike: two responses per case, by status (and the scrape
    // before them, itself a 200).
    let count = |text: &str, status: u16| -> u64 {
        let prefix = format!("smg_http_responses_total{{status_code=\"{status}\"}} ");
        text.lines().find_map(|l| l.strip_prefix(prefix.as_str())).map_or(0, |n| n.parse().unwrap())
    };
    let after = g.metrics();
    for status in [200u16, 400, 401, 404] {
        let expected = 2 * cases.iter().filter(|c| c.4 == status).count() as u64 + u64::from(status == 200);
        assert_eq!(count(&after, status) - count(&before, status), expected, "status {status}");
    }
}

#[test]
fn bad_requests_get_the_same_refusals_as_over_http1() {
    let g = with_args(&["--api-key", KEY]);
    let bearer = format!("Bearer {KEY}");
    let too_long = (shardgate::limits::http_body_bytes_max + 1).to_string();
    let cases: Vec<RefusalCase> = vec![
        // Two credentials: servers differ on which one counts, so neither does.
        (vec![("authorization", bearer.as_str()), ("authorization", "Bearer x")], 400, "more than one authorization"),
        (vec![("authorization", bearer.as_str()), ("content-length", too_long.as_str())], 413, "exceeds the limit"),
    ];
    for (headers, status, message) in cases {
        let r = block_on(async {
            let send = h2c::connect(g.port).await;
            let mut req = h2c::request("POST", "/v1/completions", &[], None);
            for (k, v) in &headers {
                let name = http::HeaderName::from_bytes(k.as_bytes()).unwrap();
                req.headers_mut().append(name, http::HeaderValue::from_str(v).unwrap());
            }
            let (response, _body) = send.ready().await.unwrap().send_request(req, false).unwrap();
            let (head, mut recv) = response.await.unwrap().into_parts();
            let mut bytes = Vec::new();
            while let Some(Ok(d)) = recv.data().await {
                bytes.extend_from_slice(&d);
            }
            (head.status.as_u16(), String::from_utf8(bytes).unwrap())
        });
        let (got, text) = r;
        assert_eq!(got, status, "{headers:?}: {text}");
        assert!(text.contains(message), "{headers:?}: {text}");
    }
    assert!(g.logs().contains("rejecting request"), "refusals are logged");
}

/// A streamed completion of `max_tokens` on an open connection: its response head and body.
async fn start_stream(send: &h2::client::SendRequest<Bytes>, max_tokens: u32) -> h2::RecvStream {
    let body = json!({"model": "test-model", "prompt": "go", "max_tokens": max_tokens, "ignore_eos": true,
                      "stream": true})
    .to_string();
    let req = h2c::request("POST", "/v1/completions", &[], Some(&body));
    let (response, mut out) = send.clone().ready().await.unwrap().send_request(req, false).unwrap();
    out.send_data(Bytes::from(body), true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    response.into_body()
}

/// Reads a stream to its end, giving its window back as it goes; what it sent.
async fn read_rest(recv: &mut h2::RecvStream) -> Vec<u8> {
    let mut bytes = Vec::new();
    while let Some(data) = recv.data().await {
        let data = data.unwrap();
        let _ = recv.flow_control().release_capacity(data.len());
        bytes.extend_from_slice(&data);
    }
    bytes
}

/// The `data:` payloads of an SSE body.
fn events(body: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(body).lines().filter_map(|l| l.strip_prefix("data: ")).map(str::to_string).collect()
}

async fn read_events(recv: &mut h2::RecvStream) -> Vec<String> {
    events(&read_rest(recv).await)
}

#[test]
fn a_reset_stream_is_aborted_on_the_engine_and_its_neighbours_go_on() {
    let g = Gateway::start();
    let (kept, reset_id) = block_on(async {
        let send = h2c::connect(g.port).await;
        let mut doomed = start_stream(&send, 5000).await;
        let mut kept = start_stream(&send, 40).await;
        // The doomed stream is running on the engine: its first event came.
        let first = doomed.data().await.unwrap().unwrap();
        assert!(first.starts_with(b"data: "), "{first:?}");
        let id = g.adds().iter().find(|a| a["max_tokens"] == 5000).map(|a| a["id"].as_str().unwrap().to_string());
        // RST_STREAM(CANCEL) is what dropping the receiving half sends.
        drop(doomed);
        (read_events(&mut kept).await, id.unwrap())
    });
    assert_eq!(kept.last().map(String::as_str), Some("[DONE]"), "{kept:?}");
    assert_eq!(kept.len(), 40 + 2, "every token of the kept stream, its final chunk and [DONE]");
    common::eventually(|| g.aborted_ids().contains(&reset_id), "the reset stream's ABORT on the engine");
}

#[test]
fn a_stream_whose_window_is_closed_waits_without_blocking_others() {
    let g = Gateway::start();
    let (stalled, flowing) = block_on(async {
        let mut builder = h2::client::Builder::new();
        // Room for about one event per stream until the client gives the window back.
        builder.initial_window_size(200).initial_connection_window_size(1 << 20);
        let send = h2c::connect_with(g.port, builder).await;
        let mut stalled = start_stream(&send, 60).await;
        let mut flowing = start_stream(&send, 60).await;
        // The stalled stream's window is never given back while the other runs to its end.
        let mut first = Vec::new();
        while first.len() < 150 {
            first.extend_from_slice(&stalled.data().await.unwrap().unwrap());
        }
        let flowing = read_events(&mut flowing).await;
        let _ = stalled.flow_control().release_capacity(first.len());
        first.extend(read_rest(&mut stalled).await);
        let events = events(&first);
        (events, flowing)
    });
    for (name, events) in [("stalled", &stalled), ("flowing", &flowing)] {
        assert_eq!(events.len(), 60 + 2, "{name}: {events:?}");
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{name}");
        for e in &events[..events.len() - 1] {
            serde_json::from_str::<Value>(e).unwrap_or_else(|err| panic!("{name}: {err}: {e}"));
        }
    }
}

/// Waits for the connection's window, not the stream's: 24 streams of ~12 KiB each on the
/// client's default 64 KiB connection window, more than their 4 KiB send reservations fit in.
/// Those left without capacity must be woken when the others' bytes are read and the window
/// comes back, or they stall until the write timeout cuts them off.
#[test]
fn streams_beyond_the_connection_windows_reserve_still_run_to_their_end() {
    let g = Gateway::start();
    let all = block_on(async {
        let send = h2c::connect(g.port).await;
        let mut streams = Vec::new();
        for _ in 0..24 {
            streams.push(start_stream(&send, 60).await);
        }
        futures_util::future::join_all(streams.iter_mut().map(read_events)).await
    });
    for (i, events) in all.iter().enumerate() {
        assert_eq!(events.len(), 60 + 2, "stream {i}: {events:?}");
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "stream {i}");
    }
}

#[test]
fn drain_sends_goaway_and_lets_open_streams_finish() {
    let mut g = with_args(&["--shutdown-timeout-secs", "30"]);
    let (events, refused) = block_on(async {
        let send = h2c::connect(g.port).await;
        let mut open = start_stream(&send, 300).await;
        g.signal_gateway(libc::SIGTERM);
        // After GOAWAY the client opens no new stream on this connection.
        let mut refused = None;
        for _ in 0..200 {
            match send.clone().ready().await {
                Err(e) => {
                    refused = Some(e.to_string());
                    break;
                }
                Ok(mut s) => match s.send_request(h2c::request("GET", "/health", &[], None), true) {
                    Err(e) => {
                        refused = Some(e.to_string());
                        break;
                    }
                    Ok((response, _)) => {
                        if let Err(e) = response.await {
                            refused = Some(e.to_string());
                            break;
                        }
                    }
                },
            }
            monoio::time::sleep(Duration::from_millis(10)).await;
        }
        (read_events(&mut open).await, refused)
    });
    assert!(refused.is_some(), "no GOAWAY: new streams were still served");
    assert_eq!(events.len(), 300 + 2, "the open stream ran to its end");
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    assert!(g.wait_gateway_exit(Duration::from_secs(20)).is_some_and(|s| s.success()));
}

#[test]
fn admission_counts_http2_streams_with_http1_requests() {
    let g = with_args(&["--max-concurrent-requests", "1", "--queue-size", "0"]);
    let (full_h2, full_h1, done) = block_on(async {
        let send = h2c::connect(g.port).await;
        // The only slot, held by a stream on the HTTP/2 connection.
        let mut holder = start_stream(&send, 300).await;
        let body = json!({"model": "test-model", "prompt": "go", "max_tokens": 2}).to_string();
        let full_h2 = h2c::send(&send, "POST", "/v1/completions", &[], Some(&body)).await;
        let full_h1 = g.post("/v1/completions", &body);
        (full_h2, full_h1, read_events(&mut holder).await)
    });
    for (protocol, r) in [("HTTP/2", &full_h2), ("HTTP/1.1", &full_h1)] {
        assert_eq!(r.status, 429, "{protocol}: {}", r.text());
        assert_eq!(r.header("retry-after"), Some("1"), "{protocol}");
        assert_eq!(r.json()["error"]["code"], "rate_limit_exceeded", "{protocol}");
    }
    assert_eq!(comparable(&full_h2), comparable(&full_h1));
    assert_eq!(done.last().map(String::as_str), Some("[DONE]"), "the stream holding the slot ran to its end");
    assert!(g.metrics().contains("shardgate_admission_rejected_total{reason=\"queue_full\"} 2"));
}

#[test]
fn requests_relayed_to_an_http_worker_are_answered_over_http2() {
    // Another gateway as the HTTP worker, beside the engine; round robin on one shard sends
    // every other request up to it.
    let upstream = Gateway::start();
    let g = Gateway::start_with(Options {
        gateway_args: vec!["--policy".into(), "round_robin".into()],
        shards: 1,
        ..Default::default()
    });
    let added = g.post_json("/workers", &json!({"url": format!("http://127.0.0.1:{}", upstream.port)}));
    assert_eq!(added.status, 202, "{}", added.text());
    let id = added.json()["id"].as_str().unwrap().to_string();
    common::eventually_within(
        Duration::from_secs(20),
        || g.get(&format!("/workers/{id}")).json()["status"] == "ready",
        "the HTTP worker to become ready",
    );
    let stream = json!({"model": "test-model", "prompt": "go", "max_tokens": 6, "stream": true}).to_string();
    let one_shot = json!({"model": "test-model", "prompt": "go", "max_tokens": 6}).to_string();
    let answers = block_on(async {
        let send = h2c::connect(g.port).await;
        let mut answers = Vec::new();
        for body in [&stream, &stream, &one_shot, &one_shot] {
            answers.push(h2c::send(&send, "POST", "/v1/completions", &[], Some(body)).await);
        }
        answers
    });
    for (i, r) in answers.iter().enumerate() {
        assert_eq!(r.status, 200, "request {i}: {}", r.text());
        assert!(r.header("connection").is_none() && r.header("transfer-encoding").is_none(), "request {i}");
        if i < 2 {
            let events = r.sse();
            assert_eq!(events.len(), 6 + 2, "request {i}: {events:?}");
            assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
        } else {
            assert_eq!(r.json()["usage"]["completion_tokens"], 6, "request {i}");
        }
    }
    assert_eq!((g.adds().len(), upstream.adds().len()), (2, 2), "two answered here, two relayed");
}

/// Whether the gateway's end of `client`'s connection writes without Nagle: its socket, found
/// by the two ports in the gateway's /proc, is copied into this process (pidfd_getfd) and asked.
fn gateway_side_nodelay(gw: &Gateway, client: &TcpStream) -> bool {
    let client_port = client.local_addr().unwrap().port();
    let table = std::fs::read_to_string(format!("/proc/{}/net/tcp", gw.pid())).unwrap();
    let port_of = |address: &str| address.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
    let inode = table
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 9 && port_of(f[1]) == Some(gw.port) && port_of(f[2]) == Some(client_port))
        .map(|f| f[9].to_string())
        .expect("the gateway's end of the connection in its /proc/PID/net/tcp");
    let target = format!("socket:[{inode}]");
    let fd: i32 = std::fs::read_dir(format!("/proc/{}/fd", gw.pid()))
        .unwrap()
        .flatten()
        .find(|e| std::fs::read_link(e.path()).is_ok_and(|link| link.to_string_lossy() == target))
        .and_then(|e| e.file_name().to_str()?.parse().ok())
        .expect("the gateway's descriptor of the connection");
    // SAFETY: plain system calls on descriptors this function opens and closes itself.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, gw.pid() as libc::pid_t, 0) as i32;
        assert!(pidfd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
        let copy = libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) as i32;
        assert!(copy >= 0, "pidfd_getfd: {}", std::io::Error::last_os_error());
        let mut on: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let rc = libc::getsockopt(copy, libc::IPPROTO_TCP, libc::TCP_NODELAY, (&raw mut on).cast(), &mut len);
        libc::close(copy);
        libc::close(pidfd);
        assert_eq!(rc, 0, "getsockopt(TCP_NODELAY): {}", std::io::Error::last_os_error());
        on != 0
    }
}

#[test]
fn every_api_connection_writes_without_nagle() {
    // With Nagle on, a stream's first DATA frame waited behind its HEADERS for the client's
    // delayed ACK (~40 ms), and so did a step's write behind the step before it.
    let gw = Gateway::start();
    let cases: &[(&str, &[u8])] = &[
        ("HTTP/1.1", b"GET /v1/models HTTP/1.1\r\nHost: t\r\n\r\n"),
        ("HTTP/2 with prior knowledge", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0"),
    ];
    for (protocol, hello) in cases {
        let mut client = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        client.write_all(hello).unwrap();
        // An answer (a response head, or the server's SETTINGS): the gateway serves the connection.
        let mut answer = [0u8; 9];
        client.read_exact(&mut answer).unwrap();
        assert!(gateway_side_nodelay(&gw, &client), "{protocol}: the gateway's socket has Nagle on");
    }
}
