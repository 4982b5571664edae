//! The response side of one HTTP/2 stream: the head, then DATA frames sent only as far as the
//! stream's and the connection's flow-control windows allow, and the client's RST_STREAM seen
//! as the client leaving.
//!
//! A stream whose window is closed waits in its own task; the connection's other streams go on.
//! The stream's handle is shared between the writer and the watch for the client's reset
//! (`gone`); both run in the request's task (the watch is polled beside the writes), so the
//! single waker slot h2 keeps per stream for both is always that task's.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::Poll;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::SendStream;

use crate::http::ClientGone;

enum State {
    /// No head sent yet.
    Head(SendResponse<Bytes>),
    Body(SendStream<Bytes>),
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
            Ok(body) => {
                *state = if end { State::Done } else { State::Body(body) };
                Ok(())
            }
            Err(e) => {
                tracing::debug!("HTTP/2 stream: response head not sent: {e}");
                *state = State::Done;
                Err(ClientGone)
            }
        }
    }

    /// Sends `data`, ending the stream after it when `end`, one window's worth at a time.
    pub async fn send_data(&self, mut data: Bytes, end: bool) -> Result<(), ClientGone> {
        loop {
            if data.is_empty() {
                return match end {
                    true => self.with_body(|s| s.send_data(Bytes::new(), true)).map(|_| self.finish()),
                    false => Ok(()),
                };
            }
            let capacity = self.capacity_for(data.len()).await?;
            let piece = data.split_to(capacity.min(data.len()));
            let last = end && data.is_empty();
            self.with_body(|s| s.send_data(piece, last))?;
            if last {
                self.finish();
                return Ok(());
            }
        }
    }

    /// Capacity to send up to `want` bytes, waiting for the peer's WINDOW_UPDATE if needed.
    async fn capacity_for(&self, want: usize) -> Result<usize, ClientGone> {
        self.with_body(|s| {
            s.reserve_capacity(want);
            Ok(())
        })?;
        poll_fn(|cx| {
            let mut state = self.state.borrow_mut();
            let State::Body(s) = &mut *state else { return Poll::Ready(Err(ClientGone)) };
            if s.capacity() > 0 {
                return Poll::Ready(Ok(s.capacity()));
            }
            match s.poll_capacity(cx) {
                Poll::Ready(Some(Ok(n))) if n > 0 => Poll::Ready(Ok(n)),
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

    fn with_body<T>(&self, f: impl FnOnce(&mut SendStream<Bytes>) -> Result<T, h2::Error>) -> Result<T, ClientGone> {
        let mut state = self.state.borrow_mut();
        let State::Body(s) = &mut *state else { return Err(ClientGone) };
        f(s).map_err(|e| {
            tracing::debug!("HTTP/2 stream: send failed: {e}");
            *state = State::Done;
            ClientGone
        })
    }

    fn finish(&self) {
        *self.state.borrow_mut() = State::Done;
    }

    /// Resolves when the client resets the stream or the connection fails. A stream that
    /// ended normally never resolves it: nothing is left to abort.
    pub fn gone(&self) -> impl Future<Output = ()> + 'static {
        let (state, was_reset) = (self.state.clone(), self.reset.clone());
        poll_fn(move |cx| {
            let reset = match &mut *state.borrow_mut() {
                State::Head(respond) => respond.poll_reset(cx),
                State::Body(s) => s.poll_reset(cx),
                State::Done => return Poll::Pending,
            };
            reset.map(|why| was_reset.set(why.is_ok()))
        })
    }
}
