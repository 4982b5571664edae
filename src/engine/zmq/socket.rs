//! libzmq sockets driven by a shard's monoio runtime.
//!
//! libzmq exposes readiness through `ZMQ_FD`, an edge-style signal: the fd turns readable when
//! the socket's command mailbox has news, and only `ZMQ_EVENTS` says whether a message can
//! actually be read. So a receiver drains with `DONTWAIT` until EAGAIN, re-checks
//! `ZMQ_EVENTS`, and only then waits on the fd (a dup of `ZMQ_FD` registered with the runtime:
//! an io_uring POLL_ADD, or epoll on the fallback driver). Waiting never consumes the signal,
//! so this works with both socketpair and eventfd signalers. No call here blocks the thread.
//!
//! Invariant: a socket is used from one thread at a time. Sockets are created and handshaken on
//! the control shard and then moved, whole, to the shard that owns them; `AsyncSocket::attach`
//! registers the fd with the runtime of the thread that calls it.

use std::io;
use std::os::fd::{FromRawFd, RawFd};

/// A ZMQ socket plus its readiness watcher on the current runtime.
pub struct AsyncSocket {
    socket: zmq::Socket,
    watcher: monoio::net::UnixStream,
}

/// Why a non-blocking send did not go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The queue towards the peer is full (back-pressure); try again later.
    Full,
    /// The peer identity is not connected (ROUTER_MANDATORY): the engine is gone.
    Unreachable,
    /// Any other libzmq failure.
    Failed(zmq::Error),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Full => f.write_str("send queue full"),
            SendError::Unreachable => f.write_str("engine not connected"),
            SendError::Failed(e) => write!(f, "zmq send failed: {e}"),
        }
    }
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

    /// Gives the socket back (to move it to another thread); the watcher is closed.
    pub fn detach(self) -> zmq::Socket {
        self.socket
    }

    pub fn socket(&self) -> &zmq::Socket {
        &self.socket
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

    /// Waits for and receives one multipart message.
    pub async fn recv_multipart(&self, frames: &mut Vec<zmq::Message>) -> Result<(), zmq::Error> {
        loop {
            if self.try_recv_multipart(frames)? {
                return Ok(());
            }
            self.wait_readable().await?;
        }
    }

    /// Waits until a message may be readable. Spurious wake-ups are possible; callers retry.
    pub async fn readable(&self) -> Result<(), zmq::Error> {
        self.wait_readable().await
    }

    async fn wait_readable(&self) -> Result<(), zmq::Error> {
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
    pub fn send_multipart(&self, frames: &[&[u8]]) -> Result<(), SendError> {
        send_frames(&self.socket, frames)
    }

    /// Sends, waiting for room while the queue is full, for at most `limit`.
    pub async fn send_multipart_within(&self, frames: &[&[u8]], limit: std::time::Duration) -> Result<(), SendError> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            match self.send_multipart(frames) {
                Err(SendError::Full) if std::time::Instant::now() < deadline => {
                    monoio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                other => return other,
            }
        }
    }
}

/// Sends a multipart message on any socket without blocking (also used before `attach`).
pub fn send_frames(socket: &zmq::Socket, frames: &[&[u8]]) -> Result<(), SendError> {
    let last = frames.len().saturating_sub(1);
    for (i, frame) in frames.iter().enumerate() {
        let flags = zmq::DONTWAIT | if i < last { zmq::SNDMORE } else { 0 };
        match socket.send(*frame, flags) {
            Ok(()) => {}
            // Only the first frame can fail for room or routing; later ones are atomic with it.
            Err(zmq::Error::EAGAIN) => return Err(SendError::Full),
            Err(zmq::Error::EHOSTUNREACH) => return Err(SendError::Unreachable),
            Err(e) => return Err(SendError::Failed(e)),
        }
    }
    Ok(())
}

/// Applies the options every data-plane socket of ours carries.
pub fn configure(socket: &zmq::Socket) -> zmq::Result<()> {
    socket.set_linger(0)?;
    socket.set_rcvhwm(0)?;
    socket.set_sndhwm(crate::limits::zmq_send_queue_messages_max)?;
    Ok(())
}
