//! One write per engine step per connection. `h2` encodes the frames its streams queued into
//! one buffer and writes it when its connection task runs, which on a shard is after every
//! stream the step woke has queued its chunk: one write for all of them. But on a transport
//! that says it writes vectored, `h2` keeps a DATA payload of 256 bytes or more out of the
//! buffer (it chains it, to avoid the copy), and a chained frame must be written before the
//! next one can be queued: a chunk of that size (an SSE event with per-chunk usage is ~330
//! bytes) costs a `writev` of its own. Saying the transport is not vectored raises that
//! threshold to 1 KiB, so token chunks are copied into the one buffer and leave together
//! (the copy is cheaper than the system call it saves).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The connection's transport, as `h2` sees it: not vectored.
pub struct Coalesce<T>(pub T);

impl<T: AsyncRead + Unpin> AsyncRead for Coalesce<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesce<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn is_write_vectored(&self) -> bool {
        false
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
