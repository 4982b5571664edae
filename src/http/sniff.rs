//! Which protocol a new cleartext connection speaks: HTTP/2 with prior knowledge starts with
//! the fixed client preface, anything else is HTTP/1.x. The bytes are only peeked, so whichever
//! server takes the connection reads it from its first byte.

use std::os::fd::AsRawFd;
use std::time::Instant;

use monoio::net::TcpStream;

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

/// What the peeked bytes say so far: `None` while they are a strict prefix of the preface.
pub fn classify(peeked: &[u8]) -> Option<Protocol> {
    let n = peeked.len().min(PREFACE.len());
    if peeked[..n] != PREFACE[..n] {
        return Some(Protocol::Http1);
    }
    (n == PREFACE.len()).then_some(Protocol::Http2)
}

/// Waits until the first bytes decide the protocol. `None`: the client closed, failed, or sent
/// nothing decisive by `deadline` (the connection is closed silently, as an HTTP/1.1 one that
/// sent nothing would be).
pub async fn sniff(stream: &TcpStream, deadline: Instant) -> Option<Protocol> {
    let fd = stream.as_raw_fd();
    let mut peeked = [0u8; PREFACE.len()];
    loop {
        // SAFETY: a peek into a local buffer of the length given; the fd is open while `stream` lives.
        let n =
            unsafe { libc::recv(fd, peeked.as_mut_ptr().cast(), peeked.len(), libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        if n == 0 {
            return None;
        }
        if n > 0 {
            if let Some(p) = classify(&peeked[..n as usize]) {
                return Some(p);
            }
        } else {
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::WouldBlock && err.kind() != std::io::ErrorKind::Interrupted {
                return None;
            }
        }
        // A partial preface keeps the socket readable: wait for more, not for readiness alone.
        let wait = async {
            if n > 0 {
                monoio::time::sleep(std::time::Duration::from_millis(1)).await;
                Ok(())
            } else {
                stream.readable(false).await
            }
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        match monoio::time::timeout(remaining, wait).await {
            Ok(Ok(())) => {}
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_wait_and_anything_else_is_http1() {
        let cases: [(&[u8], Option<Protocol>); 7] = [
            (b"P", None),
            (b"PRI * HTTP/2.0\r\n", None),
            (PREFACE, Some(Protocol::Http2)),
            (b"POST /v1/completions HTTP/1.1\r\n", Some(Protocol::Http1)),
            (b"GET / HTTP/1.1\r\n", Some(Protocol::Http1)),
            (b"PRI * HTTP/1.1\r\n", Some(Protocol::Http1)),
            (b"\x16\x03\x01", Some(Protocol::Http1)),
        ];
        for (bytes, want) in cases {
            assert_eq!(classify(bytes), want, "{bytes:?}");
        }
    }
}
