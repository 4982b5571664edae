//! Shards: one OS thread per core, each running its own monoio runtime (io_uring, or epoll
//! where io_uring is unavailable), pinned to its core. A shard owns its HTTP connections, its
//! engine socket pairs and its per-request state; shards share only `Shared` (read-mostly,
//! atomics) and talk through `mailbox`es.
//!
//! Architecture invariant: nothing on a shard blocks the thread. CPU work (tokenizing,
//! rendering) runs inline, I/O is awaited, and cross-shard traffic is message passing.

pub mod context;
pub mod mailbox;
pub mod messages;
pub mod reply;

use std::sync::Arc;

pub use context::{ShardCtx, Shared};

/// Which driver a shard's runtime ended up on.
fn driver_name() -> &'static str {
    if monoio::utils::detect_uring() {
        "io_uring"
    } else {
        "epoll"
    }
}

/// Starts `shared.shards` shards, each running `main(shared, index)` on its runtime, and blocks
/// until they all exit.
pub fn run<F, Fut>(shared: Arc<Shared>, main: F) -> Result<(), crate::startup::StartupError>
where
    F: Fn(Arc<Shared>, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let cores = core_ids();
    let mut handles = Vec::with_capacity(shared.shards);
    for index in 0..shared.shards {
        let shared = shared.clone();
        let main = main.clone();
        let core = cores.get(index % cores.len().max(1)).copied();
        let handle = std::thread::Builder::new()
            .name(format!("shard-{index}"))
            .spawn(move || {
                if let Some(core) = core {
                    pin_to_core(core);
                }
                let mut rt = match monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!("shard {index}: cannot build runtime: {e}");
                        std::process::exit(1);
                    }
                };
                tracing::debug!("shard {index} on cpu {core:?} ({})", driver_name());
                rt.block_on(main(shared, index));
            })
            .map_err(|source| crate::startup::StartupError::Thread { what: format!("shard thread {index}"), source })?;
        handles.push(handle);
    }
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}

/// CPUs this process may run on, in order.
fn core_ids() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

fn pin_to_core(core: usize) {
    // SAFETY: as above; failure only means the thread stays unpinned.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            tracing::warn!("cannot pin shard to cpu {core}: {}", std::io::Error::last_os_error());
        }
    }
}
