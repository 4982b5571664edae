//! Open-loop arrival schedules, computed before the run starts so that a slow response can
//! never delay a later send (no coordinated omission): the pacer sends against these absolute
//! times and every latency can be measured from them.
//!
//! Gaps follow vLLM: gamma with shape `burstiness` and mean 1 / rate (shape 1 is Poisson),
//! or constant; the cumulative times are then rescaled so the last arrival lands exactly at
//! count / rate, which removes the 1–2 % seed-to-seed spread of the offered rate.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrivals {
    /// No rate: every request is eligible at once (closed loop under --max-concurrency).
    Unpaced,
    /// Gamma-distributed gaps with the given shape (1 = Poisson).
    Gamma { rate_per_s: f64, shape: f64 },
    /// Equal gaps.
    Constant { rate_per_s: f64 },
}

impl Arrivals {
    pub fn rate_per_s(&self) -> Option<f64> {
        match *self {
            Arrivals::Unpaced => None,
            Arrivals::Gamma { rate_per_s, .. } | Arrivals::Constant { rate_per_s } => Some(rate_per_s),
        }
    }

    /// The gamma shape vLLM calls burstiness (constant arrivals are its limit, infinity).
    pub fn burstiness(&self) -> f64 {
        match *self {
            Arrivals::Gamma { shape, .. } => shape,
            Arrivals::Constant { .. } => f64::INFINITY,
            Arrivals::Unpaced => 1.0,
        }
    }

    /// Arrivals needed to cover `duration_s` at this rate.
    pub fn count_for_duration(&self, duration_s: f64) -> Option<usize> {
        self.rate_per_s().map(|rate| (rate * duration_s).ceil().max(1.0) as usize)
    }

    /// Send times of `count` requests in nanoseconds from the run origin, non-decreasing,
    /// the last one at count / rate. `None` when unpaced.
    pub fn offsets_ns(&self, count: usize, seed: u64) -> Option<Vec<u64>> {
        let rate = self.rate_per_s()?;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut cumulative_s = Vec::with_capacity(count);
        let mut t = 0.0f64;
        for _ in 0..count {
            t += match *self {
                Arrivals::Gamma { shape, .. } => sample_gamma(&mut rng, shape) / (rate * shape),
                _ => 1.0 / rate,
            };
            cumulative_s.push(t);
        }
        let scale = match cumulative_s.last() {
            Some(&last) if last > 0.0 => (count as f64 / rate) / last,
            _ => 1.0,
        };
        Some(cumulative_s.into_iter().map(|s| (s * scale * 1e9).round() as u64).collect())
    }
}

/// Uniform in (0, 1]: safe to take the logarithm of.
fn uniform_open(rng: &mut SmallRng) -> f64 {
    1.0 - rng.random::<f64>()
}

fn sample_normal(rng: &mut SmallRng) -> f64 {
    let u1 = uniform_open(rng);
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Gamma(shape, scale 1) by Marsaglia and Tsang; shapes below 1 use the boost
/// Gamma(a) = Gamma(a + 1) · U^(1/a).
pub fn sample_gamma(rng: &mut SmallRng, shape: f64) -> f64 {
    if shape == 1.0 {
        return -uniform_open(rng).ln();
    }
    if shape < 1.0 {
        return sample_gamma(rng, shape + 1.0) * uniform_open(rng).powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = sample_normal(rng);
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = uniform_open(rng);
        if u < 1.0 - 0.0331 * x.powi(4) || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
            return d * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap_stats(offsets: &[u64]) -> (f64, f64) {
        let mut prev = 0u64;
        let gaps: Vec<f64> = offsets
            .iter()
            .map(|&t| {
                let g = (t - prev) as f64;
                prev = t;
                g
            })
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn gap_distributions_have_the_requested_mean_and_spread() {
        // (arrivals, expected coefficient of variation = 1 / sqrt(shape))
        let cases = [
            (Arrivals::Gamma { rate_per_s: 100.0, shape: 1.0 }, 1.0),
            (Arrivals::Gamma { rate_per_s: 5000.0, shape: 0.5 }, 2f64.sqrt()),
            (Arrivals::Gamma { rate_per_s: 20.0, shape: 4.0 }, 0.5),
            (Arrivals::Constant { rate_per_s: 250.0 }, 0.0),
        ];
        let count = 200_000;
        for (arrivals, cv_want) in cases {
            let offsets = arrivals.offsets_ns(count, 7).unwrap_or_default();
            assert_eq!(offsets.len(), count);
            assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "{arrivals:?} not monotone");
            let rate = arrivals.rate_per_s().unwrap_or(0.0);
            let (mean_ns, cv) = gap_stats(&offsets);
            let mean_want = 1e9 / rate;
            assert!((mean_ns - mean_want).abs() / mean_want < 1e-4, "{arrivals:?}: mean {mean_ns} vs {mean_want}");
            assert!((cv - cv_want).abs() < 0.02, "{arrivals:?}: cv {cv} vs {cv_want}");
        }
    }

    #[test]
    fn last_arrival_is_exactly_count_over_rate() {
        for (count, rate) in [(1usize, 3.0), (10, 1.0), (150_000, 5000.0)] {
            let offsets = Arrivals::Gamma { rate_per_s: rate, shape: 1.0 }.offsets_ns(count, 1).unwrap_or_default();
            let want = (count as f64 / rate * 1e9).round() as u64;
            assert_eq!(offsets.last().copied(), Some(want), "count {count} rate {rate}");
        }
    }

    #[test]
    fn seeded_and_unpaced() {
        let a = Arrivals::Gamma { rate_per_s: 10.0, shape: 0.7 };
        assert_eq!(a.offsets_ns(100, 3), a.offsets_ns(100, 3));
        assert_ne!(a.offsets_ns(100, 3), a.offsets_ns(100, 4));
        assert_eq!(Arrivals::Unpaced.offsets_ns(5, 0), None);
        assert_eq!(Arrivals::Constant { rate_per_s: 5000.0 }.count_for_duration(30.0), Some(150_000));
        let constant = Arrivals::Constant { rate_per_s: 4.0 }.offsets_ns(4, 0);
        assert_eq!(constant, Some(vec![250_000_000, 500_000_000, 750_000_000, 1_000_000_000]));
    }
}
