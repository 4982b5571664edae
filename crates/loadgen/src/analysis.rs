//! Everything a run's report states, computed once from the raw records: per-request metrics,
//! distributions, throughputs over the whole run and the steady-state window, goodput,
//! failures, pacing, and the token cross-check, plus the warnings they call for.

use std::collections::BTreeMap;

use super::args::Slo;
use super::metrics::{self, Goodput, LatencyMetric, RequestMetrics, TokenCheck};
use super::record::RequestRecord;
use super::stats::Summary;
use super::tokenizer::BenchTokenizer;
use super::window::{self, Bucket, Pacing, SteadyBasis, SteadyState};
use super::workload::Prompt;

/// Pacing is "achieved" within this fraction of the offered rate.
const PACING_TOLERANCE: f64 = 0.01;
/// A pacer lag p99 above this (without a cap) means the client fell behind.
const PACER_LAG_P99_MS_MAX: f64 = 1.0;

/// What the analysis needs to know about the run besides its records.
pub struct RunFacts<'a> {
    pub prompts: &'a [Prompt],
    pub percentiles: &'a [f64],
    pub slos: &'a [Slo],
    pub ignore_eos: bool,
    pub offered_rate_per_s: Option<f64>,
    pub concurrency_max: Option<usize>,
    pub steady_basis: Option<SteadyBasis>,
}

pub struct Analysis {
    pub metrics: Vec<Option<RequestMetrics>>,
    pub completed: u64,
    pub failed: u64,
    /// category → (count, one example message)
    pub failures: BTreeMap<String, (u64, String)>,
    /// Origin to the end of the last response.
    pub duration_s: f64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    pub request_throughput: f64,
    pub input_throughput: f64,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    pub goodput: Option<Goodput>,
    pub latencies: Vec<LatencyMetric>,
    pub tokens_per_chunk: Summary,
    pub max_output_tokens_per_s: f64,
    pub max_concurrent_requests: u64,
    pub buckets: Vec<Bucket>,
    pub pacing: Pacing,
    pub steady: Option<SteadyState>,
    pub token_check: TokenCheck,
    pub warnings: Vec<String>,
}

impl Analysis {
    pub fn latency(&self, key: &str) -> Option<&Summary> {
        self.latencies.iter().find(|l| l.key == key).map(|l| &l.summary)
    }

    pub fn request_goodput(&self) -> Option<f64> {
        self.goodput.as_ref().map(|g| per_s(g.good_count, self.duration_s))
    }
}

fn per_s(n: u64, duration_s: f64) -> f64 {
    if duration_s > 0.0 {
        n as f64 / duration_s
    } else {
        0.0
    }
}

pub fn analyze(records: &[RequestRecord], facts: &RunFacts, tok: &BenchTokenizer) -> Analysis {
    let count = |text: &str| tok.count(text);
    let prompt_of = |r: &RequestRecord| facts.prompts.get(r.prompt_index as usize);
    let client_input = |r: &RequestRecord| prompt_of(r).map_or(0, |p| p.input_tokens);
    let requested_output = |r: &RequestRecord| prompt_of(r).map_or(0, |p| p.output_tokens);
    let metrics: Vec<Option<RequestMetrics>> =
        records.iter().map(|r| metrics::request_metrics(r, client_input(r), &count)).collect();
    let completed = metrics.iter().flatten().count() as u64;
    let total_input_tokens: u64 = metrics.iter().flatten().map(|m| u64::from(m.input_tokens)).sum();
    let total_output_tokens: u64 = metrics.iter().flatten().map(|m| u64::from(m.output_tokens)).sum();
    let duration_s = records.iter().map(|r| r.end_ns.max(r.send_ns)).max().unwrap_or(0) as f64 / 1e9;
    let buckets = window::per_second(records, &metrics);
    let mut a = Analysis {
        completed,
        failed: records.len() as u64 - completed,
        failures: metrics::failures(records),
        duration_s,
        total_input_tokens,
        total_output_tokens,
        request_throughput: per_s(completed, duration_s),
        input_throughput: per_s(total_input_tokens, duration_s),
        output_throughput: per_s(total_output_tokens, duration_s),
        total_token_throughput: per_s(total_input_tokens + total_output_tokens, duration_s),
        goodput: metrics::goodput(&metrics, facts.slos),
        latencies: metrics::latency_metrics(records, &metrics, facts.percentiles),
        tokens_per_chunk: metrics::tokens_per_chunk_summary(&metrics, facts.percentiles),
        max_output_tokens_per_s: buckets.iter().map(|b| b.output_tokens).max().unwrap_or(0) as f64,
        max_concurrent_requests: window::peak_in_flight(records),
        pacing: window::pacing(records, facts.offered_rate_per_s, facts.percentiles),
        steady: facts.steady_basis.and_then(|b| window::steady_state(records, &metrics, b, facts.percentiles)),
        token_check: metrics::token_check(
            records,
            &metrics,
            &client_input,
            &requested_output,
            facts.ignore_eos,
            &count,
        ),
        buckets,
        metrics,
        warnings: Vec::new(),
    };
    a.warnings = warnings(&a, facts);
    a
}

fn warnings(a: &Analysis, facts: &RunFacts) -> Vec<String> {
    let mut w = Vec::new();
    let c = &a.token_check;
    if c.output_mismatched > 0 {
        let worst = c.worst.map_or_else(String::new, |(i, usage, local)| {
            format!(" (worst: request {i}, usage {usage} vs tokenizer {local})")
        });
        w.push(format!(
            "{} of {} outputs: usage.completion_tokens differs from the tokenizer's re-count of the text by more than \
             10 %{worst}; a tokenizer other than the server's (or a simulator's random tokens) does this; \
             usage counts are used",
            c.output_mismatched, c.checked
        ));
    }
    if c.usage_missing > 0 {
        w.push(format!(
            "{} successful responses carried no usage.completion_tokens: their output was counted with the tokenizer",
            c.usage_missing
        ));
    }
    if c.output_len_mismatched > 0 {
        w.push(format!(
            "{} of {} outputs differ from the requested max tokens although --ignore-eos is set",
            c.output_len_mismatched, c.checked
        ));
    }
    if let Some(offered) = a.pacing.offered_rate_per_s {
        let achieved = a.pacing.achieved_rate_per_s;
        let lag_p99 = a.pacing.send_lag.percentile(99.0).unwrap_or(a.pacing.send_lag.max);
        if achieved < offered * (1.0 - PACING_TOLERANCE) {
            let why = if facts.concurrency_max.is_some() {
                "--max-concurrency queued them"
            } else {
                "the client fell behind"
            };
            w.push(format!(
                "achieved send rate {achieved:.2}/s is more than 1 % below the offered {offered:.2}/s ({why}; send lag p99 {lag_p99:.3} ms)"
            ));
        } else if facts.concurrency_max.is_none() && lag_p99 > PACER_LAG_P99_MS_MAX {
            w.push(format!(
                "pacer send lag p99 is {lag_p99:.3} ms: sends left their schedule; the client may be saturated"
            ));
        }
    }
    if let Some(warning) = a.steady.as_ref().and_then(|s| s.warning.clone()) {
        w.push(warning);
    }
    if a.completed == 0 {
        w.push("every request failed: check the URL, --model and --backend".into());
    }
    w
}
