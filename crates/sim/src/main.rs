//! `shardgate-sim`: a headless engine that speaks the vLLM EngineCore wire, or with
//! `--backend tokenspeed` the TokenSpeed 0.1.1 wire.
//!
//! It dials the handshake address exactly as `vllm serve --headless` does (HELLO, INIT,
//! registration on every input socket, READY) or as `tokenspeed.cli serve --headless` does
//! (model load first, HELLO, INIT, READY, then registration on the first input only), then runs
//! a scheduler step loop: every `--itl-ms` one new token for every running request (vLLM: one
//! batch per client each step; TokenSpeed: one columnar batch on the one output socket, on its
//! stream cadence), at most `--max-num-seqs` requests run (the rest wait, and the load reports
//! say so), and a new request gets its first token `--ttft-ms` after admission. Output is
//! deterministic: scripted text (`--script`) or seeded words.

mod engine;
mod error;
mod lockstep;
mod script;
mod tokenspeed_wire;
mod vllm_mm;
mod vllm_wire;

use std::path::PathBuf;

use clap::Parser;

use error::ArgError;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "shardgate-sim",
    version,
    about = "Headless engine simulator (vLLM EngineCore or TokenSpeed wire)",
    args_override_self = true
)]
pub struct Args {
    /// The engine whose wire to speak.
    #[arg(long, value_enum, default_value = "vllm")]
    pub backend: Backend,
    /// Handshake address to dial, `tcp://HOST:PORT` (TokenSpeed's default without it and
    /// without `--worker-url`: tcp://127.0.0.1:30500).
    #[arg(long)]
    pub handshake: Option<String>,
    /// Identity base: each rank dials as `N + rank` (two little-endian bytes) and names that
    /// value as its engine index in outputs, as TokenSpeed's `--zmq-engine-index` (vLLM's
    /// `--data-parallel-start-rank`).
    #[arg(long = "zmq-engine-index", default_value_t = 0)]
    pub zmq_engine_index: u16,
    /// Seconds before the first HELLO (an engine still starting up).
    #[arg(long = "slow-start-s", default_value_t = 0)]
    pub slow_start_s: u64,
    /// Model load time: before HELLO for TokenSpeed, between INIT and registration for vLLM.
    #[arg(long = "load-ms", default_value_t = 0)]
    pub load_ms: u64,
    /// TokenSpeed: send no load snapshot (all four tail values 0), as a build without one does.
    #[arg(long = "no-load-snapshot")]
    pub no_load_snapshot: bool,
    /// Derive the handshake address from a gateway worker URL `ipc://PATH` as the gateway does,
    /// or take a `tcp://IP:PORT` worker URL's address.
    #[arg(long = "worker-url")]
    pub worker_url: Option<String>,
    /// Model directory: loads `tokenizer.json` for `--script` and readable seeded output.
    #[arg(long = "model-path")]
    pub model_path: Option<PathBuf>,
    /// JSON Lines, each `{"prompt_contains": "...", "text": "..."}`; the first line whose
    /// `prompt_contains` occurs in the decoded prompt (or that has none) answers the request.
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Time between engine steps (each step emits one token per running request).
    #[arg(long = "itl-ms", default_value_t = 20)]
    pub itl_ms: u64,
    /// A slower step for one rank, `RANK=MS` (repeatable): a straggler for routing tests.
    #[arg(long = "rank-itl-ms", value_name = "RANK=MS", value_parser = parse_rank_value)]
    pub rank_itl_ms: Vec<(u16, u64)>,
    /// Load from other clients on one rank, `RANK=N` (repeatable): its reports add N waiting
    /// requests and a nearly full KV cache, as a rank busy with someone else's work would.
    #[arg(long = "rank-background-load", value_name = "RANK=N", value_parser = parse_rank_value)]
    pub rank_background_load: Vec<(u16, u64)>,
    /// Time from admission to a request's first token.
    #[arg(long = "ttft-ms", default_value_t = 50)]
    pub ttft_ms: u64,
    /// Requests running at once; the rest wait.
    #[arg(long = "max-num-seqs", default_value_t = 256)]
    pub max_num_seqs: usize,
    /// Tokens generated before EOS when not scripted (unless `ignore_eos` or `max_tokens` ends
    /// the request first).
    #[arg(long = "output-len", default_value_t = 64)]
    pub output_len: usize,
    /// Context length reported at registration.
    #[arg(long = "max-model-len", default_value_t = 8192)]
    pub max_model_len: u32,
    /// Data-parallel engine ranks in this process, each with its own identity (its rank plus
    /// `--zmq-engine-index`, as two little-endian bytes), sockets, scheduler and load reports, as
    /// `vllm serve --headless --data-parallel-size N` (or TokenSpeed's attention DP) starts them.
    #[arg(long = "data-parallel-size", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub data_parallel_size: u16,
    /// The ranks serve a mixture-of-experts model: they step in lockstep (every step ends in a
    /// collective all ranks join), an idle rank joins only after START_DP_WAVE, and when no rank
    /// has work each one reports `wave_complete` to client 0 and pauses, as vLLM's
    /// `DPEngineCoreProc` without a coordinator.
    #[arg(long)]
    pub moe: bool,
    /// Advertise a KV-cache event publisher at this address in the registration, as a vLLM
    /// engine started with `--kv-events-config` does (rank r at the port plus r). The simulator
    /// publishes nothing itself: a test runs vLLM's own publisher there.
    #[arg(long = "kv-events-endpoint", value_name = "tcp://HOST:PORT")]
    pub kv_events_endpoint: Option<String>,
    /// With `--kv-events-endpoint`: the replay socket's address (rank r at the port plus r).
    #[arg(long = "kv-events-replay-endpoint", value_name = "tcp://HOST:PORT")]
    pub kv_events_replay_endpoint: Option<String>,
    /// Seed of the deterministic output.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Inject a fault when request number N (1-based, counting ADDs) arrives: `die` (send
    /// ENGINE_CORE_DEAD and exit), `die-silent` (exit without a word), `stall` (keep reading,
    /// stop sending outputs), `deaf` (stop reading requests), `garbage` (send undecodable
    /// batches), `error` / `error-retryable` (answer request N with an ERROR finish carrying a
    /// vLLM 0.33 `RequestError`, not retryable / retryable; the engine stays up; vLLM wire
    /// only). `KIND@N:T`
    /// fires instead once request N has been sent T tokens (a fault in the middle of a stream;
    /// not for the request errors). Repeatable.
    #[arg(long = "fault", value_name = "KIND@N[:T]", value_parser = parse_fault)]
    pub faults: Vec<Fault>,
    /// Append every received message (ADD, ABORT, UTILITY; TokenSpeed also `invalid` for a
    /// message it drops) as a JSON line to this file.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Log level (error, warn, info, debug).
    #[arg(long = "log-level", default_value = "info")]
    pub log_level: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Vllm,
    Tokenspeed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Die,
    DieSilent,
    Stall,
    Deaf,
    Garbage,
    /// Fail the request with a vLLM 0.33 `RequestError`, retryable or not; the engine stays up.
    RequestError {
        retryable: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub at_request: u64,
    /// 0: when the request arrives; T: once T of its tokens have been sent.
    pub after_tokens: u64,
}

fn parse_fault(s: &str) -> Result<Fault, ArgError> {
    let (kind, when) = s.split_once('@').ok_or_else(|| ArgError::FaultSyntax(s.to_string()))?;
    let (n, tokens) = match when.split_once(':') {
        Some((n, t)) => (n, Some(t)),
        None => (when, None),
    };
    let kind = match kind {
        "die" => FaultKind::Die,
        "die-silent" => FaultKind::DieSilent,
        "stall" => FaultKind::Stall,
        "deaf" => FaultKind::Deaf,
        "garbage" => FaultKind::Garbage,
        "error" => FaultKind::RequestError { retryable: false },
        "error-retryable" => FaultKind::RequestError { retryable: true },
        other => return Err(ArgError::UnknownFault(other.to_string())),
    };
    if tokens.is_some() && matches!(kind, FaultKind::RequestError { .. }) {
        // A request error answers the request that fires it, on its arrival.
        return Err(ArgError::FaultSyntax(s.to_string()));
    }
    let at_request = n.parse::<u64>().ok().filter(|&n| n >= 1).ok_or_else(|| ArgError::FaultRequest(s.to_string()))?;
    let after_tokens = match tokens {
        None => 0,
        Some(t) => t.parse::<u64>().ok().filter(|&t| t >= 1).ok_or_else(|| ArgError::FaultTokens(s.to_string()))?,
    };
    Ok(Fault { kind, at_request, after_tokens })
}

fn parse_rank_value(s: &str) -> Result<(u16, u64), ArgError> {
    let (rank, value) = s.split_once('=').ok_or_else(|| ArgError::RankValueSyntax(s.to_string()))?;
    let rank = rank.parse().map_err(|_| ArgError::Rank(s.to_string()))?;
    let value = value.parse().map_err(|_| ArgError::RankValue(s.to_string()))?;
    Ok((rank, value))
}

fn main() {
    let args = Args::parse();
    let filter =
        std::env::var("RUST_LOG").unwrap_or_else(|_| format!("warn,shardgate_sim={0},shardgate={0}", args.log_level));
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_target(false)
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = engine::run(args) {
        eprintln!("shardgate-sim: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_fire_on_arrival_or_after_tokens() {
        let at = |kind, at_request, after_tokens| Ok(Fault { kind, at_request, after_tokens });
        assert_eq!(parse_fault("die@1"), at(FaultKind::Die, 1, 0));
        assert_eq!(parse_fault("die-silent@2:3"), at(FaultKind::DieSilent, 2, 3));
        for bad in ["die", "die@0", "die@1:0", "die@1:x", "boom@1"] {
            assert!(parse_fault(bad).is_err(), "{bad}");
        }
    }
}
