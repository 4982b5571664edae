//! `shardgate serve`: starts engines and the gateway together, as SMG's `smg serve` does, and
//! keeps the engines alive, which SMG does not. `--connection-mode zmq` (headless engines over
//! ipc:// sockets) is the default; `grpc` and `http` start vLLM API servers on loopback ports
//! (`vllm serve --grpc`, SMG's servicer; plain `vllm serve`) and register them as `grpc://`
//! or `http://` workers.
//!
//! Everything that can be checked is checked before anything starts (`args` the command line,
//! `plan` the replicas' ports and socket paths, `python` the interpreter and its engine
//! package, `config` the gateway's flags), so a refused launch leaves nothing behind. Then
//! `command` builds each engine's command line, and the gateway runs with the engines as its
//! companion: `supervisor` starts each in its own process group on its own thread, logs its
//! output (`output`), restarts it after an exit (`restart`), publishes its state
//! (`crate::engine_process`) to `GET /workers`, and stops them all after the gateway's drain.
//!
//! *Boundary:* the gateway's workers know an engine only by its `engine_process::EngineHandle`; nothing
//! here runs on a shard.

pub mod args;
pub mod command;
mod error;
pub mod output;
pub mod plan;
pub mod python;
pub mod restart;
pub mod supervisor;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use error::ServeError;

use crate::config::{Config, LaunchArgs};
use crate::engine_process::{EngineHandle, EngineState};
use crate::startup::StartupError;
use args::{ConnectionMode, EngineKind, ServeArgs};
use command::{EngineCommand, EngineFlags};
use plan::Replica;
use restart::RestartPolicy;
use supervisor::{EngineSpec, Fleet};

/// How the engines are kept: restart policy and the SIGTERM-to-SIGKILL grace at shutdown.
#[derive(Debug, Clone, Copy)]
pub struct Supervision {
    pub policy: RestartPolicy,
    pub shutdown_timeout: Duration,
}

impl Default for Supervision {
    fn default() -> Self {
        Supervision {
            policy: RestartPolicy::new(
                crate::limits::engine_restart_limit_default,
                crate::limits::engine_restart_window_s_default,
            ),
            shutdown_timeout: Duration::from_secs(crate::limits::engine_shutdown_timeout_s_default),
        }
    }
}

pub fn run(args: ServeArgs) -> Result<(), ServeError> {
    let kind = EngineKind::parse(&args.backend)?;
    let mode = args.connection_mode;
    if mode != ConnectionMode::Zmq && kind != EngineKind::Vllm {
        return Err(ServeError::ModeNeedsVllm { mode: mode.as_str(), backend: kind.as_str() });
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let (dir, named_by) = plan::socket_dir(|k| std::env::var(k).ok(), uid);
    let ports = plan::worker_ports(args.worker_base_port, usize::from(args.data_parallel_size), plan::port_is_free)?;
    let mut replicas = match mode {
        ConnectionMode::Zmq => plan::replicas(&dir, &ports)?,
        ConnectionMode::Grpc | ConnectionMode::Http => plan::served_replicas(mode.as_str(), &ports),
    };
    if kind == EngineKind::Tokenspeed {
        plan::assign_store_ports(&mut replicas)?;
    }
    let launch = LaunchArgs {
        worker_urls: replicas.iter().map(|r| r.url.clone()).collect(),
        backend: Some(if kind == EngineKind::Tokenspeed { "tokenspeed" } else { "vllm" }.into()),
        model_path: Some(gateway_model(&args, &replicas)?),
        zmq_engine_count: 1,
        gateway: args.gateway.clone(),
    };
    let config = Config::from_launch(&launch)?;
    let program = engine_program(kind, mode, args.engine_python.as_deref())?;
    let mut flags = EngineFlags::new(kind, mode, &args.engine_args);
    if mode == ConnectionMode::Http {
        // Clients name the gateway's model (`--served-model-name`, a gateway flag), and an
        // HTTP worker is routed by the name its server answers to.
        flags.kept.extend(["--served-model-name".into(), config.served_model_name.clone()]);
    }
    for dropped in &flags.dropped {
        tracing::warn!("engine flag {dropped} dropped: the launcher sets it itself");
    }
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let commands = replicas
        .iter()
        .map(|r| command::command(kind, mode, &program, &args.model, r, &flags, visible.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    match mode {
        ConnectionMode::Zmq => tracing::info!(
            "serve: {} {} engine(s) of {}, sockets in {dir} ({named_by})",
            replicas.len(),
            kind.as_str(),
            args.model
        ),
        _ => tracing::info!(
            "serve: {} {} server(s) of {} over {}: {}",
            replicas.len(),
            kind.as_str(),
            args.model,
            mode.as_str(),
            replicas.iter().map(|r| r.url.as_str()).collect::<Vec<_>>().join(", ")
        ),
    }
    let supervision = Supervision {
        policy: RestartPolicy::new(args.engine_restart_limit, args.engine_restart_window_secs),
        shutdown_timeout: Duration::from_secs(args.engine_shutdown_timeout_secs),
    };
    run_with_engines(config, &replicas, commands, supervision)
}

/// The gateway's model directory: `--router-model-path`, else `--model` when it is a local
/// directory (SMG requires the flag; a local `--model` names the same model).
fn gateway_model(args: &ServeArgs, replicas: &[Replica]) -> Result<PathBuf, ServeError> {
    match &args.router_model_path {
        Some(dir) => Ok(dir.clone()),
        None if Path::new(&args.model).is_dir() => Ok(PathBuf::from(&args.model)),
        None => Err(ServeError::NoModelIdentity {
            url: replicas.first().map(|r| r.url.clone()).unwrap_or_default(),
            model: args.model.clone(),
        }),
    }
}

/// What runs an engine: the simulator next to this executable, or a Python interpreter that
/// can import the engine's package.
fn engine_program(kind: EngineKind, mode: ConnectionMode, engine_python: Option<&Path>) -> Result<PathBuf, ServeError> {
    let Some(package) = kind.package() else {
        return Ok(sim_binary()?);
    };
    let virtual_env = std::env::var_os("VIRTUAL_ENV").map(PathBuf::from);
    let python = python::choose(engine_python, virtual_env.as_deref());
    python::check_package(&python, package)?;
    // `vllm serve --grpc` serves SMG's servicer, a package of its own.
    if mode == ConnectionMode::Grpc {
        python::check_package(&python, "smg_grpc_servicer")?;
    }
    Ok(python.path)
}

/// `shardgate-sim` next to this executable.
pub fn sim_binary() -> Result<PathBuf, StartupError> {
    let me = std::env::current_exe().map_err(StartupError::Locate)?;
    let sim = me.with_file_name("shardgate-sim");
    if sim.is_file() {
        Ok(sim)
    } else {
        Err(StartupError::SimulatorMissing(sim))
    }
}

/// Runs the gateway for `config` (whose workers are the replicas, in order) with one
/// supervised engine per replica. Returns only if the gateway could not start.
pub fn run_with_engines(
    mut config: Config,
    replicas: &[Replica],
    commands: Vec<EngineCommand>,
    supervision: Supervision,
) -> Result<(), ServeError> {
    let shards = config.shards;
    let mut specs = Vec::with_capacity(replicas.len());
    for ((worker, replica), command) in config.workers.iter_mut().zip(replicas).zip(commands) {
        let state = Arc::new(EngineState::new(replica.name()));
        worker.engine = Some(EngineHandle(state.clone()));
        // gRPC and HTTP workers have no socket files to clean up after a crashed engine.
        let socket_files = if worker.path.is_empty() {
            Vec::new()
        } else {
            (0..shards).map(|k| shardgate_wire::sockdir::socket_paths(&worker.path, k)).collect()
        };
        specs.push(EngineSpec { state, command, socket_files });
    }
    let fleet = Fleet::new(specs, supervision.policy, supervision.shutdown_timeout);
    crate::gateway::run_with(config, Some(Box::new(fleet))).map_err(ServeError::from)
}
