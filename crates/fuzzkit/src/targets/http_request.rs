//! HTTP/1.1 request framing: `http::request::parse_head` and `http::chunked::ChunkedDecoder`,
//! driven the way `http::conn` drives them (heads parsed from an accumulating buffer, bodies by
//! Content-Length or chunked, pipelined requests one after another).
//!
//! Oracles:
//! - TCP segmentation must not matter: the byte stream delivered whole and delivered in two
//!   pieces at every split point yields the same requests, bodies and error statuses.
//! - A parsed head, written back out canonically and parsed again, is the same head.
//! - Framing facts hold: chunked never comes with a length, lengths are within the body limit,
//!   keep-alive follows the version and `Connection` tokens.
//! - Only strictly framed heads are taken (RFC 9112, as a smuggling-aware proxy reads them):
//!   `Content-Length` digits only, `Transfer-Encoding` exactly one `chunked` and only on
//!   HTTP/1.1, exactly one `Host` on HTTP/1.1, at most one `Authorization` and `x-api-key`.
//! - A chunked body is taken only with CRLF line ends and hex-digit sizes: every LF the
//!   decoder consumed outside chunk data follows a CR.
//! - Errors are 400, 413 or 431, never anything else, and never a panic.
//!
//! The same input is also fed straight to a `ChunkedDecoder` as a body, split the same ways.
//! `\0\0` + one byte k in the input expands to k × 64 bytes (see `expand`), so size limits
//! are within reach.

use crate::{fnv1a, split_points};
use shardgate::http::chunked::ChunkedDecoder;
use shardgate::http::request::{parse_head, BodyFraming, RequestHead};
use shardgate::limits;

/// What the connection would do with one request, in comparable form.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Request { head: HeadFacts, body: Vec<u8> },
    Error(u16),
}

/// Everything of a head that decides behaviour.
#[derive(Debug, Clone, PartialEq)]
struct HeadFacts {
    method: String,
    path: String,
    query: Option<String>,
    version_minor: u8,
    framing: BodyFraming,
    keep_alive: bool,
    expect_continue: bool,
    headers: Vec<(String, String)>,
}

impl From<&RequestHead> for HeadFacts {
    fn from(h: &RequestHead) -> Self {
        HeadFacts {
            method: h.method.clone(),
            path: h.path.clone(),
            query: h.query.clone(),
            version_minor: h.version_minor,
            framing: h.framing,
            keep_alive: h.keep_alive,
            expect_continue: h.expect_continue,
            headers: h.headers.clone(),
        }
    }
}

enum Phase {
    Head,
    Length(HeadFacts, usize),
    Chunked(HeadFacts, ChunkedDecoder),
    /// The connection is closed after an error (as `conn` answers and closes).
    Closed,
}

/// `http::conn::read_request` without sockets: bytes arrive in pieces, and after each piece
/// the connection makes all the progress it can.
struct Connection {
    buf: Vec<u8>,
    phase: Phase,
    events: Vec<Event>,
}

impl Connection {
    fn new() -> Self {
        Connection { buf: Vec::new(), phase: Phase::Head, events: Vec::new() }
    }

    fn arrive(&mut self, bytes: &[u8]) {
        if matches!(self.phase, Phase::Closed) {
            return;
        }
        self.buf.extend_from_slice(bytes);
        loop {
            if self.events.len() >= limits::http_pipelined_requests_max {
                return;
            }
            match std::mem::replace(&mut self.phase, Phase::Head) {
                Phase::Closed => {
                    self.phase = Phase::Closed;
                    return;
                }
                Phase::Head => {
                    if self.buf.is_empty() {
                        return;
                    }
                    match parse_head(&self.buf) {
                        Err(e) => {
                            check_error_status(e.status, "parse_head");
                            self.events.push(Event::Error(e.status));
                            self.phase = Phase::Closed;
                            return;
                        }
                        Ok(None) => return,
                        Ok(Some((head, len))) => {
                            assert!(len > 0 && len <= self.buf.len(), "head length {len} of {}", self.buf.len());
                            check_head(&head, &self.buf[..len]);
                            self.buf.drain(..len);
                            let facts = HeadFacts::from(&head);
                            self.phase = match head.framing {
                                BodyFraming::None => {
                                    self.events.push(Event::Request { head: facts, body: Vec::new() });
                                    Phase::Head
                                }
                                BodyFraming::Length(n) => Phase::Length(facts, n),
                                BodyFraming::Chunked => {
                                    Phase::Chunked(facts, ChunkedDecoder::new(limits::http_body_bytes_max))
                                }
                            };
                        }
                    }
                }
                Phase::Length(facts, n) => {
                    if self.buf.len() < n {
                        self.phase = Phase::Length(facts, n);
                        return;
                    }
                    let body: Vec<u8> = self.buf.drain(..n).collect();
                    self.events.push(Event::Request { head: facts, body });
                }
                Phase::Chunked(facts, mut decoder) => match decoder.feed(&self.buf) {
                    Err(e) => {
                        check_error_status(e.status, "chunked");
                        self.events.push(Event::Error(e.status));
                        self.phase = Phase::Closed;
                        return;
                    }
                    Ok(used) => {
                        assert!(used <= self.buf.len(), "chunked decoder used {used} of {}", self.buf.len());
                        self.buf.drain(..used);
                        if decoder.is_done() {
                            self.events.push(Event::Request { head: facts, body: std::mem::take(&mut decoder.body) });
                        } else {
                            self.phase = Phase::Chunked(facts, decoder);
                            return;
                        }
                    }
                },
            }
        }
    }

    /// Comparable end state: the events, and what the connection still waits for.
    fn outcome(&self) -> (Vec<Event>, &'static str, usize) {
        let phase = match &self.phase {
            Phase::Head => "head",
            Phase::Length(..) => "length",
            Phase::Chunked(..) => "chunked",
            Phase::Closed => "closed",
        };
        let pending = if matches!(self.phase, Phase::Closed) { 0 } else { self.buf.len() };
        (self.events.clone(), phase, pending)
    }
}

fn check_error_status(status: u16, what: &str) {
    assert!(matches!(status, 400 | 413 | 431), "{what}: unexpected status {status}");
}

/// Facts about a successfully parsed head, and its canonical round trip.
fn check_head(head: &RequestHead, raw: &[u8]) {
    assert!(head.version_minor <= 1, "HTTP/1.{}", head.version_minor);
    let has = |name: &str| head.headers.iter().any(|(k, _)| k == name);
    match head.framing {
        BodyFraming::Chunked => assert!(!has("content-length"), "chunked framing with a Content-Length"),
        BodyFraming::Length(n) => {
            assert!(n > 0 && n <= limits::http_body_bytes_max, "Length({n})");
            assert!(!has("transfer-encoding"), "length framing with Transfer-Encoding");
        }
        BodyFraming::None => assert!(!has("transfer-encoding"), "no framing with Transfer-Encoding"),
    }
    for (k, v) in &head.headers {
        assert_eq!(*k, k.to_ascii_lowercase(), "header names are lowercased");
        assert_eq!(v.trim(), v, "header values are trimmed");
    }
    let tokens: Vec<String> = head
        .headers
        .iter()
        .filter(|(k, _)| k == "connection")
        .flat_map(|(_, v)| v.split(',').map(|t| t.trim().to_ascii_lowercase()).collect::<Vec<_>>())
        .collect();
    let expected_keep_alive = if head.version_minor == 0 {
        tokens.iter().any(|t| t == "keep-alive")
    } else {
        !tokens.iter().any(|t| t == "close")
    };
    assert_eq!(head.keep_alive, expected_keep_alive, "keep-alive for HTTP/1.{} with {tokens:?}", head.version_minor);
    check_strict_framing(head);
    assert!(!head.path.contains('?'), "path keeps its query: {:?}", head.path);

    // Every strict prefix of a complete head is "read more", never an error: otherwise a
    // request would be refused or not depending on how TCP cut it.
    for k in [raw.len() - 1, raw.len() / 2, raw.len().min(17).saturating_sub(1)] {
        if k == 0 {
            continue;
        }
        match parse_head(&raw[..k]) {
            Ok(None) => {}
            Ok(Some((_, len))) => panic!("prefix of {k} bytes parsed as a complete head of {len}"),
            Err(e) => panic!("prefix of {k} bytes of a valid head is an error: {} {}", e.status, e.message),
        }
    }

    // Canonical form: request line, `name: value` lines, CRLF everywhere.
    let mut canon = Vec::with_capacity(raw.len() + 16);
    canon.extend_from_slice(head.method.as_bytes());
    canon.push(b' ');
    canon.extend_from_slice(head.path.as_bytes());
    if let Some(q) = &head.query {
        canon.push(b'?');
        canon.extend_from_slice(q.as_bytes());
    }
    canon.extend_from_slice(format!(" HTTP/1.{}\r\n", head.version_minor).as_bytes());
    for (k, v) in &head.headers {
        canon.extend_from_slice(k.as_bytes());
        canon.extend_from_slice(b": ");
        canon.extend_from_slice(v.as_bytes());
        canon.extend_from_slice(b"\r\n");
    }
    canon.extend_from_slice(b"\r\n");
    if canon.len() > limits::http_header_bytes_max {
        // Canonical spacing can push a head that was just under the limit over it.
        return;
    }
    match parse_head(&canon) {
        Ok(Some((again, len))) => {
            assert_eq!(len, canon.len(), "canonical head length");
            assert_eq!(HeadFacts::from(&again), HeadFacts::from(head), "canonical round trip");
        }
        Ok(None) => panic!("canonical head is incomplete: {:?}", String::from_utf8_lossy(&canon)),
        Err(e) => panic!("canonical head refused ({} {}): {:?}", e.status, e.message, String::from_utf8_lossy(&canon)),
    }
}

/// The RFC 9112 rules a lenient parser would bend, on a head we accepted.
fn check_strict_framing(head: &RequestHead) {
    let values =
        |name: &str| head.headers.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect::<Vec<_>>();
    for v in values("content-length") {
        assert!(!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()), "Content-Length {v:?} taken");
    }
    let te = values("transfer-encoding");
    if !te.is_empty() {
        assert_eq!(head.version_minor, 1, "Transfer-Encoding taken on HTTP/1.0");
        assert!(te.len() == 1 && te[0].eq_ignore_ascii_case("chunked"), "Transfer-Encoding {te:?} taken");
        assert_eq!(head.framing, BodyFraming::Chunked);
    }
    if head.version_minor == 1 {
        assert_eq!(values("host").len(), 1, "HTTP/1.1 taken with {} Host headers", values("host").len());
    }
    for name in ["host", "authorization", "x-api-key"] {
        assert!(values(name).len() <= 1, "{name} taken twice");
    }
}

/// On a chunked body the decoder finished, the framing it consumed was strict: outside chunk
/// data, every LF ends a CRLF and every size line starts with a hex digit.
fn check_strict_chunks(consumed: &[u8]) {
    let mut pos = 0;
    loop {
        let lf = pos + consumed[pos..].iter().position(|&b| b == b'\n').expect("a consumed size line ends in LF");
        assert!(lf > pos && consumed[lf - 1] == b'\r', "bare LF taken at byte {lf}");
        let line = &consumed[pos..lf - 1];
        assert!(!line.contains(&b'\r'), "bare CR taken in {:?}", String::from_utf8_lossy(line));
        let hex: Vec<u8> = line.iter().copied().take_while(|&b| b != b';').collect();
        assert!(
            !hex.is_empty() && hex.iter().all(u8::is_ascii_hexdigit),
            "chunk size {:?} taken",
            String::from_utf8_lossy(&hex)
        );
        let size = usize::from_str_radix(std::str::from_utf8(&hex).unwrap(), 16).unwrap();
        pos = lf + 1;
        if size == 0 {
            // Trailer lines, then the empty line.
            loop {
                let lf = pos + consumed[pos..].iter().position(|&b| b == b'\n').expect("a consumed trailer ends in LF");
                assert!(lf > pos && consumed[lf - 1] == b'\r', "bare LF taken in the trailer at byte {lf}");
                assert!(!consumed[pos..lf - 1].contains(&b'\r'), "bare CR taken in the trailer");
                let empty = lf == pos + 1;
                pos = lf + 1;
                if empty {
                    assert_eq!(pos, consumed.len(), "bytes consumed after the last chunk");
                    return;
                }
            }
        }
        assert_eq!(&consumed[pos + size..pos + size + 2], b"\r\n", "chunk data not followed by CRLF");
        pos += size + 2;
    }
}

fn run_connection(pieces: &[&[u8]]) -> (Vec<Event>, &'static str, usize) {
    let mut c = Connection::new();
    for p in pieces {
        c.arrive(p);
    }
    c.outcome()
}

/// A body decoded as `conn` does it: feed the buffer, drop what was used, wait for more.
#[derive(Debug, PartialEq)]
enum BodyOutcome {
    Done { body: Vec<u8>, used: usize },
    Incomplete { body_so_far: usize, used: usize },
    Error(u16),
}

fn decode_body(pieces: &[&[u8]]) -> BodyOutcome {
    let mut d = ChunkedDecoder::new(limits::http_body_bytes_max);
    let mut buf: Vec<u8> = Vec::new();
    let mut used_total = 0;
    for p in pieces {
        buf.extend_from_slice(p);
        match d.feed(&buf) {
            Ok(used) => {
                assert!(used <= buf.len());
                buf.drain(..used);
                used_total += used;
            }
            Err(e) => {
                check_error_status(e.status, "chunked");
                return BodyOutcome::Error(e.status);
            }
        }
        if d.is_done() {
            return BodyOutcome::Done { body: std::mem::take(&mut d.body), used: used_total };
        }
    }
    BodyOutcome::Incomplete { body_so_far: d.body.len(), used: used_total }
}

/// `\0\0` + k in the input stands for k × 64 bytes of `a`: a cheap way for the fuzzer to build
/// lines and heads around the 4 KiB chunk-line and 64 KiB head limits, which byte-level
/// mutation alone takes hours to grow to.
fn expand(data: &[u8]) -> Vec<u8> {
    const TOTAL_MAX: usize = 96 * 1024;
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if data[i..].starts_with(b"\0\0") && i + 2 < data.len() && out.len() < TOTAL_MAX {
            let n = (data[i + 2] as usize * 64).min(TOTAL_MAX - out.len());
            out.resize(out.len() + n, b'a');
            i += 3;
        } else {
            out.push(data[i]);
            i += 1;
        }
    }
    out
}

/// One input: panics (an oracle failed) or returns.
pub fn run(raw: &[u8]) {
    let expanded = expand(raw);
    let data = &expanded[..];
    let seed = fnv1a(data);
    // Besides the spread, split right at line ends: where framing decisions are made.
    let mut points = split_points(data.len(), seed);
    for (i, _) in data.windows(2).enumerate().filter(|(_, w)| *w == b"\r\n").take(64) {
        points.extend([i, i + 1, i + 2].into_iter().filter(|&k| k > 0 && k < data.len()));
    }
    points.sort_unstable();
    points.dedup();

    let whole = run_connection(&[data]);
    for &k in &points {
        let split = run_connection(&[&data[..k], &data[k..]]);
        assert_eq!(split, whole, "stream split at byte {k} of {}", data.len());
    }

    let whole = decode_body(&[data]);
    if let BodyOutcome::Done { used, .. } = &whole {
        check_strict_chunks(&data[..*used]);
    }
    for &k in &points {
        let split = decode_body(&[&data[..k], &data[k..]]);
        assert_eq!(split, whole, "chunked body split at byte {k} of {}", data.len());
    }
}
