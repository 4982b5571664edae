//! One accepted ZMTP connection: greeting and READY, then frames in, frames out. Non-blocking
//! reads and writes on the raw descriptor; the socket (`socket.rs`) says when to call them.
//!
//! Invariants: nothing is delivered before the peer's greeting and READY checked out; a message
//! leaves `next_message` only when all its frames are in; a protocol fault closes this peer
//! only (the caller drops it), never the socket.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::codec::{self, FrameHeader, ProtocolError, GREETING_LEN};
use super::frames::Frames;
use crate::limits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Greeting,
    Ready,
    Open,
}

pub struct Peer {
    pub fd: OwnedFd,
    phase: Phase,
    /// The routing id from its READY (ROUTER peers).
    pub identity: Vec<u8>,
    rbuf: Vec<u8>,
    rstart: usize,
    wbuf: Vec<u8>,
    wstart: usize,
}

/// What a peer's bytes amounted to.
pub enum Incoming {
    /// A whole message is in `frames`.
    Message,
    /// Its handshake finished just now (READY checked: `Peer::identity` is set).
    Opened,
    /// Nothing whole yet.
    Pending,
}

/// The two socket types the gateway binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Requests out, addressed by the engine's identity (its messages in get it as frame 0).
    Router,
    /// Outputs in, fair-queued over the engines.
    Pull,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Router => "ROUTER",
            Kind::Pull => "PULL",
        }
    }

    /// Whether a peer of socket type `theirs` may connect (ZMTP's compatibility table).
    fn accepts(self, theirs: &[u8]) -> bool {
        match self {
            Kind::Router => matches!(theirs, b"DEALER" | b"REQ" | b"ROUTER"),
            Kind::Pull => theirs == b"PUSH",
        }
    }
}

impl Peer {
    /// A fresh connection; our greeting and READY are queued at once (NULL needs no wait).
    pub fn new(fd: OwnedFd, kind: Kind) -> Peer {
        let mut wbuf = Vec::with_capacity(128);
        wbuf.extend_from_slice(&codec::greeting());
        codec::encode_ready(kind.name(), (kind == Kind::Router).then_some(&[]), &mut wbuf);
        Peer { fd, phase: Phase::Greeting, identity: Vec::new(), rbuf: Vec::new(), rstart: 0, wbuf, wstart: 0 }
    }

    pub fn is_open(&self) -> bool {
        self.phase == Phase::Open
    }

    /// Reads what the kernel has, one chunk: Ok((read, asked)). `read` 0: the peer closed;
    /// `WouldBlock`: nothing now.
    pub fn read(&mut self) -> io::Result<(usize, usize)> {
        if self.rstart > 0 && self.rstart * 2 >= self.rbuf.len() {
            self.rbuf.drain(..self.rstart);
            self.rstart = 0;
        }
        let len = self.rbuf.len();
        self.rbuf.reserve(limits::zmq_read_chunk_bytes);
        let spare = self.rbuf.capacity() - len;
        // SAFETY: the kernel writes at most `spare` bytes into the reserved tail.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), self.rbuf.as_mut_ptr().add(len).cast(), spare) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `n` bytes past `len` were just initialized by read(2).
        unsafe { self.rbuf.set_len(len + n as usize) };
        Ok((n as usize, spare))
    }

    /// Queues a message (frames as given); `flush` writes it.
    pub fn queue(&mut self, frames: &[&[u8]]) {
        codec::encode_message(frames, &mut self.wbuf);
    }

    /// Bytes queued and not yet taken by the kernel.
    pub fn queued_bytes(&self) -> usize {
        self.wbuf.len() - self.wstart
    }

    /// Writes queued bytes until done or the kernel's buffer is full.
    pub fn flush(&mut self) -> io::Result<()> {
        while self.wstart < self.wbuf.len() {
            let rest = &self.wbuf[self.wstart..];
            // SAFETY: plain write of an initialized slice; MSG_NOSIGNAL keeps a closed peer
            // from raising SIGPIPE.
            let n = unsafe { libc::send(self.fd.as_raw_fd(), rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
            if n < 0 {
                let e = io::Error::last_os_error();
                return if e.kind() == io::ErrorKind::WouldBlock { Ok(()) } else { Err(e) };
            }
            self.wstart += n as usize;
        }
        self.wbuf.clear();
        self.wstart = 0;
        Ok(())
    }

    /// Takes the next whole message (or handshake step) off the read buffer into `frames`
    /// (replacing what it held); a ROUTER's message starts with the peer's identity.
    pub fn next_message(&mut self, kind: Kind, frames: &mut Frames) -> Result<Incoming, ProtocolError> {
        loop {
            let buf = &self.rbuf[self.rstart..];
            match self.phase {
                Phase::Greeting => {
                    if buf.len() < GREETING_LEN {
                        return Ok(Incoming::Pending);
                    }
                    codec::check_greeting(&buf[..GREETING_LEN])?;
                    self.rstart += GREETING_LEN;
                    self.phase = Phase::Ready;
                }
                Phase::Ready => {
                    let Some(h) = self.whole_frame()? else { return Ok(Incoming::Pending) };
                    let body = self.body(&h);
                    if !h.command {
                        return Err(ProtocolError::MessageBeforeReady);
                    }
                    let (name, data) = codec::split_command(body)?;
                    if name == b"ERROR" {
                        return Err(ProtocolError::Refused(String::from_utf8_lossy(data).into_owned()));
                    }
                    if name != b"READY" {
                        return Err(ProtocolError::ExpectedReady(String::from_utf8_lossy(name).into_owned()));
                    }
                    let ready = codec::decode_ready(data)?;
                    if !kind.accepts(&ready.socket_type) {
                        return Err(ProtocolError::IncompatibleSocket {
                            theirs: String::from_utf8_lossy(&ready.socket_type).into_owned(),
                            ours: kind.name(),
                        });
                    }
                    self.identity = ready.identity;
                    self.rstart += h.total_len();
                    self.phase = Phase::Open;
                    return Ok(Incoming::Opened);
                }
                Phase::Open => return self.next_open_message(kind, frames),
            }
        }
    }

    /// The body of the frame at `rstart`.
    fn body(&self, h: &FrameHeader) -> &[u8] {
        &self.rbuf[self.rstart + h.header_len..self.rstart + h.total_len()]
    }

    /// The next frame if it is all in the buffer.
    fn whole_frame(&self) -> Result<Option<FrameHeader>, ProtocolError> {
        let buf = &self.rbuf[self.rstart..];
        Ok(codec::parse_header(buf, limits::zmq_message_bytes_max)?.filter(|h| buf.len() >= h.total_len()))
    }

    /// Open phase: answers PING, skips other commands, and takes a message once its last
    /// frame is in (frames of a message arrive back to back, so a scan from `rstart` finds it).
    fn next_open_message(&mut self, kind: Kind, frames: &mut Frames) -> Result<Incoming, ProtocolError> {
        loop {
            let Some(first) = self.whole_frame()? else { return Ok(Incoming::Pending) };
            if first.command {
                let (name, data) = codec::split_command(self.body(&first))?;
                if name == b"PING" {
                    // PING: a 2-byte TTL, then up to 16 bytes of context that PONG echoes.
                    let context = data.get(2..).unwrap_or(&[]).to_vec();
                    codec::encode_command(b"PONG", &context, &mut self.wbuf);
                } else if name == b"ERROR" {
                    return Err(ProtocolError::PeerError(String::from_utf8_lossy(data).into_owned()));
                }
                self.rstart += first.total_len();
                continue;
            }
            // Find the end of the message without consuming anything.
            let mut at = self.rstart;
            let mut total = 0usize;
            loop {
                let Some(h) = codec::parse_header(&self.rbuf[at..], limits::zmq_message_bytes_max)? else {
                    return Ok(Incoming::Pending);
                };
                if h.command {
                    return Err(ProtocolError::CommandInMessage);
                }
                if self.rbuf.len() - at < h.total_len() {
                    return Ok(Incoming::Pending);
                }
                total += h.body_len;
                if total > limits::zmq_message_bytes_max {
                    return Err(ProtocolError::MessageTooLarge(limits::zmq_message_bytes_max));
                }
                at += h.total_len();
                if !h.more {
                    break;
                }
            }
            frames.clear();
            if kind == Kind::Router {
                frames.push(&self.identity);
            }
            while self.rstart < at {
                let h =
                    codec::parse_header(&self.rbuf[self.rstart..], usize::MAX)?.ok_or(ProtocolError::FrameVanished)?;
                frames.push(self.body(&h));
                self.rstart += h.total_len();
            }
            return Ok(Incoming::Message);
        }
    }
}
