//! The flags of `shardgate bench` and `shardgate bench compare`, and their validation into a
//! `BenchConfig`. Flag names follow `vllm bench serve` where the two tools share a concept, so
//! a command line moves between them; everything else is named for what it measures.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::schedule::Arrivals;

/// Which OpenAI endpoint the requests go to (vLLM's `--backend` names).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `POST /v1/completions` with a `prompt`.
    Openai,
    /// `POST /v1/chat/completions` with one user message.
    OpenaiChat,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Openai => "openai",
            Backend::OpenaiChat => "openai-chat",
        }
    }

    fn default_path(self) -> &'static str {
        match self {
            Backend::Openai => "/v1/completions",
            Backend::OpenaiChat => "/v1/chat/completions",
        }
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
    /// `tokenizer.json` or a directory holding it (default: --model when it is a local
    /// directory, else the demo model's Qwen3 tokenizer).
    #[arg(long, help_heading = "Target")]
    pub tokenizer: Option<PathBuf>,
    /// Extra request header, `KEY=VALUE` (repeatable).
    #[arg(long = "header", value_name = "KEY=VALUE", num_args = 1.., help_heading = "Target")]
    pub headers: Vec<String>,
    /// JSON object merged into every request body (e.g. '{"temperature":0}').
    #[arg(long = "extra-body", value_name = "JSON", help_heading = "Target")]
    pub extra_body: Option<String>,

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
    /// Lengths are drawn uniformly from [len·(1−r), len·(1+r)] (vLLM's semantics).
    #[arg(long = "random-range-ratio", default_value_t = 0.0, help_heading = "Workload")]
    pub random_range_ratio: f64,
    /// Shared prefix tokens of every prompt in a group (prefix dataset); the suffix is
    /// --random-input-len long.
    #[arg(long = "prefix-len", default_value_t = 256, help_heading = "Workload")]
    pub prefix_len: usize,
    /// Distinct prefixes (prefix dataset); prompt i belongs to group i mod count.
    #[arg(long = "prefix-group-count", default_value_t = 10, help_heading = "Workload")]
    pub prefix_group_count: usize,
    /// Output tokens for sharegpt prompts (default: the length of the recorded reply).
    #[arg(long = "sharegpt-output-len", help_heading = "Workload")]
    pub sharegpt_output_len: Option<usize>,
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
    #[arg(long = "request-timeout-s", default_value_t = 600.0, help_heading = "Load")]
    pub request_timeout_s: f64,
    /// Do not ask for `stream_options.continuous_usage_stats` (per-chunk token counts); token
    /// counts per chunk are then estimated with the tokenizer.
    #[arg(long = "no-per-chunk-usage", help_heading = "Load")]
    pub no_per_chunk_usage: bool,

    /// Percentiles reported for every latency metric.
    #[arg(long, alias = "metric-percentiles", default_value = "50,90,99", help_heading = "Metrics")]
    pub percentiles: String,
    /// Service-level objectives, `ttft:MS tpot:MS e2el:MS` (any subset).
    #[arg(long, num_args = 1.., value_name = "KEY:MS", help_heading = "Metrics")]
    pub goodput: Vec<String>,
    /// Closed loop: the steady-state window is where in-flight ≥ this × --max-concurrency.
    #[arg(long = "steady-state-threshold", default_value_t = 0.95, help_heading = "Metrics")]
    pub steady_state_threshold: f64,

    #[arg(long = "result-dir", default_value = "bench-results", help_heading = "Output")]
    pub result_dir: PathBuf,
    /// Result JSON file name (default: vLLM's `{label}-{rate}qps[-concurrency{c}]-{model}-{date}.json`).
    #[arg(long = "result-filename", help_heading = "Output")]
    pub result_filename: Option<String>,
    /// Print the summary only; write no files.
    #[arg(long = "no-save", help_heading = "Output")]
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
    pub slos: Vec<Slo>,
    pub client_cpus: Vec<Option<usize>>,
    pub request_timeout: Duration,
    pub headers: Vec<(String, String)>,
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    pub metadata: Vec<(String, String)>,
}

impl BenchConfig {
    pub fn from_args(a: &BenchArgs) -> Result<BenchConfig, String> {
        let (authority, addr) = resolve_target(a)?;
        let path = a.endpoint.clone().unwrap_or_else(|| a.backend.default_path().to_string());
        if !path.starts_with('/') {
            return Err(format!("--endpoint must start with '/', got '{path}'"));
        }
        if a.prompt_token_ids && a.backend != Backend::Openai {
            return Err("--prompt-token-ids needs --backend openai (completions take token ids)".into());
        }
        if a.num_prompts == 0 {
            return Err("--num-prompts must be at least 1".into());
        }
        if !(0.0..1.0).contains(&a.random_range_ratio) {
            return Err(format!("--random-range-ratio must be in [0, 1), got {}", a.random_range_ratio));
        }
        if matches!(a.dataset_name, DatasetName::Sharegpt | DatasetName::Jsonl) && a.dataset_path.is_none() {
            return Err("--dataset-path is required for the sharegpt and jsonl datasets".into());
        }
        if a.dataset_name == DatasetName::Prefix && a.prefix_group_count == 0 {
            return Err("--prefix-group-count must be at least 1".into());
        }
        if a.max_concurrency == Some(0) {
            return Err("--max-concurrency must be at least 1".into());
        }
        let duration = match a.duration {
            Some(s) if !(s > 0.0 && s.is_finite()) => return Err(format!("--duration must be > 0 s, got {s}")),
            Some(s) => Some(Duration::from_secs_f64(s)),
            None => None,
        };
        if !(a.request_timeout_s > 0.0 && a.request_timeout_s.is_finite()) {
            return Err(format!("--request-timeout-s must be > 0, got {}", a.request_timeout_s));
        }
        if !(a.steady_state_threshold > 0.0 && a.steady_state_threshold <= 1.0) {
            return Err(format!("--steady-state-threshold must be in (0, 1], got {}", a.steady_state_threshold));
        }
        Ok(BenchConfig {
            addr,
            authority,
            path,
            arrivals: arrivals_of(a)?,
            concurrency_max: a.max_concurrency,
            duration,
            percentiles: parse_percentiles(&a.percentiles)?,
            slos: a.goodput.iter().map(|s| parse_slo(s)).collect::<Result<_, _>>()?,
            client_cpus: parse_cpu_list(a.client_cores.as_deref())?,
            request_timeout: Duration::from_secs_f64(a.request_timeout_s),
            headers: a.headers.iter().map(|h| parse_pair(h, "--header")).collect::<Result<_, _>>()?,
            extra_body: parse_extra_body(a.extra_body.as_deref())?,
            metadata: a.metadata.iter().map(|m| parse_pair(m, "--metadata")).collect::<Result<_, _>>()?,
        })
    }
}

fn resolve_target(a: &BenchArgs) -> Result<(String, SocketAddr), String> {
    let authority = match &a.base_url {
        Some(url) => {
            let rest = url
                .strip_prefix("http://")
                .ok_or_else(|| format!("--base-url must start with http:// (TLS is not supported), got '{url}'"))?;
            rest.trim_end_matches('/').to_string()
        }
        None => format!("{}:{}", a.host, a.port),
    };
    if authority.contains('/') {
        return Err(format!("--base-url must be http://HOST:PORT without a path, got '{authority}'"));
    }
    let with_port = if authority.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        authority.clone()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {with_port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{with_port} resolves to no address"))?;
    Ok((authority, addr))
}

fn arrivals_of(a: &BenchArgs) -> Result<Arrivals, String> {
    let rate = a.request_rate;
    if rate.is_nan() || rate <= 0.0 {
        return Err(format!("--request-rate must be > 0 (or inf), got {rate}"));
    }
    if a.burstiness.is_nan() || a.burstiness <= 0.0 {
        return Err(format!("--burstiness must be > 0, got {}", a.burstiness));
    }
    if rate.is_infinite() {
        if a.arrival_process.is_some() {
            return Err("--arrival-process needs a finite --request-rate".into());
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

fn parse_percentiles(s: &str) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<f64>() {
            Ok(p) if p > 0.0 && p <= 100.0 => out.push(p),
            _ => return Err(format!("--percentiles: '{part}' is not a percentile in (0, 100]")),
        }
    }
    if out.is_empty() {
        return Err("--percentiles needs at least one value".into());
    }
    Ok(out)
}

fn parse_slo(s: &str) -> Result<Slo, String> {
    let (key, value) = s.split_once(':').ok_or_else(|| format!("--goodput: '{s}' is not KEY:MS"))?;
    let metric = match key {
        "ttft" => SloMetric::Ttft,
        "tpot" => SloMetric::Tpot,
        "e2el" => SloMetric::E2el,
        _ => return Err(format!("--goodput: unknown metric '{key}' (ttft, tpot or e2el)")),
    };
    match value.parse::<f64>() {
        Ok(limit_ms) if limit_ms >= 0.0 && limit_ms.is_finite() => Ok(Slo { metric, limit_ms }),
        _ => Err(format!("--goodput: '{value}' is not a number of milliseconds")),
    }
}

/// "2,3,6-7" → [Some(2), Some(3), Some(6), Some(7)]; none given → one unpinned thread.
pub fn parse_cpu_list(s: Option<&str>) -> Result<Vec<Option<usize>>, String> {
    let Some(s) = s else { return Ok(vec![None]) };
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("--client-cores: '{part}' is not a CPU number or range");
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
        return Err("--client-cores names no CPU".into());
    }
    Ok(cpus)
}

fn parse_pair(s: &str, flag: &str) -> Result<(String, String), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("{flag}: '{s}' is not KEY=VALUE"))?;
    let key = k.trim();
    if key.is_empty() || key.contains(['\r', '\n', ':']) || v.contains(['\r', '\n']) {
        return Err(format!("{flag}: '{s}' is not a valid KEY=VALUE"));
    }
    Ok((key.to_string(), v.trim().to_string()))
}

fn parse_extra_body(s: Option<&str>) -> Result<Option<serde_json::Map<String, serde_json::Value>>, String> {
    let Some(s) = s else { return Ok(None) };
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(map)) => Ok(Some(map)),
        Ok(_) => Err("--extra-body must be a JSON object".into()),
        Err(e) => Err(format!("--extra-body is not valid JSON: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(parse_cpu_list(None), Ok(vec![None]));
    }

    #[test]
    fn slos_and_percentiles() {
        assert_eq!(parse_slo("ttft:100"), Ok(Slo { metric: SloMetric::Ttft, limit_ms: 100.0 }));
        assert_eq!(parse_slo("e2el:2.5"), Ok(Slo { metric: SloMetric::E2el, limit_ms: 2.5 }));
        assert!(parse_slo("itl:5").is_err());
        assert!(parse_slo("tpot").is_err());
        assert_eq!(parse_percentiles("50,90,99,99.9"), Ok(vec![50.0, 90.0, 99.0, 99.9]));
        assert!(parse_percentiles("0").is_err());
        assert!(parse_percentiles("101").is_err());
    }

    #[test]
    fn pairs_and_extra_body() {
        assert_eq!(parse_pair("X-A=b=c", "--header"), Ok(("X-A".into(), "b=c".into())));
        assert!(parse_pair("novalue", "--header").is_err());
        assert!(parse_pair("a=b\r\nc", "--header").is_err());
        assert!(parse_extra_body(Some("[1]")).is_err());
        assert_eq!(parse_extra_body(Some(r#"{"temperature":0}"#)).map(|m| m.map(|m| m.len())), Ok(Some(1)));
    }
}
