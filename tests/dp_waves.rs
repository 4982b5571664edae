//! MoE data-parallel groups step in lockstep, and an idle rank joins a wave only when told
//! (START_DP_WAVE), which vLLM's coordinator would do and the gateway does here. The simulator's
//! `--moe` mode blocks a rank in its end-of-step collective until every rank joins, as a real
//! engine blocks in its all-reduce.

mod common;

use std::time::Duration;

use common::{Gateway, Options};
use serde_json::json;

fn group(model: &str, patch: serde_json::Value) -> Gateway {
    Gateway::start_with(Options {
        gateway_args: vec!["--zmq-engine-count".into(), "2".into()],
        sim_args: ["--data-parallel-size", "2", "--moe"].iter().map(|s| s.to_string()).collect(),
        model_path: Some(common::model_dir_with(model, &patch)),
        ..Default::default()
    })
}

fn completion(prompt: &str) -> String {
    json!({"model": "test-model", "prompt": prompt, "max_tokens": 4}).to_string()
}

#[test]
fn a_moe_group_is_woken_for_every_wave_and_serves_on_both_ranks() {
    let g = group("moe", json!({"num_experts": 8, "num_experts_per_tok": 2}));
    // One after another: each request finds the group paused after the last wave ended.
    for i in 0..6 {
        let r = g.post("/v1/completions", &completion(&format!("seq {i}")));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // And concurrently.
    std::thread::scope(|s| {
        for c in 0..4 {
            let g = &g;
            s.spawn(move || {
                for i in 0..3 {
                    let r = g.post("/v1/completions", &completion(&format!("c{c} r{i}")));
                    assert_eq!(r.status, 200, "{}", r.text());
                }
            });
        }
    });
    let records = g.records();
    let adds: Vec<_> = records.iter().filter(|r| r["type"] == "add").collect();
    assert_eq!(adds.len(), 18);
    for rank in [0, 1] {
        assert!(adds.iter().any(|a| a["rank"] == rank), "rank {rank} served nothing");
        assert!(
            records.iter().any(|r| r["type"] == "start_dp_wave" && r["rank"] == rank),
            "rank {rank} was never woken"
        );
    }
}

#[test]
fn without_wake_ups_a_lockstep_group_stalls() {
    // The same engines behind a dense model's config: the gateway sends no START_DP_WAVE, so
    // the rank that gets the request waits for its idle peer in the collective. This is what
    // the test above guards against, and it shows the simulator really is lockstep.
    let g = group("dense", json!({}));
    let mut s = g.connect();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    std::io::Write::write_all(
        &mut s,
        &common::raw_request("POST", "/v1/completions", Some(&completion("x")), &[], false),
    )
    .unwrap();
    let answer = common::read_response(&mut std::io::BufReader::new(s));
    assert!(answer.is_err(), "a lockstep group answered without being woken: {answer:?}");
    assert!(!g.records().iter().any(|r| r["type"] == "start_dp_wave"));
}
