//! The per-request mailbox between a transport's output reader and the request's task, both on
//! the same shard: a queue of events plus the waker of the task waiting on it. No locks, no
//! atomics: `Rc<RefCell<…>>` is enough because nothing here crosses a thread.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::{Poll, Waker};
use std::time::Instant;

use crate::engine::TokenEvent;
use crate::error::EngineFault;

#[derive(Debug)]
pub enum SlotEvent {
    Tokens(TokenEvent),
    Fault(EngineFault),
}

#[derive(Default)]
pub struct RequestSlot {
    inner: RefCell<Inner>,
}

#[derive(Default)]
struct Inner {
    events: VecDeque<SlotEvent>,
    waker: Option<Waker>,
    /// The transport delivered the request's last event (finish or fault).
    closed: bool,
    /// When the batch that carried the first event arrived from the engine.
    first_event_at: Option<Instant>,
}

impl RequestSlot {
    /// Delivers an event that arrived from the engine at `arrived`; a finish or a fault closes
    /// the slot.
    pub fn push(&self, ev: SlotEvent, arrived: Instant) {
        let mut inner = self.inner.borrow_mut();
        if inner.closed {
            return;
        }
        inner.first_event_at.get_or_insert(arrived);
        inner.closed = match &ev {
            SlotEvent::Tokens(t) => t.finish.is_some(),
            SlotEvent::Fault(_) => true,
        };
        inner.events.push_back(ev);
        if let Some(w) = inner.waker.take() {
            w.wake();
        }
    }

    /// When the first event arrived from the engine, once one has.
    pub fn first_event_at(&self) -> Option<Instant> {
        self.inner.borrow().first_event_at
    }

    /// True once the transport has delivered the last event (the engine is done with the id).
    pub fn is_closed(&self) -> bool {
        self.inner.borrow().closed
    }

    /// The next event, waiting if there is none yet.
    pub async fn next(&self) -> SlotEvent {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    /// Polls for the next event, registering `cx`'s waker when there is none.
    pub fn poll_next(&self, cx: &mut std::task::Context<'_>) -> Poll<SlotEvent> {
        let mut inner = self.inner.borrow_mut();
        match inner.events.pop_front() {
            Some(ev) => Poll::Ready(ev),
            None => {
                if !inner.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    inner.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }

    /// The next event if one is queued.
    pub fn try_next(&self) -> Option<SlotEvent> {
        self.inner.borrow_mut().events.pop_front()
    }
}
