//! HTTP/2 limits and the 2023-2024 HTTP/2 attacks, each sent as raw frames: every one is cut
//! off (the stream refused or the connection ended with GOAWAY) and the gateway goes on
//! serving other connections, over both protocols.

mod common;

use std::time::Duration;

use common::h2raw::{self, frame, Conn, Frame};
use common::{h2c, Gateway};

const LIMIT: Duration = Duration::from_secs(20);

/// What an attack must end in.
#[derive(Debug)]
enum CutOff {
    /// RST_STREAM with this code on this stream; the connection lives on.
    Refused { stream: u32, code: u32 },
    /// GOAWAY with this code, then the connection closes.
    GoAway { code: u32 },
    /// A response ending the stream whose header block is `block`; the connection lives on.
    Answered { stream: u32, block: &'static [u8] },
    /// The connection closes (the floods of frames `h2` answers itself, cut below it).
    Closed,
}

type Attack = fn(&mut Conn);

/// `:status: 431` as the server encodes it: a literal with incremental indexing of the static
/// table's `:status` name (0x48), then "431" Huffman-coded in 3 bytes (RFC 7541 §6.2.1,
/// Appendix B: '4' 011010, '3' 011001, '1' 00001, padded with ones).
const STATUS_431: &[u8] = &[0x48, 0x83, 0x69, 0x90, 0xff];

fn too_many_streams(c: &mut Conn) {
    c.acknowledge_settings();
    let max = shardgate::limits::http2_concurrent_streams_max;
    // Requests whose bodies never come: each stream stays open.
    for i in 0..=max {
        c.send(&h2raw::request(2 * i + 1, "POST", "/v1/completions", false));
    }
}

fn oversized_header_list(c: &mut Conn) {
    c.acknowledge_settings();
    let big = "a".repeat(shardgate::limits::http2_header_list_bytes_max as usize + 1024);
    let block = h2raw::request_block("GET", "/v1/models", &[("x-big", &big)]);
    let chunks: Vec<&[u8]> = block.chunks(16 * 1024).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len();
        let (kind, flags) = if i == 0 { (h2raw::HEADERS, h2raw::END_STREAM) } else { (h2raw::CONTINUATION, 0) };
        c.send(&frame(kind, flags | if last { h2raw::END_HEADERS } else { 0 }, 1, chunk));
    }
}

fn oversized_frame(c: &mut Conn) {
    c.acknowledge_settings();
    c.send(&h2raw::request(1, "POST", "/v1/completions", false));
    let size = shardgate::limits::http2_frame_bytes_max as usize + 1;
    c.send(&frame(h2raw::DATA, 0, 1, &vec![b'x'; size]));
}

fn ping_flood(c: &mut Conn) {
    for i in 0..200_000u64 {
        if !c.send(&frame(h2raw::PING, 0, 0, &i.to_be_bytes())) {
            return;
        }
    }
}

fn rapid_reset(c: &mut Conn) {
    c.acknowledge_settings();
    for i in 0..2 * shardgate::limits::http2_client_resets_max {
        let id = 2 * i + 1;
        if !c.send(&h2raw::request(id, "POST", "/v1/completions", false)) {
            return;
        }
        // Long enough for the server to take the stream before it is cancelled.
        std::thread::sleep(Duration::from_micros(300));
        if !c.send(&h2raw::rst_stream(id, h2raw::CANCEL)) {
            return;
        }
    }
}

fn continuation_flood(c: &mut Conn) {
    c.acknowledge_settings();
    c.send(&frame(h2raw::HEADERS, h2raw::END_STREAM, 1, &h2raw::request_block("GET", "/v1/models", &[])));
    let field = h2raw::header_block(&[("x-flood", "0123456789")]);
    for _ in 0..100_000 {
        if !c.send(&frame(h2raw::CONTINUATION, 0, 1, &field)) {
            return;
        }
    }
}

fn settings_flood(c: &mut Conn) {
    for _ in 0..200_000 {
        if !c.send(&h2raw::settings(&[(0x3, 100)])) {
            return;
        }
    }
}

/// Whether the connection shows `want`, and what it showed.
fn cut_off(c: &mut Conn, want: &CutOff) -> (bool, String) {
    match want {
        CutOff::Refused { stream, code } => {
            let f = c.until(LIMIT, |f| f.kind == h2raw::RST_STREAM && f.stream == *stream);
            (f.as_ref().and_then(Frame::error_code) == Some(*code), format!("{f:?}"))
        }
        CutOff::GoAway { code } => {
            let f = c.until(LIMIT, |f| f.kind == h2raw::GOAWAY);
            let closed = c.closes_within(LIMIT);
            (f.as_ref().and_then(Frame::error_code) == Some(*code) && closed, format!("{f:?}, closed: {closed}"))
        }
        CutOff::Answered { stream, block } => {
            let f = c.until(LIMIT, |f| f.kind == h2raw::HEADERS && f.stream == *stream);
            let ends = f.as_ref().is_some_and(|f| f.flags & h2raw::END_STREAM != 0 && f.payload == *block);
            (ends, format!("{f:?}"))
        }
        CutOff::Closed => {
            let closed = c.closes_within(LIMIT);
            (closed, format!("closed: {closed}"))
        }
    }
}

#[test]
fn each_attack_is_cut_off_and_other_connections_are_still_served() {
    let g = Gateway::start();
    let attacks: Vec<(&str, Attack, CutOff)> = vec![
        ("concurrent streams", too_many_streams, CutOff::Refused { stream: 2 * 256 + 1, code: h2raw::REFUSED_STREAM }),
        ("header list size", oversized_header_list, CutOff::Answered { stream: 1, block: STATUS_431 }),
        ("frame size", oversized_frame, CutOff::GoAway { code: h2raw::FRAME_SIZE_ERROR }),
        ("ping flood", ping_flood, CutOff::Closed),
        ("rapid reset", rapid_reset, CutOff::GoAway { code: h2raw::ENHANCE_YOUR_CALM }),
        ("CONTINUATION flood", continuation_flood, CutOff::GoAway { code: h2raw::ENHANCE_YOUR_CALM }),
        ("SETTINGS flood", settings_flood, CutOff::Closed),
    ];
    for (name, attack, want) in &attacks {
        let mut c = Conn::open(g.port);
        attack(&mut c);
        let (cut, seen) = cut_off(&mut c, want);
        assert!(cut, "{name}: wanted {want:?}, saw {seen}");
        // Others are still served, over both protocols.
        assert_eq!(g.get("/health").status, 200, "{name}: HTTP/1.1 after the attack");
        assert_eq!(h2c::request_once(g.port, "GET", "/v1/models", &[], None).status, 200, "{name}: HTTP/2 after");
    }
    let logs = g.logs();
    for line in ["reset more than", "PING and SETTINGS frames"] {
        assert!(logs.contains(line), "no log line with {line:?}");
    }
}
