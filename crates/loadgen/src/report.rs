//! The result JSON and the terminal summary of a run. The JSON uses `vllm bench serve`'s key
//! names and units for every metric the two tools share (so its readers, plots and `compare`
//! work on ours), then adds our unambiguous metrics under their own names.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use super::analysis::Analysis;
use super::record::RequestRecord;
use super::stats::Summary;
use super::window::SteadyState;

/// Latency keys vLLM writes (`mean_ttft_ms`, `p99_itl_ms`, ...), in its order.
pub const VLLM_LATENCY_KEYS: [&str; 4] = ["ttft", "tpot", "itl", "e2el"];
/// Ours, after them.
const EXTRA_LATENCY_KEYS: [&str; 4] = ["itl_per_token", "ttft_from_schedule", "e2el_from_schedule", "ttfb"];

/// The run's identity, as the JSON header states it.
pub struct Header<'a> {
    pub date: String,
    pub backend: &'a str,
    pub label: Option<&'a str>,
    pub model_id: &'a str,
    /// As `GET /v1/models` reported it (vLLM's result has the key).
    pub max_model_len: Option<u64>,
    pub tokenizer_id: &'a str,
    pub request_rate: Option<f64>,
    pub burstiness: f64,
    pub max_concurrency: Option<usize>,
    pub metadata: &'a [(String, String)],
    /// `--percentile-metrics`: only these latency keys are reported (None: all).
    pub percentile_metrics: Option<&'a [String]>,
    pub client_cores: usize,
    /// `--http2`: its connection count; None: HTTP/1.1.
    pub http2_connections: Option<usize>,
    pub client_cpu_s: f64,
    pub origin_unix_s: f64,
    pub warmup_count: usize,
}

impl Header<'_> {
    /// Whether the latency metric `key` (a result-JSON key stem) is reported.
    fn reports(&self, key: &str) -> bool {
        self.percentile_metrics.is_none_or(|keys| keys.iter().any(|k| k == key))
    }
}

pub fn unix_time_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// `YYYYmmdd-HHMMSS` in UTC (vLLM's result-file date).
pub fn date_stamp(unix_s: f64) -> String {
    let secs = unix_s.max(0.0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}{month:02}{day:02}-{:02}{:02}{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// vLLM's percentile key word: "99" for 99.0, "99.9" for 99.9.
pub fn percentile_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as u64)
    } else {
        format!("{p}")
    }
}

fn rate_value(rate: Option<f64>) -> Value {
    rate.map_or_else(|| json!("inf"), |r| json!(r))
}

fn put_summary(out: &mut Map<String, Value>, key: &str, s: &Summary) {
    out.insert(format!("mean_{key}_ms"), json!(s.mean));
    out.insert(format!("median_{key}_ms"), json!(s.median));
    out.insert(format!("std_{key}_ms"), json!(s.std));
    for &(p, v) in &s.percentiles {
        out.insert(format!("p{}_{key}_ms", percentile_word(p)), json!(v));
    }
    out.insert(format!("min_{key}_ms"), json!(s.min));
    out.insert(format!("max_{key}_ms"), json!(s.max));
}

pub fn result_json(h: &Header, a: &Analysis, records: &[RequestRecord], detailed: bool) -> Value {
    let mut o = Map::new();
    o.insert("date".into(), json!(h.date));
    o.insert("endpoint_type".into(), json!(h.backend));
    o.insert("backend".into(), json!(h.backend));
    o.insert("label".into(), json!(h.label));
    o.insert("model_id".into(), json!(h.model_id));
    o.insert("max_model_len".into(), json!(h.max_model_len));
    o.insert("tokenizer_id".into(), json!(h.tokenizer_id));
    o.insert("num_prompts".into(), json!(records.len()));
    for (k, v) in h.metadata {
        o.insert(k.clone(), json!(v));
    }
    o.insert("request_rate".into(), rate_value(h.request_rate));
    o.insert("burstiness".into(), if h.burstiness.is_finite() { json!(h.burstiness) } else { json!("inf") });
    o.insert("max_concurrency".into(), json!(h.max_concurrency));
    o.insert("duration".into(), json!(a.duration_s));
    o.insert("completed".into(), json!(a.completed));
    o.insert("failed".into(), json!(a.failed));
    o.insert("total_input_tokens".into(), json!(a.total_input_tokens));
    o.insert("total_output_tokens".into(), json!(a.total_output_tokens));
    o.insert("request_throughput".into(), json!(a.request_throughput));
    o.insert("request_goodput".into(), json!(a.request_goodput()));
    o.insert("input_throughput".into(), json!(a.input_throughput));
    o.insert("output_throughput".into(), json!(a.output_throughput));
    o.insert("total_token_throughput".into(), json!(a.total_token_throughput));
    if detailed {
        put_detailed(&mut o, a, records);
    }
    o.insert("max_output_tokens_per_s".into(), json!(a.max_output_tokens_per_s));
    o.insert("max_concurrent_requests".into(), json!(a.max_concurrent_requests));
    o.insert("rtfx".into(), json!(0.0));
    let mut put_latency = |key: &str, source: &str| {
        if let (true, Some(s)) = (h.reports(key), a.latency(source)) {
            put_summary(&mut o, key, s);
        }
    };
    for key in VLLM_LATENCY_KEYS {
        put_latency(key, key);
    }
    if h.max_concurrency.is_some() {
        put_latency("client_queue_time", "client_queue_time");
        if h.request_rate.is_some() {
            put_latency("e2el_including_client_queue", "e2el_from_schedule");
        }
    }
    for key in EXTRA_LATENCY_KEYS {
        put_latency(key, key);
    }
    put_extras(&mut o, h, a);
    Value::Object(o)
}

/// vLLM's per-request arrays (`--save-detailed`): seconds, failures as zeros and messages.
fn put_detailed(o: &mut Map<String, Value>, a: &Analysis, records: &[RequestRecord]) {
    let s = |ns: u64| ns as f64 / 1e9;
    let pairs: Vec<_> = records.iter().zip(&a.metrics).collect();
    let input = pairs.iter().map(|(r, m)| m.as_ref().map_or(r.usage_prompt_tokens.unwrap_or(0), |m| m.input_tokens));
    o.insert("input_lens".into(), json!(input.collect::<Vec<_>>()));
    o.insert(
        "output_lens".into(),
        json!(pairs.iter().map(|(_, m)| m.as_ref().map_or(0, |m| m.output_tokens)).collect::<Vec<_>>()),
    );
    let latencies = pairs.iter().map(|(_, m)| m.as_ref().map_or(0.0, |m| s(m.e2el_ns)));
    o.insert("latencies".into(), json!(latencies.collect::<Vec<_>>()));
    o.insert(
        "ttfts".into(),
        json!(pairs.iter().map(|(_, m)| m.as_ref().map_or(0.0, |m| s(m.ttft_ns))).collect::<Vec<_>>()),
    );
    let itls = records.iter().map(|r| r.chunks.windows(2).map(|w| s(w[1].time_ns - w[0].time_ns)).collect::<Vec<_>>());
    o.insert("itls".into(), json!(itls.collect::<Vec<_>>()));
    o.insert("start_times".into(), json!(records.iter().map(|r| s(r.send_ns)).collect::<Vec<_>>()));
    let queue = records.iter().map(|r| s(r.send_ns.saturating_sub(r.scheduled_ns)));
    o.insert("queue_times".into(), json!(queue.collect::<Vec<_>>()));
    o.insert("generated_texts".into(), json!(records.iter().map(|r| r.text.as_str()).collect::<Vec<_>>()));
    let errors = records
        .iter()
        .map(|r| r.failure.as_ref().map_or(String::new(), |f| format!("{}: {}", f.kind.category(), f.message)));
    o.insert("errors".into(), json!(errors.collect::<Vec<_>>()));
}

fn summary_value(s: &Summary) -> Value {
    let mut m = Map::new();
    m.insert("mean".into(), json!(s.mean));
    m.insert("median".into(), json!(s.median));
    m.insert("std".into(), json!(s.std));
    for &(p, v) in &s.percentiles {
        m.insert(format!("p{}", percentile_word(p)), json!(v));
    }
    m.insert("min".into(), json!(s.min));
    m.insert("max".into(), json!(s.max));
    Value::Object(m)
}

/// vllm-bench's `steady_state` object: the window, throughputs, TTFT and TPOT keys.
fn steady_value(s: &SteadyState) -> Value {
    let mut o = Map::new();
    o.insert(
        "window".into(),
        json!({
            "start_s": s.start_ns as f64 / 1e9,
            "end_s": s.end_ns as f64 / 1e9,
            "duration_s": (s.end_ns - s.start_ns) as f64 / 1e9,
            "basis": s.basis,
            "requests_started_in_window": s.requests_started,
            "requests_completed_in_window": s.requests_completed,
            "warning": s.warning,
        }),
    );
    o.insert("request_throughput".into(), json!(s.request_throughput));
    o.insert("input_throughput".into(), json!(s.input_throughput));
    o.insert("output_throughput".into(), json!(s.output_throughput));
    o.insert("total_token_throughput".into(), json!(s.total_token_throughput));
    put_summary(&mut o, "ttft", &s.ttft);
    put_summary(&mut o, "tpot", &s.tpot);
    Value::Object(o)
}

fn put_extras(o: &mut Map<String, Value>, h: &Header, a: &Analysis) {
    o.insert("tokens_per_chunk".into(), summary_value(&a.tokens_per_chunk));
    if let Some(g) = &a.goodput {
        let attainment: Map<String, Value> =
            g.attainment_pct.iter().map(|(m, pct)| (m.name().to_string(), json!(pct))).collect();
        o.insert("goodput_attainment_pct".into(), Value::Object(attainment));
    }
    let failures: Map<String, Value> = a.failures.iter().map(|(k, (n, _))| (k.clone(), json!(n))).collect();
    o.insert("failures".into(), Value::Object(failures));
    let examples: Map<String, Value> = a.failures.iter().map(|(k, (_, msg))| (k.clone(), json!(msg))).collect();
    o.insert("failure_examples".into(), Value::Object(examples));
    let p = &a.pacing;
    o.insert(
        "pacing".into(),
        json!({
            "offered_request_rate_per_s": p.offered_rate_per_s,
            "achieved_request_rate_per_s": p.achieved_rate_per_s,
            "requests_sent": p.sent,
            "last_scheduled_s": p.last_scheduled_s,
            "last_send_s": p.last_send_s,
            "send_lag_ms": summary_value(&p.send_lag),
        }),
    );
    o.insert("steady_state".into(), a.steady.as_ref().map_or(Value::Null, steady_value));
    let c = &a.token_check;
    o.insert(
        "token_check".into(),
        json!({
            "checked": c.checked,
            "output_mismatched": c.output_mismatched,
            "worst": c.worst.map(|(i, usage, local)| json!({"index": i, "usage": usage, "tokenizer": local})),
            "usage_missing": c.usage_missing,
            "output_len_mismatched": c.output_len_mismatched,
            "prompt_tokens_added_mean": c.prompt_tokens_added_mean,
        }),
    );
    let per_request_us = if a.pacing.sent > 0 { h.client_cpu_s * 1e6 / a.pacing.sent as f64 } else { 0.0 };
    o.insert(
        "client".into(),
        json!({
            "tool": "shardgate bench",
            "cores": h.client_cores,
            "http_version": if h.http2_connections.is_some() { "2" } else { "1.1" },
            "http2_connections": h.http2_connections,
            "cpu_s": h.client_cpu_s,
            "cpu_us_per_request": per_request_us,
            "warmup_requests": h.warmup_count,
            "origin_unix_s": h.origin_unix_s,
        }),
    );
    o.insert("warnings".into(), json!(a.warnings));
}

/// The terminal summary, `vllm bench serve`'s layout first, then our sections.
pub fn summary_text(h: &Header, a: &Analysis) -> String {
    let mut t = String::new();
    let line = |t: &mut String, label: &str, value: String| {
        let _ = writeln!(t, "{label:<44} {value}");
    };
    let rule = |t: &mut String, title: &str, fill: char| {
        let side = 58usize.saturating_sub(title.chars().count());
        let (left, right) = (fill.to_string().repeat(side / 2), fill.to_string().repeat(side - side / 2));
        let _ = writeln!(t, "{left} {title} {right}");
    };
    rule(&mut t, "Serving Benchmark Result", '=');
    line(&mut t, "Successful requests:", a.completed.to_string());
    line(&mut t, "Failed requests:", a.failed.to_string());
    if let Some(c) = h.max_concurrency {
        line(&mut t, "Maximum request concurrency:", c.to_string());
    }
    if let Some(r) = h.request_rate {
        line(&mut t, "Request rate configured (RPS):", format!("{r:.2}"));
    }
    line(&mut t, "Benchmark duration (s):", format!("{:.2}", a.duration_s));
    line(&mut t, "Total input tokens:", a.total_input_tokens.to_string());
    line(&mut t, "Total generated tokens:", a.total_output_tokens.to_string());
    line(&mut t, "Request throughput (req/s):", format!("{:.2}", a.request_throughput));
    if let Some(g) = a.request_goodput() {
        line(&mut t, "Request goodput (req/s):", format!("{g:.2}"));
    }
    line(&mut t, "Output token throughput (tok/s):", format!("{:.2}", a.output_throughput));
    line(&mut t, "Peak output token throughput (tok/s):", format!("{:.2}", a.max_output_tokens_per_s));
    line(&mut t, "Peak concurrent requests:", a.max_concurrent_requests.to_string());
    line(&mut t, "Total token throughput (tok/s):", format!("{:.2}", a.total_token_throughput));
    // Unpaced, every request is ready at the origin: times from it say only how long the
    // run took to reach a request, so the terminal leaves them out (the JSON keeps them).
    const FROM_SCHEDULE: [&str; 3] = ["ttft_from_schedule", "e2el_from_schedule", "client_queue_time"];
    for l in &a.latencies {
        let selected = h.reports(l.key) || (l.key == "e2el_from_schedule" && h.reports("e2el_including_client_queue"));
        if !selected || (h.request_rate.is_none() && FROM_SCHEDULE.contains(&l.key)) {
            continue;
        }
        rule(&mut t, l.label, '-');
        let name = l.key.to_uppercase();
        line(&mut t, &format!("Mean {name} (ms):"), format!("{:.3}", l.summary.mean));
        line(&mut t, &format!("Median {name} (ms):"), format!("{:.3}", l.summary.median));
        for &(p, v) in &l.summary.percentiles {
            line(&mut t, &format!("P{} {name} (ms):", percentile_word(p)), format!("{v:.3}"));
        }
    }
    summary_extras(&mut t, h, a, &line, &rule);
    t
}

fn summary_extras(
    t: &mut String,
    h: &Header,
    a: &Analysis,
    line: &dyn Fn(&mut String, &str, String),
    rule: &dyn Fn(&mut String, &str, char),
) {
    rule(t, "Tokens and pacing", '-');
    let tpc = &a.tokens_per_chunk;
    line(t, "Tokens per output chunk (mean / max):", format!("{:.2} / {}", tpc.mean, tpc.max));
    if let Some(offered) = a.pacing.offered_rate_per_s {
        line(t, "Offered request rate (req/s):", format!("{offered:.2}"));
    }
    if h.request_rate.is_some() {
        line(t, "Achieved send rate (req/s):", format!("{:.2}", a.pacing.achieved_rate_per_s));
        let lag = &a.pacing.send_lag;
        let p99 = lag.percentile(99.0).unwrap_or(lag.max);
        line(t, "Send lag p50 / p99 / max (ms):", format!("{:.3} / {:.3} / {:.3}", lag.median, p99, lag.max));
    }
    if let Some(added) = a.token_check.prompt_tokens_added_mean {
        line(t, "Server prompt tokens - client count (mean):", format!("{added:.1}"));
    }
    line(
        t,
        "Client CPU (s) / per request (us):",
        format!("{:.2} / {:.1}", h.client_cpu_s, h.client_cpu_s * 1e6 / a.pacing.sent.max(1) as f64),
    );
    if let Some(g) = &a.goodput {
        for (m, pct) in &g.attainment_pct {
            line(t, &format!("SLO attainment {} (%):", m.name()), format!("{pct:.2}"));
        }
    }
    if let Some(s) = &a.steady {
        rule(t, "Steady state", '-');
        line(t, "Window (s):", format!("{:.2} -> {:.2} ({})", s.start_ns as f64 / 1e9, s.end_ns as f64 / 1e9, s.basis));
        line(t, "Request throughput (req/s):", format!("{:.2}", s.request_throughput));
        line(t, "Output token throughput (tok/s):", format!("{:.2}", s.output_throughput));
        line(t, "Total token throughput (tok/s):", format!("{:.2}", s.total_token_throughput));
        line(
            t,
            "Median / P99 TTFT (ms):",
            format!("{:.3} / {:.3}", s.ttft.median, s.ttft.percentile(99.0).unwrap_or(s.ttft.max)),
        );
    }
    if !a.failures.is_empty() {
        rule(t, "Failures by category", '-');
        for (category, (n, example)) in &a.failures {
            line(t, &format!("{category}:"), format!("{n}  e.g. {}", example.chars().take(120).collect::<String>()));
        }
    }
    let _ = writeln!(t, "{}", "=".repeat(60));
    for w in &a.warnings {
        let _ = writeln!(t, "warning: {w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyze, RunFacts};
    use crate::args::{Slo, SloMetric};
    use crate::record::{Chunk, Failure, FailureKind};
    use crate::tokenizer::tests::tiny_tokenizer;
    use crate::window::SteadyBasis;
    use crate::workload::{Prompt, PromptInput};

    /// A `vllm bench serve` 0.33 result (`--max-concurrency 4 --request-rate 20 --goodput
    /// ttft:50 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99`), keys and
    /// value types as `vllm/benchmarks/serve.py` writes them; values shortened.
    const VLLM_SAMPLE: &str = r#"{
      "date": "20261129-195946", "endpoint_type": "openai", "backend": "openai", "label": null,
      "model_id": "qwen3-demo", "max_model_len": 8192, "tokenizer_id": "/models/qwen3", "num_prompts": 50,
      "request_rate": 20.0, "burstiness": 1.0, "max_concurrency": 4,
      "duration": 2.6, "completed": 50, "failed": 0, "total_input_tokens": 6400,
      "total_output_tokens": 1600, "request_throughput": 19.2, "request_goodput": 19.0,
      "output_throughput": 615.3, "total_token_throughput": 3076.9,
      "max_output_tokens_per_s": 650.0, "max_concurrent_requests": 4, "rtfx": 0.0,
      "mean_ttft_ms": 31.5, "median_ttft_ms": 31.2, "std_ttft_ms": 1.1,
      "p50_ttft_ms": 31.2, "p90_ttft_ms": 33.0, "p99_ttft_ms": 35.1,
      "mean_tpot_ms": 0.1, "median_tpot_ms": 0.1, "std_tpot_ms": 0.01,
      "p50_tpot_ms": 0.1, "p90_tpot_ms": 0.1, "p99_tpot_ms": 0.2,
      "mean_itl_ms": 0.1, "median_itl_ms": 0.1, "std_itl_ms": 0.2,
      "p50_itl_ms": 0.1, "p90_itl_ms": 0.1, "p99_itl_ms": 0.9,
      "mean_e2el_ms": 33.0, "median_e2el_ms": 32.9, "std_e2el_ms": 1.2,
      "p50_e2el_ms": 32.9, "p90_e2el_ms": 34.6, "p99_e2el_ms": 36.0,
      "mean_client_queue_time_ms": 2.0, "median_client_queue_time_ms": 0.0,
      "std_client_queue_time_ms": 4.1, "p50_client_queue_time_ms": 0.0,
      "p90_client_queue_time_ms": 7.5, "p99_client_queue_time_ms": 15.2,
      "mean_e2el_including_client_queue_ms": 35.0, "median_e2el_including_client_queue_ms": 33.1,
      "std_e2el_including_client_queue_ms": 4.4, "p50_e2el_including_client_queue_ms": 33.1,
      "p90_e2el_including_client_queue_ms": 41.0, "p99_e2el_including_client_queue_ms": 50.3
    }"#;

    /// `--save-detailed` adds these per-request arrays.
    const VLLM_DETAILED_KEYS: [&str; 9] = [
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "latencies",
        "start_times",
        "queue_times",
        "generated_texts",
        "errors",
    ];

    fn sample_run() -> (Vec<RequestRecord>, Vec<Prompt>) {
        let prompts = vec![Prompt { input: PromptInput::Text("red green".into()), input_tokens: 2, output_tokens: 2 }];
        let ok = |i: u32, at: u64| RequestRecord {
            index: i,
            scheduled_ns: at,
            send_ns: at + 1_000,
            header_ns: Some(at + 500_000),
            end_ns: at + 4_000_000,
            status: Some(200),
            chunks: vec![
                Chunk { time_ns: at + 2_000_000, text_end: 3, completion_tokens_cum: Some(1) },
                Chunk { time_ns: at + 3_000_000, text_end: 8, completion_tokens_cum: Some(2) },
            ],
            text: "red green".into(),
            usage_prompt_tokens: Some(9),
            usage_completion_tokens: Some(2),
            ..RequestRecord::default()
        };
        let mut records: Vec<RequestRecord> = (0..20).map(|i| ok(i, u64::from(i) * 50_000_000)).collect();
        records[7].failure = Some(Failure::new(FailureKind::HttpStatus(500), "boom"));
        records[7].chunks.clear();
        (records, prompts)
    }

    fn header() -> Header<'static> {
        Header {
            date: date_stamp(1_795_982_386.0),
            backend: "openai",
            label: None,
            model_id: "qwen3-demo",
            max_model_len: Some(8192),
            tokenizer_id: "tiny",
            request_rate: Some(20.0),
            burstiness: 1.0,
            max_concurrency: Some(4),
            metadata: &[],
            percentile_metrics: None,
            client_cores: 1,
            http2_connections: None,
            client_cpu_s: 0.01,
            origin_unix_s: 0.0,
            warmup_count: 0,
        }
    }

    fn type_of(v: &Value) -> &'static str {
        match v {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }

    #[test]
    fn result_has_every_vllm_key_with_its_type() {
        let (records, prompts) = sample_run();
        let facts = RunFacts {
            prompts: &prompts,
            percentiles: &[50.0, 90.0, 99.0],
            slos: &[Slo { metric: SloMetric::Ttft, limit_ms: 50.0 }],
            ignore_eos: true,
            offered_rate_per_s: Some(20.0),
            concurrency_max: Some(4),
            steady_basis: Some(SteadyBasis::Schedule),
        };
        let a = analyze(&records, &facts, &tiny_tokenizer());
        let ours = result_json(&header(), &a, &records, false);
        let sample: Value = serde_json::from_str(VLLM_SAMPLE).unwrap_or_default();
        let sample = sample.as_object().cloned().unwrap_or_default();
        assert_eq!(sample.len(), 59, "sample did not parse");
        for (key, value) in &sample {
            let got = ours.get(key).unwrap_or_else(|| panic!("missing vLLM key {key}"));
            // label is null in both unless set; every other shared key has vLLM's type.
            assert_eq!(type_of(got), type_of(value), "type of {key}");
        }
        assert_eq!(ours["date"], "20261129-195946");
        assert_eq!((ours["completed"].clone(), ours["failed"].clone()), (json!(19), json!(1)));
        assert_eq!(ours["total_input_tokens"], json!(19 * 9));
        // HDR precision: within 0.05 % of the exact 1.999 ms.
        assert!((ours["median_ttft_ms"].as_f64().unwrap_or(0.0) - 1.999).abs() < 1e-3);
        assert_eq!(ours["failures"], json!({"http_500": 1}));
        let detailed = result_json(&header(), &a, &records, true);
        for key in VLLM_DETAILED_KEYS {
            assert_eq!(detailed[key].as_array().map(Vec::len), Some(20), "{key}");
        }
        assert_eq!(detailed["itls"][0], json!([0.001]));
    }

    #[test]
    fn stamps_and_words() {
        assert_eq!(date_stamp(0.0), "19700101-000000");
        assert_eq!(date_stamp(951_782_400.0), "20000229-000000");
        assert_eq!(date_stamp(1_795_982_386.0), "20261129-195946");
        assert_eq!(
            (percentile_word(99.0), percentile_word(99.9), percentile_word(50.0)),
            ("99".into(), "99.9".into(), "50".into())
        );
    }
}
