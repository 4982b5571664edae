//! The metrics a scheduler in front of several hosts reads from a model server, under vLLM's
//! names (the Gateway API Inference Extension's model-server protocol; llm-d's endpoint picker,
//! Envoy's and Dynamo's vLLM scrapers read the same). To such a scheduler this whole gateway is
//! one model server: each series is this host's total for the served model, labelled
//! `model_name` as vLLM labels it, so a scraper configured for a vLLM pod reads a shardgate
//! host unchanged.
//!
//! The counts come from the rank load tables the engines' scheduler reports fill. Between
//! reports (and from an engine that sends none) a request the gateway has in flight on a rank
//! and the engine does not report waiting counts as running, and a request waiting for an
//! admission slot counts as waiting: both are load this host has taken and not yet served.

use std::fmt::Write;
use std::sync::Arc;

use crate::routing::RankLoad;
use crate::workers::Worker;

/// This host's load for the served model, all routable workers and ranks together.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct HostLoad {
    pub running: u64,
    pub waiting: u64,
    /// Mean KV-cache usage (0-1) of the ranks; 0 with no ranks.
    pub kv_cache_usage: f64,
    pub block_size: u32,
    pub gpu_blocks: u64,
}

impl HostLoad {
    /// Sums the ranks' loads; `admission_queued` requests wait before any rank has them.
    pub fn of(ranks: impl Iterator<Item = RankLoad>, admission_queued: u64) -> Self {
        let mut load = HostLoad { waiting: admission_queued, ..HostLoad::default() };
        let (mut kv_sum, mut rank_count) = (0.0, 0u32);
        for r in ranks {
            let reported = u64::from(r.running) + u64::from(r.waiting);
            load.running += u64::from(r.running) + r.in_flight.saturating_sub(reported);
            load.waiting += u64::from(r.waiting);
            kv_sum += r.kv_cache_usage;
            rank_count += 1;
        }
        if rank_count > 0 {
            load.kv_cache_usage = kv_sum / f64::from(rank_count);
        }
        load
    }

    /// The load of the routable `workers` (a dead or draining worker takes no new requests, so
    /// a scheduler must not count its capacity).
    pub fn of_workers(workers: &[Arc<Worker>], admission_queued: u64) -> Self {
        let routable: Vec<_> = workers.iter().filter(|w| w.is_routable()).collect();
        let tables: Vec<_> = routable.iter().filter_map(|w| w.ranks()).collect();
        let mut load = HostLoad::of(tables.iter().flat_map(|t| t.snapshots()), admission_queued);
        for shape in routable.iter().filter_map(|w| w.kv_cache()) {
            load.block_size = if load.block_size == 0 { shape.block_size } else { load.block_size };
            load.gpu_blocks += shape.gpu_blocks;
        }
        load
    }
}

fn gauge(out: &mut String, name: &str, help: &str, labels: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
    let _ = writeln!(out, "{name}{{{labels}}} {value}");
}

/// Writes the vLLM-named series; `model` is the escaped served model name, `now_s` the
/// scrape's Unix time (the LoRA info gauge's value, by which a scheduler finds the latest).
pub fn render(out: &mut String, model: &str, load: &HostLoad, now_s: f64) {
    let m = format!("model_name=\"{model}\"");
    gauge(out, "vllm:num_requests_running", "Requests running on this host's engines.", &m, load.running);
    gauge(
        out,
        "vllm:num_requests_waiting",
        "Requests waiting on this host (engine queues and admission).",
        &m,
        load.waiting,
    );
    gauge(
        out,
        "vllm:kv_cache_usage_perc",
        "KV-cache usage of this host's engines, mean over ranks (1 means 100 percent).",
        &m,
        load.kv_cache_usage,
    );
    if load.gpu_blocks > 0 {
        let labels = format!("{m},block_size=\"{}\",num_gpu_blocks=\"{}\"", load.block_size, load.gpu_blocks);
        gauge(out, "vllm:cache_config_info", "The KV cache of this host's engines (all ranks).", &labels, 1);
    }
    // No LoRA adapters are served: the info gauge says so, so that a LoRA-affinity scorer
    // reads "none loaded, none waiting" rather than a missing server.
    let lora = format!("{m},max_lora=\"0\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"");
    gauge(out, "vllm:lora_requests_info", "LoRA adapters running and waiting (none are served).", &lora, now_s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(in_flight: u64, running: u32, waiting: u32, kv_cache_usage: f64) -> RankLoad {
        RankLoad { in_flight, running, waiting, kv_cache_usage, ..RankLoad::default() }
    }

    #[test]
    fn host_load_sums_ranks_and_fills_in_between_reports() {
        let cases = [
            ("no ranks", vec![], 0, (0, 0, 0.0)),
            ("reports only", vec![rank(0, 3, 2, 0.5), rank(0, 1, 0, 0.25)], 0, (4, 2, 0.375)),
            ("in flight before any report", vec![rank(5, 0, 0, 0.0)], 0, (5, 0, 0.0)),
            ("in flight beyond the report", vec![rank(6, 2, 1, 0.8)], 0, (5, 1, 0.8)),
            ("admission queue waits", vec![rank(1, 1, 0, 0.1)], 4, (1, 4, 0.1)),
        ];
        for (what, ranks, queued, (running, waiting, kv)) in cases {
            let load = HostLoad::of(ranks.into_iter(), queued);
            assert_eq!((load.running, load.waiting), (running, waiting), "{what}");
            assert!((load.kv_cache_usage - kv).abs() < 1e-9, "{what}: {}", load.kv_cache_usage);
        }
    }
}
