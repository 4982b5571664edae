//! Starting a gateway from a validated `Config`: load the model in the background (readiness
//! reports `tokenizer not yet registered` until it is in), then run the shards.

use std::sync::{Arc, Mutex};

use crate::config::Config;
use crate::limits;
use crate::shard::{self, Shared};
use crate::shutdown::{Companion, CompanionSlot};
use crate::startup::StartupError;
use shardgate_text::model::{ModelAssets, ModelSource};

pub fn run(config: Config) -> Result<(), StartupError> {
    run_with(config, None)
}

pub fn run_with(config: Config, companion: Option<Box<dyn Companion>>) -> Result<(), StartupError> {
    ensure_port_free(&config.host, config.port, "--port")?;
    ensure_port_free(&config.metrics_host, config.metrics_port, "--metrics-port")?;
    // Before any thread starts, so that every thread inherits the mask and only the signal
    // thread ever takes SIGTERM / SIGINT. (Children inherit the mask: `serve` unblocks the
    // signals in each engine before it runs.)
    crate::shutdown::block_signals()?;
    let slot: CompanionSlot = Arc::new(Mutex::new(companion));
    let result = start_companion(&slot).and_then(|()| run_gateway(config, slot.clone()));
    // Only reached when the gateway did not start (it exits through the signal thread).
    if let Some(mut c) = slot.lock().ok().and_then(|mut c| c.take()) {
        c.stop();
    }
    result
}

fn start_companion(slot: &CompanionSlot) -> Result<(), StartupError> {
    match slot.lock().as_deref_mut() {
        Ok(Some(c)) => c.start(),
        _ => Ok(()),
    }
}

fn run_gateway(config: Config, companion: CompanionSlot) -> Result<(), StartupError> {
    let engines = config.workers.iter().map(|w| w.engine_count).sum();
    let budget = crate::http::fd_budget::plan(config.shards, engines, config.tls.is_some());
    tracing::info!(
        "file descriptors: limit {}, {} reserved; up to {} connections per shard ({} descriptor(s) each)",
        budget.nofile,
        budget.reserved,
        budget.connections_per_shard,
        budget.fds_per_connection
    );
    let tls = config.tls.as_ref().map(crate::http::tls::server_config).transpose().map_err(StartupError::Tls)?;
    let store = shardgate_store::Store::open(config.history.clone(), &shardgate_store::Limits::default())
        .map_err(StartupError::History)?;
    tracing::info!("response history: {}", config.history);
    let mcp = shardgate_mcp::Mcp::start(config.mcp.servers.clone(), config.mcp.limits.clone(), config.mcp.tls.clone())
        .map_err(StartupError::Mcp)?;
    mcp.connect_required().map_err(|(server, e)| StartupError::McpRequired { server, reason: e.to_string() })?;
    tracing::info!("MCP servers: {:?} (started on first use, those marked required already)", mcp.configured());
    let media_threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(limits::media_threads_max);
    let media_pool = crate::media::MediaPool::start(media_threads, limits::media_queue_max)
        .map_err(|source| StartupError::Thread { what: "the media pool".into(), source })?;
    let shared = Shared::new(config, budget.connections_per_shard, store, mcp, tls, media_pool);
    if let Some(at) = &shared.config.kv_publish {
        crate::kv_publish::publisher::start(&shared.zmq, at).map_err(StartupError::KvPublish)?;
    }
    crate::shutdown::spawn_watcher(shared.clone(), companion)?;
    let source = ModelSource {
        model_path: shared.config.model_path.clone(),
        tokenizer_path: shared.config.tokenizer_path.clone(),
        chat_template: shared.config.chat_template.clone(),
        served_name: shared.config.served_model_name.clone(),
        use_generation_config: shared.config.use_generation_config,
    };
    {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("model-load".into())
            .spawn(move || {
                let started = std::time::Instant::now();
                let loaded = ModelAssets::load(&source).map(Arc::new);
                if let Ok(m) = &loaded {
                    let model_id = source.model_path.display().to_string();
                    let vision = crate::media::Vision::load(
                        &source.model_path,
                        &model_id,
                        m,
                        shared.config.mm_device_do_normalize,
                    );
                    match &vision {
                        Ok(v) => tracing::info!(
                            "{} takes images ({} family, image token {}; pixels sent {})",
                            m.served_name,
                            v.family.name,
                            v.image_token_id,
                            if v.device_normalize { "raw, the engine normalises them" } else { "normalised" }
                        ),
                        Err(why) => tracing::info!("{} takes no images: {why}", m.served_name),
                    }
                    shared.set_vision(vision);
                }
                match &loaded {
                    Ok(m) => tracing::info!(
                        "tokenizer loaded for {} in {:.2}s (vocab {}, eos {:?}, chat template {})",
                        m.served_name,
                        started.elapsed().as_secs_f64(),
                        m.vocab_size,
                        m.eos_token_id,
                        if m.chat_template.is_some() { "found" } else { "missing" }
                    ),
                    Err(e) => tracing::error!("cannot load model assets: {e}"),
                }
                shared.set_model(loaded);
                // Parsing tokenizer.json allocates several times what the tokenizer keeps, and
                // mimalloc would hand this exiting thread's freed pages back to the OS only when
                // some other thread next allocates (an idle gateway sat at ~190 MB instead of
                // ~50 MB until its first requests).
                shardgate_util::memory::release_freed();
            })
            .map_err(|source| StartupError::Thread { what: "the model loader".into(), source })?;
    }
    shard::run(shared, shard_main)
}

/// The shards share their port with SO_REUSEPORT, which would let a second gateway (or our own
/// metrics listener) on the same port silently take part of the traffic. A plain bind fails on
/// any port already held, reuse or not, so try one first.
///
/// A gateway that just exited can still hold its port for a moment: its io_uring's pending
/// accepts keep the listener open until the kernel tears the ring down, after the process is
/// gone. So a busy port is retried for a short while before it is refused (a restart right
/// after a stop must work; a port held by a live server stays refused).
fn ensure_port_free(host: &str, port: u16, flag: &'static str) -> Result<(), StartupError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(limits::port_busy_wait_ms_max);
    loop {
        match std::net::TcpListener::bind((host, port)) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(source) => return Err(StartupError::Listen { host: host.to_string(), port, flag, source }),
        }
    }
}

/// A shard's main task: mailbox, (on shard 0) the configured workers, and the HTTP listener.
async fn shard_main(shared: Arc<Shared>, index: usize) {
    let ctx = shard::messages::start(shared.clone(), index);
    if index == 0 {
        // Configured workers were validated with the configuration; register them at once so
        // their sockets are bound before any engine dials.
        for w in &shared.config.workers {
            crate::workers::jobs::register(&ctx, w.clone(), crate::workers::WorkerMeta::default());
        }
        crate::metrics::server::spawn(ctx.clone());
    }
    crate::http::server::serve(ctx).await;
    // The listener closed for shutdown; connections, streams and engine links live on as tasks
    // of this runtime until the process exits.
    std::future::pending::<()>().await;
}
