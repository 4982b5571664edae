//! Ping and SETTINGS floods: each PING and each SETTINGS a client sends obliges an
//! acknowledgement, so a client that sends them without end (and need not read the answers)
//! keeps the connection busy for nothing. The `h2` crate answers every one, so the guard sits
//! below it, in the byte stream it reads: frame headers are followed as they pass (nothing is
//! copied or buffered), and once a client sends more than `http2_control_frames_max` of them
//! within `http2_control_frames_window_s` the read fails, which ends the connection.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::super::sniff::PREFACE;
use crate::limits;

const FRAME_HEAD_BYTES: usize = 9;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const ACK: u8 = 0x1;

/// Where the reader is in the client's byte stream.
struct Frames {
    /// Bytes of the preface still to pass.
    preface_left: usize,
    head: [u8; FRAME_HEAD_BYTES],
    head_len: usize,
    /// Payload bytes of the current frame still to pass.
    payload_left: usize,
    window_start: Instant,
    in_window: u32,
}

impl Frames {
    fn new() -> Self {
        Frames {
            preface_left: PREFACE.len(),
            head: [0; FRAME_HEAD_BYTES],
            head_len: 0,
            payload_left: 0,
            window_start: Instant::now(),
            in_window: 0,
        }
    }

    /// Follows `bytes`; false once the client is over the limit.
    fn pass(&mut self, mut bytes: &[u8]) -> bool {
        let skip = self.preface_left.min(bytes.len());
        self.preface_left -= skip;
        bytes = &bytes[skip..];
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let n = self.payload_left.min(bytes.len());
                self.payload_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (FRAME_HEAD_BYTES - self.head_len).min(bytes.len());
            self.head[self.head_len..self.head_len + n].copy_from_slice(&bytes[..n]);
            self.head_len += n;
            bytes = &bytes[n..];
            if self.head_len == FRAME_HEAD_BYTES {
                self.head_len = 0;
                let h = &self.head;
                self.payload_left = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
                if matches!(h[3], SETTINGS | PING) && h[4] & ACK == 0 && !self.count() {
                    return false;
                }
            }
        }
        true
    }

    fn count(&mut self) -> bool {
        let now = Instant::now();
        if now.duration_since(self.window_start) > Duration::from_secs(limits::http2_control_frames_window_s) {
            self.window_start = now;
            self.in_window = 0;
        }
        self.in_window += 1;
        self.in_window <= limits::http2_control_frames_max
    }
}

/// The connection's I/O with the client's PING and SETTINGS frames counted.
pub struct FloodGuard<T> {
    io: T,
    frames: Frames,
}

impl<T> FloodGuard<T> {
    pub fn new(io: T) -> Self {
        FloodGuard { io, frames: Frames::new() }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for FloodGuard<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            if !this.frames.pass(&buf.filled()[before..]) {
                return Poll::Ready(Err(io::Error::other(format!(
                    "more than {} PING and SETTINGS frames in {} s",
                    limits::http2_control_frames_max,
                    limits::http2_control_frames_window_s
                ))));
            }
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FloodGuard<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload_len: usize) -> Vec<u8> {
        let mut f = vec![0, (payload_len >> 8) as u8, payload_len as u8, kind, flags, 0, 0, 0, 0];
        f.resize(FRAME_HEAD_BYTES + payload_len, 0);
        f
    }

    #[test]
    fn counts_unacknowledged_pings_and_settings_at_any_split() {
        let max = limits::http2_control_frames_max as usize;
        // (what the client sends after the preface, whether it stays under the limit)
        let cases: Vec<(Vec<u8>, bool)> = vec![
            (frame(PING, 0, 8).repeat(max), true),
            (frame(PING, 0, 8).repeat(max + 1), false),
            (frame(SETTINGS, 0, 6).repeat(max + 1), false),
            (frame(PING, ACK, 8).repeat(max + 1), true),
            (frame(SETTINGS, ACK, 0).repeat(max + 1), true),
            // A PING's bytes inside a DATA payload are payload, not a frame.
            ([frame(0x0, 0, 9 * (max + 1))].concat(), true),
        ];
        for (i, (bytes, under)) in cases.iter().enumerate() {
            let stream = [PREFACE, bytes].concat();
            for split in [1usize, 7, 9, 1000] {
                let mut frames = Frames::new();
                let mut ok = true;
                for piece in stream.chunks(split) {
                    ok &= frames.pass(piece);
                }
                assert_eq!(ok, *under, "case {i}, pieces of {split}");
            }
        }
    }
}
