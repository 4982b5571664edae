//! Prometheus metrics. Each shard owns one `ShardMetrics` and is its only writer (relaxed
//! atomics on cache lines no other shard writes, so recording costs a plain add); a scrape
//! reads every shard's set and sums (monoio's "aggregate within each thread, combine at the
//! end"). Worker and rank gauges are read from the shared registry at scrape time.
//! Names follow SMG's metrics reference (`smg_*`) so existing dashboards work; the router
//! series carry the connection mode the request went over (`zmq`, `grpc`, `http`) as
//! `connection_mode` and `router_type`, and worker gauges carry it with `runtime_type`. The host's load is also exposed under
//! vLLM's names for schedulers that pick among hosts ([`scheduler`]).

pub mod exposition;
pub mod histogram;
pub mod mcp;
pub mod scheduler;
pub mod server;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

pub use histogram::Histogram;

/// The API endpoints counted separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Chat = 0,
    Completions = 1,
    Messages = 2,
    Responses = 3,
}

/// Every endpoint and its `endpoint` label.
pub const ENDPOINTS: [(Endpoint, &str); N_ENDPOINTS] = [
    (Endpoint::Chat, "chat"),
    (Endpoint::Completions, "completions"),
    (Endpoint::Messages, "messages"),
    (Endpoint::Responses, "responses"),
];
const N_ENDPOINTS: usize = 4;

impl Endpoint {
    /// The endpoint's requests, in log lines.
    pub fn label(self) -> &'static str {
        match self {
            Endpoint::Chat => "chat completion",
            Endpoint::Completions => "completion",
            Endpoint::Messages => "message",
            Endpoint::Responses => "response",
        }
    }
}

/// Why a request failed, as `error_type` (SMG's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    NoWorkers = 0,
    Timeout = 1,
    BackendError = 2,
    ValidationError = 3,
    InternalError = 4,
    /// Refused by admission control (queue full, or no slot in time).
    Overloaded = 5,
}

impl ErrorType {
    /// The error type of a request refused before dispatch.
    pub fn of(e: &crate::error::ApiError) -> Self {
        match e.status {
            429 => ErrorType::Overloaded,
            503 if e.code == Some("overloaded") => ErrorType::Overloaded,
            503 => ErrorType::NoWorkers,
            408 | 504 => ErrorType::Timeout,
            s if s < 500 => ErrorType::ValidationError,
            _ => ErrorType::InternalError,
        }
    }
}

pub const ERROR_TYPES: [(ErrorType, &str); 6] = [
    (ErrorType::NoWorkers, "no_workers"),
    (ErrorType::Timeout, "timeout"),
    (ErrorType::BackendError, "backend_error"),
    (ErrorType::ValidationError, "validation_error"),
    (ErrorType::InternalError, "internal_error"),
    (ErrorType::Overloaded, "overloaded"),
];

/// HTTP statuses the gateway answers with, for `smg_http_responses_total`.
pub const STATUSES: [u16; 17] = [200, 202, 204, 400, 401, 403, 404, 405, 408, 413, 422, 429, 431, 500, 501, 502, 503];

fn add(c: &AtomicU64, v: u64) {
    // Single writer per shard: a load and a store would do, but fetch_add is as cheap uncontended.
    c.fetch_add(v, Ordering::Relaxed);
}

/// How the gateway reached the engine of a generation it ran itself: `connection_mode` (and
/// `router_type`: SMG labels its pipeline over gRPC workers `router_type="grpc"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Zmq = 0,
    Grpc = 1,
}

pub const MODES: [(Mode, &str); 2] = [(Mode::Zmq, "zmq"), (Mode::Grpc, "grpc")];

/// The counters of the generations the gateway runs itself, for one connection mode.
#[derive(Default)]
pub struct Pipeline {
    /// [endpoint][streaming]
    pub requests: [[AtomicU64; 2]; N_ENDPOINTS],
    /// [endpoint][error type]
    pub errors: [[AtomicU64; 6]; N_ENDPOINTS],
    /// [endpoint] input / output tokens
    pub tokens_input: [AtomicU64; N_ENDPOINTS],
    pub tokens_output: [AtomicU64; N_ENDPOINTS],
    /// [endpoint], streaming requests only
    pub ttft: [Histogram; N_ENDPOINTS],
    /// Of `ttft`, the gateway's own part (arrival to submission, first output to first chunk).
    pub gateway_ttft: [Histogram; N_ENDPOINTS],
    pub tpot: [Histogram; N_ENDPOINTS],
    pub duration: [Histogram; N_ENDPOINTS],
    /// [endpoint] generations sent once more after their engine failed before any output.
    pub retries: [AtomicU64; N_ENDPOINTS],
}

impl Pipeline {
    pub fn request(&self, e: Endpoint, streaming: bool) {
        add(&self.requests[e as usize][streaming as usize], 1);
    }

    pub fn error(&self, e: Endpoint, t: ErrorType) {
        add(&self.errors[e as usize][t as usize], 1);
    }

    pub fn retry(&self, e: Endpoint) {
        add(&self.retries[e as usize], 1);
    }

    pub fn tokens(&self, e: Endpoint, input: u64, output: u64) {
        add(&self.tokens_input[e as usize], input);
        add(&self.tokens_output[e as usize], output);
    }
}

/// One shard's counters. Written only by its shard.
#[derive(Default)]
pub struct ShardMetrics {
    /// [mode]: generations over ZMQ and over gRPC workers.
    pub pipeline: [Pipeline; 2],
    /// The same three for requests relayed to HTTP workers (`connection_mode="http"`).
    pub relayed: [[AtomicU64; 2]; N_ENDPOINTS],
    pub relayed_errors: [[AtomicU64; 6]; N_ENDPOINTS],
    pub relayed_retries: [AtomicU64; N_ENDPOINTS],
    /// Responses by status (index in `STATUSES`; last slot: anything else).
    pub responses: [AtomicU64; STATUSES.len() + 1],
    pub http_requests: AtomicU64,
    pub connections_active: AtomicI64,
    pub connections_total: AtomicU64,
    pub connections_refused: AtomicU64,
    pub tokenizer_cache_l0_hits: AtomicU64,
    pub tokenizer_cache_l0_misses: AtomicU64,
    pub tokenizer_cache_l1_hits: AtomicU64,
    pub tokenizer_cache_l1_misses: AtomicU64,
    /// Gauges, last value published by the shard.
    pub tokenizer_cache_l0_bytes: AtomicU64,
    pub tokenizer_cache_l1_bytes: AtomicU64,
    pub tokenizer_cache_l0_entries: AtomicU64,
    pub tokenizer_cache_l1_entries: AtomicU64,
    pub mcp: mcp::McpMetrics,
}

impl ShardMetrics {
    /// The counters of one connection mode's generations.
    pub fn of(&self, mode: Mode) -> &Pipeline {
        &self.pipeline[mode as usize]
    }

    /// A request relayed to an HTTP worker.
    pub fn relayed(&self, e: Endpoint, streaming: bool) {
        add(&self.relayed[e as usize][streaming as usize], 1);
    }

    pub fn relayed_error(&self, e: Endpoint, t: ErrorType) {
        add(&self.relayed_errors[e as usize][t as usize], 1);
    }

    pub fn relayed_retry(&self, e: Endpoint) {
        add(&self.relayed_retries[e as usize], 1);
    }

    pub fn response(&self, status: u16) {
        let i = STATUSES.iter().position(|&s| s == status).unwrap_or(STATUSES.len());
        add(&self.responses[i], 1);
        add(&self.http_requests, 1);
    }

    pub fn connection_opened(&self) {
        self.connections_active.fetch_add(1, Ordering::Relaxed);
        add(&self.connections_total, 1);
    }

    pub fn connection_refused(&self) {
        add(&self.connections_refused, 1);
    }

    pub fn connection_closed(&self) {
        self.connections_active.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn tokenizer_cache(&self, s: &shardgate_text::tokenizer::cache::CacheStats) {
        self.tokenizer_cache_l0_hits.store(s.l0_hits, Ordering::Relaxed);
        self.tokenizer_cache_l0_misses.store(s.l0_misses, Ordering::Relaxed);
        self.tokenizer_cache_l1_hits.store(s.l1_hits, Ordering::Relaxed);
        self.tokenizer_cache_l1_misses.store(s.l1_misses, Ordering::Relaxed);
        self.tokenizer_cache_l0_bytes.store(s.l0_bytes as u64, Ordering::Relaxed);
        self.tokenizer_cache_l1_bytes.store(s.l1_bytes as u64, Ordering::Relaxed);
        self.tokenizer_cache_l0_entries.store(s.l0_entries as u64, Ordering::Relaxed);
        self.tokenizer_cache_l1_entries.store(s.l1_entries as u64, Ordering::Relaxed);
    }
}
