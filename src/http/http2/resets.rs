//! The streams one HTTP/2 client reset, counted per window: the rapid-reset attack
//! (CVE-2023-44487) opens and cancels streams faster than any concurrency limit sees them,
//! each one costing a request's work up to its cancellation.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::limits;

pub struct Resets {
    window_start: Cell<Instant>,
    in_window: Cell<u32>,
}

impl Default for Resets {
    fn default() -> Self {
        Resets { window_start: Cell::new(Instant::now()), in_window: Cell::new(0) }
    }
}

impl Resets {
    pub fn count(&self) {
        let now = Instant::now();
        if now.duration_since(self.window_start.get()) > Duration::from_secs(limits::http2_client_resets_window_s) {
            self.window_start.set(now);
            self.in_window.set(0);
        }
        self.in_window.set(self.in_window.get() + 1);
    }

    /// More resets in the current window than a client may make.
    pub fn exceeded(&self) -> bool {
        self.in_window.get() > limits::http2_client_resets_max
    }
}
