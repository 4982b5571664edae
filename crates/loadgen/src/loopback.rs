//! Tests of the whole client (runner, pacer, pool, HTTP and SSE parsing) over real loopback
//! sockets, against `sink` on its own pinned thread: it answers every request at once, so these
//! runs measure the client, not a server. One runs a short bench of each API the sink speaks
//! beyond completions, from the flags to the analysis.
//!
//! `pacing_holds_5000_per_s_for_30_s` is the issue's pacing criterion; it takes 30 s and runs
//! with `--ignored` (perf/loadgen/README.md records it).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::analysis::{self, RunFacts};
use super::args::tests::parsed;
use super::args::BenchConfig;
use super::chunk::Dialect;
use super::progress::Progress;
use super::record::RequestRecord;
use super::runner::{self, PreparedRequest, RunSpec};
use super::schedule::Arrivals;
use super::sink;
use super::tokenizer::tests::tiny_tokenizer;
use super::window;
use super::workload;

/// One loopback test at a time: the pacer spins on its core, and two runs pinned to the same
/// cores would time-slice each other's latencies.
static SERIAL: Mutex<()> = Mutex::new(());

/// A sink answering `output_len` output tokens per request, on `cpu`.
fn start_sink(cpu: Option<usize>, output_len: usize) -> SocketAddr {
    sink::start("127.0.0.1:0", output_len, cpu).map(|(addr, _)| addr).unwrap_or_else(|e| panic!("{e}"))
}

fn request_bytes(addr: SocketAddr) -> Vec<u8> {
    let body = r#"{"model":"m","prompt":[1,2,3,4],"max_tokens":1,"stream":true}"#;
    format!(
        "POST /v1/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// (client CPU, sink CPU): separate cores when the machine has two.
fn cpus() -> (Option<usize>, Option<usize>) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if n >= 2 {
        (Some(1), Some(0))
    } else {
        (None, None)
    }
}

fn run(
    addr: SocketAddr,
    spec_schedule: Option<Vec<u64>>,
    count: Option<usize>,
    cap: Option<usize>,
) -> Vec<RequestRecord> {
    let requests = vec![PreparedRequest { bytes: request_bytes(addr), output_tokens: 1 }];
    run_requests(addr, requests, Dialect::OpenAi, spec_schedule, count, cap)
}

fn run_requests(
    addr: SocketAddr,
    requests: Vec<PreparedRequest>,
    dialect: Dialect,
    spec_schedule: Option<Vec<u64>>,
    count: Option<usize>,
    cap: Option<usize>,
) -> Vec<RequestRecord> {
    let planned = spec_schedule.as_ref().map(Vec::len).or(count);
    let out = runner::run(RunSpec {
        cpus: vec![cpus().0],
        requests: Arc::new(requests),
        dialect,
        schedule: spec_schedule,
        request_count: count,
        duration: None,
        concurrency_max: cap,
        warmup_count: 8,
        addr,
        reuse_connections: true,
        http2_connections: None,
        request_timeout: Duration::from_secs(10),
        progress: Arc::new(Progress::new(planned.map(|n| n as u64))),
        show_progress: false,
    })
    .unwrap_or_else(|e| panic!("run failed: {e}"));
    out.records
}

#[test]
fn closed_loop_against_the_sink() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let addr = start_sink(cpus().1, 1);
    let records = run(addr, None, Some(3000), Some(16));
    assert_eq!(records.len(), 3000);
    assert!(records.iter().all(|r| r.succeeded()), "{:?}", records.iter().find(|r| !r.succeeded()));
    assert!(records.iter().enumerate().all(|(i, r)| r.index as usize == i));
    assert!(records.iter().all(|r| r.text == " w0" && r.usage_completion_tokens == Some(1)));
    // Connections were opened before the origin and reused.
    assert!(records.iter().all(|r| !r.connection_new));
    assert!(window::peak_in_flight(&records) <= 16);
}

/// `shardgate bench --backend anthropic-messages` and `openai-responses` as `run` prepares and
/// analyzes them (but for the tokenizer, a tiny one here), against the sink's canned streams of
/// 4 tokens: every request completes with a TTFT, and the counts are the streams' usage.
#[test]
fn messages_and_responses_benches_against_the_sink() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let addr = start_sink(cpus().1, 4);
    let tok = tiny_tokenizer();
    for backend in ["anthropic-messages", "openai-responses"] {
        let base_url = format!("http://{addr}");
        let flags = ["--base-url", &base_url, "--backend", backend, "--max-concurrency", "8"];
        let lens = ["--num-prompts", "200", "--random-input-len", "6", "--random-output-len", "4"];
        let args = parsed(&[&flags[..], &lens].concat()).vllm_resolved();
        let config = BenchConfig::from_args(&args).unwrap_or_else(|e| panic!("{backend}: {e}"));
        let prompts = workload::build_prompts(&args, &tok).unwrap_or_else(|e| panic!("{backend}: {e}"));
        let requests = prompts
            .iter()
            .map(|p| {
                let body = workload::request_body(&args, &config, "sink", p);
                PreparedRequest {
                    bytes: workload::request_bytes(&config, &body, false),
                    output_tokens: p.output_tokens,
                }
            })
            .collect();
        let records = run_requests(addr, requests, args.backend.dialect(), None, Some(200), Some(8));
        let facts = RunFacts {
            prompts: &prompts,
            percentiles: &[50.0, 99.0],
            slos: &[],
            ignore_eos: args.ignore_eos,
            offered_rate_per_s: None,
            concurrency_max: Some(8),
            steady_basis: None,
        };
        let a = analysis::analyze(&records, &facts, &tok);
        assert_eq!((a.completed, a.failed), (200, 0), "{backend}: {:?}", a.failures);
        let ttft = a.latency("ttft").unwrap_or_else(|| panic!("{backend}: no ttft"));
        assert!(ttft.count == 200 && ttft.min > 0.0, "{backend}: ttft {ttft:?}");
        assert_eq!((a.total_input_tokens, a.total_output_tokens), (200, 800), "{backend}: the sink's usage");
        assert!(records.iter().all(|r| r.text == " w0 w1 w2 w3" && r.chunks.len() == 4), "{backend}");
        assert!(a.warnings.is_empty(), "{backend}: {:?}", a.warnings);
    }
}

#[test]
fn open_loop_pacing_for_a_second() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let addr = start_sink(cpus().1, 1);
    let rate = 2000.0;
    let schedule = Arrivals::Gamma { rate_per_s: rate, shape: 1.0 }.offsets_ns(2000, 3);
    let records = run(addr, schedule, None, None);
    assert!(records.iter().all(|r| r.succeeded()));
    assert_eq!(records.len(), 2000);
    // What holds on any machine: every request is sent, none before its scheduled time. (Two
    // sends close together may leave in either order: one may wait for a connection.) How
    // close the pacer keeps to the schedule is a speed property, measured by the 30 s run
    // below (perf/loadgen/pacing_5000.sh), never asserted in a timed unit test.
    for r in &records {
        assert!(r.send_ns >= r.scheduled_ns, "request {} sent before its time", r.index);
    }
}

#[test]
#[ignore = "30 s; perf/bench runs it with --ignored"]
fn pacing_holds_5000_per_s_for_30_s() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let addr = start_sink(cpus().1, 1);
    let rate = 5000.0;
    let count = Arrivals::Gamma { rate_per_s: rate, shape: 1.0 }.count_for_duration(30.0).unwrap_or(0);
    let schedule = Arrivals::Gamma { rate_per_s: rate, shape: 1.0 }.offsets_ns(count, 0);
    let records = run(addr, schedule, None, None);
    let failed = records.iter().filter(|r| !r.succeeded()).count();
    if let Some(f) = records.iter().find_map(|r| r.failure.as_ref()) {
        println!("first failure: {} {}", f.kind.category(), f.message);
    }
    let p = window::pacing(&records, Some(rate), &[50.0, 99.0, 99.9]);
    let lag = &p.send_lag;
    println!(
        "offered {rate:.1} req/s for {:.3} s ({count} requests): achieved {:.2} req/s ({:+.3} %), last send {:.4} s, \
         send lag p50 {:.4} ms p99 {:.4} ms p99.9 {:.4} ms max {:.4} ms, failed {failed}, peak in flight {}",
        p.last_scheduled_s,
        p.achieved_rate_per_s,
        (p.achieved_rate_per_s / rate - 1.0) * 100.0,
        p.last_send_s,
        lag.median,
        lag.percentile(99.0).unwrap_or(0.0),
        lag.percentile(99.9).unwrap_or(0.0),
        lag.max,
        window::peak_in_flight(&records),
    );
    assert_eq!(failed, 0);
    assert!((p.achieved_rate_per_s - rate).abs() / rate < 0.01, "achieved {}", p.achieved_rate_per_s);
}
