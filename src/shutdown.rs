//! Graceful shutdown on SIGTERM or SIGINT: stop accepting, let running requests finish for up to
//! `--shutdown-timeout-secs`, then abort the rest on the engines (their clients get an error
//! event, then `[DONE]`), stop the engine processes `serve` started, and exit. A second signal
//! skips the wait.
//!
//! The signals are blocked in every thread (the mask is inherited from the thread that calls
//! `install` before the shards start) and taken synchronously by one thread with `sigwait`, so
//! no handler runs in async-signal context and the shards' runtimes are never interrupted.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::shard::mailbox::ShardMsg;
use crate::shard::Shared;
use crate::startup::StartupError;

/// Processes a command runs beside the gateway (`serve`'s engines). Started once the gateway's
/// ports are known to be free; stopped on SIGTERM / SIGINT after the drain, before the process
/// exits, or when the gateway cannot start after all.
pub trait Companion: Send {
    fn start(&mut self) -> Result<(), StartupError>;
    fn stop(&mut self);
}

/// The companion, taken by whichever stops it: the signal thread, or a failed start.
pub type CompanionSlot = Arc<Mutex<Option<Box<dyn Companion>>>>;

/// Blocks SIGTERM and SIGINT in the calling thread (and every thread it starts from now on).
pub fn block_signals() -> Result<(), StartupError> {
    // SAFETY: plain libc signal-set manipulation on a local set.
    unsafe {
        let set = signal_set();
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(StartupError::Signals(std::io::Error::from_raw_os_error(rc)));
        }
    }
    Ok(())
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, initialised by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

fn wait_signal() -> i32 {
    let set = signal_set();
    let mut sig: libc::c_int = 0;
    // SAFETY: `set` is initialised; `sig` is a valid out-pointer.
    let rc = unsafe { libc::sigwait(&set, &mut sig) };
    if rc == 0 {
        sig
    } else {
        libc::SIGTERM
    }
}

fn signal_name(sig: i32) -> &'static str {
    if sig == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    }
}

/// Starts the thread that waits for the shutdown signal and runs the shutdown; the companion
/// (serve's engines) is stopped after the drain.
pub fn spawn_watcher(shared: Arc<Shared>, companion: CompanionSlot) -> Result<(), StartupError> {
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let sig = wait_signal();
            drain_and_exit(&shared, signal_name(sig), &companion);
        })
        .map(drop)
        .map_err(|source| StartupError::Thread { what: "the signal thread".into(), source })
}

fn drain_and_exit(shared: &Arc<Shared>, signal: &str, companion: &CompanionSlot) -> ! {
    let timeout = Duration::from_secs(shared.config.shutdown_timeout_s);
    tracing::info!(
        "received {signal}: no new requests; waiting up to {} s for {} in flight",
        timeout.as_secs(),
        in_flight(shared)
    );
    shared.draining.store(true, Ordering::Release);
    for mailbox in &shared.mailboxes {
        mailbox.post(ShardMsg::StopAccepting);
    }
    // A second signal cuts the wait short.
    let (tx, rx) = std::sync::mpsc::channel();
    let _ = std::thread::Builder::new().name("signals-2".into()).spawn(move || {
        let _ = tx.send(wait_signal());
    });
    let deadline = Instant::now() + timeout;
    while in_flight(shared) > 0 && Instant::now() < deadline {
        if let Ok(sig) = rx.recv_timeout(Duration::from_millis(50)) {
            tracing::warn!("received {} again: not waiting any longer", signal_name(sig));
            break;
        }
    }
    let left = in_flight(shared);
    if left > 0 {
        tracing::warn!("shutdown: aborting {left} request(s) still running");
        for mailbox in &shared.mailboxes {
            mailbox.post(ShardMsg::AbortAll);
        }
        // Time for the ABORTs to leave and the clients to get their error events.
        std::thread::sleep(Duration::from_millis(crate::limits::shutdown_abort_flush_ms));
    }
    // MCP children are killed and reaped, not left to notice their closed stdin.
    let limit = Duration::from_millis(shardgate_mcp::limits::close_timeout_ms_default);
    if shared.mcp.close_sessions(limit) {
        tracing::info!("MCP sessions closed");
    } else {
        tracing::warn!("MCP sessions not all closed within {} ms", limit.as_millis());
    }
    // The engines outlive the drain (it needs them) and go before the process does.
    if let Some(mut c) = companion.lock().ok().and_then(|mut c| c.take()) {
        c.stop();
    }
    tracing::info!("shutdown complete");
    std::process::exit(0)
}

/// Requests on engines or waiting for a slot, all workers and shards together.
fn in_flight(shared: &Shared) -> i64 {
    let on_engines: i64 = shared.registry.snapshot().iter().map(|w| w.in_flight.load(Ordering::Acquire).max(0)).sum();
    on_engines + shared.admission.queued() as i64
}
