//! One connection for one request, plain or TLS, every read and write bounded by the fetch's
//! deadline: each I/O call gets the time left as its socket timeout, so a server that stalls
//! or drips a byte at a time is cut off at the deadline, not at a per-read idle limit.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConnection, StreamOwned};

use crate::url::HttpUrl;
use crate::{tls, FetchError, FetchPolicy};

enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

pub struct Conn {
    stream: Stream,
    deadline: Instant,
}

/// The time left before `deadline`, or the fetch's timeout error.
fn left(deadline: Instant, limit: Duration) -> Result<Duration, FetchError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(FetchError::Timeout(limit));
    }
    Ok(left)
}

/// A connection to `url`'s host, TLS established for `https`.
pub fn open(url: &HttpUrl, deadline: Instant, policy: &FetchPolicy) -> Result<Conn, FetchError> {
    let limit = policy.timeout;
    let host_port = || format!("{}:{}", url.host, url.port);
    let addrs = resolve(url.bare_host(), url.port, deadline, limit)?;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name has no addresses");
    let mut tcp = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, left(deadline, limit)?) {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(FetchError::Timeout(limit)),
            Err(e) => last = e,
        }
    }
    let tcp = tcp.ok_or_else(|| FetchError::Connect { host: host_port(), error: last.to_string() })?;
    let _ = tcp.set_nodelay(true);
    let stream = if url.https {
        let tls_error = |error: String| FetchError::Tls { host: host_port(), error };
        let config = tls::client_config(&policy.extra_roots).map_err(tls_error)?;
        let name = ServerName::try_from(url.bare_host().to_string()).map_err(|e| tls_error(e.to_string()))?;
        let client = ClientConnection::new(config, name).map_err(|e| tls_error(e.to_string()))?;
        Stream::Tls(Box::new(StreamOwned::new(client, tcp)))
    } else {
        Stream::Plain(tcp)
    };
    let mut conn = Conn { stream, deadline };
    conn.handshake().map_err(|e| match e.kind() {
        io::ErrorKind::TimedOut => FetchError::Timeout(limit),
        _ => FetchError::Tls { host: host_port(), error: e.to_string() },
    })?;
    Ok(conn)
}

/// The host's addresses. A name is resolved on a helper thread so that a slow resolver cannot
/// hold the fetch past its deadline (the thread finishes on its own).
fn resolve(host: &str, port: u16, deadline: Instant, limit: Duration) -> Result<Vec<SocketAddr>, FetchError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let within = left(deadline, limit)?;
    let (tx, rx) = mpsc::channel();
    let name = host.to_string();
    std::thread::spawn(move || {
        let _ = tx.send((name.as_str(), port).to_socket_addrs().map(Iterator::collect::<Vec<_>>));
    });
    match rx.recv_timeout(within) {
        Ok(Ok(addrs)) => Ok(addrs),
        Ok(Err(e)) => Err(FetchError::Connect { host: format!("{host}:{port}"), error: e.to_string() }),
        Err(_) => Err(FetchError::Timeout(limit)),
    }
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match &self.stream {
            Stream::Plain(s) => s,
            Stream::Tls(s) => &s.sock,
        }
    }

    /// Gives the socket the time left; a timed-out read or write then fails with `TimedOut`.
    fn arm(&self) -> io::Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.tcp().set_read_timeout(Some(left))?;
        self.tcp().set_write_timeout(Some(left))
    }

    /// TLS's handshake, before the request (a plain connection has none).
    fn handshake(&mut self) -> io::Result<()> {
        loop {
            self.arm()?;
            let Stream::Tls(s) = &mut self.stream else { return Ok(()) };
            if !s.conn.is_handshaking() {
                return Ok(());
            }
            s.conn.complete_io(&mut s.sock).map_err(timed_out)?;
        }
    }
}

/// An I/O failure of a fetch with the timeout `limit` as its error.
pub fn io_error(e: io::Error, limit: Duration) -> FetchError {
    match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => FetchError::Timeout(limit),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => {
            FetchError::Truncated
        }
        _ => FetchError::Io(e.to_string()),
    }
}

/// A socket timeout reads as `WouldBlock` on Linux: both are the deadline here.
fn timed_out(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::WouldBlock {
        return io::ErrorKind::TimedOut.into();
    }
    e
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        match &mut self.stream {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
        .map_err(timed_out)
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        match &mut self.stream {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
        .map_err(timed_out)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.arm()?;
        match &mut self.stream {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
        .map_err(timed_out)
    }
}
