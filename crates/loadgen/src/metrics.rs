//! Metrics derived from the raw records, with one name per meaning (vLLM's names where the
//! meaning is vLLM's):
//!
//! - `ttft` = first output chunk − send; `ttft_from_schedule` = first output chunk − scheduled
//!   time; `client_queue_time` = send − scheduled time; `ttfb` = response head − send.
//! - `tpot` (per request) = (last output chunk − first) / (output tokens − tokens of the first
//!   chunk); equal to vLLM's (e2el − ttft) / (n − 1) when the first chunk carries one token.
//! - `itl` = every gap between consecutive output chunks (per chunk, pooled, as vLLM);
//!   `itl_per_token` = each gap divided by the tokens its chunk carried, once per token;
//!   `tokens_per_chunk` says which of the two views a run needs.
//! - `e2el` = last output chunk − send; `e2el_from_schedule` = last output chunk − scheduled.
//!
//! Token counts come from the server's `usage`; the tokenizer only fills gaps and cross-checks.

use std::collections::BTreeMap;

use super::args::{Slo, SloMetric};
use super::record::RequestRecord;
use super::stats::{Samples, Summary};

const NS_PER_MS: f64 = 1e6;
/// Cross-check tolerance: a count differing from the tokenizer's by more than this fraction
/// (and more than one token) is a mismatch.
const TOKEN_MISMATCH_FRACTION: f64 = 0.10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkTokenSource {
    /// Per-chunk cumulative `usage` (continuous usage stats).
    Usage,
    /// As many chunks as output tokens.
    OnePerChunk,
    /// The output count apportioned by the tokenizer's count of each chunk's text.
    Estimated,
}

impl ChunkTokenSource {
    pub fn name(self) -> &'static str {
        match self {
            ChunkTokenSource::Usage => "usage",
            ChunkTokenSource::OnePerChunk => "one_per_chunk",
            ChunkTokenSource::Estimated => "estimated",
        }
    }
}

/// The derived numbers of one successful request.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestMetrics {
    pub ttft_ns: u64,
    pub ttft_from_schedule_ns: u64,
    pub client_queue_time_ns: u64,
    pub ttfb_ns: Option<u64>,
    pub tpot_ns: Option<f64>,
    pub e2el_ns: u64,
    pub e2el_from_schedule_ns: u64,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// `usage.completion_tokens` was missing and the tokenizer counted the text.
    pub output_tokens_from_tokenizer: bool,
    pub tokens_per_chunk: Vec<u32>,
    pub tokens_per_chunk_source: ChunkTokenSource,
}

/// None for a failed request. `count` is the tokenizer's token count of a text.
pub fn request_metrics(
    rec: &RequestRecord,
    client_input_tokens: u32,
    count: &dyn Fn(&str) -> usize,
) -> Option<RequestMetrics> {
    let (first, last) = match (rec.first_token_ns(), rec.last_token_ns()) {
        (Some(f), Some(l)) if rec.succeeded() => (f, l),
        _ => return None,
    };
    let (output_tokens, from_tokenizer) = match rec.usage_completion_tokens {
        Some(n) => (n, false),
        None => (u32::try_from(count(&rec.text)).unwrap_or(u32::MAX), true),
    };
    let (tokens_per_chunk, source) = tokens_per_chunk(rec, output_tokens, count);
    let after_first = output_tokens.saturating_sub(tokens_per_chunk[0]);
    Some(RequestMetrics {
        ttft_ns: first.saturating_sub(rec.send_ns),
        ttft_from_schedule_ns: first.saturating_sub(rec.scheduled_ns),
        client_queue_time_ns: rec.send_ns.saturating_sub(rec.scheduled_ns),
        ttfb_ns: rec.header_ns.map(|h| h.saturating_sub(rec.send_ns)),
        tpot_ns: (after_first > 0).then(|| (last - first) as f64 / f64::from(after_first)),
        e2el_ns: last.saturating_sub(rec.send_ns),
        e2el_from_schedule_ns: last.saturating_sub(rec.scheduled_ns),
        input_tokens: rec.usage_prompt_tokens.unwrap_or(client_input_tokens),
        output_tokens,
        output_tokens_from_tokenizer: from_tokenizer,
        tokens_per_chunk,
        tokens_per_chunk_source: source,
    })
}

/// Tokens carried by each output chunk (`rec.chunks` is not empty).
fn tokens_per_chunk(
    rec: &RequestRecord,
    output_tokens: u32,
    count: &dyn Fn(&str) -> usize,
) -> (Vec<u32>, ChunkTokenSource) {
    let chunks = &rec.chunks;
    if chunks.iter().all(|c| c.completion_tokens_cum.is_some()) {
        let mut previous = 0u32;
        let per = chunks
            .iter()
            .map(|c| {
                let cum = c.completion_tokens_cum.unwrap_or(previous).max(previous);
                let tokens = cum - previous;
                previous = cum;
                tokens
            })
            .collect::<Vec<_>>();
        return (per, ChunkTokenSource::Usage);
    }
    if output_tokens as usize == chunks.len() {
        return (vec![1; chunks.len()], ChunkTokenSource::OnePerChunk);
    }
    let weights: Vec<u64> = (0..chunks.len()).map(|i| count(rec.chunk_text(i)).max(1) as u64).collect();
    (apportion(u64::from(output_tokens), &weights), ChunkTokenSource::Estimated)
}

/// Splits `total` in proportion to `weights` by largest remainder; the parts sum to `total`.
fn apportion(total: u64, weights: &[u64]) -> Vec<u32> {
    let weight_sum: u64 = weights.iter().sum::<u64>().max(1);
    let mut parts: Vec<(u64, u64, usize)> =
        weights.iter().enumerate().map(|(i, &w)| (total * w / weight_sum, total * w % weight_sum, i)).collect();
    let mut left = total - parts.iter().map(|p| p.0).sum::<u64>();
    let mut by_remainder: Vec<usize> = (0..parts.len()).collect();
    by_remainder.sort_by_key(|&i| std::cmp::Reverse(parts[i].1));
    for &i in &by_remainder {
        if left == 0 {
            break;
        }
        parts[i].0 += 1;
        left -= 1;
    }
    parts.iter().map(|p| u32::try_from(p.0).unwrap_or(u32::MAX)).collect()
}

/// One reported latency distribution, in milliseconds.
pub struct LatencyMetric {
    /// vLLM-style key stem: `mean_{key}_ms`, `p99_{key}_ms`...
    pub key: &'static str,
    pub label: &'static str,
    pub summary: Summary,
}

/// The latency distributions over the successful requests.
pub fn latency_metrics(
    records: &[RequestRecord],
    metrics: &[Option<RequestMetrics>],
    percentiles: &[f64],
) -> Vec<LatencyMetric> {
    let mut s: [Samples; 9] = Default::default();
    for (rec, m) in records.iter().zip(metrics) {
        let Some(m) = m else { continue };
        s[0].record(m.ttft_ns);
        if let Some(tpot) = m.tpot_ns {
            s[1].record(tpot.round() as u64);
        }
        let mut pending_ns = 0u64;
        for (pair, &tokens) in rec.chunks.windows(2).zip(&m.tokens_per_chunk[1..]) {
            let gap = pair[1].time_ns - pair[0].time_ns;
            s[2].record(gap);
            // A chunk without a new token hands its gap to the next one that has some.
            pending_ns += gap;
            if tokens > 0 {
                s[4].record_n(pending_ns / u64::from(tokens), tokens);
                pending_ns = 0;
            }
        }
        s[3].record(m.e2el_ns);
        s[5].record(m.ttft_from_schedule_ns);
        s[6].record(m.e2el_from_schedule_ns);
        s[7].record(m.client_queue_time_ns);
        if let Some(ttfb) = m.ttfb_ns {
            s[8].record(ttfb);
        }
    }
    let names: [(&str, &str); 9] = [
        ("ttft", "Time to First Token"),
        ("tpot", "Time per Output Token (excl. 1st chunk)"),
        ("itl", "Inter-chunk Latency (vLLM ITL)"),
        ("e2el", "End-to-end Latency"),
        ("itl_per_token", "Inter-token Latency per token"),
        ("ttft_from_schedule", "TTFT from scheduled time"),
        ("e2el_from_schedule", "E2EL from scheduled time"),
        ("client_queue_time", "Client queue time (send - scheduled)"),
        ("ttfb", "Time to response head"),
    ];
    names
        .iter()
        .zip(s.iter())
        .map(|(&(key, label), samples)| LatencyMetric {
            key,
            label,
            summary: samples.summary(percentiles).scaled(1.0 / NS_PER_MS),
        })
        .collect()
}

/// Tokens per output chunk (a count, not a time).
pub fn tokens_per_chunk_summary(metrics: &[Option<RequestMetrics>], percentiles: &[f64]) -> Summary {
    let mut s = Samples::default();
    for t in metrics.iter().flatten().flat_map(|m| m.tokens_per_chunk.iter()) {
        s.record(u64::from(*t));
    }
    s.summary(percentiles)
}

#[derive(Clone, Debug, PartialEq)]
pub struct Goodput {
    pub good_count: u64,
    /// (metric, % of completed requests within its SLO)
    pub attainment_pct: Vec<(SloMetric, f64)>,
}

/// Requests meeting every SLO (vLLM: TPOT counts as 0 for a one-token output).
pub fn goodput(metrics: &[Option<RequestMetrics>], slos: &[Slo]) -> Option<Goodput> {
    if slos.is_empty() {
        return None;
    }
    let value_ms = |m: &RequestMetrics, metric: SloMetric| match metric {
        SloMetric::Ttft => m.ttft_ns as f64 / NS_PER_MS,
        SloMetric::Tpot => m.tpot_ns.unwrap_or(0.0) / NS_PER_MS,
        SloMetric::E2el => m.e2el_ns as f64 / NS_PER_MS,
    };
    let mut met = vec![0u64; slos.len()];
    let (mut good, mut completed) = (0u64, 0u64);
    for m in metrics.iter().flatten() {
        completed += 1;
        let mut all = true;
        for (i, slo) in slos.iter().enumerate() {
            let ok = value_ms(m, slo.metric) <= slo.limit_ms;
            met[i] += u64::from(ok);
            all &= ok;
        }
        good += u64::from(all);
    }
    let pct = |n: u64| if completed == 0 { 0.0 } else { 100.0 * n as f64 / completed as f64 };
    Some(Goodput {
        good_count: good,
        attainment_pct: slos.iter().zip(&met).map(|(s, &n)| (s.metric, pct(n))).collect(),
    })
}

/// Failures by category, with one example message each.
pub fn failures(records: &[RequestRecord]) -> BTreeMap<String, (u64, String)> {
    let mut out: BTreeMap<String, (u64, String)> = BTreeMap::new();
    for f in records.iter().filter_map(|r| r.failure.as_ref()) {
        let entry = out.entry(f.kind.category()).or_insert_with(|| (0, f.message.clone()));
        entry.0 += 1;
    }
    out
}

/// The server's token counts against the client tokenizer's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenCheck {
    pub checked: u64,
    /// Outputs whose `usage` count differs from the tokenizer's by > 10 % and > 1 token.
    pub output_mismatched: u64,
    /// (request index, usage count, tokenizer count) of the largest difference.
    pub worst: Option<(u32, u32, u32)>,
    /// Successful requests without `usage.completion_tokens`.
    pub usage_missing: u64,
    /// With --ignore-eos: outputs whose length differs from the requested max_tokens.
    pub output_len_mismatched: u64,
    /// Mean of server prompt tokens − client prompt tokens (chat templates add tokens).
    pub prompt_tokens_added_mean: Option<f64>,
}

pub fn token_check(
    records: &[RequestRecord],
    metrics: &[Option<RequestMetrics>],
    client_input_tokens: &dyn Fn(&RequestRecord) -> u32,
    requested_output_tokens: &dyn Fn(&RequestRecord) -> u32,
    ignore_eos: bool,
    count: &dyn Fn(&str) -> usize,
) -> TokenCheck {
    let mut c = TokenCheck::default();
    let mut worst_diff = 0u32;
    let (mut added_sum, mut added_n) = (0i64, 0i64);
    for (rec, m) in records.iter().zip(metrics) {
        let Some(m) = m else { continue };
        c.checked += 1;
        if let Some(server) = rec.usage_prompt_tokens {
            added_sum += i64::from(server) - i64::from(client_input_tokens(rec));
            added_n += 1;
        }
        if ignore_eos && m.output_tokens != requested_output_tokens(rec) {
            c.output_len_mismatched += 1;
        }
        let Some(usage) = rec.usage_completion_tokens else {
            c.usage_missing += 1;
            continue;
        };
        let local = u32::try_from(count(&rec.text)).unwrap_or(u32::MAX);
        let diff = usage.abs_diff(local);
        if diff > 1 && f64::from(diff) > TOKEN_MISMATCH_FRACTION * f64::from(usage.max(1)) {
            c.output_mismatched += 1;
        }
        if diff > worst_diff {
            worst_diff = diff;
            c.worst = Some((rec.index, usage, local));
        }
    }
    c.prompt_tokens_added_mean = (added_n > 0).then(|| added_sum as f64 / added_n as f64);
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::{apply_event, Dialect};
    use crate::record::{Chunk, Failure, FailureKind};

    const MS: u64 = 1_000_000;

    /// A successful record: sent at `send_ms`, scheduled at `sched_ms`, chunks at
    /// (ms, cumulative tokens).
    fn timeline(sched_ms: u64, send_ms: u64, chunks: &[(u64, Option<u32>)], usage: Option<u32>) -> RequestRecord {
        let mut rec = RequestRecord {
            scheduled_ns: sched_ms * MS,
            send_ns: send_ms * MS,
            header_ns: Some((send_ms + 1) * MS),
            usage_completion_tokens: usage,
            ..RequestRecord::default()
        };
        for (i, &(t, cum)) in chunks.iter().enumerate() {
            rec.text.push_str(["a", " bb", " c d", " e"][i % 4]);
            rec.chunks.push(Chunk { time_ns: t * MS, text_end: rec.text.len() as u32, completion_tokens_cum: cum });
        }
        rec.end_ns = chunks.last().map_or(0, |c| c.0 + 1) * MS;
        rec
    }

    /// Words of the text: the test tokenizer.
    fn words(text: &str) -> usize {
        text.split_whitespace().count()
    }

    struct Want {
        ttft_ms: f64,
        tpot_ms: Option<f64>,
        e2el_ms: f64,
        itl_ms: Vec<f64>,
        itl_per_token_ms: Vec<f64>,
        tokens_per_chunk: Vec<u32>,
        source: ChunkTokenSource,
    }

    #[test]
    fn per_request_metrics_on_known_timelines() {
        let cases: Vec<(&str, RequestRecord, Want)> = vec![
            (
                "one token per chunk, per-chunk usage",
                timeline(0, 0, &[(10, Some(1)), (12, Some(2)), (14, Some(3)), (16, Some(4))], Some(4)),
                Want {
                    ttft_ms: 10.0,
                    tpot_ms: Some(2.0),
                    e2el_ms: 16.0,
                    itl_ms: vec![2.0, 2.0, 2.0],
                    itl_per_token_ms: vec![2.0, 2.0, 2.0],
                    tokens_per_chunk: vec![1, 1, 1, 1],
                    source: ChunkTokenSource::Usage,
                },
            ),
            (
                "multi-token chunks: 2, 3, 1 tokens",
                timeline(0, 0, &[(10, Some(2)), (16, Some(5)), (20, Some(6))], Some(6)),
                Want {
                    ttft_ms: 10.0,
                    tpot_ms: Some(2.5),
                    e2el_ms: 20.0,
                    itl_ms: vec![6.0, 4.0],
                    itl_per_token_ms: vec![2.0, 2.0, 2.0, 4.0],
                    tokens_per_chunk: vec![2, 3, 1],
                    source: ChunkTokenSource::Usage,
                },
            ),
            (
                "no per-chunk usage, as many chunks as tokens",
                timeline(0, 2, &[(12, None), (15, None), (18, None)], Some(3)),
                Want {
                    ttft_ms: 10.0,
                    tpot_ms: Some(3.0),
                    e2el_ms: 16.0,
                    itl_ms: vec![3.0, 3.0],
                    itl_per_token_ms: vec![3.0, 3.0],
                    tokens_per_chunk: vec![1, 1, 1],
                    source: ChunkTokenSource::OnePerChunk,
                },
            ),
            (
                "no per-chunk usage, more tokens than chunks: apportioned by the tokenizer",
                timeline(0, 0, &[(10, None), (14, None), (20, None)], Some(6)),
                Want {
                    ttft_ms: 10.0,
                    tpot_ms: Some(2.5),
                    e2el_ms: 20.0,
                    itl_ms: vec![4.0, 6.0],
                    itl_per_token_ms: vec![4.0, 2.0, 2.0, 2.0],
                    tokens_per_chunk: vec![2, 1, 3],
                    source: ChunkTokenSource::Estimated,
                },
            ),
            (
                "a single chunk: no TPOT",
                timeline(0, 0, &[(7, Some(1))], Some(1)),
                Want {
                    ttft_ms: 7.0,
                    tpot_ms: None,
                    e2el_ms: 7.0,
                    itl_ms: vec![],
                    itl_per_token_ms: vec![],
                    tokens_per_chunk: vec![1],
                    source: ChunkTokenSource::Usage,
                },
            ),
        ];
        for (name, rec, want) in cases {
            let m = request_metrics(&rec, 5, &words).unwrap_or_else(|| panic!("{name}: no metrics"));
            assert_eq!(m.ttft_ns as f64 / 1e6, want.ttft_ms, "{name}");
            assert_eq!(m.tpot_ns.map(|t| t / 1e6), want.tpot_ms, "{name}");
            assert_eq!(m.e2el_ns as f64 / 1e6, want.e2el_ms, "{name}");
            assert_eq!(m.tokens_per_chunk, want.tokens_per_chunk, "{name}");
            assert_eq!(m.tokens_per_chunk_source, want.source, "{name}");
            let records = [rec];
            let lat = latency_metrics(&records, &[Some(m)], &[50.0]);
            let get = |key: &str| lat.iter().find(|l| l.key == key).map(|l| l.summary.clone()).unwrap_or_default();
            let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
            assert_eq!(get("itl").count as usize, want.itl_ms.len(), "{name}");
            assert!((get("itl").mean - mean(&want.itl_ms)).abs() < 1e-9, "{name}");
            assert_eq!(get("itl_per_token").count as usize, want.itl_per_token_ms.len(), "{name}");
            assert!((get("itl_per_token").mean - mean(&want.itl_per_token_ms)).abs() < 1e-9, "{name}");
        }
    }

    #[test]
    fn role_only_first_chunk_does_not_start_ttft() {
        let mut rec = RequestRecord { send_ns: 0, ..RequestRecord::default() };
        let events: [(u64, &str); 4] = [
            (3, r#"{"choices":[{"delta":{"role":"assistant","content":""}}],"usage":null}"#),
            (9, r#"{"choices":[{"delta":{"content":"Hi"}}],"usage":{"prompt_tokens":4,"completion_tokens":1}}"#),
            (13, r#"{"choices":[{"delta":{"content":" there"}}],"usage":{"prompt_tokens":4,"completion_tokens":2}}"#),
            (
                14,
                r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":2}}"#,
            ),
        ];
        for (t, e) in events {
            assert_eq!(apply_event(Dialect::OpenAi, e.as_bytes(), t * MS, &mut rec), Ok(false));
        }
        let m = request_metrics(&rec, 1, &words).unwrap_or_else(|| panic!("no metrics"));
        assert_eq!((m.ttft_ns, m.e2el_ns, m.tpot_ns), (9 * MS, 13 * MS, Some(4.0 * MS as f64)));
        assert_eq!((m.input_tokens, m.output_tokens), (4, 2));
    }

    #[test]
    fn schedule_queue_and_tokenizer_fallback() {
        let rec = timeline(100, 103, &[(110, None), (111, None)], None);
        let m = request_metrics(&rec, 5, &words).unwrap_or_else(|| panic!("no metrics"));
        assert_eq!((m.ttft_ns, m.ttft_from_schedule_ns, m.client_queue_time_ns), (7 * MS, 10 * MS, 3 * MS));
        assert_eq!((m.e2el_ns, m.e2el_from_schedule_ns, m.ttfb_ns), (8 * MS, 11 * MS, Some(MS)));
        // "a bb" is 2 words: the tokenizer count stands in for the missing usage.
        assert_eq!((m.output_tokens, m.output_tokens_from_tokenizer, m.input_tokens), (2, true, 5));
        let mut failed = rec.clone();
        failed.failure = Some(Failure::new(FailureKind::Timeout, "t"));
        assert_eq!(request_metrics(&failed, 5, &words), None);
    }

    #[test]
    fn goodput_failures_and_token_check() {
        let fast = timeline(0, 0, &[(10, Some(1)), (12, Some(2))], Some(2));
        let slow = timeline(0, 0, &[(50, Some(1)), (90, Some(2))], Some(2));
        let mut bad = timeline(0, 0, &[], None);
        bad.failure = Some(Failure::new(FailureKind::HttpStatus(503), "busy"));
        let records = vec![fast, slow, bad];
        let metrics: Vec<_> = records.iter().map(|r| request_metrics(r, 3, &words)).collect();
        let slos = [Slo { metric: SloMetric::Ttft, limit_ms: 20.0 }, Slo { metric: SloMetric::Tpot, limit_ms: 100.0 }];
        let g = goodput(&metrics, &slos).unwrap_or_else(|| panic!("no goodput"));
        assert_eq!(g.good_count, 1);
        assert_eq!(g.attainment_pct, vec![(SloMetric::Ttft, 50.0), (SloMetric::Tpot, 100.0)]);
        assert_eq!(goodput(&metrics, &[]), None);
        let f = failures(&records);
        assert_eq!(f.get("http_503"), Some(&(1, "busy".to_string())));
        // "a bb" is 2 words and usage says 2: no mismatch; requested 3 under ignore_eos: mismatch.
        let c = token_check(&records, &metrics, &|_| 3, &|_| 3, true, &words);
        assert_eq!((c.checked, c.output_mismatched, c.usage_missing, c.output_len_mismatched), (2, 0, 0, 2));
        let lying = timeline(0, 0, &[(1, Some(1)), (2, Some(40))], Some(40));
        let m = [request_metrics(&lying, 3, &words)];
        let c = token_check(std::slice::from_ref(&lying), &m, &|_| 3, &|_| 40, false, &words);
        assert_eq!((c.output_mismatched, c.worst), (1, Some((0, 40, 2))));
    }

    #[test]
    fn apportioning_sums_to_the_total() {
        assert_eq!(apportion(6, &[1, 1, 1]), vec![2, 2, 2]);
        assert_eq!(apportion(7, &[1, 2, 4]), vec![1, 2, 4]);
        assert_eq!(apportion(5, &[1, 1, 1]).iter().sum::<u32>(), 5);
        assert_eq!(apportion(0, &[3]), vec![0]);
    }
}
