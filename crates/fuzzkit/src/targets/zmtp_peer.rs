//! ZMTP framing (`engine::zmq::zmtp::peer`) on whatever arrives on an engine connection: the
//! engine is another process, and a bad byte must cost that connection, never the shard.
//!
//! Bit 1 of the first byte picks the socket (0: ROUTER, 1: PULL). Bit 0 picks the mode:
//! - even: raw bytes, as a peer might write them (seeds: pyzmq's captured streams);
//! - odd: a stream this harness writes (greeting, READY, messages with PINGs between them)
//!   from `arbitrary` messages.
//!
//! Oracles:
//! - never a panic;
//! - where the stream is cut into reads does not change what comes out (messages, then the
//!   error if any), at every split point;
//! - a well-formed stream gives back exactly its messages (ROUTER: the identity first) and a
//!   PONG with each PING's context.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;

use arbitrary::{Arbitrary, Unstructured};
use shardgate_wire::zmtp::peer::{Incoming, Peer};
use shardgate_wire::zmtp::{codec, Frames, Kind, ProtocolError};

/// What a stream amounted to: its messages, then the fault that ended it, if any.
type Outcome = (Vec<Vec<Vec<u8>>>, Option<ProtocolError>);

/// One input: panics (an oracle failed) or returns.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let kind = if mode & 2 == 0 { Kind::Router } else { Kind::Pull };
    if mode & 1 == 0 {
        let whole = feed(kind, &[rest]).0;
        for at in crate::split_points(rest.len(), crate::fnv1a(rest)) {
            let (a, b) = rest.split_at(at);
            assert_eq!(feed(kind, &[a, b]).0, whole, "cut at {at}");
        }
        return;
    }
    let mut u = Unstructured::new(rest);
    let Ok(stream) = Stream::arbitrary(&mut u) else { return };
    let (bytes, expected, pongs) = stream.write(kind);
    let (outcome, answered) = feed(kind, &[&bytes]);
    assert_eq!(outcome, (expected, None));
    let mut ours = Vec::new();
    ours.extend_from_slice(&codec::greeting());
    codec::encode_ready(kind.name(), (kind == Kind::Router).then_some(&[]), &mut ours);
    ours.extend_from_slice(&pongs);
    assert_eq!(answered, ours, "our greeting, READY and one PONG per PING");
}

/// Runs a peer over a socket pair, one write and read-until-dry per chunk.
fn feed(kind: Kind, chunks: &[&[u8]]) -> (Outcome, Vec<u8>) {
    let (ours, mut theirs) = UnixStream::pair().expect("socketpair");
    ours.set_nonblocking(true).expect("nonblocking");
    theirs.set_nonblocking(true).expect("nonblocking");
    let mut peer = Peer::new(OwnedFd::from(ours), kind);
    let mut frames = Frames::default();
    let mut messages = Vec::new();
    let mut answered = Vec::new();
    let mut fault = None;
    'chunks: for chunk in chunks {
        theirs.write_all(chunk).expect("fuzz inputs fit a socket buffer");
        loop {
            match peer.read() {
                Ok((0, _)) => break 'chunks,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("read: {e}"),
            }
        }
        loop {
            match peer.next_message(kind, &mut frames) {
                Ok(Incoming::Message) => messages.push(frames.iter().map(<[u8]>::to_vec).collect()),
                Ok(Incoming::Opened) => {}
                Ok(Incoming::Pending) => break,
                Err(e) => {
                    fault = Some(e);
                    break 'chunks;
                }
            }
        }
    }
    peer.flush().expect("flush");
    let mut buf = [0u8; 4096];
    while let Ok(n) = theirs.read(&mut buf) {
        if n == 0 {
            break;
        }
        answered.extend_from_slice(&buf[..n]);
    }
    ((messages, fault), answered)
}

#[derive(Debug, Arbitrary)]
struct Stream {
    identity: Vec<u8>,
    items: Vec<Item>,
}

#[derive(Debug, Arbitrary)]
enum Item {
    /// A message of at least one frame.
    Message(Vec<u8>, Vec<Vec<u8>>),
    /// PING with a TTL and up to 16 bytes of context.
    Ping(u16, Vec<u8>),
    /// A command we skip (SUBSCRIBE-like, named by the fuzzer, never PING or ERROR).
    Command(u8, Vec<u8>),
}

impl Stream {
    /// The bytes a well-behaved peer of `kind`'s counterpart writes, the messages they carry,
    /// and the PONGs they must draw.
    fn write(&self, kind: Kind) -> (Vec<u8>, Vec<Vec<Vec<u8>>>, Vec<u8>) {
        let mut out = codec::greeting().to_vec();
        let (their_type, identity) = match kind {
            Kind::Router => ("DEALER", self.identity.clone()),
            Kind::Pull => ("PUSH", Vec::new()),
        };
        codec::encode_ready(their_type, (kind == Kind::Router).then_some(&identity), &mut out);
        let mut expected = Vec::new();
        let mut pongs = Vec::new();
        for item in &self.items {
            match item {
                Item::Message(first, rest) => {
                    let frames: Vec<&[u8]> =
                        std::iter::once(first.as_slice()).chain(rest.iter().map(Vec::as_slice)).collect();
                    codec::encode_message(&frames, &mut out);
                    let mut got: Vec<Vec<u8>> = Vec::new();
                    if kind == Kind::Router {
                        got.push(identity.clone());
                    }
                    got.extend(frames.iter().map(|f| f.to_vec()));
                    expected.push(got);
                }
                Item::Ping(ttl, context) => {
                    let context = &context[..context.len().min(16)];
                    let mut data = ttl.to_be_bytes().to_vec();
                    data.extend_from_slice(context);
                    codec::encode_command(b"PING", &data, &mut out);
                    codec::encode_command(b"PONG", context, &mut pongs);
                }
                Item::Command(name_len, data) => {
                    let name = vec![b'X'; (*name_len as usize % 12) + 1];
                    codec::encode_command(&name, data, &mut out);
                }
            }
        }
        (out, expected, pongs)
    }
}
