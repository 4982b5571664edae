//! The metrics listener speaks the model-server protocol of the Gateway API Inference Extension
//! (what its endpoint picker, llm-d's scheduler and other vLLM scrapers read): every metric the
//! protocol names is exposed under vLLM's name with its type, labelled by model, and carries
//! this host's load as the engines report it.

mod common;

use common::{eventually, rest_of_stream, start_stream, Gateway, Options};

/// The metrics (vLLM names) and their types, as listed by the protocol's "Metrics Reporting"
/// and "LoRA Adapter Serving" sections:
/// https://github.com/kubernetes-sigs/gateway-api-inference-extension/blob/main/docs/proposals/003-model-server-protocol/README.md
/// `vllm:cache_config_info` carries the optional BlockSize and NumGPUBlocks as the labels
/// `block_size` and `num_gpu_blocks`; `vllm:lora_requests_info` the labels `max_lora`,
/// `running_lora_adapters` and `waiting_lora_adapters`.
const PROTOCOL: [(&str, &str, &[&str]); 5] = [
    ("vllm:num_requests_waiting", "gauge", &[]),
    ("vllm:num_requests_running", "gauge", &[]),
    ("vllm:kv_cache_usage_perc", "gauge", &[]),
    ("vllm:cache_config_info", "gauge", &["block_size", "num_gpu_blocks"]),
    ("vllm:lora_requests_info", "gauge", &["max_lora", "running_lora_adapters", "waiting_lora_adapters"]),
];

/// The one sample line of `name` and its value.
fn sample<'a>(text: &'a str, name: &str) -> Option<(&'a str, f64)> {
    let line = text.lines().find(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with('{')))?;
    let value = line.rsplit(' ').next()?.parse().ok()?;
    Some((line, value))
}

fn value(g: &Gateway, name: &str) -> f64 {
    let text = g.metrics();
    sample(&text, name).unwrap_or_else(|| panic!("no {name} in {text}")).1
}

#[test]
fn every_protocol_metric_is_exposed_with_its_type_and_labels() {
    let g = Gateway::start();
    let text = g.metrics();
    for (name, kind, labels) in PROTOCOL {
        assert!(text.contains(&format!("# TYPE {name} {kind}\n")), "{name} is not a {kind}: {text}");
        let (line, _) = sample(&text, name).unwrap_or_else(|| panic!("no sample of {name}: {text}"));
        for label in ["model_name"].iter().chain(labels) {
            assert!(line.contains(&format!("{label}=\"")), "{name} lacks label {label}: {line}");
        }
    }
    let (config, _) = sample(&text, "vllm:cache_config_info").unwrap();
    assert!(config.contains("block_size=\"16\""), "the simulator's 16-token blocks: {config}");
}

#[test]
fn the_host_load_follows_the_engines_reports() {
    let g = Gateway::start_with(Options {
        // The engine has other clients' work queued and a nearly full cache (0.9, kept in steps
        // of 1/2^15), and steps slowly enough for the scrape to see the request running.
        sim_args: ["--rank-background-load", "0=7", "--itl-ms", "40"].iter().map(|s| s.to_string()).collect(),
        shards: 1,
        ..Default::default()
    });
    assert_eq!(value(&g, "vllm:num_requests_running"), 0.0);
    let mut stream = start_stream(&g, 60);
    eventually(
        || {
            let text = g.metrics();
            let v = |name| sample(&text, name).map(|(_, v)| v);
            v("vllm:num_requests_running") == Some(1.0)
                && v("vllm:num_requests_waiting") == Some(7.0)
                && v("vllm:kv_cache_usage_perc").is_some_and(|kv| kv > 0.85)
        },
        "one running, the engine's 7 waiting and its KV usage while the stream runs",
    );
    let events = rest_of_stream(&mut stream);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    eventually(
        || value(&g, "vllm:num_requests_running") == 0.0 && value(&g, "vllm:num_requests_waiting") == 0.0,
        "nothing running or waiting once the stream ended",
    );
}
