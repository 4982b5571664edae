//! The load generator's errors, one enum per stage of a run: the flags (`FlagError`), the
//! server's model listing before the run (`ServerError`), the tokenizer and prompts
//! (`WorkloadError`), the client threads (`RunError`), the result files (`ResultFileError`),
//! `bench sink` (`SinkError`); `BenchError` is any of them, as `shardgate bench` prints it.
//! `HttpError` is a response the client cannot frame: it ends one request (its text is the
//! request's failure message) or the model listing.
//!
//! Each `Display` writes the text the command has always printed (tests and scripts match on
//! them). Clap's `value_parser` functions return `FlagError` too: clap takes any error type and
//! prints its `Display`.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use shardgate_text::AssetError;

/// Any error that ends `shardgate bench` (a run, `compare` or `sink`).
#[derive(Debug)]
pub enum BenchError {
    Flag(FlagError),
    Server(ServerError),
    Workload(WorkloadError),
    Run(RunError),
    ResultFile(ResultFileError),
    Sink(SinkError),
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Flag(e) => e.fmt(f),
            BenchError::Server(e) => e.fmt(f),
            BenchError::Workload(e) => e.fmt(f),
            BenchError::Run(e) => e.fmt(f),
            BenchError::ResultFile(e) => e.fmt(f),
            BenchError::Sink(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BenchError::Flag(e) => Some(e),
            BenchError::Server(e) => Some(e),
            BenchError::Workload(e) => Some(e),
            BenchError::Run(e) => Some(e),
            BenchError::ResultFile(e) => Some(e),
            BenchError::Sink(e) => Some(e),
        }
    }
}

impl From<FlagError> for BenchError {
    fn from(e: FlagError) -> Self {
        BenchError::Flag(e)
    }
}

impl From<ServerError> for BenchError {
    fn from(e: ServerError) -> Self {
        BenchError::Server(e)
    }
}

impl From<WorkloadError> for BenchError {
    fn from(e: WorkloadError) -> Self {
        BenchError::Workload(e)
    }
}

impl From<RunError> for BenchError {
    fn from(e: RunError) -> Self {
        BenchError::Run(e)
    }
}

impl From<ResultFileError> for BenchError {
    fn from(e: ResultFileError) -> Self {
        BenchError::ResultFile(e)
    }
}

impl From<SinkError> for BenchError {
    fn from(e: SinkError) -> Self {
        BenchError::Sink(e)
    }
}

/// A command line that cannot run: a flag's value, flags that do not go together, a refused
/// `vllm bench serve` flag, or a target that does not resolve. Named before anything is dialed
/// (but the last two, which the runner checks against the client cores).
#[derive(Debug)]
pub enum FlagError {
    /// A `vllm bench serve` flag with no equivalent here; `instead` says what to use.
    Refused {
        name: &'static str,
        instead: &'static str,
    },
    TokenizerMode(String),
    CustomOutputLen,
    /// `--endpoint` without a leading `/`.
    Endpoint(String),
    /// `--prompt-token-ids` with an API that takes text only: the API's name.
    PromptTokenIdsWithText(&'static str),
    /// `--min-p` with `--backend openai-responses`.
    MinPWithResponses,
    NoPrompts,
    NoDatasetPath,
    NoPrefixGroups,
    NoConcurrency,
    Duration(f64),
    RequestTimeout(f64),
    SteadyStateThreshold(f64),
    /// `--base-url` that is not `http://`.
    BaseUrlScheme(String),
    /// `--base-url` with a path: the authority given.
    BaseUrlPath(String),
    Resolve {
        target: String,
        source: io::Error,
    },
    NoAddress(String),
    RequestRate(f64),
    Burstiness(f64),
    ArrivalProcessUnpaced,
    /// A `--percentiles` entry.
    Percentile(String),
    NoPercentiles,
    /// A metric name that is none of `known` (the flag's list, kept with the flags).
    UnknownPercentileMetric {
        name: String,
        known: &'static [&'static str],
    },
    NoPercentileMetrics,
    /// A `--goodput` entry without `:`.
    GoodputSyntax(String),
    GoodputMetric(String),
    /// A `--goodput` limit that is not a number of milliseconds.
    GoodputLimit(String),
    /// A `--client-cores` entry.
    ClientCores(String),
    NoClientCores,
    /// `flag` (`--header`, `--metadata`) with a value without `=`.
    PairSyntax {
        flag: &'static str,
        value: String,
    },
    /// `flag` with an empty key, or a key or value that would break the request head.
    PairInvalid {
        flag: &'static str,
        value: String,
    },
    ExtraBodyNotObject,
    ExtraBodyJson(serde_json::Error),
    /// `--random-range-ratio` neither a number nor a JSON object.
    RangeRatioSyntax(String),
    /// `--random-range-ratio` whose `key` is not a number.
    RangeRatioValue {
        key: &'static str,
        value: String,
    },
    RangeRatioBounds(f64),
    ConcurrencyBelowCores {
        cap: usize,
        cores: usize,
    },
    DurationWithoutConcurrency,
    ConnectionsWithoutHttp2,
    Http2NewConnections,
    NoConnections,
}

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlagError::Refused { name, instead } => {
                write!(f, "--{name} (a vllm bench serve flag) is not supported; use instead: {instead}")
            }
            FlagError::TokenizerMode(mode) => write!(
                f,
                "--tokenizer-mode {mode}: this client reads a Hugging Face tokenizer.json only; use auto or hf, with \
                 --tokenizer pointing at the tokenizer.json"
            ),
            FlagError::CustomOutputLen => {
                f.write_str("--custom-output-len must be at least 1, or -1 for the file's output_tokens")
            }
            FlagError::Endpoint(path) => write!(f, "--endpoint must start with '/', got '{path}'"),
            FlagError::PromptTokenIdsWithText(api) => {
                write!(f, "--prompt-token-ids needs a completions backend (openai or vllm): {api} takes no token ids")
            }
            FlagError::MinPWithResponses => f.write_str(
                "--min-p: the Responses API has no min_p (vLLM's openai-responses backend refuses it too); send it with \
                 --extra-body '{\"min_p\": P}' if the server takes it",
            ),
            FlagError::NoPrompts => f.write_str("--num-prompts must be at least 1"),
            FlagError::NoDatasetPath => f.write_str("--dataset-path is required for the sharegpt and jsonl datasets"),
            FlagError::NoPrefixGroups => f.write_str("--prefix-group-count must be at least 1"),
            FlagError::NoConcurrency => f.write_str("--max-concurrency must be at least 1"),
            FlagError::Duration(s) => write!(f, "--duration must be > 0 s, got {s}"),
            FlagError::RequestTimeout(s) => write!(f, "--request-timeout-s must be > 0, got {s}"),
            FlagError::SteadyStateThreshold(t) => write!(f, "--steady-state-threshold must be in (0, 1], got {t}"),
            FlagError::BaseUrlScheme(url) => {
                write!(f, "--base-url must start with http:// (TLS is not supported), got '{url}'")
            }
            FlagError::BaseUrlPath(authority) => {
                write!(f, "--base-url must be http://HOST:PORT without a path, got '{authority}'")
            }
            FlagError::Resolve { target, source } => write!(f, "cannot resolve {target}: {source}"),
            FlagError::NoAddress(target) => write!(f, "{target} resolves to no address"),
            FlagError::RequestRate(rate) => write!(f, "--request-rate must be > 0 (or inf), got {rate}"),
            FlagError::Burstiness(b) => write!(f, "--burstiness must be > 0, got {b}"),
            FlagError::ArrivalProcessUnpaced => f.write_str("--arrival-process needs a finite --request-rate"),
            FlagError::Percentile(part) => write!(f, "--percentiles: '{part}' is not a percentile in (0, 100]"),
            FlagError::NoPercentiles => f.write_str("--percentiles needs at least one value"),
            FlagError::UnknownPercentileMetric { name, known } => {
                write!(f, "--percentile-metrics: unknown metric '{name}' (one of {})", known.join(","))
            }
            FlagError::NoPercentileMetrics => f.write_str("--percentile-metrics needs at least one metric"),
            FlagError::GoodputSyntax(s) => write!(f, "--goodput: '{s}' is not KEY:MS"),
            FlagError::GoodputMetric(key) => write!(f, "--goodput: unknown metric '{key}' (ttft, tpot or e2el)"),
            FlagError::GoodputLimit(value) => write!(f, "--goodput: '{value}' is not a number of milliseconds"),
            FlagError::ClientCores(part) => write!(f, "--client-cores: '{part}' is not a CPU number or range"),
            FlagError::NoClientCores => f.write_str("--client-cores names no CPU"),
            FlagError::PairSyntax { flag, value } => write!(f, "{flag}: '{value}' is not KEY=VALUE"),
            FlagError::PairInvalid { flag, value } => write!(f, "{flag}: '{value}' is not a valid KEY=VALUE"),
            FlagError::ExtraBodyNotObject => f.write_str("--extra-body must be a JSON object"),
            FlagError::ExtraBodyJson(e) => write!(f, "--extra-body is not valid JSON: {e}"),
            FlagError::RangeRatioSyntax(s) => {
                write!(f, "'{s}' is neither a number nor '{{\"input\": r, \"output\": r}}'")
            }
            FlagError::RangeRatioValue { key, value } => write!(f, "'{key}' in '{value}' is not a number"),
            FlagError::RangeRatioBounds(r) => write!(f, "ratios must be in [0, 1), got {r}"),
            FlagError::ConcurrencyBelowCores { cap, cores } => {
                write!(f, "--max-concurrency {cap} is below the {cores} client cores: use fewer --client-cores")
            }
            FlagError::DurationWithoutConcurrency => {
                f.write_str("--duration without --request-rate needs --max-concurrency (a closed loop)")
            }
            FlagError::ConnectionsWithoutHttp2 => {
                f.write_str("--connections needs --http2 (HTTP/1.1 opens one connection per request in flight)")
            }
            FlagError::Http2NewConnections => {
                f.write_str("--new-connection-per-request and --http2 exclude each other: streams share connections")
            }
            FlagError::NoConnections => f.write_str("--connections must be at least 1"),
        }
    }
}

impl std::error::Error for FlagError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FlagError::Resolve { source, .. } => Some(source),
            FlagError::ExtraBodyJson(e) => Some(e),
            _ => None,
        }
    }
}

/// An HTTP/1.1 response the client cannot frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    MalformedHead(httparse::Error),
    /// The `content-length` value.
    ContentLength(String),
    ChunkSizeWithoutDigits,
    ChunkSizeByte(u8),
    ChunkSizeTooLarge,
    /// The byte found where CRLF should end a chunk's data.
    ChunkDataEnd(u8),
    /// A prepared request that cannot be sent as an HTTP/2 stream: why.
    RequestForHttp2(String),
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::MalformedHead(e) => write!(f, "malformed response head: {e}"),
            HttpError::ContentLength(value) => write!(f, "bad content-length '{value}'"),
            HttpError::ChunkSizeWithoutDigits => f.write_str("chunk size line without digits"),
            HttpError::ChunkSizeByte(b) => write!(f, "bad chunk size byte 0x{b:02x}"),
            HttpError::ChunkSizeTooLarge => f.write_str("chunk size too large"),
            HttpError::ChunkDataEnd(b) => write!(f, "missing CRLF after chunk data (0x{b:02x})"),
            HttpError::RequestForHttp2(why) => write!(f, "request not expressible as an HTTP/2 stream: {why}"),
        }
    }
}

impl std::error::Error for HttpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HttpError::MalformedHead(e) => Some(e),
            _ => None,
        }
    }
}

/// The server's `GET /v1/models`, asked before the run for the model (and readiness).
#[derive(Debug)]
pub enum ServerError {
    /// The listing could not be had, or named no model and `--model` was not given.
    Listing { authority: String, failure: ListingFailure },
    /// `--ready-check-timeout-sec` passed with the listing still failing.
    NotReady { timeout_s: u64, authority: String, failure: ListingFailure },
    /// The first model listed has no `id`.
    ModelWithoutId { authority: String },
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let listing = |f: &mut fmt::Formatter<'_>, authority: &str, failure: &ListingFailure| {
            write!(f, "cannot list models at http://{authority}/v1/models ({failure}); pass --model")
        };
        match self {
            ServerError::Listing { authority, failure } => listing(f, authority, failure),
            ServerError::NotReady { timeout_s, authority, failure } => {
                write!(f, "not ready after --ready-check-timeout-sec {timeout_s}: ")?;
                listing(f, authority, failure)
            }
            ServerError::ModelWithoutId { authority } => {
                write!(f, "http://{authority}/v1/models lists a model without an id; pass --model")
            }
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServerError::Listing { failure, .. } | ServerError::NotReady { failure, .. } => Some(failure),
            ServerError::ModelWithoutId { .. } => None,
        }
    }
}

/// Why `GET /v1/models` gave no listing.
#[derive(Debug)]
pub enum ListingFailure {
    /// Connecting, sending or reading.
    Io(io::Error),
    Http(HttpError),
    /// The connection closed before the response head was complete.
    Truncated,
    Status(u16),
    Json(serde_json::Error),
    /// The listing has no model.
    NoModel,
}

impl fmt::Display for ListingFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListingFailure::Io(e) => e.fmt(f),
            ListingFailure::Http(e) => e.fmt(f),
            ListingFailure::Truncated => f.write_str("truncated response"),
            ListingFailure::Status(status) => write!(f, "status {status}"),
            ListingFailure::Json(e) => e.fmt(f),
            ListingFailure::NoModel => f.write_str("no model listed"),
        }
    }
}

impl std::error::Error for ListingFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ListingFailure::Io(e) => Some(e),
            ListingFailure::Http(e) => Some(e),
            ListingFailure::Json(e) => Some(e),
            ListingFailure::Truncated | ListingFailure::Status(_) | ListingFailure::NoModel => None,
        }
    }
}

impl From<io::Error> for ListingFailure {
    fn from(e: io::Error) -> Self {
        ListingFailure::Io(e)
    }
}

impl From<HttpError> for ListingFailure {
    fn from(e: HttpError) -> Self {
        ListingFailure::Http(e)
    }
}

impl From<serde_json::Error> for ListingFailure {
    fn from(e: serde_json::Error) -> Self {
        ListingFailure::Json(e)
    }
}

/// The workload: the client's tokenizer, and the prompts built with it from a dataset.
#[derive(Debug)]
pub enum WorkloadError {
    /// `--tokenizer` names neither a tokenizer.json nor a directory holding one.
    NoTokenizerFile(PathBuf),
    /// The default tokenizer's demo model could not be fetched.
    DemoModel(AssetError),
    LoadTokenizer {
        path: PathBuf,
        source: tokenizers::Error,
    },
    ReadDataset {
        path: PathBuf,
        source: io::Error,
    },
    ShareGpt {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A JSON Lines dataset's line (1-based) that is not a prompt object.
    JsonlLine {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    NoPrompts,
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkloadError::NoTokenizerFile(p) => write!(f, "--tokenizer: {} has no tokenizer.json", p.display()),
            WorkloadError::DemoModel(e) => e.fmt(f),
            WorkloadError::LoadTokenizer { path, source } => write!(f, "cannot load {}: {source}", path.display()),
            WorkloadError::ReadDataset { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            WorkloadError::ShareGpt { path, source } => {
                write!(f, "{} is not a ShareGPT JSON array: {source}", path.display())
            }
            WorkloadError::JsonlLine { path, line, source } => {
                write!(f, "{}:{line}: expected {{\"prompt\": ..., \"output_tokens\": N}}: {source}", path.display())
            }
            WorkloadError::NoPrompts => f.write_str("the dataset produced no prompts"),
        }
    }
}

impl std::error::Error for WorkloadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WorkloadError::DemoModel(e) => Some(e),
            WorkloadError::LoadTokenizer { source, .. } => Some(&**source),
            WorkloadError::ReadDataset { source, .. } => Some(source),
            WorkloadError::ShareGpt { source, .. } | WorkloadError::JsonlLine { source, .. } => Some(source),
            WorkloadError::NoTokenizerFile(_) | WorkloadError::NoPrompts => None,
        }
    }
}

impl From<AssetError> for WorkloadError {
    fn from(e: AssetError) -> Self {
        WorkloadError::DemoModel(e)
    }
}

/// The client threads of a run: starting them, their runtimes, their first connections.
#[derive(Debug)]
pub enum RunError {
    /// Flags the plan for the client cores cannot honour.
    Flag(FlagError),
    SpawnThread(io::Error),
    ThreadPanicked,
    Runtime {
        core: u16,
        source: io::Error,
    },
    /// A connection opened ahead of the run.
    Connect {
        addr: SocketAddr,
        source: io::Error,
    },
    /// A core was released from the start barrier before the origin was set.
    NoOrigin,
    Timerfd {
        core: u16,
        source: io::Error,
    },
    /// A paced core was planned without its schedule.
    NoSchedule,
    /// `--http2`: a prepared request has no stream form.
    Http2Request(HttpError),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Flag(e) => e.fmt(f),
            RunError::SpawnThread(e) => write!(f, "cannot start a client thread: {e}"),
            RunError::ThreadPanicked => f.write_str("a client thread panicked"),
            RunError::Runtime { core, source } => write!(f, "client core {core}: cannot build a runtime: {source}"),
            RunError::Connect { addr, source } => write!(f, "cannot connect to {addr}: {source}"),
            RunError::NoOrigin => f.write_str("the run origin was not set"),
            RunError::Timerfd { core, source } => write!(f, "client core {core}: cannot create a timerfd: {source}"),
            RunError::NoSchedule => f.write_str("a paced run needs its schedule"),
            RunError::Http2Request(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Flag(e) => Some(e),
            RunError::SpawnThread(e) => Some(e),
            RunError::Runtime { source, .. } | RunError::Connect { source, .. } | RunError::Timerfd { source, .. } => {
                Some(source)
            }
            RunError::Http2Request(e) => Some(e),
            RunError::ThreadPanicked | RunError::NoOrigin | RunError::NoSchedule => None,
        }
    }
}

impl From<HttpError> for RunError {
    fn from(e: HttpError) -> Self {
        RunError::Http2Request(e)
    }
}

impl From<FlagError> for RunError {
    fn from(e: FlagError) -> Self {
        RunError::Flag(e)
    }
}

/// Result files: writing a run's (JSON, JSON Lines, SVG), reading two for `compare`.
#[derive(Debug)]
pub enum ResultFileError {
    CreateDir {
        dir: PathBuf,
        source: io::Error,
    },
    Write {
        path: PathBuf,
        source: io::Error,
    },
    /// `--append-result`.
    Append {
        path: PathBuf,
        source: io::Error,
    },
    Read {
        path: PathBuf,
        source: io::Error,
    },
    /// Neither one JSON document nor JSON Lines ending in one.
    NotAResult {
        path: PathBuf,
        source: serde_json::Error,
    },
}

impl fmt::Display for ResultFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResultFileError::CreateDir { dir, source } => write!(f, "cannot create {}: {source}", dir.display()),
            ResultFileError::Write { path, source } => write!(f, "cannot write {}: {source}", path.display()),
            ResultFileError::Append { path, source } => write!(f, "cannot append to {}: {source}", path.display()),
            ResultFileError::Read { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            ResultFileError::NotAResult { path, source } => {
                write!(f, "{} is not a result JSON: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for ResultFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ResultFileError::CreateDir { source, .. }
            | ResultFileError::Write { source, .. }
            | ResultFileError::Append { source, .. }
            | ResultFileError::Read { source, .. } => Some(source),
            ResultFileError::NotAResult { source, .. } => Some(source),
        }
    }
}

/// `shardgate bench sink` cannot serve.
#[derive(Debug)]
pub enum SinkError {
    Listen { listen: String, source: io::Error },
    LocalAddr(io::Error),
    Nonblocking(io::Error),
    SpawnThread(io::Error),
    ThreadPanicked,
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkError::Listen { listen, source } => write!(f, "cannot listen on {listen}: {source}"),
            SinkError::LocalAddr(e) => write!(f, "cannot read the bound address: {e}"),
            SinkError::Nonblocking(e) => write!(f, "cannot make the listener non-blocking: {e}"),
            SinkError::SpawnThread(e) => write!(f, "cannot start the sink thread: {e}"),
            SinkError::ThreadPanicked => f.write_str("the sink thread panicked"),
        }
    }
}

impl std::error::Error for SinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SinkError::Listen { source, .. } => Some(source),
            SinkError::LocalAddr(e) | SinkError::Nonblocking(e) | SinkError::SpawnThread(e) => Some(e),
            SinkError::ThreadPanicked => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed errors read exactly as the texts they replaced.
    #[test]
    fn error_texts_are_unchanged() {
        let io = || io::Error::from(io::ErrorKind::NotFound);
        let json = || match serde_json::from_str::<serde_json::Value>("{") {
            Err(e) => e,
            Ok(v) => panic!("{v} parsed"),
        };
        let flag = |e: FlagError| e.to_string();
        let cases: Vec<(String, String)> = vec![
            (
                flag(FlagError::Refused { name: "profile", instead: "the server's own profiler" }),
                "--profile (a vllm bench serve flag) is not supported; use instead: the server's own profiler".into(),
            ),
            (
                flag(FlagError::TokenizerMode("mistral".into())),
                "--tokenizer-mode mistral: this client reads a Hugging Face tokenizer.json only; use auto or hf, \
                 with --tokenizer pointing at the tokenizer.json"
                    .into(),
            ),
            (
                flag(FlagError::CustomOutputLen),
                "--custom-output-len must be at least 1, or -1 for the file's output_tokens".into(),
            ),
            (flag(FlagError::Endpoint("v1".into())), "--endpoint must start with '/', got 'v1'".into()),
            (
                flag(FlagError::PromptTokenIdsWithText("chat")),
                "--prompt-token-ids needs a completions backend (openai or vllm): chat takes no token ids".into(),
            ),
            (
                flag(FlagError::MinPWithResponses),
                "--min-p: the Responses API has no min_p (vLLM's openai-responses backend refuses it too); send it \
                 with --extra-body '{\"min_p\": P}' if the server takes it"
                    .into(),
            ),
            (flag(FlagError::NoPrompts), "--num-prompts must be at least 1".into()),
            (flag(FlagError::NoDatasetPath), "--dataset-path is required for the sharegpt and jsonl datasets".into()),
            (flag(FlagError::NoPrefixGroups), "--prefix-group-count must be at least 1".into()),
            (flag(FlagError::NoConcurrency), "--max-concurrency must be at least 1".into()),
            (flag(FlagError::Duration(-1.5)), "--duration must be > 0 s, got -1.5".into()),
            (flag(FlagError::RequestTimeout(0.0)), "--request-timeout-s must be > 0, got 0".into()),
            (flag(FlagError::SteadyStateThreshold(2.0)), "--steady-state-threshold must be in (0, 1], got 2".into()),
            (
                flag(FlagError::BaseUrlScheme("https://h".into())),
                "--base-url must start with http:// (TLS is not supported), got 'https://h'".into(),
            ),
            (
                flag(FlagError::BaseUrlPath("h:1/v1".into())),
                "--base-url must be http://HOST:PORT without a path, got 'h:1/v1'".into(),
            ),
            (
                flag(FlagError::Resolve { target: "nohost:80".into(), source: io() }),
                format!("cannot resolve nohost:80: {}", io()),
            ),
            (flag(FlagError::NoAddress("h:80".into())), "h:80 resolves to no address".into()),
            (flag(FlagError::RequestRate(0.0)), "--request-rate must be > 0 (or inf), got 0".into()),
            (flag(FlagError::Burstiness(f64::NAN)), "--burstiness must be > 0, got NaN".into()),
            (flag(FlagError::ArrivalProcessUnpaced), "--arrival-process needs a finite --request-rate".into()),
            (flag(FlagError::Percentile("0".into())), "--percentiles: '0' is not a percentile in (0, 100]".into()),
            (flag(FlagError::NoPercentiles), "--percentiles needs at least one value".into()),
            (
                flag(FlagError::UnknownPercentileMetric { name: "goodput".into(), known: &["ttft", "tpot"] }),
                "--percentile-metrics: unknown metric 'goodput' (one of ttft,tpot)".into(),
            ),
            (flag(FlagError::NoPercentileMetrics), "--percentile-metrics needs at least one metric".into()),
            (flag(FlagError::GoodputSyntax("tpot".into())), "--goodput: 'tpot' is not KEY:MS".into()),
            (
                flag(FlagError::GoodputMetric("itl".into())),
                "--goodput: unknown metric 'itl' (ttft, tpot or e2el)".into(),
            ),
            (flag(FlagError::GoodputLimit("x".into())), "--goodput: 'x' is not a number of milliseconds".into()),
            (flag(FlagError::ClientCores("4-2".into())), "--client-cores: '4-2' is not a CPU number or range".into()),
            (flag(FlagError::NoClientCores), "--client-cores names no CPU".into()),
            (
                flag(FlagError::PairSyntax { flag: "--header", value: "novalue".into() }),
                "--header: 'novalue' is not KEY=VALUE".into(),
            ),
            (
                flag(FlagError::PairInvalid { flag: "--metadata", value: "=v".into() }),
                "--metadata: '=v' is not a valid KEY=VALUE".into(),
            ),
            (flag(FlagError::ExtraBodyNotObject), "--extra-body must be a JSON object".into()),
            (flag(FlagError::ExtraBodyJson(json())), format!("--extra-body is not valid JSON: {}", json())),
            (
                flag(FlagError::RangeRatioSyntax("wide".into())),
                "'wide' is neither a number nor '{\"input\": r, \"output\": r}'".into(),
            ),
            (
                flag(FlagError::RangeRatioValue { key: "input", value: r#"{"input": "x"}"#.into() }),
                r#"'input' in '{"input": "x"}' is not a number"#.into(),
            ),
            (flag(FlagError::RangeRatioBounds(1.0)), "ratios must be in [0, 1), got 1".into()),
            (
                flag(FlagError::ConcurrencyBelowCores { cap: 1, cores: 2 }),
                "--max-concurrency 1 is below the 2 client cores: use fewer --client-cores".into(),
            ),
            (
                flag(FlagError::DurationWithoutConcurrency),
                "--duration without --request-rate needs --max-concurrency (a closed loop)".into(),
            ),
            (HttpError::ContentLength("x".into()).to_string(), "bad content-length 'x'".into()),
            (HttpError::ChunkSizeWithoutDigits.to_string(), "chunk size line without digits".into()),
            (HttpError::ChunkSizeByte(b'z').to_string(), "bad chunk size byte 0x7a".into()),
            (HttpError::ChunkSizeTooLarge.to_string(), "chunk size too large".into()),
            (HttpError::ChunkDataEnd(b'X').to_string(), "missing CRLF after chunk data (0x58)".into()),
            (
                HttpError::MalformedHead(httparse::Error::Version).to_string(),
                format!("malformed response head: {}", httparse::Error::Version),
            ),
            (
                ServerError::Listing { authority: "h:1".into(), failure: ListingFailure::Io(io()) }.to_string(),
                format!("cannot list models at http://h:1/v1/models ({}); pass --model", io()),
            ),
            (
                ServerError::Listing { authority: "h:1".into(), failure: ListingFailure::NoModel }.to_string(),
                "cannot list models at http://h:1/v1/models (no model listed); pass --model".into(),
            ),
            (
                ServerError::NotReady { timeout_s: 3, authority: "h:1".into(), failure: ListingFailure::Status(503) }
                    .to_string(),
                "not ready after --ready-check-timeout-sec 3: cannot list models at http://h:1/v1/models \
                 (status 503); pass --model"
                    .into(),
            ),
            (
                ServerError::NotReady { timeout_s: 3, authority: "h:1".into(), failure: ListingFailure::Truncated }
                    .to_string(),
                "not ready after --ready-check-timeout-sec 3: cannot list models at http://h:1/v1/models \
                 (truncated response); pass --model"
                    .into(),
            ),
            (
                ServerError::ModelWithoutId { authority: "h:1".into() }.to_string(),
                "http://h:1/v1/models lists a model without an id; pass --model".into(),
            ),
            (ListingFailure::Http(HttpError::ChunkSizeTooLarge).to_string(), "chunk size too large".into()),
            (WorkloadError::NoTokenizerFile("/m".into()).to_string(), "--tokenizer: /m has no tokenizer.json".into()),
            (WorkloadError::DemoModel(AssetError::Unpack("p.tgz".into())).to_string(), "cannot unpack p.tgz".into()),
            (
                WorkloadError::LoadTokenizer { path: "/m/tokenizer.json".into(), source: "bad".into() }.to_string(),
                "cannot load /m/tokenizer.json: bad".into(),
            ),
            (
                WorkloadError::ReadDataset { path: "d.json".into(), source: io() }.to_string(),
                format!("cannot read d.json: {}", io()),
            ),
            (WorkloadError::NoPrompts.to_string(), "the dataset produced no prompts".into()),
            (RunError::SpawnThread(io()).to_string(), format!("cannot start a client thread: {}", io())),
            (RunError::ThreadPanicked.to_string(), "a client thread panicked".into()),
            (
                RunError::Runtime { core: 2, source: io() }.to_string(),
                format!("client core 2: cannot build a runtime: {}", io()),
            ),
            (
                RunError::Connect { addr: SocketAddr::from(([127, 0, 0, 1], 9)), source: io() }.to_string(),
                format!("cannot connect to 127.0.0.1:9: {}", io()),
            ),
            (RunError::NoOrigin.to_string(), "the run origin was not set".into()),
            (
                RunError::Timerfd { core: 0, source: io() }.to_string(),
                format!("client core 0: cannot create a timerfd: {}", io()),
            ),
            (RunError::NoSchedule.to_string(), "a paced run needs its schedule".into()),
            (RunError::Flag(FlagError::NoPrompts).to_string(), "--num-prompts must be at least 1".into()),
            (
                ResultFileError::CreateDir { dir: "out".into(), source: io() }.to_string(),
                format!("cannot create out: {}", io()),
            ),
            (
                ResultFileError::Write { path: "out/r.json".into(), source: io() }.to_string(),
                format!("cannot write out/r.json: {}", io()),
            ),
            (
                ResultFileError::Append { path: "r.json".into(), source: io() }.to_string(),
                format!("cannot append to r.json: {}", io()),
            ),
            (
                ResultFileError::Read { path: "a.json".into(), source: io() }.to_string(),
                format!("cannot read a.json: {}", io()),
            ),
            (
                SinkError::Listen { listen: "127.0.0.1:1".into(), source: io() }.to_string(),
                format!("cannot listen on 127.0.0.1:1: {}", io()),
            ),
            (SinkError::LocalAddr(io()).to_string(), format!("cannot read the bound address: {}", io())),
            (SinkError::Nonblocking(io()).to_string(), format!("cannot make the listener non-blocking: {}", io())),
            (SinkError::SpawnThread(io()).to_string(), format!("cannot start the sink thread: {}", io())),
            (SinkError::ThreadPanicked.to_string(), "the sink thread panicked".into()),
            (BenchError::from(SinkError::ThreadPanicked).to_string(), "the sink thread panicked".into()),
            (
                WorkloadError::ShareGpt { path: "s.json".into(), source: json() }.to_string(),
                format!("s.json is not a ShareGPT JSON array: {}", json()),
            ),
            (
                WorkloadError::JsonlLine { path: "p.jsonl".into(), line: 3, source: json() }.to_string(),
                format!("p.jsonl:3: expected {{\"prompt\": ..., \"output_tokens\": N}}: {}", json()),
            ),
            (
                ResultFileError::NotAResult { path: "b.json".into(), source: json() }.to_string(),
                format!("b.json is not a result JSON: {}", json()),
            ),
            (ListingFailure::Json(json()).to_string(), json().to_string()),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}
