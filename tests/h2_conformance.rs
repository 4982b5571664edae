//! Frame-level conformance of the HTTP/2 front end, on what `h2spec` checks: the preface, the
//! server's SETTINGS and their acknowledgement, PING, flow-control windows, stream states,
//! GOAWAY and the error codes of each fault (RFC 9113). Each case is raw frames on a fresh
//! connection and the frame (or end) the server must answer with. Where the `h2` crate answers
//! with another error code than the RFC names, the case says so and checks `h2`'s (a change
//! in `h2` then shows here).

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::h2raw::{self, Conn, Frame};
use common::Gateway;

const LIMIT: Duration = Duration::from_secs(10);

/// What the server must answer with.
enum Expect {
    /// A frame for which the predicate holds.
    Frame(&'static str, fn(&Frame) -> bool),
    /// GOAWAY with this error code.
    GoAway(u32),
    /// RST_STREAM with this error code on this stream, or GOAWAY with it (RFC 9113 lets a
    /// stream error be treated as a connection error).
    StreamError(u32, u32),
}

struct Case {
    name: &'static str,
    /// Acknowledge the server's SETTINGS before sending.
    ack: bool,
    send: Vec<Vec<u8>>,
    expect: Expect,
}

fn get(stream: u32) -> Vec<u8> {
    h2raw::request(stream, "GET", "/v1/models", true)
}

fn setting(frame: &Frame, id: u16) -> Option<u32> {
    frame
        .payload
        .chunks(6)
        .find(|p| u16::from_be_bytes([p[0], p[1]]) == id)
        .map(|p| u32::from_be_bytes([p[2], p[3], p[4], p[5]]))
}

fn cases() -> Vec<Case> {
    use h2raw::*;
    let ping = frame(PING, 0, 0, b"8 bytes!");
    vec![
        Case {
            name: "the server's first frame is its SETTINGS, with its limits",
            ack: false,
            send: vec![],
            expect: Expect::Frame("SETTINGS with MAX_CONCURRENT_STREAMS 256 and MAX_HEADER_LIST_SIZE", |f| {
                f.kind == SETTINGS
                    && f.flags & ACK == 0
                    && setting(f, 0x3) == Some(256)
                    && setting(f, 0x6) == Some(shardgate::limits::http2_header_list_bytes_max)
            }),
        },
        Case {
            name: "the client's SETTINGS are acknowledged",
            ack: false,
            send: vec![],
            expect: Expect::Frame("SETTINGS ACK, empty", |f| {
                f.kind == SETTINGS && f.flags == ACK && f.payload.is_empty()
            }),
        },
        Case {
            name: "SETTINGS ACK with a payload",
            ack: true,
            send: vec![frame(SETTINGS, ACK, 0, &[0, 3, 0, 0, 0, 1])],
            // RFC 9113 §6.5 names FRAME_SIZE_ERROR; `h2` answers PROTOCOL_ERROR.
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "SETTINGS on a stream",
            ack: true,
            send: vec![frame(SETTINGS, 0, 1, &[])],
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
            ack: true,
            send: vec![settings(&[(0x4, 1 << 31)])],
            // RFC 9113 §6.5.2 names FLOW_CONTROL_ERROR; `h2` answers PROTOCOL_ERROR.
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "SETTINGS_MAX_FRAME_SIZE below 16384",
            ack: true,
            send: vec![settings(&[(0x5, 16383)])],
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "PING is answered with its payload",
            ack: true,
            send: vec![ping],
            expect: Expect::Frame("PING ACK with the same payload", |f| {
                f.kind == PING && f.flags == ACK && f.payload == b"8 bytes!"
            }),
        },
        Case {
            name: "PING of 7 bytes",
            ack: true,
            send: vec![frame(PING, 0, 0, b"7 bytes")],
            // RFC 9113 §6.7 names FRAME_SIZE_ERROR; `h2` answers PROTOCOL_ERROR.
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "PING on a stream",
            ack: true,
            send: vec![frame(PING, 0, 1, b"8 bytes!")],
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "an unknown frame type is ignored",
            ack: true,
            send: vec![frame(0xee, 0, 0, b"whatever"), frame(PING, 0, 0, b"after it")],
            expect: Expect::Frame("PING ACK after the unknown frame", |f| f.kind == PING && f.payload == b"after it"),
        },
        Case {
            name: "WINDOW_UPDATE of 0 on the connection",
            ack: true,
            send: vec![window_update(0, 0)],
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "WINDOW_UPDATE overflowing the connection window",
            ack: true,
            send: vec![window_update(0, 0x7fff_ffff)],
            expect: Expect::GoAway(FLOW_CONTROL_ERROR),
        },
        Case {
            name: "DATA on an idle stream",
            ack: true,
            send: vec![frame(DATA, 0, 1, b"x")],
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "RST_STREAM on an idle stream",
            ack: true,
            send: vec![rst_stream(1, CANCEL)],
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "HEADERS on an even (server-initiated) stream",
            ack: true,
            send: vec![get(2)],
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "a stream id lower than one already used",
            ack: true,
            send: vec![get(5), get(3)],
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "DATA after END_STREAM (half-closed remote)",
            ack: true,
            send: vec![h2raw::request(1, "POST", "/v1/completions", true), frame(DATA, 0, 1, b"x")],
            // RFC 9113 §5.1 names STREAM_CLOSED; `h2` answers PROTOCOL_ERROR.
            expect: Expect::StreamError(1, PROTOCOL_ERROR),
        },
        Case {
            name: "HEADERS without :path",
            ack: true,
            send: vec![frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                1,
                &header_block(&[(":method", "GET"), (":scheme", "http")]),
            )],
            // RFC 9113 §8.3.1 makes it malformed; `h2` passes it on and the gateway answers it.
            expect: Expect::Frame("a response on stream 1", |f| f.kind == HEADERS && f.stream == 1),
        },
        Case {
            name: "an uppercase header name",
            ack: true,
            send: vec![frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                1,
                &request_block("GET", "/v1/models", &[("X-Upper", "1")]),
            )],
            expect: Expect::StreamError(1, PROTOCOL_ERROR),
        },
        Case {
            name: "a connection-specific header",
            ack: true,
            send: vec![frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                1,
                &request_block("GET", "/v1/models", &[("connection", "keep-alive")]),
            )],
            expect: Expect::StreamError(1, PROTOCOL_ERROR),
        },
        Case {
            name: "a header block that is not HPACK",
            ack: true,
            send: vec![frame(HEADERS, END_HEADERS | END_STREAM, 1, &[0xff, 0xff, 0xff, 0xff])],
            // RFC 9113 §4.3 names COMPRESSION_ERROR; `h2` answers PROTOCOL_ERROR.
            expect: Expect::GoAway(PROTOCOL_ERROR),
        },
        Case {
            name: "a request is answered on its stream",
            ack: true,
            send: vec![get(1)],
            expect: Expect::Frame("DATA ending stream 1", |f| {
                f.kind == DATA && f.stream == 1 && f.flags & END_STREAM != 0
            }),
        },
        Case {
            name: "the client's GOAWAY: the server finishes and closes",
            ack: true,
            send: vec![frame(GOAWAY, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 0])],
            expect: Expect::Frame("nothing after the client's GOAWAY but the end", |_| false),
        },
    ]
}

#[test]
fn each_frame_level_case_gets_its_answer() {
    let g = Gateway::start();
    let mut failures = Vec::new();
    for case in cases() {
        let mut c = Conn::open(g.port);
        if case.ack {
            c.acknowledge_settings();
        }
        for bytes in &case.send {
            c.send(bytes);
        }
        if let Err(why) = check(&mut c, case.name, case.expect) {
            failures.push(format!("{}: {why}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn check(c: &mut Conn, name: &str, expect: Expect) -> Result<(), String> {
    match expect {
        Expect::Frame(what, check) if name.starts_with("the client's GOAWAY") => {
            if c.until(LIMIT, check).is_some() || !c.closes_within(LIMIT) {
                return Err(what.to_string());
            }
        }
        Expect::Frame(what, check) => {
            c.until(LIMIT, check).ok_or(format!("no {what}"))?;
        }
        Expect::GoAway(code) => {
            let f = c.until(LIMIT, |f| f.kind == h2raw::GOAWAY);
            if f.as_ref().and_then(Frame::error_code) != Some(code) {
                return Err(format!("wanted GOAWAY({code}), got {f:?}"));
            }
            if !c.closes_within(LIMIT) {
                return Err("the connection stays open after GOAWAY".into());
            }
        }
        Expect::StreamError(stream, code) => {
            let f = c.until(LIMIT, |f| f.kind == h2raw::GOAWAY || (f.kind == h2raw::RST_STREAM && f.stream == stream));
            if f.as_ref().and_then(Frame::error_code) != Some(code) {
                return Err(format!("wanted RST_STREAM or GOAWAY ({code}), got {f:?}"));
            }
        }
    }
    Ok(())
}

#[test]
fn a_response_waits_for_the_clients_window_and_no_more() {
    let g = Gateway::start();
    // An initial stream window of 0: the response head may come, its body only as the
    // client's WINDOW_UPDATEs allow, byte for byte.
    let mut c = Conn::open_with(g.port, &h2raw::settings(&[(0x4, 0)]));
    c.acknowledge_settings();
    c.send(&get(1));
    let head = c.until(LIMIT, |f| f.kind == h2raw::HEADERS && f.stream == 1);
    assert!(head.is_some(), "no response head");
    let early = c.until(Duration::from_millis(500), |f| f.kind == h2raw::DATA);
    assert!(early.is_none(), "DATA sent into a closed window: {early:?}");
    let mut body = Vec::new();
    for _ in 0..1000 {
        c.send(&h2raw::window_update(1, 10));
        let f = c.until(LIMIT, |f| f.kind == h2raw::DATA && f.stream == 1).expect("DATA after the WINDOW_UPDATE");
        assert!(f.payload.len() <= 10, "{} bytes into a 10-byte window", f.payload.len());
        body.extend_from_slice(&f.payload);
        if f.flags & h2raw::END_STREAM != 0 {
            break;
        }
    }
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["data"][0]["id"], "test-model");
}

#[test]
fn a_connection_that_is_not_http2_after_all_gets_http1s_answer() {
    let g = Gateway::start();
    // The preface's first line, then not its second: HTTP/1.1 reads `PRI * HTTP/2.0`.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", g.port)).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");
}
