//! Time-based views of a run: the per-second series (sent, completed, output tokens), the
//! exact peak of requests in flight, pacing (achieved vs offered rate, send lag), and the
//! steady-state window, which leaves out the ramp-up and the drain:
//!
//! - with --max-concurrency and no rate: from the first time in-flight reaches
//!   ceil(threshold × cap) to the last time it falls below (vllm-bench's definition);
//! - with a rate: from the scheduled time of the request at 10 % of the run to the last
//!   scheduled time (the drain after the last arrival is not steady);
//! - all at once (no rate, no cap): none.

use super::metrics::RequestMetrics;
use super::record::RequestRecord;
use super::stats::{Samples, Summary};

const NS_PER_S: f64 = 1e9;
const NS_PER_MS: f64 = 1e6;
/// Open-loop steady state starts after this fraction of the requests were scheduled.
const OPEN_LOOP_RAMP_FRACTION: f64 = 0.10;
/// A steady-state window shorter than this gets a warning.
const STEADY_WINDOW_S_MIN: f64 = 10.0;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bucket {
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    pub output_tokens: u64,
}

/// One bucket per second from the origin.
pub fn per_second(records: &[RequestRecord], metrics: &[Option<RequestMetrics>]) -> Vec<Bucket> {
    let last_ns = records.iter().map(|r| r.end_ns.max(r.send_ns)).max().unwrap_or(0);
    let count = (last_ns / 1_000_000_000) as usize + 1;
    let mut buckets = vec![Bucket::default(); count];
    let at = |ns: u64| ((ns / 1_000_000_000) as usize).min(count - 1);
    for (r, m) in records.iter().zip(metrics) {
        buckets[at(r.send_ns)].sent += 1;
        match m {
            Some(m) => {
                buckets[at(r.end_ns)].completed += 1;
                for (c, &tokens) in r.chunks.iter().zip(&m.tokens_per_chunk) {
                    buckets[at(c.time_ns)].output_tokens += u64::from(tokens);
                }
            }
            None => buckets[at(r.end_ns)].failed += 1,
        }
    }
    buckets
}

/// (time, requests in flight from then on), one step per send or end; ends sort before sends
/// at the same instant so a closed-loop worker's hand-over is not a spike.
fn in_flight_steps(records: &[RequestRecord]) -> Vec<(u64, u64)> {
    let mut events: Vec<(u64, i8)> =
        records.iter().flat_map(|r| [(r.send_ns, 1), (r.end_ns.max(r.send_ns), -1)]).collect();
    events.sort_unstable();
    let mut level = 0i64;
    events
        .into_iter()
        .map(|(t, d)| {
            level += i64::from(d);
            (t, level.max(0) as u64)
        })
        .collect()
}

pub fn peak_in_flight(records: &[RequestRecord]) -> u64 {
    in_flight_steps(records).iter().map(|s| s.1).max().unwrap_or(0)
}

#[derive(Clone, Debug, PartialEq)]
pub struct Pacing {
    pub offered_rate_per_s: Option<f64>,
    /// Requests sent / time of the last send.
    pub achieved_rate_per_s: f64,
    pub sent: u64,
    pub last_scheduled_s: f64,
    pub last_send_s: f64,
    /// send − scheduled, ms.
    pub send_lag: Summary,
}

pub fn pacing(records: &[RequestRecord], offered_rate_per_s: Option<f64>, percentiles: &[f64]) -> Pacing {
    let mut lag = Samples::default();
    for r in records {
        lag.record(r.send_ns.saturating_sub(r.scheduled_ns));
    }
    let last_send_s = records.iter().map(|r| r.send_ns).max().unwrap_or(0) as f64 / NS_PER_S;
    let sent = records.len() as u64;
    Pacing {
        offered_rate_per_s,
        achieved_rate_per_s: if last_send_s > 0.0 { sent as f64 / last_send_s } else { 0.0 },
        sent,
        last_scheduled_s: records.iter().map(|r| r.scheduled_ns).max().unwrap_or(0) as f64 / NS_PER_S,
        last_send_s,
        send_lag: lag.summary(percentiles).scaled(1.0 / NS_PER_MS),
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SteadyBasis {
    /// Closed loop: in-flight ≥ ceil(threshold × cap).
    Concurrency { cap: usize, threshold: f64 },
    /// Open loop: the schedule after its first 10 %.
    Schedule,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SteadyState {
    pub start_ns: u64,
    pub end_ns: u64,
    pub basis: String,
    pub requests_started: u64,
    pub requests_completed: u64,
    pub request_throughput: f64,
    pub input_throughput: f64,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    pub ttft: Summary,
    pub tpot: Summary,
    pub warning: Option<String>,
}

pub fn steady_state(
    records: &[RequestRecord],
    metrics: &[Option<RequestMetrics>],
    basis: SteadyBasis,
    percentiles: &[f64],
) -> Option<SteadyState> {
    let (start_ns, end_ns, description) = match basis {
        SteadyBasis::Concurrency { cap, threshold } => {
            let threshold_abs = ((cap as f64 * threshold).ceil() as u64).max(1);
            let (start, end) = concurrency_window(&in_flight_steps(records), threshold_abs)?;
            (start, end, format!("in flight >= {threshold_abs} (ceil({threshold} x {cap}))"))
        }
        SteadyBasis::Schedule => {
            let mut scheduled: Vec<u64> = records.iter().map(|r| r.scheduled_ns).collect();
            scheduled.sort_unstable();
            let first = *scheduled.get((scheduled.len() as f64 * OPEN_LOOP_RAMP_FRACTION) as usize)?;
            (first, *scheduled.last()?, "scheduled times after the first 10 % of requests".to_string())
        }
    };
    if end_ns <= start_ns {
        return None;
    }
    let inside = |t: u64| (start_ns..=end_ns).contains(&t);
    let duration_s = (end_ns - start_ns) as f64 / NS_PER_S;
    let (mut started, mut completed, mut input, mut output) = (0u64, 0u64, 0u64, 0u64);
    let (mut ttft, mut tpot) = (Samples::default(), Samples::default());
    for (r, m) in records.iter().zip(metrics) {
        let Some(m) = m else { continue };
        if inside(r.send_ns) {
            started += 1;
            input += u64::from(m.input_tokens);
            ttft.record(m.ttft_ns);
            if let Some(t) = m.tpot_ns {
                tpot.record(t.round() as u64);
            }
        }
        completed += u64::from(inside(r.end_ns));
        output += r
            .chunks
            .iter()
            .zip(&m.tokens_per_chunk)
            .filter(|(c, _)| inside(c.time_ns))
            .map(|(_, &t)| u64::from(t))
            .sum::<u64>();
    }
    let per_s = |n: u64| n as f64 / duration_s;
    Some(SteadyState {
        start_ns,
        end_ns,
        basis: description,
        requests_started: started,
        requests_completed: completed,
        request_throughput: per_s(completed),
        input_throughput: per_s(input),
        output_throughput: per_s(output),
        total_token_throughput: per_s(input + output),
        ttft: ttft.summary(percentiles).scaled(1.0 / NS_PER_MS),
        tpot: tpot.summary(percentiles).scaled(1.0 / NS_PER_MS),
        warning: (duration_s < STEADY_WINDOW_S_MIN).then(|| {
            format!("steady-state window is {duration_s:.1} s (< {STEADY_WINDOW_S_MIN} s): may not be representative")
        }),
    })
}

/// From the first step at or above `threshold` to the last step that falls below it (or the
/// last step, if it never does).
fn concurrency_window(steps: &[(u64, u64)], threshold: u64) -> Option<(u64, u64)> {
    let start = steps.iter().find(|s| s.1 >= threshold)?.0;
    let mut end = None;
    let mut above = false;
    for &(t, level) in steps {
        if level >= threshold {
            above = true;
        } else if above {
            end = Some(t);
            above = false;
        }
    }
    let end = if above { steps.last().map(|s| s.0) } else { end };
    end.map(|e| (start, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Chunk;

    const S: u64 = 1_000_000_000;

    fn rec(index: u32, sched: u64, send: u64, end: u64, chunk_times: &[u64]) -> RequestRecord {
        RequestRecord {
            index,
            scheduled_ns: sched,
            send_ns: send,
            end_ns: end,
            chunks: chunk_times
                .iter()
                .map(|&t| Chunk { time_ns: t, text_end: 0, completion_tokens_cum: None })
                .collect(),
            usage_completion_tokens: Some(chunk_times.len() as u32),
            ..RequestRecord::default()
        }
    }

    fn metrics_of(records: &[RequestRecord]) -> Vec<Option<RequestMetrics>> {
        records.iter().map(|r| crate::metrics::request_metrics(r, 10, &|_| 1)).collect()
    }

    #[test]
    fn closed_loop_window_and_peak() {
        // Cap 2: two workers, each running back-to-back 1 s requests from 0 to 4 s; a third
        // request alone from 4 to 6 s (the drain).
        let records = vec![
            rec(0, 0, 0, S, &[S / 2, S]),
            rec(1, 0, 0, 2 * S, &[S, 2 * S]),
            rec(2, S, S, 4 * S, &[3 * S, 4 * S]),
            rec(3, 2 * S, 2 * S, 4 * S, &[3 * S, 4 * S]),
            rec(4, 4 * S, 4 * S, 6 * S, &[5 * S, 6 * S]),
        ];
        let metrics = metrics_of(&records);
        assert_eq!(peak_in_flight(&records), 2);
        let basis = SteadyBasis::Concurrency { cap: 2, threshold: 0.95 };
        let ss = steady_state(&records, &metrics, basis, &[50.0]).unwrap_or_else(|| panic!("no window"));
        assert_eq!((ss.start_ns, ss.end_ns), (0, 4 * S));
        // Sent in [0, 4 s]: all five (the last at exactly 4 s); completed: four.
        assert_eq!((ss.requests_started, ss.requests_completed), (5, 4));
        assert_eq!(ss.request_throughput, 1.0);
        // Tokens (1 per chunk) at 0.5, 1, 1, 2, 3, 4, 3, 4 s are inside; 5 and 6 s are not.
        assert_eq!(ss.output_throughput, 2.0);
        assert!(ss.warning.is_some());
    }

    #[test]
    fn open_loop_window_series_and_pacing() {
        let records: Vec<RequestRecord> = (0..20u64)
            .map(|i| rec(i as u32, i * S / 2, i * S / 2 + 1000, i * S / 2 + S / 4, &[i * S / 2 + S / 8]))
            .collect();
        let metrics = metrics_of(&records);
        let ss =
            steady_state(&records, &metrics, SteadyBasis::Schedule, &[50.0]).unwrap_or_else(|| panic!("no window"));
        assert_eq!((ss.start_ns, ss.end_ns), (S, 19 * S / 2));
        let buckets = per_second(&records, &metrics);
        assert_eq!(buckets.len(), 10);
        assert!(buckets.iter().all(|b| b.sent == 2 && b.output_tokens == 2 && b.completed == 2));
        let p = pacing(&records, Some(2.0), &[99.0]);
        assert_eq!(p.sent, 20);
        assert!((p.achieved_rate_per_s - 20.0 / 9.500001).abs() < 1e-9);
        assert!((p.send_lag.mean - 0.001).abs() < 1e-12);
        assert_eq!(p.last_scheduled_s, 9.5);
    }

    #[test]
    fn concurrency_windows() {
        let steps = [(0, 1), (1, 2), (2, 3), (3, 2), (4, 3), (5, 1), (6, 0)];
        assert_eq!(concurrency_window(&steps, 3), Some((2, 5)));
        assert_eq!(concurrency_window(&steps, 4), None);
        assert_eq!(concurrency_window(&[(0, 1), (1, 2)], 2), Some((1, 1)));
    }
}
