//! What ends a `shardgate` command before (or instead of) serving: a command line that cannot
//! start a gateway, a port or thread that cannot be had, the demo's simulator or assets, the
//! `template` command's model and streams. `main` prints each as `error: {e}`; the texts are
//! the ones the gateway has always printed.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::config::ConfigError;
use shardgate_text::{AssetError, ModelError, TemplateError};

#[derive(Debug)]
pub enum StartupError {
    Config(ConfigError),
    /// `flag`'s port is held by another listener.
    Listen {
        host: String,
        port: u16,
        flag: &'static str,
        source: io::Error,
    },
    Signals(io::Error),
    /// A thread could not be started; `what` names it ("the model loader", "shard thread 3").
    Thread {
        what: String,
        source: io::Error,
    },
    /// `demo`, `serve --backend sim`: the path of this executable.
    Locate(io::Error),
    /// `demo`, `serve --backend sim`: no `shardgate-sim` next to this executable.
    SimulatorMissing(PathBuf),
    /// `demo`: no port at all could be had on `host`.
    NoPort {
        host: String,
        source: io::Error,
    },
    Asset(AssetError),
    Model(ModelError),
    Template(TemplateError),
    /// `template` without a model.
    NoModel,
    /// `template` for a model without a chat template.
    NoChatTemplate,
    Stdin(io::Error),
    Stdout(io::Error),
    /// The response store would not open (`--history-backend`, `--data-dir`).
    History(shardgate_store::StoreError),
    /// The MCP thread could not be started.
    Mcp(std::io::Error),
    /// A server `--mcp-config-path` marks `required` did not start or list its tools.
    McpRequired {
        server: String,
        reason: String,
    },
    /// The host's KV-event stream could not bind (`--kv-events-publish-endpoint`).
    KvPublish(String),
    /// The certificate or key of `--tls-cert-path` / `--tls-key-path`.
    Tls(crate::http::tls::TlsError),
}

impl fmt::Display for StartupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartupError::Config(e) => e.fmt(f),
            StartupError::Listen { host, port, flag, source } => {
                write!(f, "cannot listen on {host}:{port} ({flag}): {source}")
            }
            StartupError::Signals(e) => write!(f, "cannot block shutdown signals: {e}"),
            StartupError::Thread { what, source } => write!(f, "cannot start {what}: {source}"),
            StartupError::Locate(e) => write!(f, "cannot locate myself: {e}"),
            StartupError::SimulatorMissing(path) => {
                write!(f, "{} not found: build it with `cargo build --release`", path.display())
            }
            StartupError::NoPort { host, source } => write!(f, "cannot listen on {host}: {source}"),
            StartupError::Asset(e) => e.fmt(f),
            StartupError::Model(e) => e.fmt(f),
            StartupError::Template(e) => e.fmt(f),
            StartupError::NoModel => f.write_str("pass --model-path DIR or --tokenizer-package PACKAGE"),
            StartupError::NoChatTemplate => f.write_str("the model has no chat template"),
            StartupError::Stdin(e) => write!(f, "cannot read stdin: {e}"),
            StartupError::Stdout(e) => write!(f, "cannot write stdout: {e}"),
            StartupError::History(e) => write!(f, "cannot open the response history (--history-backend): {e}"),
            StartupError::Mcp(e) => write!(f, "cannot start the MCP thread: {e}"),
            StartupError::McpRequired { server, reason } => {
                write!(f, "Failed to connect to static server '{server}' (required in --mcp-config-path): {reason}")
            }
            StartupError::KvPublish(e) => write!(f, "cannot publish the host's KV events: {e}"),
            StartupError::Tls(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for StartupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartupError::Config(e) => Some(e),
            StartupError::Asset(e) => Some(e),
            StartupError::Model(e) => Some(e),
            StartupError::Template(e) => Some(e),
            StartupError::History(e) => Some(e),
            StartupError::Mcp(e) => Some(e),
            StartupError::Tls(e) => Some(e),
            StartupError::Listen { source, .. }
            | StartupError::Thread { source, .. }
            | StartupError::NoPort { source, .. } => Some(source),
            StartupError::Signals(e) | StartupError::Locate(e) | StartupError::Stdin(e) | StartupError::Stdout(e) => {
                Some(e)
            }
            StartupError::SimulatorMissing(_)
            | StartupError::McpRequired { .. }
            | StartupError::NoModel
            | StartupError::NoChatTemplate
            | StartupError::KvPublish(_) => None,
        }
    }
}

impl From<ConfigError> for StartupError {
    fn from(e: ConfigError) -> Self {
        StartupError::Config(e)
    }
}

impl From<AssetError> for StartupError {
    fn from(e: AssetError) -> Self {
        StartupError::Asset(e)
    }
}

impl From<ModelError> for StartupError {
    fn from(e: ModelError) -> Self {
        StartupError::Model(e)
    }
}

impl From<TemplateError> for StartupError {
    fn from(e: TemplateError) -> Self {
        StartupError::Template(e)
    }
}
