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
