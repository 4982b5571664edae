//! Where a generation's events go: the API adapter that asked for it. The pipeline decides what
//! happens and when a batch of events is complete; the sink decides what it looks like on the
//! wire (SSE chunks, a JSON body, named events) and writes it to its client.
//!
//! Calls, streamed: `open(true)`, the `Start` events, `flush`; then events and a `flush` per
//! batch of engine outputs (a `keepalive` when nothing happened for a while); then `Usage` and
//! `close`. One-shot: `open(false)`, every event once the choices finished, `close`. `fail` ends
//! either instead of `close`, at any point, and nothing follows it. After a call reports `Gone`
//! the pipeline stops (and aborts the engine requests).

use super::events::Event;
use crate::error::ApiError;

/// The client went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

/// An API adapter's end of a generation. Futures stay on their shard: no `Send` bounds.
#[allow(async_fn_in_trait)]
pub trait Sink {
    /// The response begins; a streamed one sends its head now.
    async fn open(&mut self, streaming: bool) -> Result<(), Gone>;

    /// One event, rendered and queued (nothing is written until `flush` or `close`).
    fn event(&mut self, event: Event);

    /// Writes what is queued, in one write.
    async fn flush(&mut self) -> Result<(), Gone>;

    /// A streamed response has had nothing to say for a while: something that keeps proxies
    /// and clients from dropping the connection.
    async fn keepalive(&mut self) -> Result<(), Gone>;

    /// The generation is complete: what is queued and the end of the response.
    async fn close(&mut self);

    /// The generation failed: an error response, or, once a stream started, what is queued,
    /// an error event, and the end of the stream.
    async fn fail(&mut self, error: &ApiError);
}
