//! A one-shot, single-thread signal: raised once, awaited by any number of local tasks.
//!
//! Each `wait()` future owns one slot in the signal's waiter list: a poll replaces the waker in
//! its slot and dropping the future frees the slot. The list is therefore as long as the number
//! of futures waiting right now, however often they are polled. (Deduplicating on
//! `Waker::will_wake` instead is not enough: the same task's waker can carry a different vtable
//! pointer from one codegen unit to the next, so `will_wake` said no and a long-lived loop that
//! selected on the signal added a waker on every poll, making every later poll scan a list that
//! grew with the requests served.)

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct LocalSignal {
    raised: Cell<bool>,
    waiters: RefCell<Waiters>,
}

#[derive(Default)]
struct Waiters {
    slots: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl LocalSignal {
    pub fn raise(&self) {
        if self.raised.replace(true) {
            return;
        }
        // Slots stay allocated: their futures free them when dropped.
        let wakers: Vec<Waker> = self.waiters.borrow_mut().slots.iter_mut().filter_map(Option::take).collect();
        for w in wakers {
            w.wake();
        }
    }

    pub fn is_raised(&self) -> bool {
        self.raised.get()
    }

    /// Resolves once the signal is raised (at once if it already was).
    pub fn wait(&self) -> Wait<'_> {
        Wait { signal: self, slot: None }
    }

    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.waiters.borrow().slots.iter().filter(|s| s.is_some()).count()
    }
}

pub struct Wait<'a> {
    signal: &'a LocalSignal,
    slot: Option<usize>,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.signal.raised.get() {
            return Poll::Ready(());
        }
        let mut waiters = this.signal.waiters.borrow_mut();
        match this.slot {
            Some(i) => waiters.slots[i] = Some(cx.waker().clone()),
            None => {
                let waker = Some(cx.waker().clone());
                let i = match waiters.free.pop() {
                    Some(i) => {
                        waiters.slots[i] = waker;
                        i
                    }
                    None => {
                        waiters.slots.push(waker);
                        waiters.slots.len() - 1
                    }
                };
                this.slot = Some(i);
            }
        }
        Poll::Pending
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let mut waiters = self.signal.waiters.borrow_mut();
            waiters.slots[i] = None;
            waiters.free.push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wake_count::WakeCount;
    use std::sync::Arc;
    use std::task::Wake;

    /// A distinct waker every time (what a task's waker looks like to `will_wake` when its
    /// vtable pointer differs), counting into `count`.
    fn fresh_waker(count: &Arc<WakeCount>) -> Waker {
        struct Forward(Arc<WakeCount>);
        impl Wake for Forward {
            fn wake(self: Arc<Self>) {
                self.0.wake_by_ref();
            }
        }
        Waker::from(Arc::new(Forward(count.clone())))
    }

    #[test]
    fn repolling_does_not_grow_the_waiter_list() {
        let s = LocalSignal::default();
        let count = Arc::new(WakeCount::default());
        let mut wait = Box::pin(s.wait());
        for _ in 0..1000 {
            let waker = fresh_waker(&count);
            assert!(wait.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        }
        assert_eq!(s.waiting(), 1);
        s.raise();
        assert_eq!(count.get(), 1, "the latest waker is woken, once");
        assert!(wait.as_mut().poll(&mut Context::from_waker(&fresh_waker(&count))).is_ready());
    }

    #[test]
    fn dropped_waiters_leave_and_the_rest_are_woken() {
        let s = LocalSignal::default();
        let count = Arc::new(WakeCount::default());
        let mut kept = Vec::new();
        for i in 0..100 {
            let mut w = Box::pin(s.wait());
            assert!(w.as_mut().poll(&mut Context::from_waker(&fresh_waker(&count))).is_pending());
            if i % 2 == 0 {
                kept.push(w);
            }
        }
        assert_eq!(s.waiting(), 50);
        // Freed slots are reused: the list never held more than the live waiters plus one.
        let mut again = Box::pin(s.wait());
        assert!(again.as_mut().poll(&mut Context::from_waker(&fresh_waker(&count))).is_pending());
        assert_eq!(s.waiters.borrow().slots.len(), 51);
        s.raise();
        assert_eq!(count.get(), 51);
        assert!(s.is_raised());
        let waker = Waker::from(count.clone());
        assert!(Box::pin(s.wait()).as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
    }
}
