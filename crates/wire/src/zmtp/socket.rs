//! A bound ZMTP socket (ROUTER or PULL; `ipc://` or `tcp://`) that a shard drives itself: no
//! I/O thread.
//!
//! The listener and every accepted peer sit in one epoll set of the socket's own; the shard's
//! runtime waits on that epoll descriptor (an io_uring poll), and `service` then accepts, reads
//! and flushes exactly the descriptors that are ready. Reads and writes are plain non-blocking
//! syscalls on the shard's thread, so a request goes from the shard to the engine's socket,
//! and an output batch from the engine's socket to the shard, with no thread hop (libzmq's
//! I/O thread cost a wake-up and a context switch each way; perf/README.md).
//!
//! Invariants: a `Socket` holds only descriptors and buffers, so it moves between threads
//! whole (bound and handshaken on the control shard, then driven by its owner shard through
//! `Attached`); the epoll set is level-triggered, so a wait never misses what `service` left
//! unread; EPOLLOUT is armed exactly while a peer has queued bytes.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use super::frames::Frames;
use super::peer::{Incoming, Kind, Peer};
use crate::limits;

/// Why a non-blocking send did not go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The queue towards the peer is full (back-pressure); try again later.
    Full,
    /// No engine with that identity is connected: the engine is gone.
    Unreachable,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Full => f.write_str("send queue full"),
            SendError::Unreachable => f.write_str("engine not connected"),
        }
    }
}

struct Slot {
    peer: Peer,
    /// EPOLLOUT is in this peer's interest set.
    out_armed: bool,
}

/// The epoll token of the listener; peer `i` is `i + 1`.
const LISTENER: u64 = 0;

/// Where engines dial in: a socket file on this host, or a TCP address (engines on other hosts).
enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

impl Listener {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Listener::Unix(l) => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
        }
    }

    /// The next connection, non-blocking; a failure to set it up is an accept failure (the
    /// listener is level-triggered, so the connections behind it are taken on the next wake).
    fn accept(&self) -> io::Result<OwnedFd> {
        match self {
            Listener::Unix(l) => {
                let (s, _) = l.accept()?;
                s.set_nonblocking(true)?;
                Ok(OwnedFd::from(s))
            }
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                s.set_nonblocking(true)?;
                // Engine messages are whole frames written at once: Nagle would only delay them.
                s.set_nodelay(true)?;
                Ok(OwnedFd::from(s))
            }
        }
    }
}

pub struct Socket {
    kind: Kind,
    path: String,
    listener: Listener,
    epoll: OwnedFd,
    slots: Vec<Option<Slot>>,
    /// Where the next receive starts looking, so busy peers take turns.
    cursor: usize,
    /// ROUTER: identities whose connection closed with no other connection holding them.
    lost: Vec<Vec<u8>>,
}

fn epoll_ctl(epoll: &OwnedFd, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: token };
    // SAFETY: both descriptors are open; `ev` outlives the call.
    if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), op, fd, &mut ev) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Socket {
    /// Binds `path` (which must not exist: `sockdir::prepare` clears stale files).
    pub fn bind(kind: Kind, path: &str) -> io::Result<Socket> {
        let listener = UnixListener::bind(path)?;
        listener.set_nonblocking(true)?;
        Socket::listen(kind, path.to_string(), Listener::Unix(listener))
    }

    /// Binds `addr` (port 0: a free one); `path()` is then `tcp://IP:PORT` as bound, the
    /// address to tell the engines.
    pub fn bind_tcp(kind: Kind, addr: SocketAddr) -> io::Result<Socket> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        Socket::listen(kind, format!("tcp://{bound}"), Listener::Tcp(listener))
    }

    fn listen(kind: Kind, path: String, listener: Listener) -> io::Result<Socket> {
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(raw) };
        epoll_ctl(&epoll, libc::EPOLL_CTL_ADD, listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER)?;
        Ok(Socket { kind, path, listener, epoll, slots: Vec::new(), cursor: 0, lost: Vec::new() })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Peers whose handshake finished.
    pub fn open_peers(&self) -> usize {
        self.slots.iter().flatten().filter(|s| s.peer.is_open()).count()
    }

    /// Handles what the epoll set reports: new connections, readable and writable peers.
    fn service(&mut self) -> io::Result<()> {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 16];
        // SAFETY: `events` has room for the 16 entries epoll_wait may fill.
        let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        for ev in &events[..n as usize] {
            let (token, flags) = (ev.u64, ev.events);
            if token == LISTENER {
                self.accept_all();
                continue;
            }
            let i = (token - 1) as usize;
            if flags & libc::EPOLLOUT as u32 != 0 {
                self.flush(i);
            }
            if flags & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                self.read(i);
            }
        }
        Ok(())
    }

    fn accept_all(&mut self) {
        loop {
            let fd = match self.listener.accept() {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::warn!("{}: accept failed: {e}", self.path);
                    return;
                }
            };
            if self.slots.iter().flatten().count() >= limits::zmq_peers_max {
                tracing::warn!("{}: refusing a connection: {} peers already", self.path, limits::zmq_peers_max);
                continue;
            }
            let i = self.slots.iter().position(Option::is_none).unwrap_or(self.slots.len());
            if let Err(e) =
                epoll_ctl(&self.epoll, libc::EPOLL_CTL_ADD, fd.as_raw_fd(), libc::EPOLLIN as u32, i as u64 + 1)
            {
                tracing::warn!("{}: cannot watch an accepted connection: {e}", self.path);
                continue;
            }
            let slot = Some(Slot { peer: Peer::new(fd, self.kind), out_armed: false });
            if i == self.slots.len() {
                self.slots.push(slot);
            } else {
                self.slots[i] = slot;
            }
            self.flush(i);
        }
    }

    /// Reads from peer `i` until the kernel has nothing more (or a fair share is in). A read
    /// that did not fill its buffer took everything, so no second read just to see EAGAIN.
    fn read(&mut self, i: usize) {
        let Some(Some(slot)) = self.slots.get_mut(i) else { return };
        for _ in 0..limits::zmq_read_chunks_per_wake {
            match slot.peer.read() {
                Ok((0, _)) => return self.close(i, None),
                Ok((n, asked)) if n < asked => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.close(i, Some(&format!("read failed: {e}"))),
            }
        }
    }

    /// Writes peer `i`'s queued bytes and arms or disarms EPOLLOUT to match what is left.
    fn flush(&mut self, i: usize) {
        let Some(Some(slot)) = self.slots.get_mut(i) else { return };
        if let Err(e) = slot.peer.flush() {
            let plain_close = matches!(e.kind(), io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset);
            return self.close(i, (!plain_close).then(|| format!("write failed: {e}")).as_deref());
        }
        let want = slot.peer.queued_bytes() > 0;
        if want != slot.out_armed {
            let events = libc::EPOLLIN as u32 | if want { libc::EPOLLOUT as u32 } else { 0 };
            if let Err(e) = epoll_ctl(&self.epoll, libc::EPOLL_CTL_MOD, slot.peer.fd.as_raw_fd(), events, i as u64 + 1)
            {
                return self.close(i, Some(&format!("cannot watch for room: {e}")));
            }
            slot.out_armed = want;
        }
    }

    /// The open peer with `identity`, other than peer `except`.
    fn holder(&self, identity: &[u8], except: Option<usize>) -> Option<usize> {
        self.slots.iter().enumerate().position(|(j, s)| {
            Some(j) != except && matches!(s, Some(s) if s.peer.is_open() && s.peer.identity == identity)
        })
    }

    /// Drops peer `i`; `fault` names a protocol or I/O fault (a plain close is only debug).
    fn close(&mut self, i: usize, fault: Option<&str>) {
        let Some(slot) = self.slots.get_mut(i).and_then(Option::take) else { return };
        let identity = &slot.peer.identity;
        if self.kind == Kind::Router
            && slot.peer.is_open()
            && !identity.is_empty()
            && self.holder(identity, None).is_none()
        {
            self.lost.push(identity.clone());
        }
        // Closing the descriptor takes it out of the epoll set (we never dup peer fds).
        drop(slot);
        match fault {
            Some(why) => tracing::warn!("{}: dropped an engine connection: {why}", self.path),
            None => tracing::debug!("{}: an engine connection closed", self.path),
        }
    }

    /// The next message already read, peers taking turns.
    fn take_buffered(&mut self, frames: &mut Frames) -> bool {
        let n = self.slots.len();
        for step in 0..n {
            let i = (self.cursor + step) % n;
            while let Some(Some(slot)) = self.slots.get_mut(i) {
                match slot.peer.next_message(self.kind, frames) {
                    Ok(Incoming::Message) => {
                        self.flush_if_queued(i);
                        self.cursor = i + 1;
                        return true;
                    }
                    Ok(Incoming::Opened) => self.opened(i),
                    Ok(Incoming::Pending) => {
                        self.flush_if_queued(i);
                        break;
                    }
                    Err(e) => {
                        self.close(i, Some(&e.to_string()));
                        break;
                    }
                }
            }
        }
        false
    }

    fn flush_if_queued(&mut self, i: usize) {
        if matches!(self.slots.get(i), Some(Some(s)) if s.peer.queued_bytes() > 0) {
            self.flush(i);
        }
    }

    /// A peer finished its handshake. A ROUTER refuses a second peer with a live peer's
    /// identity, as libzmq does without ROUTER_HANDOVER: the first keeps its messages.
    fn opened(&mut self, i: usize) {
        let Some(Some(slot)) = self.slots.get(i) else { return };
        let identity = &slot.peer.identity;
        if self.kind == Kind::Router && (identity.is_empty() || self.holder(identity, Some(i)).is_some()) {
            let why = format!("identity {identity:02x?} is empty or already connected");
            return self.close(i, Some(&why));
        }
        tracing::debug!("{}: engine connected (identity {:02x?})", self.path, identity);
    }

    /// ROUTER: an identity that lost its connection since the last call and has not
    /// connected again (an engine of an earlier attempt that closed while a new one with its
    /// identity registered is not a loss).
    pub fn take_lost(&mut self) -> Option<Vec<u8>> {
        while let Some(identity) = self.lost.pop() {
            if self.holder(&identity, None).is_none() {
                return Some(identity);
            }
        }
        None
    }

    /// Receives one message if one is whole, without blocking.
    pub fn try_recv(&mut self, frames: &mut Frames) -> io::Result<bool> {
        if self.take_buffered(frames) {
            return Ok(true);
        }
        self.service()?;
        Ok(self.take_buffered(frames))
    }

    /// ROUTER: sends `frames[1..]` to the peer whose identity is `frames[0]`, without blocking.
    pub fn send(&mut self, frames: &[&[u8]]) -> Result<(), SendError> {
        assert!(self.kind == Kind::Router && frames.len() >= 2, "only a ROUTER sends, with an identity frame");
        let Some(i) = self.holder(frames[0], None) else { return Err(SendError::Unreachable) };
        let Some(Some(slot)) = self.slots.get_mut(i) else { return Err(SendError::Unreachable) };
        if slot.peer.queued_bytes() > limits::zmq_send_queue_bytes_max {
            return Err(SendError::Full);
        }
        slot.peer.queue(&frames[1..]);
        self.flush(i);
        match self.slots.get(i) {
            Some(Some(_)) => Ok(()),
            _ => Err(SendError::Unreachable),
        }
    }
}

/// Why `Attached::drive` returned.
#[derive(Debug)]
pub enum DriveEnd {
    Stopped,
    /// The connection of the engine with this identity closed.
    Lost(Vec<u8>),
    Failed(io::Error),
}

/// A socket driven by the runtime of the thread that attached it.
pub struct Attached {
    socket: RefCell<Socket>,
    watcher: monoio::net::UnixStream,
    /// `recv_multipart` read the epoll set since the watcher last reported it ready. Until it
    /// does again, another `epoll_wait` would find nothing new: the watcher's poll is level-
    /// triggered, so whatever is still or newly ready completes it at once. This saves a
    /// syscall per engine output batch, between its delivery and the streams' turn.
    checked: Cell<bool>,
}

impl Attached {
    pub fn attach(socket: Socket) -> io::Result<Self> {
        // SAFETY: dup returns a new descriptor we own; the socket keeps its own.
        let dup = unsafe { libc::dup(socket.epoll.as_raw_fd()) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // The watcher is only ever polled for readability, never read.
        // SAFETY: `dup` is a fresh, owned, open descriptor.
        let std_stream = unsafe { std::os::unix::net::UnixStream::from_raw_fd(dup) };
        let watcher = monoio::net::UnixStream::from_std(std_stream)?;
        Ok(Attached { socket: RefCell::new(socket), watcher, checked: Cell::new(false) })
    }

    /// Gives the socket back (to move it to another thread); the watcher is closed.
    pub fn detach(self) -> Socket {
        self.socket.into_inner()
    }

    pub fn path(&self) -> String {
        self.socket.borrow().path.clone()
    }

    pub fn try_recv_multipart(&self, frames: &mut Frames) -> io::Result<bool> {
        self.socket.borrow_mut().try_recv(frames)
    }

    /// Waits for and receives one message.
    pub async fn recv_multipart(&self, frames: &mut Frames) -> io::Result<()> {
        loop {
            if !self.checked.replace(true) {
                if self.try_recv_multipart(frames)? {
                    return Ok(());
                }
            } else if self.socket.borrow_mut().take_buffered(frames) {
                return Ok(());
            } else {
                self.readable().await?;
                self.checked.set(false);
            }
        }
    }

    /// Waits until the epoll set has something to handle. Spurious wake-ups are possible.
    pub async fn readable(&self) -> io::Result<()> {
        self.watcher.readable(false).await
    }

    pub fn send_multipart(&self, frames: &[&[u8]]) -> Result<(), SendError> {
        self.socket.borrow_mut().send(frames)
    }

    /// Sends, waiting for room while the queue is full, for at most `limit`.
    pub async fn send_multipart_within(&self, frames: &[&[u8]], limit: Duration) -> Result<(), SendError> {
        let deadline = Instant::now() + limit;
        loop {
            match self.send_multipart(frames) {
                Err(SendError::Full) if Instant::now() < deadline => {
                    monoio::time::sleep(Duration::from_millis(1)).await;
                }
                other => return other,
            }
        }
    }

    /// ROUTER after the handshake: keeps the socket serviced (flushes queued requests, accepts
    /// a reconnecting engine, answers PING) until `stop` resolves or an engine's connection is
    /// lost. Engines send nothing on this socket after registering, so any message is logged
    /// and dropped.
    pub async fn drive<F: std::future::Future<Output = ()>>(&self, stop: F) -> DriveEnd {
        let mut stop = std::pin::pin!(stop);
        let mut frames = Frames::default();
        loop {
            loop {
                match self.try_recv_multipart(&mut frames) {
                    Ok(true) => tracing::debug!("{}: dropped an unexpected message from an engine", self.path()),
                    Ok(false) => break,
                    Err(e) => return DriveEnd::Failed(e),
                }
            }
            if let Some(identity) = self.socket.borrow_mut().take_lost() {
                return DriveEnd::Lost(identity);
            }
            monoio::select! {
                r = self.readable() => if let Err(e) = r { return DriveEnd::Failed(e) },
                _ = &mut stop => return DriveEnd::Stopped,
            }
        }
    }
}
