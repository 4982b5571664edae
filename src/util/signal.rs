//! A one-shot, single-thread signal: raised once, awaited by any number of local tasks.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};

#[derive(Default)]
pub struct LocalSignal {
    raised: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
}

impl LocalSignal {
    pub fn raise(&self) {
        if self.raised.replace(true) {
            return;
        }
        for w in self.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    pub fn is_raised(&self) -> bool {
        self.raised.get()
    }

    pub async fn wait(&self) {
        poll_fn(|cx| {
            if self.raised.get() {
                Poll::Ready(())
            } else {
                let mut waiters = self.waiters.borrow_mut();
                if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    waiters.push(cx.waker().clone());
                }
                Poll::Pending
            }
        })
        .await
    }
}
