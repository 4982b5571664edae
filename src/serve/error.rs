//! Why `shardgate serve` stopped before it served: every check is made before any engine or
//! listener starts, so each of these leaves nothing behind. `main` prints them as
//! `error: {e}`; where SMG's launcher has a text for the same failure, it is SMG's.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::config::ConfigError;
use crate::startup::StartupError;

#[derive(Debug)]
pub enum ServeError {
    /// A command-line argument that is not Unicode (engine flags are passed on as text).
    NotUnicode(OsString),
    /// `--backend` names an engine `serve` cannot start over ZMQ.
    UnsupportedBackend(String),
    /// `--connection-mode grpc` or `http` with an engine other than vLLM.
    ModeNeedsVllm {
        mode: &'static str,
        backend: &'static str,
    },
    /// No `--router-model-path`, and `--model` is not a local directory.
    NoModelIdentity {
        url: String,
        model: String,
    },
    /// Fewer free worker ports than replicas at or above `--worker-base-port`.
    NoWorkerPorts {
        base: u16,
        count: usize,
    },
    /// Two replicas' socket paths derive one handshake port.
    HandshakeCollision {
        port: u16,
        first: String,
        second: String,
    },
    /// No free port for TokenSpeed's `--dist-init-addr`.
    NoStorePort(io::Error),
    /// `-tp` / `--tensor-parallel-size` among the engine flags is not a positive integer.
    TensorParallelSize(String),
    /// `CUDA_VISIBLE_DEVICES` lists fewer GPUs than the replicas need (SMG's text).
    GpuPool {
        visible: usize,
        replica: usize,
        tp: usize,
    },
    /// The engine's Python interpreter cannot be run.
    Python {
        python: PathBuf,
        chosen_by: &'static str,
        source: io::Error,
    },
    /// The interpreter runs but cannot import the engine's package.
    PackageMissing {
        python: PathBuf,
        chosen_by: &'static str,
        package: &'static str,
        detail: String,
    },
    /// `import <package>` did not finish in time.
    PackageCheckTimeout {
        python: PathBuf,
        package: &'static str,
        secs: u64,
    },
    Config(ConfigError),
    /// The simulator binary, the demo's model, or the gateway itself.
    Startup(StartupError),
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::NotUnicode(arg) => write!(f, "argument {arg:?} is not valid Unicode"),
            ServeError::UnsupportedBackend(b) => write!(
                f,
                "connection-mode zmq is only supported for the vllm and tokenspeed backends, not {b} \
                 (or sim, the simulator)"
            ),
            ServeError::ModeNeedsVllm { mode, backend } => write!(
                f,
                "connection-mode {mode} is only supported for the vllm backend, not {backend} (the simulator and \
                 TokenSpeed speak the engine wire: use --connection-mode zmq)"
            ),
            ServeError::NoModelIdentity { url, model } => write!(
                f,
                "ZMQ worker {url} has no model identity: --model {model} is not a local directory; pass \
                 --router-model-path DIR (the model's local directory, with its tokenizer)"
            ),
            ServeError::NoWorkerPorts { base, count } => {
                write!(f, "could not find {count} available ports starting from --worker-base-port {base}")
            }
            ServeError::HandshakeCollision { port, first, second } => write!(
                f,
                "ZMQ handshake port collision on {port}: {first} and {second} derive the same port. Adjust \
                 --worker-base-port so the worker ipc paths differ."
            ),
            ServeError::NoStorePort(e) => write!(f, "cannot find a free port for TokenSpeed's --dist-init-addr: {e}"),
            ServeError::TensorParallelSize(v) => {
                write!(f, "--tensor-parallel-size must be a positive integer, got '{v}'")
            }
            ServeError::GpuPool { visible, replica, tp } => write!(
                f,
                "CUDA_VISIBLE_DEVICES has {visible} GPU(s) but dp_rank={replica} with tp_size={tp} requires index \
                 {}..{}",
                replica * tp,
                replica * tp + tp - 1
            ),
            ServeError::Python { python, chosen_by, source } => write!(
                f,
                "cannot run the engine's Python interpreter {} ({chosen_by}): {source}; pass --engine-python PATH",
                python.display()
            ),
            ServeError::PackageMissing { python, chosen_by, package, detail } => write!(
                f,
                "the engine's Python interpreter {} ({chosen_by}) cannot import {package}: {detail}; install \
                 {package} there, or pass --engine-python with an interpreter that has it",
                python.display()
            ),
            ServeError::PackageCheckTimeout { python, package, secs } => write!(
                f,
                "the engine's Python interpreter {} did not import {package} within {secs} s",
                python.display()
            ),
            ServeError::Config(e) => e.fmt(f),
            ServeError::Startup(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::NoStorePort(e) | ServeError::Python { source: e, .. } => Some(e),
            ServeError::Config(e) => Some(e),
            ServeError::Startup(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ConfigError> for ServeError {
    fn from(e: ConfigError) -> Self {
        ServeError::Config(e)
    }
}

impl From<StartupError> for ServeError {
    fn from(e: StartupError) -> Self {
        ServeError::Startup(e)
    }
}
