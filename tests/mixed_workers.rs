//! Workers of one model reached three ways (a ZMQ engine, a gRPC worker, an HTTP worker) share
//! the requests under each policy, and the metrics count each request under the mode it went
//! over. The gRPC worker is a scripted `VllmEngine` server, the HTTP worker another
//! simulator-backed shardgate.

mod common;

use std::time::Duration;

use common::{Gateway, Options};
use serde_json::json;
use shardgate_testkit::grpc::{self as scripted, Script};

/// Requests counted under `connection_mode` in the gateway's `/metrics`.
fn counted(g: &Gateway, mode: &str) -> u64 {
    let prefix = format!("smg_router_requests_total{{router_type=\"{mode}\",connection_mode=\"{mode}\"");
    g.metrics()
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

fn add(g: &Gateway, url: &str) {
    let r = g.post_json("/workers", &json!({"url": url}));
    assert_eq!(r.status, 202, "{url}: {}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    common::eventually_within(
        Duration::from_secs(20),
        || g.get(&format!("/workers/{id}")).json()["status"] == "ready",
        &format!("{url} ready"),
    );
}

#[test]
fn zmq_grpc_and_http_workers_share_a_model_under_every_policy() {
    let upstream = Gateway::start();
    let grpc = scripted::start(Script::Healthy { tokens: 3 }, 8192);
    // (policy, requests, exact share per worker kind when the policy is deterministic)
    let cases =
        [("round_robin", 9, Some(3)), ("power_of_two", 30, None), ("cache_aware", 30, None), ("random", 30, None)];
    for (policy, n, exact) in cases {
        let g = Gateway::start_with(Options {
            gateway_args: vec!["--policy".into(), policy.into()],
            // One shard: one policy instance, whichever connection the kernel hands it.
            shards: 1,
            ..Default::default()
        });
        add(&g, &format!("grpc://127.0.0.1:{}", grpc.port));
        add(&g, &format!("http://127.0.0.1:{}", upstream.port));
        let relayed_before = upstream.adds().len();
        for i in 0..n {
            // Prompts that share no prefix beyond the JSON around them: cache_aware has nothing
            // to stick to, and balances.
            let seed: u64 = i + 1;
            let content = format!("{:016x}", seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)).repeat(8);
            let body = json!({"model": "test-model", "max_tokens": 3,
                              "messages": [{"role": "user", "content": content}]});
            let r = g.post_json("/v1/chat/completions", &body);
            assert_eq!(r.status, 200, "{policy} #{i}: {}", r.text());
        }
        let shares = [g.adds().len() as u64, counted(&g, "grpc"), (upstream.adds().len() - relayed_before) as u64];
        assert_eq!(shares.iter().sum::<u64>(), n, "{policy}: every request went to one worker: {shares:?}");
        assert_eq!(counted(&g, "http"), shares[2], "{policy}: relayed requests counted as http");
        assert_eq!(counted(&g, "zmq"), shares[0], "{policy}: engine requests counted as zmq");
        match exact {
            Some(each) => assert_eq!(shares, [each; 3], "{policy}"),
            None => assert!(shares.iter().all(|&s| s > 0), "{policy}: every kind of worker served: {shares:?}"),
        }
    }
}
