//! HTTP/1.1 behaviour of the gateway: keep-alive, pipelining, chunked request bodies,
//! `Expect: 100-continue`, limits and their status codes, unknown routes.

mod common;

use std::io::{BufReader, Read, Write};
use std::time::Duration;

use common::Gateway;
use serde_json::json;

fn completion_body() -> String {
    json!({"model": "test-model", "prompt": "hi", "max_tokens": 3}).to_string()
}

#[test]
fn keep_alive_and_pipelined_requests_are_answered_in_order() {
    let g = Gateway::start();
    let s = g.connect();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    // Sequential on one connection.
    for _ in 0..3 {
        w.write_all(&common::raw_request("POST", "/v1/completions", Some(&completion_body()), &[], false)).unwrap();
        assert_eq!(common::read_response(&mut r).unwrap().status, 200);
    }
    // Pipelined: three requests in one write, three answers in order.
    let mut batch = Vec::new();
    batch.extend(common::raw_request("GET", "/v1/models", None, &[], false));
    batch.extend(common::raw_request("POST", "/v1/completions", Some(&completion_body()), &[], false));
    batch.extend(common::raw_request("GET", "/nope", None, &[], false));
    w.write_all(&batch).unwrap();
    assert_eq!(common::read_response(&mut r).unwrap().json()["object"], "list");
    assert_eq!(common::read_response(&mut r).unwrap().json()["object"], "text_completion");
    assert_eq!(common::read_response(&mut r).unwrap().status, 404);
}

#[test]
fn chunked_bodies_and_expect_continue() {
    let g = Gateway::start();
    let body = completion_body();
    let (a, b) = body.split_at(10);
    let mut s = g.connect();
    let head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n";
    s.write_all(head.as_bytes()).unwrap();
    let mut cont = [0u8; 25];
    s.read_exact(&mut cont).unwrap();
    assert_eq!(&cont, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(format!("{:x}\r\n{a}\r\n{:x};ext=1\r\n{b}\r\n0\r\n\r\n", a.len(), b.len()).as_bytes()).unwrap();
    let r = common::read_response(&mut BufReader::new(s)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn limits_answer_with_the_right_status_in_the_openai_envelope() {
    let g = Gateway::start();
    let cases: Vec<(Vec<u8>, u16)> = vec![
        (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n".to_vec(), 413),
        (format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "a".repeat(70_000)).into_bytes(), 431),
        (b"NONSENSE\r\n\r\n".to_vec(), 400),
        (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{bad}".to_vec(), 400),
        (b"DELETE /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), 405),
        (b"GET /v2/whatever HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), 404),
        (
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec(),
            400,
        ),
    ];
    for (raw, status) in cases {
        let mut s = g.connect();
        s.write_all(&raw).unwrap();
        let r = common::read_response(&mut BufReader::new(s)).unwrap();
        assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&raw[..raw.len().min(60)]));
        let e = r.json();
        assert!(e["error"]["message"].is_string(), "{e}");
        assert!(e["error"]["type"].is_string(), "{e}");
    }
}

#[test]
fn lenient_framing_is_refused_with_400_and_the_connection_closed() {
    let g = Gateway::start();
    let body = completion_body();
    let post = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
    let chunked = format!("{post}Transfer-Encoding: chunked\r\n\r\n");
    // Each of these is read differently by lenient and strict parsers: a proxy in front that
    // applies RFC 9112 strictly must never see us take a request where it saw none (or two).
    let cases: Vec<(&str, String)> = vec![
        ("signed length", format!("{post}Content-Length: +{}\r\n\r\n{body}", body.len())),
        ("signed chunk size", format!("{chunked}+{:x}\r\n{body}\r\n0\r\n\r\n", body.len())),
        ("chunk size with a space", format!("{chunked}{:x} \r\n{body}\r\n0\r\n\r\n", body.len())),
        ("chunk size after a space", format!("{chunked} {:x}\r\n{body}\r\n0\r\n\r\n", body.len())),
        ("gzip, chunked", format!("{post}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")),
        (
            "two Transfer-Encoding lines",
            format!("{post}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ),
        ("chunked on HTTP/1.0", "POST /v1/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".into()),
        ("HTTP/1.1 without Host", "GET /v1/models HTTP/1.1\r\n\r\n".into()),
        ("two Host headers", "GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".into()),
        // Bare-LF lines were waited on until the body timeout, then answered 408.
        ("bare-LF chunk lines", format!("{chunked}{:x}\n{body}\n0\n\n", body.len())),
        ("bare LF after chunk data", format!("{chunked}{:x}\r\n{body}\n", body.len())),
    ];
    for (what, raw) in cases {
        let mut s = g.connect();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(raw.as_bytes()).unwrap();
        let mut r = BufReader::new(s);
        let resp = common::read_response(&mut r).unwrap_or_else(|e| panic!("{what}: no answer within 5 s: {e}"));
        assert_eq!(resp.status, 400, "{what}: {}", resp.text());
        assert_eq!(resp.header("connection"), Some("close"), "{what}");
        assert!(resp.json()["error"]["message"].is_string(), "{what}");
        let mut rest = Vec::new();
        assert_eq!(r.read_to_end(&mut rest).unwrap(), 0, "{what}: the connection stays open");
    }
    // The same requests, framed strictly, are served.
    let legal = [
        format!("{post}Content-Length: {}\r\n\r\n{body}", body.len()),
        format!("{post}Transfer-Encoding: Chunked\r\n\r\n{:X}\r\n{body}\r\n0\r\n\r\n", body.len()),
        format!("POST /v1/completions HTTP/1.0\r\nContent-Length: {}\r\n\r\n{body}", body.len()),
    ];
    for raw in legal {
        let mut s = g.connect();
        s.write_all(raw.as_bytes()).unwrap();
        let resp = common::read_response(&mut BufReader::new(s)).unwrap();
        assert_eq!(resp.status, 200, "{raw:?}: {}", resp.text());
    }
}

#[test]
fn a_slow_client_is_cut_off_with_408() {
    let g = Gateway::start();
    let mut s = g.connect();
    s.write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Len").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let r = common::read_response(&mut BufReader::new(s)).unwrap();
    assert_eq!(r.status, 408);
    // The gateway is unaffected.
    assert_eq!(g.get("/health").status, 200);
}

#[test]
fn http_1_0_streams_end_by_closing() {
    let g = Gateway::start();
    let mut s = g.connect();
    let body = json!({"model": "test-model", "prompt": "hi", "max_tokens": 3, "stream": true}).to_string();
    let req = format!("POST /v1/completions HTTP/1.0\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    assert!(all.starts_with("HTTP/1.0 200"), "{all}");
    assert!(!all.contains("transfer-encoding"), "{all}");
    assert!(all.ends_with("data: [DONE]\n\n"), "{all}");
}
