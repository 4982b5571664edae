//! The flags of `shardgate bench` and `shardgate bench compare`, and their validation into a
//! `BenchConfig`. Flag names follow `vllm bench serve` where the two tools share a concept, so
//! a command line moves between them; everything else is named for what it measures.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::chunk::Dialect;
use super::error::FlagError;
use super::sampling::SamplingArgs;
use super::schedule::Arrivals;
use super::vllm_flags::ForeignFlags;

/// Which API the requests go to (vLLM's `--backend` names where vLLM has the API).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `POST /v1/completions` with a `prompt`.
    Openai,
    /// `POST /v1/chat/completions` with one user message.
    OpenaiChat,
    /// vLLM's other name for `openai`; kept as typed, as vLLM writes it into the result.
    Vllm,
    /// `POST /v1/messages` (Anthropic Messages) with one user message.
    AnthropicMessages,
    /// `POST /v1/responses` (OpenAI Responses) with the prompt as `input`.
    OpenaiResponses,
}

/// The `anthropic-version` header sent: the one Anthropic's SDKs sent up to 1.x (servers take
/// any).
const ANTHROPIC_VERSION: &str = "2023-06-01";

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Openai => "openai",
            Backend::OpenaiChat => "openai-chat",
            Backend::Vllm => "vllm",
            Backend::AnthropicMessages => "anthropic-messages",
            Backend::OpenaiResponses => "openai-responses",
        }
    }

    /// The format its responses stream in.
    pub fn dialect(self) -> Dialect {
        match self {
            Backend::Openai | Backend::OpenaiChat | Backend::Vllm => Dialect::OpenAi,
            Backend::AnthropicMessages => Dialect::AnthropicMessages,
            Backend::OpenaiResponses => Dialect::OpenAiResponses,
        }
    }

    /// The API's name, where it takes text only; None for completions (which take token ids).
    pub fn text_only_api(self) -> Option<&'static str> {
        match self {
            Backend::Openai | Backend::Vllm => None,
            Backend::OpenaiChat => Some("chat"),
            Backend::AnthropicMessages => Some("the Messages API"),
            Backend::OpenaiResponses => Some("the Responses API"),
        }
    }

    fn default_path(self) -> &'static str {
        match self {
            Backend::Openai | Backend::Vllm => "/v1/completions",
            Backend::OpenaiChat => "/v1/chat/completions",
            Backend::AnthropicMessages => "/v1/messages",
            Backend::OpenaiResponses => "/v1/responses",
        }
    }

    /// The API key from the environment: `OPENAI_API_KEY` (as vLLM reads it); for
    /// anthropic-messages `ANTHROPIC_API_KEY` (the Anthropic SDK's) first.
    fn api_key(self) -> Option<String> {
        let var = |name: &str| std::env::var(name).ok().filter(|k| !k.is_empty());
        let anthropic = if self == Backend::AnthropicMessages { var("ANTHROPIC_API_KEY") } else { None };
        anthropic.or_else(|| var("OPENAI_API_KEY"))
    }

    /// The headers its API needs on every request: a key as a bearer token (and for Anthropic
    /// as `x-api-key` too, the header its older SDKs send), `anthropic-version`.
    fn headers(self, key: Option<&str>) -> Vec<(String, String)> {
        let mut headers = Vec::new();
        if let Some(key) = key {
            headers.push(("Authorization".to_string(), format!("Bearer {key}")));
        }
        if self == Backend::AnthropicMessages {
            if let Some(key) = key {
                headers.push(("x-api-key".to_string(), key.to_string()));
            }
            headers.push(("anthropic-version".to_string(), ANTHROPIC_VERSION.to_string()));
        }
        headers
    }
}

/// Where the prompts come from.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatasetName {
    /// Random token ids of the tokenizer, exact input lengths.
    Random,
    /// A ShareGPT-format JSON file (`--dataset-path`): first human turn, first reply's length.
    Sharegpt,
    /// Groups of prompts sharing a common random prefix (prefix-cache tests).
    #[value(alias = "prefix_repetition")]
    Prefix,
    /// JSON Lines of `{"prompt": "...", "output_tokens": N}` (`--dataset-path`).
    #[value(alias = "custom")]
    Jsonl,
}

/// How arrival times are drawn for an open-loop rate.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrivalProcess {
    /// Exponential gaps (gamma with shape 1).
    Poisson,
    /// Gamma gaps with shape `--burstiness` (< 1 burstier, > 1 smoother).
    Gamma,
    /// Equal gaps of 1 / rate.
    Constant,
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Server base URL, `http://HOST:PORT` (overrides --host/--port).
    #[arg(long = "base-url", help_heading = "Target")]
    pub base_url: Option<String>,
    #[arg(long, default_value = "127.0.0.1", help_heading = "Target")]
    pub host: String,
    #[arg(long, default_value_t = 8000, help_heading = "Target")]
    pub port: u16,
    /// Request path (default: from --backend).
    #[arg(long, help_heading = "Target")]
    pub endpoint: Option<String>,
    #[arg(long, value_enum, default_value = "openai", help_heading = "Target")]
    pub backend: Backend,
    /// Model name sent in requests (default: the first model of `GET /v1/models`).
    #[arg(long, help_heading = "Target")]
    pub model: Option<String>,
    /// Model name put in the requests (default: --model), as vLLM's.
    #[arg(long = "served-model-name", help_heading = "Target")]
    pub served_model_name: Option<String>,
    /// `tokenizer.json` or a directory holding it (default: --model when it is a local
    /// directory, else the demo model's Qwen3 tokenizer).
    #[arg(long, help_heading = "Target")]
    pub tokenizer: Option<PathBuf>,
    /// vLLM's tokenizer mode: `auto` and `hf` (a Hugging Face tokenizer.json) are what this
    /// client reads; other modes are refused.
    #[arg(long = "tokenizer-mode", default_value = "auto", help_heading = "Target")]
    pub tokenizer_mode: String,
    /// Wait up to this long for `GET /v1/models` to answer before starting (0: no wait).
    #[arg(long = "ready-check-timeout-sec", default_value_t = 0, help_heading = "Target")]
    pub ready_check_timeout_sec: u64,
    /// Extra request header, `KEY=VALUE` (repeatable).
    #[arg(long = "header", value_name = "KEY=VALUE", num_args = 1.., help_heading = "Target")]
    pub headers: Vec<String>,
    /// JSON object merged into every request body (e.g. '{"temperature":0}'); its keys win
    /// over the sampling flags.
    #[arg(long = "extra-body", value_name = "JSON", help_heading = "Target")]
    pub extra_body: Option<String>,
    #[command(flatten)]
    pub sampling: SamplingArgs,

    #[arg(long = "dataset-name", value_enum, default_value = "random", help_heading = "Workload")]
    pub dataset_name: DatasetName,
    /// File for the sharegpt and jsonl datasets.
    #[arg(long = "dataset-path", help_heading = "Workload")]
    pub dataset_path: Option<PathBuf>,
    /// Prompts in the workload; with --duration, prompts are reused in turn.
    #[arg(long = "num-prompts", default_value_t = 1000, help_heading = "Workload")]
    pub num_prompts: usize,
    #[arg(long = "random-input-len", default_value_t = 1024, help_heading = "Workload")]
    pub random_input_len: usize,
    #[arg(long = "random-output-len", default_value_t = 128, help_heading = "Workload")]
    pub random_output_len: usize,
    /// Sets --random-input-len (vLLM's general length flag).
    #[arg(long = "input-len", help_heading = "Workload")]
    pub input_len: Option<usize>,
    /// Sets the output length of every dataset (vLLM's general length flag).
    #[arg(long = "output-len", help_heading = "Workload")]
    pub output_len: Option<usize>,
    /// Lengths are drawn uniformly from [len·(1−r), len·(1+r)] (vLLM's semantics); one number
    /// for both, or '{"input": r1, "output": r2}'.
    #[arg(long = "random-range-ratio", default_value = "0.0", value_parser = parse_range_ratio, help_heading = "Workload")]
    pub random_range_ratio: RangeRatio,
    /// Tokens of one random prefix shared by every prompt of the random dataset (vLLM's).
    #[arg(long = "random-prefix-len", default_value_t = 0, help_heading = "Workload")]
    pub random_prefix_len: usize,
    /// Shared prefix tokens of every prompt in a group (prefix dataset); the suffix is
    /// --prefix-repetition-suffix-len (default: --random-input-len) long.
    #[arg(
        long = "prefix-len",
        alias = "prefix-repetition-prefix-len",
        default_value_t = 256,
        help_heading = "Workload"
    )]
    pub prefix_len: usize,
    /// Distinct prefixes (prefix dataset); prompt i belongs to group i mod count.
    #[arg(
        long = "prefix-group-count",
        alias = "prefix-repetition-num-prefixes",
        default_value_t = 10,
        help_heading = "Workload"
    )]
    pub prefix_group_count: usize,
    /// Random suffix tokens of each prefix-dataset prompt (default: --random-input-len).
    #[arg(long = "prefix-repetition-suffix-len", help_heading = "Workload")]
    pub prefix_repetition_suffix_len: Option<usize>,
    /// Output tokens of each prefix-dataset prompt (default: --random-output-len).
    #[arg(long = "prefix-repetition-output-len", help_heading = "Workload")]
    pub prefix_repetition_output_len: Option<usize>,
    /// Output tokens for sharegpt prompts (default: the length of the recorded reply).
    #[arg(long = "sharegpt-output-len", help_heading = "Workload")]
    pub sharegpt_output_len: Option<usize>,
    /// Output tokens for custom (jsonl) prompts, over the file's `output_tokens`; -1: the
    /// file's (the default here).
    #[arg(long = "custom-output-len", allow_negative_numbers = true, help_heading = "Workload")]
    pub custom_output_len: Option<i64>,
    /// Keep the dataset file's order (sharegpt is shuffled by --seed otherwise).
    #[arg(long = "disable-shuffle", help_heading = "Workload")]
    pub disable_shuffle: bool,
    /// Do not repeat a dataset file's prompts when it has fewer than --num-prompts.
    #[arg(long = "no-oversample", help_heading = "Workload")]
    pub no_oversample: bool,
    /// Send prompts as token id arrays (completions only): exact input lengths, no server
    /// tokenization.
    #[arg(long = "prompt-token-ids", help_heading = "Workload")]
    pub prompt_token_ids: bool,
    /// Ask the server to ignore EOS so every request generates its max tokens.
    #[arg(long = "ignore-eos", help_heading = "Workload")]
    pub ignore_eos: bool,
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub seed: u64,

    /// Open-loop arrivals per second ("inf": no schedule, all at once or as the cap allows).
    #[arg(long = "request-rate", default_value_t = f64::INFINITY, help_heading = "Load")]
    pub request_rate: f64,
    /// Arrival process of an open-loop rate (default: poisson, or gamma when --burstiness ≠ 1).
    #[arg(long = "arrival-process", value_enum, help_heading = "Load")]
    pub arrival_process: Option<ArrivalProcess>,
    /// Gamma shape of the inter-arrival gaps (1 = Poisson).
    #[arg(long, default_value_t = 1.0, help_heading = "Load")]
    pub burstiness: f64,
    /// Closed-loop cap on requests in flight (with a rate: requests wait in a client queue,
    /// and the wait is reported).
    #[arg(long = "max-concurrency", help_heading = "Load")]
    pub max_concurrency: Option<usize>,
    /// Run for this many seconds instead of --num-prompts requests.
    #[arg(long, value_name = "SECONDS", help_heading = "Load")]
    pub duration: Option<f64>,
    /// Requests sent (at the same cap) before the measured run; excluded from results.
    #[arg(long = "num-warmups", default_value_t = 0, help_heading = "Load")]
    pub num_warmups: usize,
    /// CPUs for client threads, e.g. "2,3" or "2-5": one pinned runtime per CPU (default: one
    /// unpinned thread).
    #[arg(long = "client-cores", value_name = "CPUS", help_heading = "Load")]
    pub client_cores: Option<String>,
    /// Open a TCP connection per request (measures connection setup; off: pooled keep-alive).
    #[arg(long = "new-connection-per-request", help_heading = "Load")]
    pub new_connection_per_request: bool,
    /// Send every request as a stream of HTTP/2 connections (cleartext, prior knowledge: h2c)
    /// instead of HTTP/1.1 requests.
    #[arg(long, help_heading = "Load")]
    pub http2: bool,
    /// With --http2: the number of connections the streams are multiplexed over, split across
    /// the client cores (at least one each), opened before the run.
    #[arg(long, value_name = "N", help_heading = "Load")]
    pub connections: Option<usize>,
    #[arg(long = "request-timeout-s", default_value_t = 600.0, help_heading = "Load")]
    pub request_timeout_s: f64,
    /// Do not ask for `stream_options.continuous_usage_stats` (per-chunk token counts); token
    /// counts per chunk are then estimated with the tokenizer.
    #[arg(long = "no-per-chunk-usage", help_heading = "Load")]
    pub no_per_chunk_usage: bool,

    /// Percentiles reported for every latency metric.
    #[arg(long, alias = "metric-percentiles", default_value = "50,90,99", help_heading = "Metrics")]
    pub percentiles: String,
    /// Latency metrics reported, e.g. ttft,tpot,itl,e2el (default: all).
    #[arg(long = "percentile-metrics", value_name = "METRICS", help_heading = "Metrics")]
    pub percentile_metrics: Option<String>,
    /// Service-level objectives, `ttft:MS tpot:MS e2el:MS` (any subset).
    #[arg(long, num_args = 1.., value_name = "KEY:MS", help_heading = "Metrics")]
    pub goodput: Vec<String>,
    /// Closed loop: the steady-state window is where in-flight ≥ this × --max-concurrency.
    #[arg(long = "steady-state-threshold", default_value_t = 0.95, help_heading = "Metrics")]
    pub steady_state_threshold: f64,

    /// Where the files go (default: bench-results/, or the current directory with
    /// --save-result or --append-result, as vLLM).
    #[arg(long = "result-dir", help_heading = "Output")]
    pub result_dir: Option<PathBuf>,
    /// Result JSON file name (default: vLLM's `{label}-{rate}qps[-concurrency{c}]-{model}-{date}.json`).
    #[arg(long = "result-filename", help_heading = "Output")]
    pub result_filename: Option<String>,
    /// vLLM's flag to save the result (results are always saved here unless --no-save); the
    /// default --result-dir becomes the current directory, as vLLM's.
    #[arg(long = "save-result", help_heading = "Output")]
    pub save_result: bool,
    /// Append the result JSON, on one line, to the result file instead of replacing it.
    #[arg(long = "append-result", help_heading = "Output")]
    pub append_result: bool,
    /// Print the summary only; write no files.
    #[arg(long = "no-save", conflicts_with_all = ["save_result", "append_result"], help_heading = "Output")]
    pub no_save: bool,
    /// Also put vLLM's per-request arrays (ttfts, itls, ...) into the result JSON.
    #[arg(long = "save-detailed", help_heading = "Output")]
    pub save_detailed: bool,
    /// Do not write the SVG plots.
    #[arg(long = "no-plots", help_heading = "Output")]
    pub no_plots: bool,
    #[arg(long, help_heading = "Output")]
    pub label: Option<String>,
    /// `KEY=VALUE` pairs copied into the result JSON (repeatable).
    #[arg(long, num_args = 1.., value_name = "KEY=VALUE", help_heading = "Output")]
    pub metadata: Vec<String>,
    /// No live progress line.
    #[arg(long = "disable-progress", alias = "disable-tqdm", help_heading = "Output")]
    pub disable_progress: bool,
    #[command(flatten)]
    pub foreign: ForeignFlags,
}

/// `--random-range-ratio`, for input and output lengths.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RangeRatio {
    pub input: f64,
    pub output: f64,
}

/// A clap `value_parser`: clap prints the `FlagError`'s text.
fn parse_range_ratio(s: &str) -> Result<RangeRatio, FlagError> {
    let (input, output) = match s.trim().parse::<f64>() {
        Ok(r) => (r, r),
        Err(_) => {
            let v: serde_json::Value =
                serde_json::from_str(s).map_err(|_| FlagError::RangeRatioSyntax(s.to_string()))?;
            let get = |key: &'static str| {
                v.get(key).map_or(Ok(0.0), |x| {
                    x.as_f64().ok_or_else(|| FlagError::RangeRatioValue { key, value: s.to_string() })
                })
            };
            (get("input")?, get("output")?)
        }
    };
    for r in [input, output] {
        if !(0.0..1.0).contains(&r) {
            return Err(FlagError::RangeRatioBounds(r));
        }
    }
    Ok(RangeRatio { input, output })
}

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Baseline result JSON (ours or `vllm bench serve`'s).
    pub a: PathBuf,
    /// Result JSON compared against the baseline (ratio = B / A).
    pub b: PathBuf,
    /// Show only keys containing one of these words (e.g. ttft,throughput).
    #[arg(long, value_delimiter = ',')]
    pub filter: Vec<String>,
}

/// One service-level objective of `--goodput`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slo {
    pub metric: SloMetric,
    pub limit_ms: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SloMetric {
    Ttft,
    Tpot,
    E2el,
}

impl SloMetric {
    pub fn name(self) -> &'static str {
        match self {
            SloMetric::Ttft => "ttft",
            SloMetric::Tpot => "tpot",
            SloMetric::E2el => "e2el",
        }
    }
}

/// The validated configuration of one run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub addr: SocketAddr,
    /// `Host` header value.
    pub authority: String,
    pub path: String,
    pub arrivals: Arrivals,
    pub concurrency_max: Option<usize>,
    pub duration: Option<Duration>,
    pub percentiles: Vec<f64>,
    /// `--percentile-metrics`: the latency keys reported (None: all).
    pub percentile_metrics: Option<Vec<String>>,
    pub slos: Vec<Slo>,
    pub client_cpus: Vec<Option<usize>>,
    /// `--http2`: the HTTP/2 connections; None: HTTP/1.1.
    pub http2_connections: Option<usize>,
    pub request_timeout: Duration,
    /// Every request's headers besides framing: the backend's (API key, version), then
    /// --header's.
    pub headers: Vec<(String, String)>,
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    pub metadata: Vec<(String, String)>,
    pub result_dir: PathBuf,
    /// The line naming the vLLM flags accepted and ignored, for the start of the run.
    pub ignored_flags_warning: Option<String>,
}

/// Latency keys `--percentile-metrics` may name: vLLM's, then ours.
pub const PERCENTILE_METRICS: [&str; 10] = [
    "ttft",
    "tpot",
    "itl",
    "e2el",
    "client_queue_time",
    "e2el_including_client_queue",
    "itl_per_token",
    "ttft_from_schedule",
    "e2el_from_schedule",
    "ttfb",
];

impl BenchArgs {
    /// The arguments with vLLM's general flags applied as `vllm bench serve` applies them:
    /// --input-len and --output-len set every dataset's lengths, and the random dataset
    /// always ignores EOS so every request generates its requested length.
    pub fn vllm_resolved(&self) -> BenchArgs {
        let mut a = self.clone();
        if let Some(n) = a.input_len {
            a.random_input_len = n;
        }
        if let Some(n) = a.output_len {
            a.random_output_len = n;
            a.sharegpt_output_len = Some(n);
            a.custom_output_len = Some(i64::try_from(n).unwrap_or(i64::MAX));
            a.prefix_repetition_output_len = Some(n);
        }
        if a.dataset_name == DatasetName::Random {
            a.ignore_eos = true;
        }
        a
    }
}

impl BenchConfig {
    pub fn from_args(a: &BenchArgs) -> Result<BenchConfig, FlagError> {
        // vLLM flags first: a refused one must be named before anything is resolved or dialed.
        let ignored_flags_warning = a.foreign.check()?;
        if !matches!(a.tokenizer_mode.as_str(), "auto" | "hf") {
            return Err(FlagError::TokenizerMode(a.tokenizer_mode.clone()));
        }
        if a.custom_output_len.is_some_and(|n| n < 1 && n != -1) {
            return Err(FlagError::CustomOutputLen);
        }
        let (authority, addr) = resolve_target(a)?;
        let path = a.endpoint.clone().unwrap_or_else(|| a.backend.default_path().to_string());
        if !path.starts_with('/') {
            return Err(FlagError::Endpoint(path));
        }
        if let (true, Some(api)) = (a.prompt_token_ids, a.backend.text_only_api()) {
            return Err(FlagError::PromptTokenIdsWithText(api));
        }
        if a.backend == Backend::OpenaiResponses && a.sampling.min_p.is_some() {
            return Err(FlagError::MinPWithResponses);
        }
        if a.num_prompts == 0 {
            return Err(FlagError::NoPrompts);
        }
        if matches!(a.dataset_name, DatasetName::Sharegpt | DatasetName::Jsonl) && a.dataset_path.is_none() {
            return Err(FlagError::NoDatasetPath);
        }
        if a.dataset_name == DatasetName::Prefix && a.prefix_group_count == 0 {
            return Err(FlagError::NoPrefixGroups);
        }
        if a.max_concurrency == Some(0) {
            return Err(FlagError::NoConcurrency);
        }
        let http2_connections = http2_connections(a)?;
        let duration = match a.duration {
            Some(s) if !(s > 0.0 && s.is_finite()) => return Err(FlagError::Duration(s)),
            Some(s) => Some(Duration::from_secs_f64(s)),
            None => None,
        };
        if !(a.request_timeout_s > 0.0 && a.request_timeout_s.is_finite()) {
            return Err(FlagError::RequestTimeout(a.request_timeout_s));
        }
        if !(a.steady_state_threshold > 0.0 && a.steady_state_threshold <= 1.0) {
            return Err(FlagError::SteadyStateThreshold(a.steady_state_threshold));
        }
        Ok(BenchConfig {
            addr,
            authority,
            path,
            arrivals: arrivals_of(a)?,
            concurrency_max: a.max_concurrency,
            duration,
            percentiles: parse_percentiles(&a.percentiles)?,
            percentile_metrics: a.percentile_metrics.as_deref().map(parse_percentile_metrics).transpose()?,
            slos: a.goodput.iter().map(|s| parse_slo(s)).collect::<Result<_, _>>()?,
            client_cpus: parse_cpu_list(a.client_cores.as_deref())?,
            http2_connections,
            request_timeout: Duration::from_secs_f64(a.request_timeout_s),
            headers: request_headers(a)?,
            extra_body: request_extras(a)?,
            metadata: a.metadata.iter().map(|m| parse_pair(m, "--metadata")).collect::<Result<_, _>>()?,
            result_dir: a
                .result_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(if a.save_result || a.append_result { "." } else { "bench-results" })),
            ignored_flags_warning,
        })
    }
}

fn http2_connections(a: &BenchArgs) -> Result<Option<usize>, FlagError> {
    match (a.http2, a.connections) {
        (false, Some(_)) => Err(FlagError::ConnectionsWithoutHttp2),
        (true, _) if a.new_connection_per_request => Err(FlagError::Http2NewConnections),
        (true, Some(0)) => Err(FlagError::NoConnections),
        (true, n) => Ok(Some(n.unwrap_or(1))),
        (false, None) => Ok(None),
    }
}

fn resolve_target(a: &BenchArgs) -> Result<(String, SocketAddr), FlagError> {
    let authority = match &a.base_url {
        Some(url) => {
            let rest = url.strip_prefix("http://").ok_or_else(|| FlagError::BaseUrlScheme(url.clone()))?;
            rest.trim_end_matches('/').to_string()
        }
        None => format!("{}:{}", a.host, a.port),
    };
    if authority.contains('/') {
        return Err(FlagError::BaseUrlPath(authority));
    }
    let with_port = if authority.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        authority.clone()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|source| FlagError::Resolve { target: with_port.clone(), source })?
        .next()
        .ok_or(FlagError::NoAddress(with_port))?;
    Ok((authority, addr))
}

fn arrivals_of(a: &BenchArgs) -> Result<Arrivals, FlagError> {
    let rate = a.request_rate;
    if rate.is_nan() || rate <= 0.0 {
        return Err(FlagError::RequestRate(rate));
    }
    if a.burstiness.is_nan() || a.burstiness <= 0.0 {
        return Err(FlagError::Burstiness(a.burstiness));
    }
    if rate.is_infinite() {
        if a.arrival_process.is_some() {
            return Err(FlagError::ArrivalProcessUnpaced);
        }
        return Ok(Arrivals::Unpaced);
    }
    let process =
        a.arrival_process.unwrap_or(if a.burstiness == 1.0 { ArrivalProcess::Poisson } else { ArrivalProcess::Gamma });
    Ok(match process {
        ArrivalProcess::Poisson => Arrivals::Gamma { rate_per_s: rate, shape: 1.0 },
        ArrivalProcess::Gamma => Arrivals::Gamma { rate_per_s: rate, shape: a.burstiness },
        ArrivalProcess::Constant => Arrivals::Constant { rate_per_s: rate },
    })
}

fn parse_percentiles(s: &str) -> Result<Vec<f64>, FlagError> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<f64>() {
            Ok(p) if p > 0.0 && p <= 100.0 => out.push(p),
            _ => return Err(FlagError::Percentile(part.to_string())),
        }
    }
    if out.is_empty() {
        return Err(FlagError::NoPercentiles);
    }
    Ok(out)
}

fn parse_percentile_metrics(s: &str) -> Result<Vec<String>, FlagError> {
    let names: Vec<String> = s.split(',').map(str::trim).filter(|m| !m.is_empty()).map(String::from).collect();
    if let Some(bad) = names.iter().find(|m| !PERCENTILE_METRICS.contains(&m.as_str())) {
        return Err(FlagError::UnknownPercentileMetric { name: bad.clone(), known: &PERCENTILE_METRICS });
    }
    if names.is_empty() {
        return Err(FlagError::NoPercentileMetrics);
    }
    Ok(names)
}

fn parse_slo(s: &str) -> Result<Slo, FlagError> {
    let (key, value) = s.split_once(':').ok_or_else(|| FlagError::GoodputSyntax(s.to_string()))?;
    let metric = match key {
        "ttft" => SloMetric::Ttft,
        "tpot" => SloMetric::Tpot,
        "e2el" => SloMetric::E2el,
        _ => return Err(FlagError::GoodputMetric(key.to_string())),
    };
    match value.parse::<f64>() {
        Ok(limit_ms) if limit_ms >= 0.0 && limit_ms.is_finite() => Ok(Slo { metric, limit_ms }),
        _ => Err(FlagError::GoodputLimit(value.to_string())),
    }
}

/// "2,3,6-7" → [Some(2), Some(3), Some(6), Some(7)]; none given → one unpinned thread.
pub fn parse_cpu_list(s: Option<&str>) -> Result<Vec<Option<usize>>, FlagError> {
    let Some(s) = s else { return Ok(vec![None]) };
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || FlagError::ClientCores(part.to_string());
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().map_err(|_| bad())?, b.parse::<usize>().map_err(|_| bad())?),
            None => {
                let c = part.parse::<usize>().map_err(|_| bad())?;
                (c, c)
            }
        };
        if first > last || last >= libc::CPU_SETSIZE as usize {
            return Err(bad());
        }
        cpus.extend((first..=last).map(Some));
    }
    if cpus.is_empty() {
        return Err(FlagError::NoClientCores);
    }
    Ok(cpus)
}

fn parse_pair(s: &str, flag: &'static str) -> Result<(String, String), FlagError> {
    let (k, v) = s.split_once('=').ok_or_else(|| FlagError::PairSyntax { flag, value: s.to_string() })?;
    let key = k.trim();
    if key.is_empty() || key.contains(['\r', '\n', ':']) || v.contains(['\r', '\n']) {
        return Err(FlagError::PairInvalid { flag, value: s.to_string() });
    }
    Ok((key.to_string(), v.trim().to_string()))
}

fn request_headers(a: &BenchArgs) -> Result<Vec<(String, String)>, FlagError> {
    let mut headers = a.backend.headers(a.backend.api_key().as_deref());
    for h in &a.headers {
        headers.push(parse_pair(h, "--header")?);
    }
    Ok(headers)
}

fn parse_extra_body(s: Option<&str>) -> Result<Option<serde_json::Map<String, serde_json::Value>>, FlagError> {
    let Some(s) = s else { return Ok(None) };
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(map)) => Ok(Some(map)),
        Ok(_) => Err(FlagError::ExtraBodyNotObject),
        Err(e) => Err(FlagError::ExtraBodyJson(e)),
    }
}

/// The sampling flags' fields with --extra-body over them (vLLM's order of precedence).
fn request_extras(a: &BenchArgs) -> Result<Option<serde_json::Map<String, serde_json::Value>>, FlagError> {
    let mut fields = a.sampling.body_fields();
    fields.extend(parse_extra_body(a.extra_body.as_deref())?.unwrap_or_default());
    Ok((!fields.is_empty()).then_some(fields))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }

    #[test]
    fn an_unknown_percentile_metric_is_refused_naming_every_known_one() {
        let e = parse_percentile_metrics("ttft,goodput").err().map(|e| e.to_string());
        let text = "--percentile-metrics: unknown metric 'goodput' (one of ttft,tpot,itl,e2el,client_queue_time,\
                    e2el_including_client_queue,itl_per_token,ttft_from_schedule,e2el_from_schedule,ttfb)";
        assert_eq!(e.as_deref(), Some(text));
    }

    /// `shardgate bench` flags parsed as the command line would be (panics on a bad flag).
    pub fn parsed(extra: &[&str]) -> BenchArgs {
        let argv = ["bench"].iter().chain(extra).copied();
        Cli::try_parse_from(argv).map(|c| c.args).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn cpu_lists() {
        let cases: &[(&str, Option<Vec<usize>>)] = &[
            ("1", Some(vec![1])),
            ("0,2-4", Some(vec![0, 2, 3, 4])),
            (" 3 , 5 ", Some(vec![3, 5])),
            ("4-2", None),
            ("x", None),
            ("", None),
        ];
        for (input, want) in cases {
            let got = parse_cpu_list(Some(input)).ok().map(|v| v.into_iter().flatten().collect::<Vec<_>>());
            assert_eq!(&got, want, "{input}");
        }
        assert_eq!(parse_cpu_list(None).ok(), Some(vec![None]));
    }

    #[test]
    fn transport_flags() {
        // (flags, the connection count or the start of the refusal)
        type Want = Result<Option<usize>, &'static str>;
        let cases: &[(&[&str], Want)] = &[
            (&[], Ok(None)),
            (&["--http2"], Ok(Some(1))),
            (&["--http2", "--connections", "8"], Ok(Some(8))),
            (&["--connections", "8"], Err("--connections needs --http2")),
            (&["--http2", "--connections", "0"], Err("--connections must be at least 1")),
            (&["--http2", "--new-connection-per-request"], Err("--new-connection-per-request and --http2")),
        ];
        for (argv, want) in cases {
            let got = http2_connections(&parsed(argv)).map_err(|e| e.to_string());
            match (got, want) {
                (Ok(n), Ok(w)) => assert_eq!(n, *w, "{argv:?}"),
                (Err(e), Err(w)) => assert!(e.starts_with(w), "{argv:?}: {e}"),
                (got, _) => panic!("{argv:?}: {got:?}"),
            }
        }
    }

    #[test]
    fn slos_and_percentiles() {
        assert_eq!(parse_slo("ttft:100").ok(), Some(Slo { metric: SloMetric::Ttft, limit_ms: 100.0 }));
        assert_eq!(parse_slo("e2el:2.5").ok(), Some(Slo { metric: SloMetric::E2el, limit_ms: 2.5 }));
        assert!(parse_slo("itl:5").is_err());
        assert!(parse_slo("tpot").is_err());
        assert_eq!(parse_percentiles("50,90,99,99.9").ok(), Some(vec![50.0, 90.0, 99.0, 99.9]));
        assert!(parse_percentiles("0").is_err());
        assert!(parse_percentiles("101").is_err());
    }

    #[test]
    fn vllm_general_flags_map_as_vllm_maps_them() {
        // (flags, random_input_len, random_output_len, sharegpt, custom, prefix output, ignore_eos)
        type Want = (usize, usize, Option<usize>, Option<i64>, Option<usize>, bool);
        let cases: &[(&[&str], Want)] = &[
            (&[], (1024, 128, None, None, None, true)),
            (&["--input-len", "7", "--output-len", "3"], (7, 3, Some(3), Some(3), Some(3), true)),
            (
                &["--dataset-name", "prefix_repetition", "--output-len", "5"],
                (1024, 5, Some(5), Some(5), Some(5), false),
            ),
            (&["--dataset-name", "custom", "--dataset-path", "x"], (1024, 128, None, None, None, false)),
        ];
        for (argv, want) in cases {
            let a = parsed(argv).vllm_resolved();
            let got = (
                a.random_input_len,
                a.random_output_len,
                a.sharegpt_output_len,
                a.custom_output_len,
                a.prefix_repetition_output_len,
                a.ignore_eos,
            );
            assert_eq!(&got, want, "{argv:?}");
        }
    }

    #[test]
    fn range_ratios_and_sampling_fields() {
        let cases: &[(&str, Option<(f64, f64)>)] = &[
            ("0.25", Some((0.25, 0.25))),
            (r#"{"input": 0.3, "output": 0.5}"#, Some((0.3, 0.5))),
            (r#"{"output": 0.5}"#, Some((0.0, 0.5))),
            ("1.0", None),
            (r#"{"input": "x"}"#, None),
            ("wide", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_range_ratio(s).ok().map(|r| (r.input, r.output)), *want, "{s}");
        }
        let a = parsed(&["--temperature", "0", "--top-k", "-1", "--extra-body", r#"{"temperature": 0.5}"#]);
        let extras = request_extras(&a).ok().flatten().unwrap_or_default();
        assert_eq!(serde_json::Value::Object(extras), serde_json::json!({"temperature": 0.5, "top_k": -1}));
    }

    #[test]
    fn backends_paths_and_refusals() {
        let cases: &[(&[&str], Result<&str, &str>)] = &[
            (&[], Ok("/v1/completions")),
            (&["--backend", "vllm"], Ok("/v1/completions")),
            (&["--backend", "openai-chat"], Ok("/v1/chat/completions")),
            (&["--backend", "anthropic-messages"], Ok("/v1/messages")),
            (&["--backend", "openai-responses"], Ok("/v1/responses")),
            (&["--backend", "openai-responses", "--endpoint", "/x/responses"], Ok("/x/responses")),
            (&["--backend", "openai", "--prompt-token-ids"], Ok("/v1/completions")),
            (&["--backend", "anthropic-messages", "--min-p", "0.1"], Ok("/v1/messages")),
            (
                &["--backend", "openai-chat", "--prompt-token-ids"],
                Err("--prompt-token-ids needs a completions backend (openai or vllm): chat takes no token ids"),
            ),
            (
                &["--backend", "anthropic-messages", "--prompt-token-ids"],
                Err("--prompt-token-ids needs a completions backend (openai or vllm): the Messages API takes no \
                     token ids"),
            ),
            (
                &["--backend", "openai-responses", "--prompt-token-ids"],
                Err("--prompt-token-ids needs a completions backend (openai or vllm): the Responses API takes no \
                     token ids"),
            ),
            (&["--backend", "openai-responses", "--min-p", "0.1"], Err("--min-p: the Responses API has no min_p")),
        ];
        for (argv, want) in cases {
            match (BenchConfig::from_args(&parsed(argv)), want) {
                (Ok(config), Ok(path)) => assert_eq!(config.path, *path, "{argv:?}"),
                (Err(e), Err(text)) => assert!(e.to_string().starts_with(text), "{argv:?}: {e}"),
                (got, _) => panic!("{argv:?}: {:?}", got.map(|c| c.path)),
            }
        }
    }

    #[test]
    fn each_api_sends_its_key_and_version_headers() {
        let pairs = |h: &[(&str, &str)]| h.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        // (backend, API key, headers in the order sent)
        type Case<'a> = (Backend, Option<&'a str>, &'a [(&'a str, &'a str)]);
        let cases: &[Case] = &[
            (Backend::Openai, None, &[]),
            (Backend::OpenaiChat, Some("k"), &[("Authorization", "Bearer k")]),
            (Backend::OpenaiResponses, Some("k"), &[("Authorization", "Bearer k")]),
            (Backend::AnthropicMessages, None, &[("anthropic-version", "2023-06-01")]),
            (
                Backend::AnthropicMessages,
                Some("k"),
                &[("Authorization", "Bearer k"), ("x-api-key", "k"), ("anthropic-version", "2023-06-01")],
            ),
        ];
        for (backend, key, want) in cases {
            assert_eq!(backend.headers(*key), pairs(want), "{backend:?} {key:?}");
        }
    }

    #[test]
    fn pairs_and_extra_body() {
        assert_eq!(parse_pair("X-A=b=c", "--header").ok(), Some(("X-A".into(), "b=c".into())));
        assert!(parse_pair("novalue", "--header").is_err());
        assert!(parse_pair("a=b\r\nc", "--header").is_err());
        assert!(parse_extra_body(Some("[1]")).is_err());
        assert_eq!(parse_extra_body(Some(r#"{"temperature":0}"#)).ok().flatten().map(|m| m.len()), Some(1));
    }
}
