//! Routing end to end: a grouped worker's rank table steers requests away from a slow rank,
//! `--policy` chooses among replica workers (cache affinity, rotation), and a bad `--policy` is
//! refused at startup with the valid names.

mod common;

use std::process::Command;

use common::{Gateway, Options};
use serde_json::{json, Value};

fn completion(g: &Gateway, prompt: &str) {
    let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": prompt, "max_tokens": 6}));
    assert_eq!(r.status, 200, "{}", r.text());
}

fn adds_in(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["type"] == "add")
        .collect()
}

/// Registers a second worker at runtime with its own simulator (and its own record file).
fn second_worker(g: &Gateway) -> (common::ChildGuard, std::path::PathBuf) {
    let url = format!("ipc://{}/engine-b", g.dir.display());
    let record = g.dir.join("record-b.jsonl");
    let r = g.post_json("/workers", &json!({"url": url, "runtime": "vllm"}));
    assert_eq!(r.status, 202, "{}", r.text());
    let sim = g.spawn_sim(&url, &["--record", record.to_str().unwrap()]);
    common::eventually(
        || g.get("/workers").json()["workers"].as_array().is_some_and(|w| w.iter().all(|w| w["status"] == "ready")),
        "both workers ready",
    );
    (sim, record)
}

#[test]
fn a_slow_rank_receives_fewer_requests() {
    let g = Gateway::start_with(Options {
        gateway_args: vec!["--zmq-engine-count".into(), "2".into()],
        // Rank 1 is busy with other clients' work: slow, with a queue and a nearly full cache.
        sim_args: ["--data-parallel-size", "2", "--rank-itl-ms", "1=30", "--rank-background-load", "1=20"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        ..Default::default()
    });
    // Four clients, each sending one request after another. Round robin would give rank 1 half;
    // the scores (its reported queue, and its requests held longer) should give it far fewer.
    std::thread::scope(|s| {
        for c in 0..4 {
            let g = &g;
            s.spawn(move || {
                for i in 0..12 {
                    completion(g, &format!("client {c} request {i}"));
                }
            });
        }
    });
    common::eventually(|| g.adds().len() == 48, "48 requests recorded");
    let adds = g.adds();
    let slow = adds.iter().filter(|a| a["rank"] == 1).count();
    let fast = adds.len() - slow;
    eprintln!("loaded rank: {slow} of 48");
    // Rotation would give it 24; observed about 10.
    assert!(slow * 3 <= 48, "the loaded rank got {slow} of 48 requests (rotation would give it 24)");
    assert!(fast > slow);
    // The table is visible and settles back to idle.
    common::eventually(
        || {
            let w = &g.get("/workers").json()["workers"][0];
            w["load"]["ranks"].as_array().is_some_and(|r| r.len() == 2 && r.iter().all(|r| r["in_flight"] == 0))
        },
        "both ranks idle in GET /workers",
    );
    let m = g.metrics();
    assert!(m.contains("shardgate_worker_rank_in_flight{"), "{m}");
    assert!(m.contains("rank=\"1\""), "{m}");
    // The cumulative per-rank counter agrees with what each rank received.
    let total = |rank: usize| -> usize {
        let line = m
            .lines()
            .find(|l| l.starts_with("shardgate_worker_rank_requests_total{") && l.contains(&format!("rank=\"{rank}\"")))
            .unwrap_or_else(|| panic!("no request counter for rank {rank}: {m}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!((total(0), total(1)), (fast, slow));
}

#[test]
fn cache_aware_keeps_a_prefix_on_one_replica() {
    let g = Gateway::start_with(Options {
        gateway_args: vec!["--policy".into(), "cache_aware".into()],
        ..Default::default()
    });
    let (_sim, record_b) = second_worker(&g);
    let shared = "You are a careful assistant. Answer in one short sentence, and never use lists. ".repeat(3);
    for i in 0..6 {
        completion(&g, &format!("{shared}Question {i}?"));
    }
    let (a, b) = (g.adds().len(), adds_in(&record_b).len());
    assert_eq!(a + b, 6);
    assert!(a == 6 || b == 6, "one shared prefix went to both replicas: {a} and {b}");
}

#[test]
fn round_robin_alternates_between_replicas() {
    let g = Gateway::start_with(Options {
        gateway_args: vec!["--policy".into(), "round_robin".into()],
        shards: 1,
        ..Default::default()
    });
    let (_sim, record_b) = second_worker(&g);
    for _ in 0..6 {
        completion(&g, "the same prompt every time");
    }
    assert_eq!((g.adds().len(), adds_in(&record_b).len()), (3, 3));
}

#[test]
fn an_unknown_policy_is_refused_with_the_valid_names() {
    let out = Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["launch", "--worker-urls", "ipc:///tmp/sg-nowhere/engine", "--model-path"])
        .arg(common::model_dir())
        .args(["--policy", "fastest"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "unknown policy 'fastest'; valid policies: round_robin, random, power_of_two, least_load, cache_aware"
        ),
        "{err}"
    );
}
