//! A log line for an event that can repeat thousands of times a second (refused connections,
//! failed accepts): written at most once per interval, with how many times the event happened.

use std::time::{Duration, Instant};

pub struct Throttle {
    interval: Duration,
    last: Option<Instant>,
    count: u64,
}

impl Throttle {
    pub fn new(interval: Duration) -> Self {
        Throttle { interval, last: None, count: 0 }
    }

    /// Counts one event at `now`. `Some(n)` when a line is due: `n` events since the last line,
    /// this one included.
    pub fn hit(&mut self, now: Instant) -> Option<u64> {
        self.count += 1;
        if self.last.is_some_and(|last| now.duration_since(last) < self.interval) {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count() {
        let t0 = Instant::now();
        let mut t = Throttle::new(Duration::from_secs(1));
        let ms = |n| t0 + Duration::from_millis(n);
        // (time of the event, the line it writes)
        let cases = [(0, Some(1)), (1, None), (500, None), (999, None), (1000, Some(4)), (1001, None), (5000, Some(2))];
        for (at, expected) in cases {
            assert_eq!(t.hit(ms(at)), expected, "event at {at} ms");
        }
    }
}
