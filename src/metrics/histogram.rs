//! A fixed-bucket histogram for one writer (its shard) and any number of scrape readers.

use std::sync::atomic::{AtomicU64, Ordering};

/// Latency buckets in seconds: token-level (sub-millisecond) to long generations. Finer
/// between 50 and 250 µs, where the gateway's own part of TTFT lies and its 100 µs target is.
pub const BUCKETS_S: [f64; 26] = [
    0.00005, 0.000075, 0.0001, 0.00015, 0.0002, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
    0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

pub struct Histogram {
    /// Non-cumulative counts per bucket; the last slot is +Inf.
    buckets: [AtomicU64; BUCKETS_S.len() + 1],
    count: AtomicU64,
    /// Sum of observations in microseconds (integer, so one atomic add).
    sum_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: Default::default(), count: AtomicU64::new(0), sum_us: AtomicU64::new(0) }
    }
}

/// A scrape-time copy, summable across shards.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HistogramSnapshot {
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_s: f64,
}

impl Histogram {
    pub fn observe(&self, seconds: f64) {
        let i = BUCKETS_S.iter().position(|&b| seconds <= b).unwrap_or(BUCKETS_S.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add((seconds.max(0.0) * 1e6) as u64, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect(),
            count: self.count.load(Ordering::Relaxed),
            sum_s: self.sum_us.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

impl HistogramSnapshot {
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; other.buckets.len()];
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum_s += other.sum_s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_sum_and_merge() {
        let h = Histogram::default();
        for s in [0.0001, 0.003, 0.003, 0.2, 1000.0] {
            h.observe(s);
        }
        let snap = h.snapshot();
        let bucket = |bound: f64| BUCKETS_S.iter().position(|&b| b == bound).expect("a bound");
        assert_eq!(snap.count, 5);
        assert_eq!(snap.buckets[bucket(0.0001)], 1); // ≤ 100 µs, on the bound
        assert_eq!(snap.buckets[bucket(0.005)], 2); // (2.5 ms, 5 ms]
        assert_eq!(snap.buckets[bucket(0.25)], 1); // (100 ms, 250 ms]
        assert_eq!(snap.buckets[BUCKETS_S.len()], 1); // +Inf
        let mut total = HistogramSnapshot::default();
        total.merge(&snap);
        total.merge(&snap);
        assert_eq!(total.count, 10);
        assert!((total.sum_s - 2.0 * 1000.2061).abs() < 1e-3);
    }
}
