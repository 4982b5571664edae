//! `shardgate bench`: a load generator for any OpenAI-compatible endpoint that measures
//! latency honestly and is never the bottleneck itself.
//!
//! Layout, in the order a run uses it:
//! - `args` flags and their validation, `sampling` vLLM's sampling flags, `vllm_flags` the
//!   `vllm bench serve` flags ignored or refused by name; `schedule` open-loop arrival times,
//!   precomputed;
//! - `tokenizer` + `workload` prompts of exact token lengths and the bytes of every request,
//!   prepared before the clock starts;
//! - `runner` one pinned monoio runtime per client core, pacer and concurrency cap;
//!   `client` pooled keep-alive connections and one request's exchange (`http2` the same as
//!   streams of a few HTTP/2 connections, `--http2`); `http` response
//!   framing, `pacer` the open loop's timerfd clock, `sse` event framing and `chunk` what each
//!   API's stream events mean (no I/O, tested at every split point); `record` what was
//!   observed, raw; `progress` the live line;
//! - `metrics`, `window`, `stats` and `analysis` derive every number after the run;
//!   `report`, `plot` and `output` state them; `compare` puts two results side by side;
//!   `sink` is an instant endpoint for measuring load generators themselves;
//! - `error` what ends a command, one type per stage, each printing the text it always has.
//!
//! Architecture invariant: nothing is computed on a client core during the run but framing
//! and timestamps; everything else happens before the origin or after the last response.

mod analysis;
mod args;
mod chunk;
mod client;
mod compare;
mod error;
mod http;
mod http2;
mod limits;
#[cfg(test)]
mod loopback;
mod metrics;
mod output;
mod pacer;
mod plot;
mod progress;
mod record;
mod report;
mod runner;
mod sampling;
mod schedule;
mod sink;
mod sse;
mod stats;
mod tokenizer;
mod vllm_flags;
mod window;
mod workload;

use std::sync::Arc;
use std::time::Duration;

pub use args::{BenchArgs, CompareArgs};
pub use error::{
    BenchError, FlagError, HttpError, ListingFailure, ResultFileError, RunError, ServerError, SinkError, WorkloadError,
};
pub use sink::SinkArgs;

use analysis::RunFacts;
use args::BenchConfig;
use progress::Progress;
use report::Header;
use runner::{PreparedRequest, RunOutput, RunSpec};
use schedule::Arrivals;
use tokenizer::BenchTokenizer;
use window::SteadyBasis;
use workload::Prompt;

/// `shardgate bench [FLAGS]` runs a benchmark; `shardgate bench compare A.json B.json`
/// compares two results; `shardgate bench sink` serves an instant endpoint.
#[derive(clap::Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BenchCommand {
    #[command(subcommand)]
    pub action: Option<BenchAction>,
    #[command(flatten)]
    pub args: BenchArgs,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchAction {
    /// Print two result JSON files side by side with ratios (B / A).
    Compare(CompareArgs),
    /// Serve an endpoint that answers every request at once, to measure a load generator.
    Sink(SinkArgs),
}

/// The `shardgate bench` entry: a run, or `compare`.
pub fn dispatch(cmd: &BenchCommand) -> Result<(), BenchError> {
    match &cmd.action {
        Some(BenchAction::Compare(c)) => Ok(compare(c)?),
        Some(BenchAction::Sink(s)) => Ok(sink::run(s)?),
        None => run(&cmd.args),
    }
}

pub fn compare(args: &CompareArgs) -> Result<(), ResultFileError> {
    compare::compare(args)
}

/// Runs one benchmark: prepare, load, analyze, report.
pub fn run(args: &BenchArgs) -> Result<(), BenchError> {
    let args = &args.vllm_resolved();
    let config = BenchConfig::from_args(args)?;
    if let Some(warning) = &config.ignored_flags_warning {
        eprintln!("shardgate bench: warning: {warning}");
    }
    if args.ready_check_timeout_sec > 0 {
        client::wait_ready(config.addr, &config.authority, Duration::from_secs(args.ready_check_timeout_sec))?;
    }
    let served = client::served_model(config.addr, &config.authority, args.model.as_deref())?;
    let model = served.id;
    let tok = BenchTokenizer::load(args.tokenizer.as_deref(), Some(&model))?;
    eprintln!(
        "shardgate bench: {} http://{}{} model {model}, tokenizer {}",
        args.backend.name(),
        config.authority,
        config.path,
        tok.id
    );
    let prompts = workload::build_prompts(args, &tok)?;
    let out = load(args, &config, args.served_model_name.as_deref().unwrap_or(&model), &prompts)?;
    let steady_basis = match (config.arrivals.rate_per_s(), config.concurrency_max) {
        (Some(_), _) => Some(SteadyBasis::Schedule),
        (None, Some(cap)) => Some(SteadyBasis::Concurrency { cap, threshold: args.steady_state_threshold }),
        (None, None) => None,
    };
    let facts = RunFacts {
        prompts: &prompts,
        percentiles: &config.percentiles,
        slos: &config.slos,
        ignore_eos: args.ignore_eos,
        offered_rate_per_s: config.arrivals.rate_per_s(),
        concurrency_max: config.concurrency_max,
        steady_basis,
    };
    let mut analysis = analysis::analyze(&out.records, &facts, &tok);
    if out.warmup_failed > 0 {
        analysis.warnings.push(format!("{} of {} warm-up requests failed", out.warmup_failed, args.num_warmups));
    }
    let header = Header {
        date: report::date_stamp(out.origin_unix_s),
        backend: args.backend.name(),
        label: args.label.as_deref(),
        model_id: &model,
        max_model_len: served.max_model_len,
        tokenizer_id: &tok.id,
        request_rate: config.arrivals.rate_per_s(),
        burstiness: config.arrivals.burstiness(),
        max_concurrency: config.concurrency_max,
        metadata: &config.metadata,
        percentile_metrics: config.percentile_metrics.as_deref(),
        client_cores: config.client_cpus.len(),
        http2_connections: config.http2_connections,
        client_cpu_s: out.client_cpu_s,
        origin_unix_s: out.origin_unix_s,
        warmup_count: args.num_warmups,
    };
    print!("{}", report::summary_text(&header, &analysis));
    if !args.no_save {
        for path in output::write_all(args, &config.result_dir, &header, &analysis, &out.records, &prompts)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// The request bytes of every prompt, the plan, and the run itself.
fn load(args: &BenchArgs, config: &BenchConfig, model: &str, prompts: &[Prompt]) -> Result<RunOutput, RunError> {
    let requests: Vec<PreparedRequest> = prompts
        .iter()
        .map(|p| {
            let body = workload::request_body(args, config, model, p);
            let bytes = workload::request_bytes(config, &body, args.new_connection_per_request);
            PreparedRequest { bytes, output_tokens: p.output_tokens }
        })
        .collect();
    let (schedule, request_count) = plan_requests(args, config);
    let planned = schedule.as_ref().map(Vec::len).or(request_count);
    runner::run(RunSpec {
        cpus: config.client_cpus.clone(),
        requests: Arc::new(requests),
        dialect: args.backend.dialect(),
        schedule,
        request_count,
        duration: config.duration,
        concurrency_max: config.concurrency_max,
        warmup_count: args.num_warmups,
        addr: config.addr,
        reuse_connections: !args.new_connection_per_request,
        http2_connections: config.http2_connections,
        request_timeout: config.request_timeout,
        progress: Arc::new(Progress::new(planned.map(|n| n as u64))),
        show_progress: !args.disable_progress,
    })
}

/// (open-loop schedule, unpaced request count); both None: unpaced until --duration.
fn plan_requests(args: &BenchArgs, config: &BenchConfig) -> (Option<Vec<u64>>, Option<usize>) {
    // A seed of its own: the schedule must not mirror the prompt lengths drawn from `seed`.
    let schedule_seed = args.seed ^ 0x5eed_5c4e_d01e;
    match (config.arrivals, config.duration) {
        (Arrivals::Unpaced, Some(_)) => (None, None),
        (Arrivals::Unpaced, None) => (None, Some(args.num_prompts)),
        (arrivals, duration) => {
            let count = duration.and_then(|d| arrivals.count_for_duration(d.as_secs_f64())).unwrap_or(args.num_prompts);
            (arrivals.offsets_ns(count, schedule_seed), None)
        }
    }
}
