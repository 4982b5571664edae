//! The response side of one HTTP/2 stream: the head, then DATA frames sent only as far as the
//! stream's and the connection's flow-control windows allow, and the client's RST_STREAM seen
//! as the client leaving.
//!
//! A stream whose window is closed waits in its own task; the connection's other streams go on.
//! The stream's handle is shared between the writer and the watch for the client's reset
//! (`gone`); both run in the request's task (the watch is polled beside the writes), so the
//! single waker slot h2 keeps per stream for both is always that task's.
//!
//! Capacity is reserved in bulk (`http2_stream_reserve_bytes`), not per chunk: reserving wakes
//! the stream's own task when `h2` grants it, so a reservation per chunk cost a lock, a wake
//! and a second poll of the request's task for every token. A stream holds at most that much
//! of the connection's window unused; ending the stream gives it back.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::Poll;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::SendStream;

use crate::http::ClientGone;
use crate::limits;

enum State {
    /// No head sent yet.
    Head(SendResponse<Bytes>),
    /// `budget`: bytes the stream may still queue without asking `h2` (the capacity `h2` last
    /// reported, less what was queued since). Each question costs a lock of the connection's
    /// stream table, so a chunk that fits costs one call into `h2`, not three.
    Body { stream: SendStream<Bytes>, budget: usize },
    /// Ended, or failed.
    Done,
}

#[derive(Clone)]
pub struct StreamOut {
    state: Rc<RefCell<State>>,
    /// The client reset the stream before its response ended.
    reset: Rc<Cell<bool>>,
}

impl StreamOut {
    pub fn new(respond: SendResponse<Bytes>) -> Self {
        StreamOut { state: Rc::new(RefCell::new(State::Head(respond))), reset: Rc::default() }
    }

    /// Whether the client reset the stream while it was being answered.
    pub fn was_reset(&self) -> bool {
        self.reset.get()
    }

    /// Sends the head; `end` when there is no body.
    pub fn send_head(&self, head: http::Response<()>, end: bool) -> Result<(), ClientGone> {
        let mut state = self.state.borrow_mut();
        let State::Head(respond) = &mut *state else { return Err(ClientGone) };
        match respond.send_response(head, end) {
            Ok(stream) => {
                *state = if end { State::Done } else { State::Body { stream, budget: 0 } };
                Ok(())
            }
            Err(e) => {
                tracing::debug!("HTTP/2 stream: response head not sent: {e}");
                *state = State::Done;
                Err(ClientGone)
            }
        }
    }

    /// Queues as much of `data` as the stream's capacity covers, ending the stream after it
    /// when `end` and all of it fitted; returns what did not fit (empty when all did).
    pub fn send_now(&self, mut data: Bytes, end: bool) -> Result<Bytes, ClientGone> {
        let mut state = self.state.borrow_mut();
        let State::Body { stream, budget } = &mut *state else { return Err(ClientGone) };
        if data.len() > *budget {
            *budget = stream.capacity();
        }
        let piece = if data.len() <= *budget { std::mem::take(&mut data) } else { data.split_to(*budget) };
        let last = end && data.is_empty();
        if piece.is_empty() && !last {
            return Ok(data);
        }
        *budget -= piece.len();
        match stream.send_data(piece, last) {
            Ok(()) => {
                if last {
                    *state = State::Done;
                }
                Ok(data)
            }
            Err(e) => {
                tracing::debug!("HTTP/2 stream: send failed: {e}");
                *state = State::Done;
                Err(ClientGone)
            }
        }
    }

    /// Sends `data`, ending the stream after it when `end`, waiting for the client's window
    /// whenever it is used up.
    pub async fn send_data(&self, data: Bytes, end: bool) -> Result<(), ClientGone> {
        let mut rest = self.send_now(data, end)?;
        while !rest.is_empty() {
            self.wait_capacity(rest.len()).await?;
            rest = self.send_now(rest, end)?;
        }
        Ok(())
    }

    /// Reserves capacity for `want` bytes, or for `http2_stream_reserve_bytes` if more (so
    /// that the next chunks find it reserved), and waits until some is granted.
    async fn wait_capacity(&self, want: usize) -> Result<(), ClientGone> {
        if let State::Body { stream, .. } = &mut *self.state.borrow_mut() {
            stream.reserve_capacity(want.max(limits::http2_stream_reserve_bytes));
        }
        poll_fn(|cx| {
            let mut state = self.state.borrow_mut();
            let State::Body { stream, budget } = &mut *state else { return Poll::Ready(Err(ClientGone)) };
            *budget = stream.capacity();
            if *budget > 0 {
                return Poll::Ready(Ok(()));
            }
            match stream.poll_capacity(cx) {
                Poll::Ready(Some(Ok(n))) if n > 0 => {
                    *budget = n;
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Some(Ok(_))) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                Poll::Ready(_) => Poll::Ready(Err(ClientGone)),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// Resolves when the client resets the stream or the connection fails. A stream that
    /// ended normally never resolves it: nothing is left to abort.
    pub fn gone(&self) -> impl Future<Output = ()> + 'static {
        let (state, was_reset) = (self.state.clone(), self.reset.clone());
        poll_fn(move |cx| {
            let reset = match &mut *state.borrow_mut() {
                State::Head(respond) => respond.poll_reset(cx),
                State::Body { stream, .. } => stream.poll_reset(cx),
                State::Done => return Poll::Pending,
            };
            reset.map(|why| was_reset.set(why.is_ok()))
        })
    }
}
