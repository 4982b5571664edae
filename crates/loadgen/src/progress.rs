//! The live progress line: requests sent and done against the plan, in flight, the current
//! send and completion rates, and TTFT p50/p99 over the last few seconds. Client cores only
//! bump counters and push TTFT samples into a bounded lock-free queue; the main thread, which
//! sends nothing, does the arithmetic and the printing.

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam::queue::ArrayQueue;

use super::record::RequestRecord;

/// TTFT samples waiting for the main thread; beyond this, samples are dropped (display only).
const TTFT_QUEUE_SIZE: usize = 1 << 16;
/// TTFT percentiles and rates cover this much recent time.
const WINDOW: Duration = Duration::from_secs(3);
const POLL_INTERVAL: Duration = Duration::from_millis(50);
const TERMINAL_REFRESH: Duration = Duration::from_millis(500);
/// Without a terminal, one line this often (logs stay readable).
const LOG_REFRESH: Duration = Duration::from_secs(10);

pub struct Progress {
    sent: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    ttft_us: ArrayQueue<u32>,
    planned: Option<u64>,
}

impl Progress {
    pub fn new(planned: Option<u64>) -> Progress {
        Progress {
            sent: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            ttft_us: ArrayQueue::new(TTFT_QUEUE_SIZE),
            planned,
        }
    }

    pub fn on_send(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    pub fn on_done(&self, rec: &RequestRecord) {
        self.completed.fetch_add(1, Ordering::Relaxed);
        match rec.first_token_ns() {
            Some(t) if rec.succeeded() => {
                let us = u32::try_from(t.saturating_sub(rec.send_ns) / 1000).unwrap_or(u32::MAX);
                let _ = self.ttft_us.push(us);
            }
            _ => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Forgets the warm-up.
    pub fn reset(&self) {
        self.sent.store(0, Ordering::Relaxed);
        self.completed.store(0, Ordering::Relaxed);
        self.failed.store(0, Ordering::Relaxed);
        while self.ttft_us.pop().is_some() {}
    }

    /// Runs on the main thread until `finished()`, printing when `show`.
    pub fn watch(&self, origin: Instant, show: bool, finished: impl Fn() -> bool) {
        let terminal = std::io::stderr().is_terminal();
        let refresh = if terminal { TERMINAL_REFRESH } else { LOG_REFRESH };
        let mut view = View::default();
        let mut last_print = Instant::now();
        while !finished() {
            std::thread::sleep(POLL_INTERVAL);
            let now = Instant::now();
            view.sample(self, now);
            if show && now >= origin && now - last_print >= refresh {
                last_print = now;
                let line = view.line(self, now - origin);
                let mut err = std::io::stderr().lock();
                let _ = if terminal { write!(err, "\r{line}\x1b[K") } else { writeln!(err, "{line}") };
                let _ = err.flush();
            }
        }
        if show && terminal {
            eprintln!();
        }
    }
}

#[derive(Default)]
struct View {
    ttfts: VecDeque<(Instant, u32)>,
    /// (time, sent, completed) snapshots over the window.
    counts: VecDeque<(Instant, u64, u64)>,
}

impl View {
    fn sample(&mut self, p: &Progress, now: Instant) {
        while let Some(us) = p.ttft_us.pop() {
            self.ttfts.push_back((now, us));
        }
        self.counts.push_back((now, p.sent.load(Ordering::Relaxed), p.completed.load(Ordering::Relaxed)));
        let horizon = now.checked_sub(WINDOW).unwrap_or(now);
        while self.ttfts.front().is_some_and(|(t, _)| *t < horizon) {
            self.ttfts.pop_front();
        }
        while self.counts.len() > 2 && self.counts.front().is_some_and(|(t, _, _)| *t < horizon) {
            self.counts.pop_front();
        }
    }

    fn line(&self, p: &Progress, elapsed: Duration) -> String {
        let sent = p.sent.load(Ordering::Relaxed);
        let done = p.completed.load(Ordering::Relaxed);
        let failed = p.failed.load(Ordering::Relaxed);
        let plan = p.planned.map_or_else(String::new, |n| format!("/{n}"));
        let (send_rate, done_rate) = match (self.counts.front(), self.counts.back()) {
            (Some(a), Some(b)) if b.0 > a.0 => {
                let dt = (b.0 - a.0).as_secs_f64();
                ((b.1 - a.1) as f64 / dt, (b.2 - a.2) as f64 / dt)
            }
            _ => (0.0, 0.0),
        };
        let mut sorted: Vec<u32> = self.ttfts.iter().map(|(_, us)| *us).collect();
        sorted.sort_unstable();
        let pct = |q: f64| sorted.get(((sorted.len() as f64 - 1.0) * q).round() as usize).map(|&us| us as f64 / 1e3);
        let ttft = match (pct(0.5), pct(0.99)) {
            (Some(p50), Some(p99)) => format!("TTFT p50 {p50:.2} ms p99 {p99:.2} ms"),
            _ => "TTFT -".into(),
        };
        format!(
            "[{:7.1} s] sent {sent}{plan}  done {done} (failed {failed})  in flight {}  {send_rate:.0} sent/s  {done_rate:.0} done/s  {ttft}",
            elapsed.as_secs_f64(),
            sent.saturating_sub(done)
        )
    }
}
