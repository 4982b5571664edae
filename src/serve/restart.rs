//! When an engine that exited is started again: after a backoff that starts at
//! `engine_restart_backoff_ms_initial` and doubles with each restart still inside the window
//! (up to `engine_restart_backoff_ms_max`), unless it was already restarted
//! `--engine-restart-limit` times within `--engine-restart-window-secs`: then never. An engine
//! that stays up longer than the window starts over at the shortest backoff.
//!
//! Pure: times in, decisions out.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::limits;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RestartPolicy {
    pub limit: u32,
    pub window: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
}

impl RestartPolicy {
    pub fn new(limit: u32, window_s: u64) -> RestartPolicy {
        RestartPolicy {
            limit,
            window: Duration::from_secs(window_s),
            backoff_initial: Duration::from_millis(limits::engine_restart_backoff_ms_initial),
            backoff_max: Duration::from_millis(limits::engine_restart_backoff_ms_max),
        }
    }
}

#[derive(Debug, PartialEq)]
pub enum Decision {
    RestartAfter(Duration),
    /// The limit is reached: `restarts` were made within the window.
    GiveUp {
        restarts: usize,
    },
}

/// One engine's restarts still inside the window, oldest first.
#[derive(Debug, Default)]
pub struct Restarts {
    at: VecDeque<Instant>,
}

impl Restarts {
    /// The engine exited at `now`.
    pub fn decide(&mut self, policy: &RestartPolicy, now: Instant) -> Decision {
        while self.at.front().is_some_and(|&t| now.saturating_duration_since(t) >= policy.window) {
            self.at.pop_front();
        }
        let recent = self.at.len();
        if recent >= policy.limit as usize {
            return Decision::GiveUp { restarts: recent };
        }
        let doublings = u32::try_from(recent).unwrap_or(u32::MAX).min(16);
        Decision::RestartAfter(policy.backoff_initial.saturating_mul(1 << doublings).min(policy.backoff_max))
    }

    /// The engine was started again at `now`.
    pub fn record(&mut self, now: Instant) {
        self.at.push_back(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_inside_the_window_and_the_limit_ends_it() {
        let policy = RestartPolicy::new(3, 60);
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // (seconds after t0 the engine exits, decision); each restart happens at once after it.
        let cases = [
            (0, Decision::RestartAfter(s(1))),
            (2, Decision::RestartAfter(s(2))),
            (5, Decision::RestartAfter(s(4))),
            (10, Decision::GiveUp { restarts: 3 }),
            // Once the first restart is older than the window, one more is allowed.
            (61, Decision::RestartAfter(s(4))),
        ];
        let mut restarts = Restarts::default();
        for (exit_s, expected) in cases {
            let now = t0 + s(exit_s);
            let decision = restarts.decide(&policy, now);
            if let Decision::RestartAfter(_) = decision {
                restarts.record(now);
            }
            assert_eq!(decision, expected, "exit at {exit_s} s");
        }
    }

    #[test]
    fn a_stable_engine_starts_over_and_the_backoff_is_capped() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let policy = RestartPolicy::new(100, 300);
        let mut restarts = Restarts::default();
        let mut last = Duration::ZERO;
        for i in 0..10 {
            match restarts.decide(&policy, t0 + s(i)) {
                Decision::RestartAfter(d) => last = d,
                other => panic!("{other:?}"),
            }
            restarts.record(t0 + s(i));
        }
        assert_eq!(last, s(30), "capped at the max");
        assert_eq!(
            restarts.decide(&policy, t0 + s(10 + 300)),
            Decision::RestartAfter(s(1)),
            "up longer than the window"
        );
        assert_eq!(Restarts::default().decide(&RestartPolicy::new(0, 300), t0), Decision::GiveUp { restarts: 0 });
    }
}
