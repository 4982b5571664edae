//! `shardgate serve`'s command line: the gateway's flags (those of `launch`), serve's own, and
//! everything else for the engines.
//!
//! clap cannot pass unknown flags through, so the command line is split first (`split`): a
//! flag this command knows (by its long name or an alias, or spelled with SMG's `--router-`
//! prefix) stays here with its values; any other flag, with the values after it, goes to every
//! engine in the order given; after `--` everything does. clap then parses what stayed.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

use super::error::ServeError;
use crate::config::GatewayArgs;
use crate::limits;

const AFTER_HELP: &str = "\
Engine flags: any flag not listed above is passed to every engine as given, with the values \
that follow it (after `--`, everything is). Flags the launcher sets itself are dropped with a \
warning (vLLM: --model, --headless, --data-parallel-size, --data-parallel-size-local, \
--data-parallel-address, --data-parallel-rpc-port and their short forms; TokenSpeed: --model, \
--headless, --port, --dist-init-addr, --data-parallel-address, --data-parallel-rpc-port, \
--zmq-engine-index; sim: --worker-url, --handshake, --model-path, --backend), except \
TokenSpeed's --grammar-backend and --enable-output-logprobs, whose given values replace the \
launcher's. Gateway flags may also be spelled with SMG's --router- prefix (--router-policy).

Sockets: ipc://<dir>/engine-<worker port> per replica, <dir> from SHARDGATE_ZMQ_SOCKET_DIR, \
else SMG_ZMQ_SOCKET_DIR, else /tmp/shardgate-zmq-<uid>.";

/// Which engine `serve` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Vllm,
    Tokenspeed,
    /// `shardgate-sim`, speaking vLLM's wire.
    Sim,
}

impl EngineKind {
    pub fn parse(name: &str) -> Result<EngineKind, ServeError> {
        match name {
            "vllm" => Ok(EngineKind::Vllm),
            "tokenspeed" => Ok(EngineKind::Tokenspeed),
            "sim" => Ok(EngineKind::Sim),
            other => Err(ServeError::UnsupportedBackend(other.to_string())),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Vllm => "vllm",
            EngineKind::Tokenspeed => "tokenspeed",
            EngineKind::Sim => "sim",
        }
    }

    /// The Python package a Python engine needs.
    pub fn package(self) -> Option<&'static str> {
        match self {
            EngineKind::Vllm => Some("vllm"),
            EngineKind::Tokenspeed => Some("tokenspeed"),
            EngineKind::Sim => None,
        }
    }
}

/// How `serve`'s gateway reaches the engines it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionMode {
    Zmq,
    Grpc,
    Http,
}

impl ConnectionMode {
    pub fn parse(name: &str) -> Result<ConnectionMode, String> {
        match name {
            "zmq" => Ok(ConnectionMode::Zmq),
            "grpc" => Ok(ConnectionMode::Grpc),
            "http" => Ok(ConnectionMode::Http),
            other => Err(format!("unknown connection mode '{other}': zmq, grpc or http")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionMode::Zmq => "zmq",
            ConnectionMode::Grpc => "grpc",
            ConnectionMode::Http => "http",
        }
    }
}

#[derive(Args, Debug, Clone)]
#[command(after_help = AFTER_HELP)]
pub struct ServeArgs {
    /// The engine to start: vllm, tokenspeed, or sim (shardgate-sim, the simulator next to
    /// this executable). The gateway speaks its wire.
    #[arg(long, value_name = "vllm|tokenspeed|sim")]
    pub backend: String,
    /// The model the engines load (a Hugging Face id or a directory; for sim, a local model
    /// directory). Also the gateway's model when it is a local directory and
    /// --router-model-path is not given.
    #[arg(long, value_name = "MODEL")]
    pub model: String,
    /// The gateway's local model directory (tokenizer, config, chat template; the engines
    /// report none over ZMQ). Default: --model, when it is a local directory.
    #[arg(long = "router-model-path", alias = "model-path", value_name = "DIR")]
    pub router_model_path: Option<PathBuf>,
    /// How the gateway reaches the engines: zmq (headless engines over ipc:// sockets; the
    /// gateway does all text work), grpc (`vllm serve --grpc`, SMG's servicer, one grpc://
    /// worker per replica; the gateway still does all text work) or http (`vllm serve`, one
    /// http:// worker per replica; the engines do their own text work). grpc and http need
    /// --backend vllm.
    #[arg(long = "connection-mode", default_value = "zmq", value_parser = ConnectionMode::parse)]
    pub connection_mode: ConnectionMode,
    /// Engine replicas: each an independent single-engine worker with its own socket path
    /// (and, for vLLM and TokenSpeed, its own CUDA_VISIBLE_DEVICES slice).
    #[arg(long = "data-parallel-size", alias = "dp-size", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=limits::serve_replicas_max as i64))]
    pub data_parallel_size: u16,
    /// First worker port: replica i gets the i-th free port from here. It names the socket
    /// path (engine-<port>) and is TokenSpeed's --port.
    #[arg(long = "worker-base-port", default_value_t = limits::serve_worker_base_port_default)]
    pub worker_base_port: u16,
    /// Python interpreter for vllm and tokenspeed (default: $VIRTUAL_ENV/bin/python when a
    /// virtual environment is active, else python3 on PATH).
    #[arg(long = "engine-python", value_name = "PATH")]
    pub engine_python: Option<PathBuf>,
    /// Restarts an engine gets within --engine-restart-window-secs; when it exits again, it
    /// is left stopped and its worker shows the engine as failed (0: never restart).
    #[arg(long = "engine-restart-limit", default_value_t = limits::engine_restart_limit_default)]
    pub engine_restart_limit: u32,
    /// The window the restart limit counts in, in seconds. Backoff between restarts starts at
    /// 1 s and doubles with each restart inside the window, up to 30 s.
    #[arg(long = "engine-restart-window-secs", default_value_t = limits::engine_restart_window_s_default)]
    pub engine_restart_window_secs: u64,
    /// At shutdown (after the gateway drained), how long engines get between SIGTERM and
    /// SIGKILL.
    #[arg(long = "engine-shutdown-timeout-secs", default_value_t = limits::engine_shutdown_timeout_s_default)]
    pub engine_shutdown_timeout_secs: u64,
    #[command(flatten)]
    pub gateway: GatewayArgs,
    /// Engine flags, split off before clap parses the rest (see `split`).
    #[arg(skip)]
    pub engine_args: Vec<String>,
}

/// A `serve` command line split in two.
#[derive(Debug, PartialEq)]
pub struct Split {
    /// For clap, in their order; `--router-X` spelled `--X`.
    pub ours: Vec<OsString>,
    /// For the engines, in their order.
    pub engine: Vec<String>,
}

/// How this command takes a flag it knows.
#[derive(Clone, Copy, PartialEq)]
enum Known {
    Switch,
    OneValue,
    Values,
}

/// The flags `command` defines, by long name and alias.
fn known_flags(command: &clap::Command) -> Vec<(String, Known)> {
    let mut known = vec![("help".to_string(), Known::Switch)];
    for arg in command.get_arguments() {
        let taking = match (arg.get_action().takes_values(), arg.get_num_args()) {
            (false, _) => Known::Switch,
            (true, Some(range)) if range.max_values() > 1 => Known::Values,
            (true, _) => Known::OneValue,
        };
        let aliases = arg.get_all_aliases().unwrap_or_default();
        for name in arg.get_long().into_iter().chain(aliases) {
            known.push((name.to_string(), taking));
        }
    }
    known
}

/// A token that starts a flag (a negative number is a value).
pub(super) fn is_flag(token: &str) -> bool {
    token.starts_with('-') && token.len() > 1 && !token[1..].starts_with(|c: char| c.is_ascii_digit() || c == '.')
}

/// Splits `args` (what follows `serve`) between this command and the engines.
pub fn split(command: &clap::Command, args: &[OsString]) -> Result<Split, ServeError> {
    let known = known_flags(command);
    let lookup = |name: &str| known.iter().find(|(n, _)| n == name).map(|(_, k)| *k);
    let mut split = Split { ours: Vec::new(), engine: Vec::new() };
    let mut tokens = args.iter().map(|a| a.to_str().ok_or_else(|| ServeError::NotUnicode(a.clone()))).peekable();
    while let Some(token) = tokens.next() {
        let token = token?;
        if token == "--" {
            for rest in tokens.by_ref() {
                split.engine.push(rest?.to_string());
            }
            break;
        }
        let Some(flag) = token.strip_prefix("--").filter(|_| is_flag(token)) else {
            if is_flag(token) && token != "-h" {
                // A short flag: none of ours has one but -h.
                split.engine.push(token.to_string());
                take_engine_values(&mut tokens, &mut split.engine)?;
            } else {
                split.ours.push(token.into());
            }
            continue;
        };
        let (given, inline) = match flag.split_once('=') {
            Some((name, _)) => (name, true),
            None => (flag, false),
        };
        let found = match lookup(given) {
            Some(k) => Some((given, k)),
            None => given.strip_prefix("router-").and_then(|n| lookup(n).map(|k| (n, k))),
        };
        let Some((name, taking)) = found else {
            split.engine.push(token.to_string());
            if !inline {
                take_engine_values(&mut tokens, &mut split.engine)?;
            }
            continue;
        };
        split.ours.push(format!("--{name}{}", &flag[given.len()..]).into());
        if inline {
            continue;
        }
        match taking {
            Known::Switch => {}
            Known::OneValue => {
                if let Some(value) = tokens.next() {
                    split.ours.push(value?.into());
                }
            }
            Known::Values => {
                while let Some(value) = tokens.next_if(|t| t.as_ref().is_ok_and(|t| !is_flag(t))) {
                    split.ours.push(value?.into());
                }
            }
        }
    }
    Ok(split)
}

/// An engine flag's values: the tokens after it up to the next flag.
fn take_engine_values<'a, I>(tokens: &mut std::iter::Peekable<I>, engine: &mut Vec<String>) -> Result<(), ServeError>
where
    I: Iterator<Item = Result<&'a str, ServeError>>,
{
    while let Some(value) = tokens.next_if(|t| t.as_ref().is_ok_and(|t| !is_flag(t) && *t != "--")) {
        engine.push(value?.to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn split_of(args: &[&str]) -> (Vec<String>, Vec<String>) {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let s = split(&Serve::command(), &args).unwrap();
        (s.ours.iter().map(|a| a.to_string_lossy().into_owned()).collect(), s.engine)
    }

    #[test]
    fn known_flags_stay_and_the_rest_goes_to_the_engines() {
        // (command line, ours, the engines')
        let cases: [(&[&str], &[&str], &[&str]); 11] = [
            (&["--backend", "vllm", "--model", "m"], &["--backend", "vllm", "--model", "m"], &[]),
            (&["--model=m", "--dtype", "float32"], &["--model=m"], &["--dtype", "float32"]),
            (&["--enforce-eager", "--port", "8000"], &["--port", "8000"], &["--enforce-eager"]),
            (&["--max-model-len=1024", "--enforce-eager"], &[], &["--max-model-len=1024", "--enforce-eager"]),
            // SMG's prefixed spelling of a gateway flag, and an alias.
            (
                &["--router-policy", "round_robin", "--dp-size", "2"],
                &["--policy", "round_robin", "--dp-size", "2"],
                &[],
            ),
            (&["--router-model-path", "/m"], &["--router-model-path", "/m"], &[]),
            (&["--model-path=/m"], &["--model-path=/m"], &[]),
            // Short engine flags and negative values.
            (&["-tp", "2", "--seed", "-1", "--port", "1"], &["--port", "1"], &["-tp", "2", "--seed", "-1"]),
            // A repeated flag of ours, and a switch of ours before an engine flag's value.
            (
                &["--cors-allow-origin", "a", "--tokenizer-cache-enable-l0", "--cors-allow-origin", "b"],
                &["--cors-allow-origin", "a", "--tokenizer-cache-enable-l0", "--cors-allow-origin", "b"],
                &[],
            ),
            // After `--`, everything is the engines', ours included.
            (&["--port", "1", "--", "--port", "2", "-x"], &["--port", "1"], &["--port", "2", "-x"]),
            (&["-h", "--unknown-switch", "--host", "h"], &["-h", "--host", "h"], &["--unknown-switch"]),
        ];
        for (line, ours, engine) in cases {
            let (o, e) = split_of(line);
            assert_eq!(o, ours, "{line:?}");
            assert_eq!(e, engine, "{line:?}");
        }
    }

    /// Every flag of ours is known to the splitter the way clap takes it, so none of its
    /// values leaks to the engines.
    #[test]
    fn every_flag_of_ours_is_known_with_its_arity() {
        let command = Serve::command();
        let known = known_flags(&command);
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let (_, taking) = known.iter().find(|(n, _)| n == long).unwrap_or_else(|| panic!("--{long} unknown"));
            assert_eq!(*taking == Known::Switch, !arg.get_action().takes_values(), "--{long}");
        }
        assert!(known.iter().any(|(n, _)| n == "policy"), "the gateway's flags are serve's");
        assert!(known.iter().any(|(n, _)| n == "dp-size"), "aliases count");
    }

    #[test]
    fn a_command_line_parses_into_serve_args() {
        let (ours, engine) = split_of(&["--backend", "sim", "--model", "/m", "--port", "9", "--itl-ms", "2"]);
        let mut full = vec!["serve".to_string()];
        full.extend(ours);
        let parsed = Serve::try_parse_from(full).unwrap().args;
        assert_eq!(parsed.backend, "sim");
        assert_eq!(parsed.gateway.port, 9);
        assert_eq!(parsed.data_parallel_size, 1);
        assert_eq!(engine, ["--itl-ms", "2"]);
        for bad in ["sglang", "trtllm"] {
            assert_eq!(
                EngineKind::parse(bad).unwrap_err().to_string(),
                format!(
                    "connection-mode zmq is only supported for the vllm and tokenspeed backends, not {bad} \
                     (or sim, the simulator)"
                )
            );
        }
    }
}
