//! The Prometheus text format (version 0.0.4): every shard's counters summed, worker gauges
//! from the registry.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use super::histogram::{HistogramSnapshot, BUCKETS_S};
use super::{Pipeline, ShardMetrics, ENDPOINTS, ERROR_TYPES, MODES, STATUSES};
use crate::shard::Shared;
use crate::workers::WorkerStatus;

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value with `\`, `"` and newlines escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn sum<F: Fn(&ShardMetrics) -> u64>(shards: &[&ShardMetrics], f: F) -> u64 {
    shards.iter().map(|m| f(m)).sum()
}

fn histogram(out: &mut String, name: &str, labels: &str, h: &HistogramSnapshot) {
    let mut cumulative = 0;
    for (i, bound) in BUCKETS_S.iter().enumerate() {
        cumulative += h.buckets.get(i).copied().unwrap_or(0);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum_s);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
}

pub fn render(shared: &Shared) -> String {
    let shards: Vec<&ShardMetrics> = shared.metrics.iter().map(|m| &**m).collect();
    let model = label(&shared.config.served_model_name);
    let mut out = String::with_capacity(16 * 1024);
    router_metrics(&mut out, &shards, &model);
    http_metrics(&mut out, &shards);
    worker_metrics(&mut out, &shards, shared, &model);
    tokenizer_cache_metrics(&mut out, &shards);
    mcp_metrics(&mut out, &shards);
    admission_metrics(&mut out, &shared.admission);
    let load = super::scheduler::HostLoad::of_workers(&shared.registry.snapshot(), shared.admission.queued() as u64);
    let now_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    super::scheduler::render(&mut out, &model, &load, now_s);
    header(&mut out, "shardgate_shards", "gauge", "Shards (pinned runtimes) serving requests.");
    let _ = writeln!(out, "shardgate_shards {}", shared.shards);
    out
}

fn router_metrics(out: &mut String, shards: &[&ShardMetrics], model: &str) {
    let base = |mode: &str, endpoint: &str| {
        format!("router_type=\"{mode}\",connection_mode=\"{mode}\",model=\"{model}\",endpoint=\"{endpoint}\"")
    };
    // Relayed requests carry the model the client named, which the gateway does not track.
    let relayed = |endpoint: &str| format!("router_type=\"http\",connection_mode=\"http\",endpoint=\"{endpoint}\"");
    header(out, "smg_router_requests_total", "counter", "Requests processed by the router.");
    for (e, name) in ENDPOINTS {
        for streaming in [false, true] {
            for (mode, mname) in MODES {
                let n = sum(shards, |m| m.of(mode).requests[e as usize][streaming as usize].load(Ordering::Relaxed));
                let _ =
                    writeln!(out, "smg_router_requests_total{{{},streaming=\"{streaming}\"}} {n}", base(mname, name));
            }
            let n = sum(shards, |m| m.relayed[e as usize][streaming as usize].load(Ordering::Relaxed));
            let _ = writeln!(out, "smg_router_requests_total{{{},streaming=\"{streaming}\"}} {n}", relayed(name));
        }
    }
    header(out, "smg_router_request_errors_total", "counter", "Router errors by type.");
    for (e, name) in ENDPOINTS {
        for (t, tname) in ERROR_TYPES {
            for (mode, mname) in MODES {
                let n = sum(shards, |m| m.of(mode).errors[e as usize][t as usize].load(Ordering::Relaxed));
                let _ = writeln!(
                    out,
                    "smg_router_request_errors_total{{{},error_type=\"{tname}\"}} {n}",
                    base(mname, name)
                );
            }
            let n = sum(shards, |m| m.relayed_errors[e as usize][t as usize].load(Ordering::Relaxed));
            let _ = writeln!(out, "smg_router_request_errors_total{{{},error_type=\"{tname}\"}} {n}", relayed(name));
        }
    }
    header(out, "smg_router_tokens_total", "counter", "Tokens by type.");
    for (e, name) in ENDPOINTS {
        for (mode, mname) in MODES {
            let input = sum(shards, |m| m.of(mode).tokens_input[e as usize].load(Ordering::Relaxed));
            let output = sum(shards, |m| m.of(mode).tokens_output[e as usize].load(Ordering::Relaxed));
            let _ = writeln!(out, "smg_router_tokens_total{{{},token_type=\"input\"}} {input}", base(mname, name));
            let _ = writeln!(out, "smg_router_tokens_total{{{},token_type=\"output\"}} {output}", base(mname, name));
        }
    }
    type Pick = fn(&Pipeline, usize) -> HistogramSnapshot;
    let histograms: [(&str, &str, Pick); 4] = [
        ("smg_router_ttft_seconds", "Time to first token (streaming requests).", |m, e| m.ttft[e].snapshot()),
        (
            "shardgate_gateway_ttft_seconds",
            "Of the time to first token, the gateway's own part: request arrival to engine submission, plus the first output's arrival from the engine to its chunk written (streaming requests).",
            |m, e| m.gateway_ttft[e].snapshot(),
        ),
        ("smg_router_tpot_seconds", "Time per output token (streaming requests).", |m, e| m.tpot[e].snapshot()),
        ("smg_router_request_duration_seconds", "Router request duration.", |m, e| m.duration[e].snapshot()),
    ];
    for (name, help, pick) in histograms {
        header(out, name, "histogram", help);
        for (e, ename) in ENDPOINTS {
            for (mode, mname) in MODES {
                let mut total = HistogramSnapshot::default();
                for m in shards {
                    total.merge(&pick(m.of(mode), e as usize));
                }
                histogram(out, name, &base(mname, ename), &total);
            }
        }
    }
}

fn http_metrics(out: &mut String, shards: &[&ShardMetrics]) {
    header(out, "smg_http_responses_total", "counter", "HTTP responses by status code.");
    for (i, status) in STATUSES.iter().enumerate() {
        let n = sum(shards, |m| m.responses[i].load(Ordering::Relaxed));
        let _ = writeln!(out, "smg_http_responses_total{{status_code=\"{status}\"}} {n}");
    }
    let other = sum(shards, |m| m.responses[STATUSES.len()].load(Ordering::Relaxed));
    let _ = writeln!(out, "smg_http_responses_total{{status_code=\"other\"}} {other}");
    header(out, "smg_http_requests_total", "counter", "HTTP requests received.");
    let _ = writeln!(out, "smg_http_requests_total {}", sum(shards, |m| m.http_requests.load(Ordering::Relaxed)));
    header(out, "smg_http_connections_active", "gauge", "Open HTTP connections.");
    let active: i64 = shards.iter().map(|m| m.connections_active.load(Ordering::Relaxed)).sum();
    let _ = writeln!(out, "smg_http_connections_active {}", active.max(0));
    header(out, "shardgate_http_connections_total", "counter", "HTTP connections accepted.");
    let _ = writeln!(
        out,
        "shardgate_http_connections_total {}",
        sum(shards, |m| m.connections_total.load(Ordering::Relaxed))
    );
    header(
        out,
        "shardgate_http_connections_refused_total",
        "counter",
        "HTTP connections closed at accept: the shard was at its connection cap.",
    );
    let _ = writeln!(
        out,
        "shardgate_http_connections_refused_total {}",
        sum(shards, |m| m.connections_refused.load(Ordering::Relaxed))
    );
    header(out, "shardgate_shard_connections_active", "gauge", "Open HTTP connections per shard.");
    for (i, m) in shards.iter().enumerate() {
        let _ = writeln!(
            out,
            "shardgate_shard_connections_active{{shard=\"{i}\"}} {}",
            m.connections_active.load(Ordering::Relaxed).max(0)
        );
    }
}

fn worker_metrics(out: &mut String, shards: &[&ShardMetrics], shared: &Shared, model: &str) {
    header(
        out,
        "smg_worker_retries_total",
        "counter",
        "Requests sent once more to another worker after theirs failed before any output.",
    );
    for (e, name) in ENDPOINTS {
        for (mode, mname) in MODES {
            let n = sum(shards, |m| m.of(mode).retries[e as usize].load(Ordering::Relaxed));
            let _ = writeln!(
                out,
                "smg_worker_retries_total{{worker_type=\"regular\",connection_mode=\"{mname}\",endpoint=\"{name}\"}} {n}"
            );
        }
        let n = sum(shards, |m| m.relayed_retries[e as usize].load(Ordering::Relaxed));
        let _ = writeln!(
            out,
            "smg_worker_retries_total{{worker_type=\"regular\",connection_mode=\"http\",endpoint=\"{name}\"}} {n}"
        );
    }
    let workers = shared.registry.snapshot();
    header(out, "smg_worker_pool_size", "gauge", "Workers registered.");
    for mode in ["zmq", "grpc", "http"] {
        let n = workers.iter().filter(|w| w.connection_mode() == mode).count();
        let _ = writeln!(
            out,
            "smg_worker_pool_size{{worker_type=\"regular\",connection_mode=\"{mode}\",model=\"{model}\"}} {n}"
        );
    }
    let labels = |w: &crate::workers::Worker| {
        format!(
            "worker=\"{}\",connection_mode=\"{}\",runtime_type=\"{}\"",
            label(w.url()),
            w.connection_mode(),
            w.runtime_type()
        )
    };
    header(out, "smg_worker_health", "gauge", "1 when the worker takes requests.");
    for w in workers.iter() {
        let _ = writeln!(out, "smg_worker_health{{{}}} {}", labels(w), u8::from(w.is_routable()));
    }
    header(out, "smg_worker_status", "gauge", "Worker lifecycle state (1 for the current one).");
    for w in workers.iter() {
        for s in [WorkerStatus::Pending, WorkerStatus::Ready, WorkerStatus::Dead, WorkerStatus::Draining] {
            let _ = writeln!(
                out,
                "smg_worker_status{{{},status=\"{}\"}} {}",
                labels(w),
                s.as_str(),
                u8::from(w.status() == s)
            );
        }
    }
    header(out, "smg_worker_requests_active", "gauge", "Requests in flight per worker.");
    for w in workers.iter() {
        let _ =
            writeln!(out, "smg_worker_requests_active{{{}}} {}", labels(w), w.in_flight.load(Ordering::Relaxed).max(0));
    }
    header(out, "shardgate_worker_engines", "gauge", "Data-parallel engines (ranks) behind each worker.");
    for w in workers.iter() {
        let _ = writeln!(out, "shardgate_worker_engines{{{}}} {}", labels(w), w.config.engine_count);
    }
    rank_metrics(out, &workers, &labels);
}

/// Each engine rank's load as the routing table sees it.
fn rank_metrics(
    out: &mut String,
    workers: &[std::sync::Arc<crate::workers::Worker>],
    labels: &dyn Fn(&crate::workers::Worker) -> String,
) {
    type Pick = fn(&crate::routing::RankLoad) -> f64;
    let series: [(&str, &str, &str, Pick); 5] = [
        (
            "shardgate_worker_rank_requests_total",
            "counter",
            "Requests the gateway has dispatched to an engine rank.",
            |l| l.requests_total as f64,
        ),
        ("shardgate_worker_rank_in_flight", "gauge", "Requests the gateway has in flight on an engine rank.", |l| {
            l.in_flight as f64
        }),
        ("shardgate_worker_rank_running", "gauge", "Running requests the engine rank last reported.", |l| {
            f64::from(l.running)
        }),
        ("shardgate_worker_rank_waiting", "gauge", "Waiting requests the engine rank last reported.", |l| {
            f64::from(l.waiting)
        }),
        ("shardgate_worker_rank_kv_cache_usage", "gauge", "KV-cache usage (0-1) the engine rank last reported.", |l| {
            l.kv_cache_usage
        }),
    ];
    let tables: Vec<_> = workers.iter().filter_map(|w| w.ranks().map(|t| (w, t))).collect();
    for (name, kind, help, pick) in series {
        header(out, name, kind, help);
        for (w, table) in &tables {
            for (rank, load) in table.snapshots().enumerate() {
                let _ = writeln!(out, "{name}{{{},rank=\"{rank}\"}} {}", labels(w), pick(&load));
            }
        }
    }
}

fn admission_metrics(out: &mut String, a: &crate::pipeline::admission::Admission) {
    header(out, "shardgate_admission_running", "gauge", "Generation requests holding an admission slot.");
    let _ = writeln!(out, "shardgate_admission_running {}", a.running());
    header(out, "shardgate_admission_queued", "gauge", "Generation requests waiting for an admission slot.");
    let _ = writeln!(out, "shardgate_admission_queued {}", a.queued());
    header(out, "shardgate_admission_rejected_total", "counter", "Requests refused by admission control.");
    let full = a.rejected_full.load(Ordering::Relaxed);
    let timeout = a.rejected_timeout.load(Ordering::Relaxed);
    let _ = writeln!(out, "shardgate_admission_rejected_total{{reason=\"queue_full\"}} {full}");
    let _ = writeln!(out, "shardgate_admission_rejected_total{{reason=\"queue_timeout\"}} {timeout}");
}

fn mcp_metrics(out: &mut String, shards: &[&ShardMetrics]) {
    let (calls, iterations) = super::mcp::McpMetrics::sum(shards.iter().map(|m| &m.mcp));
    header(out, "smg_mcp_tool_calls_total", "counter", "MCP tool invocations.");
    for ((model, tool, result), n) in calls {
        let (model, tool) = (label(&model), label(&tool));
        let _ =
            writeln!(out, "smg_mcp_tool_calls_total{{model=\"{model}\",tool_name=\"{tool}\",result=\"{result}\"}} {n}");
    }
    header(out, "smg_mcp_tool_iterations_total", "counter", "Responses API tool-loop iterations.");
    let _ = writeln!(out, "smg_mcp_tool_iterations_total {iterations}");
}

fn tokenizer_cache_metrics(out: &mut String, shards: &[&ShardMetrics]) {
    header(out, "shardgate_tokenizer_cache_hits_total", "counter", "Tokenizer cache hits by level.");
    let _ = writeln!(
        out,
        "shardgate_tokenizer_cache_hits_total{{level=\"l0\"}} {}",
        sum(shards, |m| m.tokenizer_cache_l0_hits.load(Ordering::Relaxed))
    );
    let _ = writeln!(
        out,
        "shardgate_tokenizer_cache_hits_total{{level=\"l1\"}} {}",
        sum(shards, |m| m.tokenizer_cache_l1_hits.load(Ordering::Relaxed))
    );
    header(out, "shardgate_tokenizer_cache_misses_total", "counter", "Tokenizer cache misses by level.");
    let _ = writeln!(
        out,
        "shardgate_tokenizer_cache_misses_total{{level=\"l0\"}} {}",
        sum(shards, |m| m.tokenizer_cache_l0_misses.load(Ordering::Relaxed))
    );
    let _ = writeln!(
        out,
        "shardgate_tokenizer_cache_misses_total{{level=\"l1\"}} {}",
        sum(shards, |m| m.tokenizer_cache_l1_misses.load(Ordering::Relaxed))
    );
    header(out, "shardgate_tokenizer_cache_bytes", "gauge", "Bytes held by the tokenizer caches (all shards).");
    let _ = writeln!(
        out,
        "shardgate_tokenizer_cache_bytes{{level=\"l0\"}} {}",
        sum(shards, |m| m.tokenizer_cache_l0_bytes.load(Ordering::Relaxed))
    );
    let _ = writeln!(
        out,
        "shardgate_tokenizer_cache_bytes{{level=\"l1\"}} {}",
        sum(shards, |m| m.tokenizer_cache_l1_bytes.load(Ordering::Relaxed))
    );
    header(out, "shardgate_tokenizer_cache_entries", "gauge", "Entries in the tokenizer caches (all shards).");
    let _ = writeln!(
        out,
        "shardgate_tokenizer_cache_entries{{level=\"l0\"}} {}",
        sum(shards, |m| m.tokenizer_cache_l0_entries.load(Ordering::Relaxed))
    );
    let _ = writeln!(
        out,
        "shardgate_tokenizer_cache_entries{{level=\"l1\"}} {}",
        sum(shards, |m| m.tokenizer_cache_l1_entries.load(Ordering::Relaxed))
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Endpoint, ErrorType, Mode};

    /// Each generation is counted under the mode its worker was reached by, as both
    /// `router_type` and `connection_mode`.
    #[test]
    fn router_series_are_labelled_by_connection_mode() {
        let m = ShardMetrics::default();
        m.of(Mode::Grpc).request(Endpoint::Chat, true);
        m.of(Mode::Grpc).request(Endpoint::Chat, true);
        m.of(Mode::Zmq).request(Endpoint::Chat, true);
        m.of(Mode::Grpc).error(Endpoint::Responses, ErrorType::BackendError);
        m.of(Mode::Grpc).tokens(Endpoint::Chat, 7, 3);
        m.of(Mode::Grpc).ttft[Endpoint::Chat as usize].observe(0.01);
        m.relayed(Endpoint::Chat, true);
        let mut out = String::new();
        router_metrics(&mut out, &[&m], "m");
        let has = |line: &str| out.lines().any(|l| l == line);
        let lines = [
            r#"smg_router_requests_total{router_type="grpc",connection_mode="grpc",model="m",endpoint="chat",streaming="true"} 2"#,
            r#"smg_router_requests_total{router_type="zmq",connection_mode="zmq",model="m",endpoint="chat",streaming="true"} 1"#,
            r#"smg_router_requests_total{router_type="http",connection_mode="http",endpoint="chat",streaming="true"} 1"#,
            r#"smg_router_request_errors_total{router_type="grpc",connection_mode="grpc",model="m",endpoint="responses",error_type="backend_error"} 1"#,
            r#"smg_router_request_errors_total{router_type="zmq",connection_mode="zmq",model="m",endpoint="responses",error_type="backend_error"} 0"#,
            r#"smg_router_tokens_total{router_type="grpc",connection_mode="grpc",model="m",endpoint="chat",token_type="input"} 7"#,
            r#"smg_router_ttft_seconds_count{router_type="grpc",connection_mode="grpc",model="m",endpoint="chat"} 1"#,
            r#"smg_router_ttft_seconds_count{router_type="zmq",connection_mode="zmq",model="m",endpoint="chat"} 0"#,
        ];
        for line in lines {
            assert!(has(line), "missing {line}\n{out}");
        }
    }
}
