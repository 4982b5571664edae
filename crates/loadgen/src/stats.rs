//! Distributions: an HDR histogram (3 significant digits: percentiles within 0.05 % of the
//! exact nearest-rank value, in constant memory however many samples) plus exact count, mean,
//! population standard deviation (numpy's default, as vLLM reports), min and max.

use hdrhistogram::Histogram;

pub struct Samples {
    hist: Histogram<u64>,
    count: u64,
    mean: f64,
    /// Sum of squared deviations (Welford).
    m2: f64,
    min: u64,
    max: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub median: f64,
    /// (percentile in (0, 100], value)
    pub percentiles: Vec<(f64, f64)>,
}

impl Default for Samples {
    fn default() -> Self {
        Samples {
            hist: Histogram::new(3).expect("3 significant digits is a valid HDR precision"),
            count: 0,
            mean: 0.0,
            m2: 0.0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Samples {
    pub fn record(&mut self, value: u64) {
        // Auto-resizing: recording cannot fail for a u64.
        let _ = self.hist.record(value);
        self.count += 1;
        let delta = value as f64 - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (value as f64 - self.mean);
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    pub fn record_n(&mut self, value: u64, n: u32) {
        for _ in 0..n {
            self.record(value);
        }
    }

    /// All zeros when empty (as vLLM reports an empty metric).
    pub fn summary(&self, percentiles: &[f64]) -> Summary {
        if self.count == 0 {
            return Summary { percentiles: percentiles.iter().map(|&p| (p, 0.0)).collect(), ..Summary::default() };
        }
        // The epsilon keeps 99.9 / 100 = 0.99900000000000011 from rounding up one rank.
        let at = |p: f64| self.hist.median_equivalent(self.hist.value_at_quantile(p / 100.0 - 1e-12)) as f64;
        Summary {
            count: self.count,
            mean: self.mean,
            std: (self.m2 / self.count as f64).sqrt(),
            min: self.min as f64,
            max: self.max as f64,
            median: at(50.0),
            percentiles: percentiles.iter().map(|&p| (p, at(p))).collect(),
        }
    }
}

impl Summary {
    /// The same distribution in another unit (ns → ms: 1e-6).
    pub fn scaled(&self, factor: f64) -> Summary {
        Summary {
            count: self.count,
            mean: self.mean * factor,
            std: self.std * factor,
            min: self.min * factor,
            max: self.max * factor,
            median: self.median * factor,
            percentiles: self.percentiles.iter().map(|&(p, v)| (p, v * factor)).collect(),
        }
    }

    pub fn percentile(&self, p: f64) -> Option<f64> {
        self.percentiles.iter().find(|(q, _)| *q == p).map(|&(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_moments_and_percentiles() {
        let mut s = Samples::default();
        for v in 1..=1000u64 {
            s.record(v);
        }
        let sum = s.summary(&[50.0, 90.0, 99.0, 99.9]);
        assert_eq!((sum.count, sum.min, sum.max), (1000, 1.0, 1000.0));
        assert!((sum.mean - 500.5).abs() < 1e-9);
        // Population std of 1..=n is sqrt((n² − 1) / 12).
        assert!((sum.std - ((1000f64 * 1000.0 - 1.0) / 12.0).sqrt()).abs() < 1e-9);
        assert_eq!(sum.median, 500.0);
        assert_eq!(sum.percentiles, vec![(50.0, 500.0), (90.0, 900.0), (99.0, 990.0), (99.9, 999.0)]);
    }

    #[test]
    fn large_values_within_precision_and_empty_is_zero() {
        let mut s = Samples::default();
        s.record_n(123_456_789, 3);
        let sum = s.summary(&[99.0]);
        let p99 = sum.percentile(99.0).unwrap_or(0.0);
        assert!((p99 - 123_456_789.0).abs() / 123_456_789.0 < 5e-4, "{p99}");
        assert_eq!(sum.std, 0.0);
        let empty = Samples::default().summary(&[50.0]);
        assert_eq!((empty.count, empty.mean, empty.percentiles), (0, 0.0, vec![(50.0, 0.0)]));
    }
}
