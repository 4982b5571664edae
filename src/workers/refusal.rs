//! Why a worker is refused at registration, before anything is created for it: SMG's
//! `Failed job: type=AddWorker` reasons. The same refusals answer `POST /workers` (400, the
//! reason as message) and end startup for `--worker-urls` (`ConfigError::Worker`).

use std::fmt;

use shardgate_wire::sockdir::SockdirError;

#[derive(Debug)]
pub enum WorkerRefusal {
    /// `zmq_handshake_address` for a worker that is not `ipc://`.
    HandshakeAddressWithoutZmq,
    /// `connection_mode: zmq` (or a command-line worker) without an `ipc://` URL.
    NotIpc,
    /// Any other URL scheme.
    NotZmq {
        url: String,
    },
    /// The `ipc://` path (normalisation, lengths, socket root, directory rules).
    Path(SockdirError),
    UnsupportedRuntime {
        url: String,
        runtime: String,
    },
    HandshakeAddressNotTcp,
    WorkerType {
        url: String,
        worker_type: String,
    },
    DpRank {
        url: String,
    },
    DpSize {
        url: String,
        dp_size: usize,
    },
    /// A grouped worker cannot be dp-aware expanded; `setting` is how its size was given
    /// (`dp_size` or `--zmq-engine-count`).
    DpAware {
        url: String,
        setting: &'static str,
        count: usize,
    },
    OtherModel {
        url: String,
        theirs: String,
        ours: String,
    },
    /// A `tool_parser` / `reasoning_parser` label that names no registered parser.
    UnknownParser {
        url: String,
        label: &'static str,
        name: String,
        model: String,
    },
    /// The same socket files as a registered worker (any spelling, symlinks resolved).
    Duplicate {
        url: String,
        other: String,
    },
    HandshakeAddressTaken {
        address: String,
        other: String,
    },
    NoModelIdentity {
        url: String,
    },
    /// An `http(s)://` worker URL that names no usable upstream.
    Upstream {
        url: String,
        reason: crate::upstream::target::TargetError,
    },
    /// A `connection_mode` other than the URL's.
    ConnectionMode {
        url: String,
        mode: String,
    },
    /// A `tcp://` URL that is not an IP address and port of one interface.
    TcpAddress {
        url: String,
    },
    /// A `tcp://` bind on a public address without `--allow-public-engine-bind`.
    PublicBind {
        url: String,
        ip: std::net::IpAddr,
    },
    /// `zmq_handshake_address` for a `tcp://` worker, whose URL is its handshake address.
    TcpHandshakeAddress {
        url: String,
    },
    /// A `grpc://` URL without a `host:port`.
    GrpcAddress {
        url: String,
    },
    /// A runtime other than vLLM behind a `grpc://` URL.
    GrpcRuntime {
        url: String,
        runtime: String,
    },
    /// An `https://` or `grpcs://` worker while the TLS flags cannot be used (or the system
    /// has no CA store and no `--ca-cert-path` was given).
    Tls {
        url: String,
        reason: String,
    },
}

impl fmt::Display for WorkerRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerRefusal::HandshakeAddressWithoutZmq => {
                f.write_str("zmq_handshake_address is only valid for ZMQ workers (ipc:// URLs)")
            }
            WorkerRefusal::NotIpc => f.write_str("ZMQ worker URL must be ipc://<path>"),
            WorkerRefusal::Upstream { url, reason } => write!(f, "worker {url}: {reason}"),
            WorkerRefusal::ConnectionMode { url, mode } => {
                write!(f, "worker {url} has connection_mode '{mode}', but its URL is http://")
            }
            WorkerRefusal::NotZmq { url } => {
                write!(
                    f,
                    "worker {url} is not a ZMQ, gRPC or HTTP worker: this gateway serves ipc://, tcp://, grpc://, grpcs://, http:// and https:// workers"
                )
            }
            WorkerRefusal::GrpcAddress { url } => {
                write!(f, "gRPC worker URL must be grpc://<host>:<port> or grpcs://<host>:<port>, not {url}")
            }
            WorkerRefusal::Tls { url, reason } => write!(f, "worker {url} needs TLS, which cannot be set up: {reason}"),
            WorkerRefusal::GrpcRuntime { url, runtime } => {
                write!(f, "gRPC worker {url} has unsupported runtime {runtime}: only vllm is supported over gRPC")
            }
            WorkerRefusal::Path(e) => e.fmt(f),
            WorkerRefusal::UnsupportedRuntime { url, runtime } => write!(
                f,
                "ZMQ worker {url} has unsupported runtime {runtime}: only vllm and tokenspeed are supported over \
                 the ZMQ direct backend"
            ),
            WorkerRefusal::HandshakeAddressNotTcp => f.write_str("zmq_handshake_address must be a tcp:// address"),
            WorkerRefusal::WorkerType { url, worker_type } => {
                write!(f, "ZMQ worker {url} cannot serve worker type {worker_type}: ZMQ workers must be regular")
            }
            WorkerRefusal::DpRank { url } => {
                write!(f, "ZMQ worker {url} takes dp_size for a grouped worker; leave dp_rank unset")
            }
            WorkerRefusal::DpSize { url, dp_size } => write!(
                f,
                "ZMQ worker {url} has dp_size {dp_size}: it must be between 1 and {}",
                crate::limits::engines_per_worker_max
            ),
            WorkerRefusal::DpAware { url, setting, count } => {
                write!(f, "ZMQ worker {url} is a grouped worker ({setting} {count}) and cannot be dp-aware expanded")
            }
            WorkerRefusal::OtherModel { url, theirs, ours } => write!(
                f,
                "ZMQ worker {url} serves model {theirs}, but this gateway serves {ours} (one model per gateway)"
            ),
            WorkerRefusal::UnknownParser { url, label, name, model } => {
                write!(f, "worker {url} declares unknown {label} '{name}' for model '{model}'")
            }
            WorkerRefusal::Duplicate { url, other } => write!(f, "worker {url} is already registered as {other}"),
            WorkerRefusal::HandshakeAddressTaken { address, other } => {
                write!(f, "would bind handshake address {address}, already claimed by worker {other}")
            }
            WorkerRefusal::NoModelIdentity { url } => {
                write!(f, "ZMQ worker {url} has no model identity: start the gateway with --model-path")
            }
            WorkerRefusal::TcpAddress { url } => write!(
                f,
                "ZMQ worker {url} must be tcp://IP:PORT with the IP address of one interface of this host and a \
                 non-zero port (the engines dial the addresses the gateway binds)"
            ),
            WorkerRefusal::PublicBind { url, ip } => write!(
                f,
                "ZMQ worker {url}: {ip} is not a loopback or private address, and the engine wire has no \
                 authentication; bind on a private network, or pass --allow-public-engine-bind"
            ),
            WorkerRefusal::TcpHandshakeAddress { url } => {
                write!(
                    f,
                    "ZMQ worker {url} is a tcp:// worker: its URL is its handshake address; omit zmq_handshake_address"
                )
            }
        }
    }
}

impl std::error::Error for WorkerRefusal {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WorkerRefusal::Path(e) => Some(e),
            _ => None,
        }
    }
}

impl From<SockdirError> for WorkerRefusal {
    fn from(e: SockdirError) -> Self {
        WorkerRefusal::Path(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed refusals read exactly as the texts they replaced (SMG's).
    #[test]
    fn refusal_texts_are_unchanged() {
        let url = || "ipc:///tmp/w".to_string();
        let cases: Vec<(WorkerRefusal, String)> = vec![
            (
                WorkerRefusal::HandshakeAddressWithoutZmq,
                "zmq_handshake_address is only valid for ZMQ workers (ipc:// URLs)".into(),
            ),
            (WorkerRefusal::NotIpc, "ZMQ worker URL must be ipc://<path>".into()),
            (
                WorkerRefusal::NotZmq { url: "unix://h:1".into() },
                "worker unix://h:1 is not a ZMQ, gRPC or HTTP worker: this gateway serves ipc://, tcp://, grpc://, grpcs://, http:// and https:// workers"
                    .into(),
            ),
            (
                WorkerRefusal::GrpcAddress { url: "grpc://h".into() },
                "gRPC worker URL must be grpc://<host>:<port> or grpcs://<host>:<port>, not grpc://h".into(),
            ),
            (
                WorkerRefusal::GrpcRuntime { url: "grpc://h:1".into(), runtime: "tokenspeed".into() },
                "gRPC worker grpc://h:1 has unsupported runtime tokenspeed: only vllm is supported over gRPC".into(),
            ),
            (
                WorkerRefusal::Path(SockdirError::NotAbsolute),
                "ZMQ worker URL must be ipc://<path> with an absolute path".into(),
            ),
            (
                WorkerRefusal::UnsupportedRuntime { url: url(), runtime: "sglang".into() },
                "ZMQ worker ipc:///tmp/w has unsupported runtime sglang: only vllm and tokenspeed are supported \
                 over the ZMQ direct backend"
                    .into(),
            ),
            (WorkerRefusal::HandshakeAddressNotTcp, "zmq_handshake_address must be a tcp:// address".into()),
            (
                WorkerRefusal::WorkerType { url: url(), worker_type: "prefill".into() },
                "ZMQ worker ipc:///tmp/w cannot serve worker type prefill: ZMQ workers must be regular".into(),
            ),
            (
                WorkerRefusal::DpRank { url: url() },
                "ZMQ worker ipc:///tmp/w takes dp_size for a grouped worker; leave dp_rank unset".into(),
            ),
            (
                WorkerRefusal::DpSize { url: url(), dp_size: 0 },
                format!(
                    "ZMQ worker ipc:///tmp/w has dp_size 0: it must be between 1 and {}",
                    crate::limits::engines_per_worker_max
                ),
            ),
            (
                WorkerRefusal::DpAware { url: url(), setting: "dp_size", count: 2 },
                "ZMQ worker ipc:///tmp/w is a grouped worker (dp_size 2) and cannot be dp-aware expanded".into(),
            ),
            (
                WorkerRefusal::DpAware { url: url(), setting: "--zmq-engine-count", count: 2 },
                "ZMQ worker ipc:///tmp/w is a grouped worker (--zmq-engine-count 2) and cannot be dp-aware expanded"
                    .into(),
            ),
            (
                WorkerRefusal::OtherModel { url: url(), theirs: "/a".into(), ours: "/b".into() },
                "ZMQ worker ipc:///tmp/w serves model /a, but this gateway serves /b (one model per gateway)".into(),
            ),
            (
                WorkerRefusal::UnknownParser { url: url(), label: "tool_parser", name: "x".into(), model: "m".into() },
                "worker ipc:///tmp/w declares unknown tool_parser 'x' for model 'm'".into(),
            ),
            (
                WorkerRefusal::Duplicate { url: url(), other: "ipc:///tmp/v".into() },
                "worker ipc:///tmp/w is already registered as ipc:///tmp/v".into(),
            ),
            (
                WorkerRefusal::HandshakeAddressTaken { address: "tcp://127.0.0.1:1".into(), other: url() },
                "would bind handshake address tcp://127.0.0.1:1, already claimed by worker ipc:///tmp/w".into(),
            ),
            (
                WorkerRefusal::NoModelIdentity { url: url() },
                "ZMQ worker ipc:///tmp/w has no model identity: start the gateway with --model-path".into(),
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
    }
}
