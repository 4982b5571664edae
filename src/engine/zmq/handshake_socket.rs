//! The handshake socket: a libzmq ROUTER driven by the control shard's monoio runtime. (The
//! data-plane sockets are our own ZMTP, `zmtp/`, with no libzmq I/O thread between a shard and
//! its engines; the handshake is a few messages per engine start, on `tcp://` or `ipc://`.)
//!
//! libzmq exposes readiness through `ZMQ_FD`, an edge-style signal: the fd turns readable when
//! the socket's command mailbox has news, and only `ZMQ_EVENTS` says whether a message can
//! actually be read. So a receiver drains with `DONTWAIT` until EAGAIN, re-checks
//! `ZMQ_EVENTS`, and only then waits on the fd (a dup of `ZMQ_FD` registered with the runtime:
//! an io_uring POLL_ADD, or epoll on the fallback driver). Waiting never consumes the signal,
//! so this works with both socketpair and eventfd signalers. No call here blocks the thread.
//!
//! Invariant: a socket is used from one thread at a time; `AsyncSocket::attach` registers the
//! fd with the runtime of the thread that calls it.

use std::fmt;
use std::io;
use std::os::fd::{FromRawFd, RawFd};

/// Why a message could not leave the handshake socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeSendError {
    /// No engine with that identity is connected.
    NotConnected,
    Zmq(zmq::Error),
}

impl fmt::Display for HandshakeSendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeSendError::NotConnected => f.write_str("engine not connected"),
            HandshakeSendError::Zmq(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for HandshakeSendError {}

/// A ZMQ socket plus its readiness watcher on the current runtime.
pub struct AsyncSocket {
    socket: zmq::Socket,
    watcher: monoio::net::UnixStream,
}

impl AsyncSocket {
    /// Wraps `socket` for the runtime of the calling thread.
    pub fn attach(socket: zmq::Socket) -> io::Result<Self> {
        let fd: RawFd = socket.get_fd().map_err(io::Error::other)?;
        // SAFETY: dup returns a new descriptor we own; libzmq keeps its own.
        let dup = unsafe { libc::dup(fd) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // The watcher must never read: reading the signaler would steal libzmq's wake-up.
        // SAFETY: `dup` is a fresh, owned, open descriptor.
        let std_stream = unsafe { std::os::unix::net::UnixStream::from_raw_fd(dup) };
        std_stream.set_nonblocking(true)?;
        let watcher = monoio::net::UnixStream::from_std(std_stream)?;
        Ok(AsyncSocket { socket, watcher })
    }

    /// Receives one multipart message into `frames` (reusing its buffers), without blocking the
    /// thread. Returns Ok(false) only if `try_recv` found nothing; the async form waits instead.
    pub fn try_recv_multipart(&self, frames: &mut Vec<zmq::Message>) -> Result<bool, zmq::Error> {
        let mut count = 0;
        loop {
            if frames.len() == count {
                frames.push(zmq::Message::new());
            }
            match self.socket.recv(&mut frames[count], zmq::DONTWAIT) {
                Ok(()) => {}
                Err(zmq::Error::EAGAIN) if count == 0 => {
                    frames.truncate(0);
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
            count += 1;
            if !frames[count - 1].get_more() {
                frames.truncate(count);
                return Ok(true);
            }
        }
    }

    /// Waits until a message may be readable. Spurious wake-ups are possible; callers retry.
    pub async fn readable(&self) -> Result<(), zmq::Error> {
        loop {
            if self.socket.get_events()?.contains(zmq::POLLIN) {
                return Ok(());
            }
            if self.watcher.readable(false).await.is_err() {
                return Err(zmq::Error::EFAULT);
            }
        }
    }

    /// Sends a multipart message without blocking.
    pub fn send_multipart(&self, frames: &[&[u8]]) -> Result<(), HandshakeSendError> {
        let last = frames.len().saturating_sub(1);
        for (i, frame) in frames.iter().enumerate() {
            let flags = zmq::DONTWAIT | if i < last { zmq::SNDMORE } else { 0 };
            match self.socket.send(*frame, flags) {
                Ok(()) => {}
                Err(zmq::Error::EHOSTUNREACH) => return Err(HandshakeSendError::NotConnected),
                Err(e) => return Err(HandshakeSendError::Zmq(e)),
            }
        }
        Ok(())
    }
}
