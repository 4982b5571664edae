//! The simulator's errors: its flags (`ArgError`), the `--script` file (`ScriptError`), a vLLM
//! request the engine side refuses to decode (`RequestError`), the handshake with the gateway
//! (`HandshakeError`), and `EngineError`, any of them or a failure of the serving loop, as
//! `main` prints it (`shardgate-sim: {e}`, exit 1).
//!
//! Each `Display` writes the text the simulator has always printed (the gateway's tests read
//! them). `parse_fault` and `parse_rank_value`, clap `value_parser`s, return `ArgError`: clap
//! takes any error type and prints its `Display`.

use std::fmt;
use std::io;
use std::path::PathBuf;

use shardgate_text::TokenizerError;
use shardgate_wire::msgpack::DecodeError;

/// A command line the simulator cannot run with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// `--fault` without `@`.
    FaultSyntax(String),
    UnknownFault(String),
    /// `--fault` whose request number is not a positive integer.
    FaultRequest(String),
    /// `--fault` whose token count is not a positive integer.
    FaultTokens(String),
    /// `RANK=VALUE` without `=`.
    RankValueSyntax(String),
    Rank(String),
    RankValue(String),
    EngineIndexRange,
    ScriptWithoutModel,
    /// A vLLM engine with neither `--handshake` nor `--worker-url`.
    NoHandshake,
    WorkerUrl,
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::FaultSyntax(s) => write!(f, "--fault takes KIND@N[:T], got '{s}'"),
            ArgError::UnknownFault(kind) => {
                write!(f, "unknown fault '{kind}' (die, die-silent, stall, deaf, garbage, error, error-retryable)")
            }
            ArgError::FaultRequest(s) => write!(f, "--fault {s}: N must be a positive integer"),
            ArgError::FaultTokens(s) => write!(f, "--fault {s}: T must be a positive integer"),
            ArgError::RankValueSyntax(s) => write!(f, "expected RANK=VALUE, got '{s}'"),
            ArgError::Rank(s) => write!(f, "'{s}': bad rank"),
            ArgError::RankValue(s) => write!(f, "'{s}': bad value"),
            ArgError::EngineIndexRange => {
                f.write_str("--zmq-engine-index + --data-parallel-size - 1 must fit in 16 bits")
            }
            ArgError::ScriptWithoutModel => {
                f.write_str("--script needs --model-path (the tokenizer turns script text into tokens)")
            }
            ArgError::NoHandshake => f.write_str("pass --handshake tcp://HOST:PORT or --worker-url ipc://PATH"),
            ArgError::WorkerUrl => f.write_str("--worker-url must be ipc://PATH or tcp://IP:PORT"),
        }
    }
}

impl std::error::Error for ArgError {}

/// A `--script` file that cannot be used; lines are 1-based.
#[derive(Debug)]
pub enum ScriptError {
    Read {
        path: PathBuf,
        source: io::Error,
    },
    Json {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    /// A line without a string `text`.
    NoText {
        path: PathBuf,
        line: usize,
    },
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScriptError::Read { path, source } => write!(f, "cannot read script {}: {source}", path.display()),
            ScriptError::Json { path, line, source } => write!(f, "script {} line {line}: {source}", path.display()),
            ScriptError::NoText { path, line } => {
                write!(f, "script {} line {line}: needs a string \"text\"", path.display())
            }
        }
    }
}

impl std::error::Error for ScriptError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ScriptError::Read { source, .. } => Some(source),
            ScriptError::Json { source, .. } => Some(source),
            ScriptError::NoText { .. } => None,
        }
    }
}

/// A vLLM request that a real engine would fail to decode: undecodable msgpack, or a check
/// vLLM re-runs while decoding.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestError {
    Decode(DecodeError),
    /// `structured_outputs` with this many constraints instead of one.
    StructuredOutputsConstraints(usize),
    StructuredOutputsWithoutBackend,
    TopP(f64),
    Temperature(f64),
    /// START_DP_WAVE with this many elements instead of two.
    StartDpWaveLength(usize),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Decode(e) => e.fmt(f),
            RequestError::StructuredOutputsConstraints(n) => {
                write!(f, "structured outputs need exactly one constraint, got {n}")
            }
            RequestError::StructuredOutputsWithoutBackend => f.write_str("structured outputs without a _backend"),
            RequestError::TopP(p) => write!(f, "top_p must be in (0, 1], got {p}"),
            RequestError::Temperature(t) => write!(f, "temperature must be in [0, 2], got {t}"),
            RequestError::StartDpWaveLength(n) => write!(f, "START_DP_WAVE with {n} elements"),
        }
    }
}

impl std::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RequestError::Decode(e) => Some(e),
            _ => None,
        }
    }
}

impl From<DecodeError> for RequestError {
    fn from(e: DecodeError) -> Self {
        RequestError::Decode(e)
    }
}

/// The handshake with the gateway, as a headless vLLM or TokenSpeed engine makes it.
#[derive(Debug)]
pub enum HandshakeError {
    /// Creating or setting up a socket, or sending on it.
    Socket(zmq::Error),
    Dial {
        addr: String,
        source: zmq::Error,
    },
    /// vLLM: INIT did not come (the engine's 5 minutes passed).
    NoInit {
        addr: String,
        source: zmq::Error,
    },
    /// TokenSpeed: INIT did not come in the engine's init timeout.
    InitTimeout {
        addr: String,
        source: zmq::Error,
    },
    /// TokenSpeed: INIT as a message without frames.
    EmptyInit,
    UndecodableInit(DecodeError),
    ConnectInput {
        addr: String,
        source: zmq::Error,
    },
    ConnectOutput {
        addr: String,
        source: zmq::Error,
    },
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::Socket(e) => e.fmt(f),
            HandshakeError::Dial { addr, source } => write!(f, "cannot dial {addr}: {source}"),
            HandshakeError::NoInit { addr, source } => write!(f, "no INIT from {addr}: {source}"),
            HandshakeError::InitTimeout { addr, source } => {
                write!(f, "timed out waiting for INIT from {addr}: {source}")
            }
            HandshakeError::EmptyInit => f.write_str("empty INIT"),
            HandshakeError::UndecodableInit(e) => write!(f, "undecodable INIT: {e}"),
            HandshakeError::ConnectInput { addr, source } => write!(f, "cannot connect input {addr}: {source}"),
            HandshakeError::ConnectOutput { addr, source } => write!(f, "cannot connect output {addr}: {source}"),
        }
    }
}

impl std::error::Error for HandshakeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HandshakeError::Socket(source)
            | HandshakeError::Dial { source, .. }
            | HandshakeError::NoInit { source, .. }
            | HandshakeError::InitTimeout { source, .. }
            | HandshakeError::ConnectInput { source, .. }
            | HandshakeError::ConnectOutput { source, .. } => Some(source),
            HandshakeError::UndecodableInit(e) => Some(e),
            HandshakeError::EmptyInit => None,
        }
    }
}

impl From<zmq::Error> for HandshakeError {
    fn from(e: zmq::Error) -> Self {
        HandshakeError::Socket(e)
    }
}

/// What ends the simulator: its setup, a rank's handshake, or a rank's serving loop failing
/// as the real engine's would (an output thread crash, an undecodable ABORT or utility call).
#[derive(Debug)]
pub enum EngineError {
    Arg(ArgError),
    /// `--model-path`'s tokenizer.json.
    Tokenizer(TokenizerError),
    Script(ScriptError),
    Handshake(HandshakeError),
    /// The `--record` file.
    OpenRecord {
        path: PathBuf,
        source: io::Error,
    },
    SpawnRank {
        rank: u16,
        source: io::Error,
    },
    RankPanicked,
    /// Polling the input sockets.
    Poll(zmq::Error),
    Abort(DecodeError),
    Utility(DecodeError),
    StartDpWave(RequestError),
    /// An ADD for a client with no output socket.
    ClientIndex(usize),
    NoOutputSocket(usize),
    Send(zmq::Error),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Arg(e) => e.fmt(f),
            EngineError::Tokenizer(e) => e.fmt(f),
            EngineError::Script(e) => e.fmt(f),
            EngineError::Handshake(e) => e.fmt(f),
            EngineError::OpenRecord { path, source } => write!(f, "cannot open {}: {source}", path.display()),
            EngineError::SpawnRank { rank, source } => write!(f, "cannot start rank {rank}: {source}"),
            EngineError::RankPanicked => f.write_str("a rank thread panicked"),
            EngineError::Poll(e) => e.fmt(f),
            EngineError::Abort(e) => write!(f, "undecodable ABORT: {e}"),
            EngineError::Utility(e) => e.fmt(f),
            EngineError::StartDpWave(e) => e.fmt(f),
            EngineError::ClientIndex(i) => write!(f, "client_index {i} out of range: the output thread crashes"),
            EngineError::NoOutputSocket(client) => write!(f, "no output socket for client {client}"),
            EngineError::Send(e) => write!(f, "output send failed: {e}"),
        }
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EngineError::Arg(e) => Some(e),
            EngineError::Tokenizer(e) => Some(e),
            EngineError::Script(e) => Some(e),
            EngineError::Handshake(e) => Some(e),
            EngineError::OpenRecord { source, .. } | EngineError::SpawnRank { source, .. } => Some(source),
            EngineError::Poll(e) | EngineError::Send(e) => Some(e),
            EngineError::Abort(e) | EngineError::Utility(e) => Some(e),
            EngineError::StartDpWave(e) => Some(e),
            EngineError::RankPanicked | EngineError::ClientIndex(_) | EngineError::NoOutputSocket(_) => None,
        }
    }
}

impl From<ArgError> for EngineError {
    fn from(e: ArgError) -> Self {
        EngineError::Arg(e)
    }
}

impl From<TokenizerError> for EngineError {
    fn from(e: TokenizerError) -> Self {
        EngineError::Tokenizer(e)
    }
}

impl From<ScriptError> for EngineError {
    fn from(e: ScriptError) -> Self {
        EngineError::Script(e)
    }
}

impl From<HandshakeError> for EngineError {
    fn from(e: HandshakeError) -> Self {
        EngineError::Handshake(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed errors read exactly as the texts they replaced.
    #[test]
    fn error_texts_are_unchanged() {
        let io = || io::Error::from(io::ErrorKind::NotFound);
        let zmq = zmq::Error::ECONNREFUSED;
        let decode = || DecodeError("truncated".into());
        let json = || match serde_json::from_str::<serde_json::Value>("{") {
            Err(e) => e,
            Ok(v) => panic!("{v} parsed"),
        };
        let cases: Vec<(String, String)> = vec![
            (ArgError::FaultSyntax("die".into()).to_string(), "--fault takes KIND@N[:T], got 'die'".into()),
            (
                ArgError::UnknownFault("boom".into()).to_string(),
                "unknown fault 'boom' (die, die-silent, stall, deaf, garbage, error, error-retryable)".into(),
            ),
            (ArgError::FaultRequest("die@0".into()).to_string(), "--fault die@0: N must be a positive integer".into()),
            (
                ArgError::FaultTokens("die@1:x".into()).to_string(),
                "--fault die@1:x: T must be a positive integer".into(),
            ),
            (ArgError::RankValueSyntax("1".into()).to_string(), "expected RANK=VALUE, got '1'".into()),
            (ArgError::Rank("x=1".into()).to_string(), "'x=1': bad rank".into()),
            (ArgError::RankValue("1=x".into()).to_string(), "'1=x': bad value".into()),
            (
                ArgError::EngineIndexRange.to_string(),
                "--zmq-engine-index + --data-parallel-size - 1 must fit in 16 bits".into(),
            ),
            (
                ArgError::ScriptWithoutModel.to_string(),
                "--script needs --model-path (the tokenizer turns script text into tokens)".into(),
            ),
            (ArgError::NoHandshake.to_string(), "pass --handshake tcp://HOST:PORT or --worker-url ipc://PATH".into()),
            (ArgError::WorkerUrl.to_string(), "--worker-url must be ipc://PATH or tcp://IP:PORT".into()),
            (
                ScriptError::Read { path: "s.jsonl".into(), source: io() }.to_string(),
                format!("cannot read script s.jsonl: {}", io()),
            ),
            (
                ScriptError::Json { path: "s.jsonl".into(), line: 2, source: json() }.to_string(),
                format!("script s.jsonl line 2: {}", json()),
            ),
            (
                ScriptError::NoText { path: "s.jsonl".into(), line: 3 }.to_string(),
                "script s.jsonl line 3: needs a string \"text\"".into(),
            ),
            (RequestError::Decode(decode()).to_string(), "truncated".into()),
            (
                RequestError::StructuredOutputsConstraints(2).to_string(),
                "structured outputs need exactly one constraint, got 2".into(),
            ),
            (RequestError::StructuredOutputsWithoutBackend.to_string(), "structured outputs without a _backend".into()),
            (RequestError::TopP(0.0).to_string(), "top_p must be in (0, 1], got 0".into()),
            (RequestError::Temperature(2.5).to_string(), "temperature must be in [0, 2], got 2.5".into()),
            (RequestError::StartDpWaveLength(3).to_string(), "START_DP_WAVE with 3 elements".into()),
            (HandshakeError::Socket(zmq).to_string(), zmq.to_string()),
            (
                HandshakeError::Dial { addr: "tcp://h:1".into(), source: zmq }.to_string(),
                format!("cannot dial tcp://h:1: {zmq}"),
            ),
            (
                HandshakeError::NoInit { addr: "tcp://h:1".into(), source: zmq }.to_string(),
                format!("no INIT from tcp://h:1: {zmq}"),
            ),
            (
                HandshakeError::InitTimeout { addr: "tcp://h:1".into(), source: zmq }.to_string(),
                format!("timed out waiting for INIT from tcp://h:1: {zmq}"),
            ),
            (HandshakeError::EmptyInit.to_string(), "empty INIT".into()),
            (HandshakeError::UndecodableInit(decode()).to_string(), "undecodable INIT: truncated".into()),
            (
                HandshakeError::ConnectInput { addr: "ipc:///s/in".into(), source: zmq }.to_string(),
                format!("cannot connect input ipc:///s/in: {zmq}"),
            ),
            (
                HandshakeError::ConnectOutput { addr: "ipc:///s/out".into(), source: zmq }.to_string(),
                format!("cannot connect output ipc:///s/out: {zmq}"),
            ),
            (
                EngineError::Tokenizer(TokenizerError::LoadFile {
                    path: "/m/tokenizer.json".into(),
                    reason: "x".into(),
                })
                .to_string(),
                "cannot load tokenizer /m/tokenizer.json: x".into(),
            ),
            (
                EngineError::OpenRecord { path: "r.jsonl".into(), source: io() }.to_string(),
                format!("cannot open r.jsonl: {}", io()),
            ),
            (EngineError::SpawnRank { rank: 1, source: io() }.to_string(), format!("cannot start rank 1: {}", io())),
            (EngineError::RankPanicked.to_string(), "a rank thread panicked".into()),
            (EngineError::Poll(zmq).to_string(), zmq.to_string()),
            (EngineError::Abort(decode()).to_string(), "undecodable ABORT: truncated".into()),
            (EngineError::Utility(decode()).to_string(), "truncated".into()),
            (
                EngineError::StartDpWave(RequestError::StartDpWaveLength(1)).to_string(),
                "START_DP_WAVE with 1 elements".into(),
            ),
            (EngineError::ClientIndex(4).to_string(), "client_index 4 out of range: the output thread crashes".into()),
            (EngineError::NoOutputSocket(4).to_string(), "no output socket for client 4".into()),
            (EngineError::Send(zmq).to_string(), format!("output send failed: {zmq}")),
            (
                EngineError::from(ArgError::WorkerUrl).to_string(),
                "--worker-url must be ipc://PATH or tcp://IP:PORT".into(),
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}
