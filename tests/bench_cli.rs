//! `shardgate bench` end to end: the binary against a real gateway and simulator, closed and
//! open loop, chat and completions; every request accounted for in the result JSON, the
//! per-request JSONL and the plots written, and `bench compare` reading two results.

mod common;

use std::path::Path;
use std::process::Command;

use common::{Gateway, Options};
use serde_json::Value;

fn bench(g: &Gateway, dir: &Path, name: &str, load: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["bench", "--base-url", &format!("http://127.0.0.1:{}", g.port), "--model", "test-model"])
        .arg("--tokenizer")
        .arg(common::model_dir())
        .args(["--random-input-len", "64", "--random-output-len", "8", "--ignore-eos", "--disable-progress"])
        .args(["--num-warmups", "4", "--percentiles", "50,99,99.9"])
        .arg("--result-dir")
        .arg(dir)
        .args(["--result-filename", &format!("{name}.json")])
        .args(load)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{name}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Successful requests"), "{name}: summary table missing:\n{stdout}");
    serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap()).unwrap()
}

#[test]
fn runs_against_the_gateway_and_accounts_for_every_request() {
    let g = Gateway::start_with(Options { sim_args: vec!["--itl-ms".into(), "1".into()], ..Default::default() });
    let dir = g.dir.join("bench");
    let closed = bench(&g, &dir, "closed", &["--num-prompts", "40", "--max-concurrency", "8"]);
    assert_eq!(closed["completed"], 40);
    assert_eq!(closed["failed"], 0);
    assert_eq!(closed["total_output_tokens"], 40 * 8, "usage counts");
    assert_eq!(closed["total_input_tokens"], 40 * 64, "exact input lengths");
    assert_eq!(closed["max_model_len"], 8192, "from GET /v1/models, as vLLM's result has it");
    assert!(closed["max_concurrent_requests"].as_u64().unwrap() <= 8);
    for key in ["median_ttft_ms", "p99_itl_ms", "p99.9_tpot_ms", "mean_e2el_ms", "request_throughput"] {
        assert!(closed[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {}", closed[key]);
    }
    let jsonl = std::fs::read_to_string(dir.join("closed.requests.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), 40, "one line per measured request, warm-ups excluded");
    assert!(std::fs::read_dir(&dir).unwrap().any(|e| e.unwrap().path().extension().is_some_and(|x| x == "svg")));

    let open = bench(
        &g,
        &dir,
        "open",
        &["--num-prompts", "30", "--request-rate", "200", "--backend", "openai-chat", "--goodput", "ttft:10000"],
    );
    assert_eq!(open["completed"], 30);
    assert_eq!(open["total_output_tokens"], 30 * 8);
    assert_eq!(open["request_rate"], 200.0);
    assert_eq!(open["goodput_attainment_pct"]["ttft"], 100.0, "{}", open["goodput_attainment_pct"]);
    assert!(open["pacing"]["offered_request_rate_per_s"] == 200.0, "{}", open["pacing"]);

    let out = Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["bench", "compare"])
        .arg(dir.join("closed.json"))
        .arg(dir.join("open.json"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("median_ttft_ms"));
}

/// The Messages and Responses backends against the gateway's own routes: every request's
/// tokens read from the API's own events and usage.
#[test]
fn the_messages_and_responses_backends_measure_the_gateways_routes() {
    let g = Gateway::start_with(Options { sim_args: vec!["--itl-ms".into(), "1".into()], ..Default::default() });
    let dir = g.dir.join("bench");
    for backend in ["anthropic-messages", "openai-responses"] {
        let r = bench(&g, &dir, backend, &["--num-prompts", "20", "--max-concurrency", "4", "--backend", backend]);
        assert_eq!((r["completed"].as_u64(), r["failed"].as_u64()), (Some(20), Some(0)), "{backend}");
        assert_eq!(r["total_output_tokens"], 20 * 8, "{backend}: output tokens from the API's usage");
        // Input tokens come from the API's usage: the client's 64 plus the chat template's
        // fixed turn markers, the same for every request.
        let added = r["token_check"]["prompt_tokens_added_mean"].as_f64().unwrap_or_default();
        assert!(added > 0.0 && added.fract() == 0.0, "{backend}: template tokens added {added}");
        assert_eq!(r["total_input_tokens"].as_f64(), Some(20.0 * (64.0 + added)), "{backend}: input tokens");
        assert_eq!(r["token_check"]["output_mismatched"], 0, "{backend}: {}", r["token_check"]);
        assert!(r["median_ttft_ms"].as_f64().is_some_and(|v| v > 0.0), "{backend}");
    }
    let metrics = g.metrics();
    for endpoint in ["messages", "responses"] {
        assert!(
            metrics.lines().any(|l| l.starts_with("smg_router_requests_total")
                && l.contains(&format!("endpoint=\"{endpoint}\""))
                && l.contains("streaming=\"true\"")
                && !l.ends_with(" 0")),
            "{endpoint} requests counted"
        );
    }
}

/// `--http2`: streams multiplexed over two h2c connections of the gateway, measured as over
/// HTTP/1.1 (every request, its tokens and its chunk gaps). The `h2` client reads nothing but
/// HTTP/2 frames, so a completed request is an HTTP/2 exchange.
#[test]
fn http2_streams_share_a_few_connections() {
    // Steps of 10 ms: a gap between two chunks is a step, never two chunks of one read.
    let g = Gateway::start_with(Options { sim_args: vec!["--itl-ms".into(), "10".into()], ..Default::default() });
    let dir = g.dir.join("bench");
    for (name, load) in [
        ("h2-closed", &["--num-prompts", "60", "--max-concurrency", "16"][..]),
        ("h2-open", &["--num-prompts", "30", "--request-rate", "200", "--backend", "openai-chat"][..]),
    ] {
        let r = bench(&g, &dir, name, &[load, &["--http2", "--connections", "2"]].concat());
        let n = r["num_prompts"].as_u64().unwrap();
        assert_eq!((r["completed"].as_u64(), r["failed"].as_u64()), (Some(n), Some(0)), "{name}");
        assert_eq!(r["total_output_tokens"].as_u64(), Some(n * 8), "{name}: usage counts");
        assert_eq!((&r["client"]["http_version"], &r["client"]["http2_connections"]), (&"2".into(), &2.into()));
        for key in ["median_ttft_ms", "p99_itl_ms", "mean_tpot_ms", "median_ttfb_ms"] {
            assert!(r[key].as_f64().is_some_and(|v| v > 0.0), "{name} {key}: {}", r[key]);
        }
    }
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    let port = common::free_port();
    let out = Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["bench", "--base-url", &format!("http://127.0.0.1:{port}"), "--num-prompts", "2"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&port.to_string()), "{err}");
}

/// `shardgate bench sink` on a free port: answers every request at once with 4 tokens.
fn sink() -> (common::ChildGuard, u16) {
    let port = common::free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["bench", "sink", "--port", &port.to_string(), "--output-len", "4"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let guard = common::ChildGuard(child);
    common::eventually(|| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(), "the sink to listen");
    (guard, port)
}

/// A `vllm bench serve` command line against the sink, run in `cwd`.
fn vllm_line(port: u16, cwd: &Path, flags: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .current_dir(cwd)
        .args(["bench", "--host", "127.0.0.1", "--port", &port.to_string(), "--model", "sink"])
        .arg("--tokenizer")
        .arg(common::model_dir())
        .args(["--dataset-name", "random", "--random-input-len", "16", "--num-prompts", "12", "--disable-tqdm"])
        .args(flags)
        .output()
        .unwrap()
}

/// The one result file in `dir` whose name starts with `prefix`, parsed (each line of an
/// appended file).
fn result_lines(dir: &Path, prefix: &str) -> Vec<Value> {
    let names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix) && n.ends_with(".json"))
        .collect();
    assert_eq!(names.len(), 1, "one result named {prefix}*.json in {}: {names:?}", dir.display());
    let text = std::fs::read_to_string(dir.join(&names[0])).unwrap();
    if text.trim_start().starts_with("{\n") {
        return vec![serde_json::from_str(&text).unwrap()];
    }
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn vllm_bench_serve_command_lines_run_with_vllms_meaning() {
    struct Case {
        flags: &'static [&'static str],
        /// Where the result lands, relative to the case's directory, and its file-name prefix.
        dir: &'static str,
        prefix: &'static str,
        /// Times the line runs (--append-result adds a line each time).
        runs: usize,
        present: &'static [&'static str],
        absent: &'static [&'static str],
        values: &'static [(&'static str, &'static str)],
        stderr: &'static str,
    }
    let cases = [
        Case {
            flags: &[
                "--backend",
                "vllm",
                "--endpoint",
                "/v1/completions",
                "--save-result",
                "--result-dir",
                "out",
                "--save-detailed",
                "--metadata",
                "tp=1",
                "version=0.32",
                "--percentile-metrics",
                "ttft,tpot,itl,e2el",
                "--metric-percentiles",
                "25,50,99",
                "--request-rate",
                "inf",
                "--max-concurrency",
                "4",
                "--tokenizer-mode",
                "hf",
                "--temperature",
                "0",
                "--seed",
                "3",
            ],
            dir: "out",
            prefix: "vllm-infqps-concurrency4-sink-",
            runs: 1,
            present: &[
                "p25_ttft_ms",
                "p50_tpot_ms",
                "p99_itl_ms",
                "mean_e2el_ms",
                "std_e2el_ms",
                "ttfts",
                "itls",
                "latencies",
            ],
            absent: &["p90_ttft_ms"],
            values: &[
                ("backend", "\"vllm\""),
                ("request_rate", "\"inf\""),
                ("tp", "\"1\""),
                ("version", "\"0.32\""),
                ("completed", "12"),
            ],
            stderr: "",
        },
        Case {
            flags: &[
                "--save-result",
                "--percentile-metrics",
                "ttft",
                "--metric-percentiles",
                "99.9",
                "--request-rate",
                "500",
            ],
            dir: ".",
            prefix: "openai-500.0qps-sink-",
            runs: 1,
            present: &["p99.9_ttft_ms", "median_ttft_ms"],
            absent: &["mean_itl_ms", "p99_ttft_ms", "mean_e2el_ms", "mean_ttfb_ms", "ttfts"],
            values: &[("request_rate", "500.0"), ("max_concurrency", "null")],
            stderr: "",
        },
        Case {
            flags: &[
                "--append-result",
                "--result-filename",
                "runs.json",
                "--label",
                "mine",
                "--trust-remote-code",
                "--request-id-prefix",
                "r-",
                "--input-len",
                "8",
                "--output-len",
                "3",
            ],
            dir: ".",
            prefix: "runs",
            runs: 2,
            present: &["p99_ttft_ms"],
            absent: &[],
            values: &[("label", "\"mine\""), ("num_prompts", "12")],
            stderr: "ignoring vllm bench serve flags: --trust-remote-code (",
        },
    ];
    let (_sink, port) = sink();
    let root = std::env::temp_dir().join(format!("sg-bench-vllm-{}", std::process::id()));
    for (i, case) in cases.iter().enumerate() {
        let cwd = root.join(i.to_string());
        std::fs::create_dir_all(&cwd).unwrap();
        for _ in 0..case.runs {
            let out = vllm_line(port, &cwd, case.flags);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "case {i}: {stderr}");
            assert!(stderr.contains(case.stderr), "case {i}: stderr lacks {:?}:\n{stderr}", case.stderr);
        }
        let results = result_lines(&cwd.join(case.dir), case.prefix);
        assert_eq!(results.len(), case.runs, "case {i}: one result per run");
        for r in &results {
            for key in case.present {
                assert!(r.get(key).is_some(), "case {i}: {key} missing");
            }
            for key in case.absent {
                assert!(r.get(key).is_none(), "case {i}: {key} present: {}", r[key]);
            }
            for (key, want) in case.values {
                assert_eq!(r[key].to_string(), *want, "case {i}: {key}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn refused_vllm_flags_exit_naming_the_flag() {
    // Nothing listens on the port: a refusal must come before any connection is tried.
    let port = common::free_port();
    const INSTEAD: &str = "(a vllm bench serve flag) is not supported; use instead: ";
    let cases: &[(&[&str], &str, &str)] = &[
        (&["--profile"], "--profile", INSTEAD),
        (&["--lora-modules", "a", "b"], "--lora-modules", INSTEAD),
        (&["--ramp-up-strategy", "linear"], "--ramp-up-strategy", INSTEAD),
        (&["--hf-split", "train"], "--hf-split", "--dataset-name custom"),
        (&["--logprobs", "2"], "--logprobs", "--extra-body"),
        (&["--tokenizer-mode", "mistral"], "--tokenizer-mode", "use auto or hf"),
        (&["--percentile-metrics", "ttft,goodput"], "--percentile-metrics", "unknown metric 'goodput'"),
        (&["--dataset-name", "hf"], "--dataset-name", "possible values"),
        (&["--backend", "openai-embeddings"], "--backend", "possible values"),
    ];
    for (flags, name, instead) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_shardgate"))
            .args(["bench", "--base-url", &format!("http://127.0.0.1:{port}"), "--num-prompts", "2"])
            .args(*flags)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} ran");
        assert!(err.contains(name) && err.contains(instead), "{flags:?}: {err}");
        assert!(!err.contains(&port.to_string()), "{flags:?} dialed the server: {err}");
    }
}
