//! What `GET /workers` shows of a supervised engine process: its state, pid, restart count and
//! how it last exited. The engine's supervision thread writes it; any shard reads it, without a
//! lock (atomics, and an `ArcSwapOption` for the exit text).
//!
//! It also tells the worker's control loop that the engine process exited, so the worker drops
//! a handshake in progress and binds afresh at once for the restart, instead of waiting out the
//! handshake timeout or the next health probe.
//!
//! A leaf: it knows nothing of the gateway's workers, configuration or `serve`; the worker
//! holds an `EngineHandle`, `serve`'s supervisor the `EngineState` behind it.

use std::future::poll_fn;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::Poll;

use arc_swap::ArcSwapOption;

/// Where an engine process is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ProcessState {
    /// Spawned and not exited (it may still be loading its model).
    Running = 0,
    /// Exited; waiting out its backoff before the next start.
    Restarting = 1,
    /// Exited more often than the restart limit allows within the window: not restarted.
    Failed = 2,
    /// The gateway is shutting down: SIGTERM sent, SIGKILL after the grace period.
    Stopping = 3,
    Stopped = 4,
}

impl ProcessState {
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessState::Running => "running",
            ProcessState::Restarting => "restarting",
            ProcessState::Failed => "failed",
            ProcessState::Stopping => "stopping",
            ProcessState::Stopped => "stopped",
        }
    }

    fn from_u8(v: u8) -> ProcessState {
        match v {
            0 => ProcessState::Running,
            1 => ProcessState::Restarting,
            2 => ProcessState::Failed,
            3 => ProcessState::Stopping,
            _ => ProcessState::Stopped,
        }
    }
}

/// One engine process's state, shared between its supervision thread and the shards.
pub struct EngineState {
    /// `engine-<worker port>`: the prefix of its output lines.
    pub name: String,
    state: AtomicU8,
    /// 0 while no process is running.
    pid: AtomicU32,
    restart_count: AtomicU32,
    last_exit: ArcSwapOption<String>,
    /// Process exits so far; the worker's control loop compares it with what it saw.
    exit_count: AtomicU64,
    /// The worker's control loop, waiting for the next exit.
    exited: atomic_waker::AtomicWaker,
}

impl EngineState {
    pub fn new(name: String) -> EngineState {
        EngineState {
            name,
            state: AtomicU8::new(ProcessState::Stopped as u8),
            pid: AtomicU32::new(0),
            restart_count: AtomicU32::new(0),
            last_exit: ArcSwapOption::empty(),
            exit_count: AtomicU64::new(0),
            exited: atomic_waker::AtomicWaker::new(),
        }
    }

    pub fn state(&self) -> ProcessState {
        ProcessState::from_u8(self.state.load(Ordering::Acquire))
    }

    pub fn set_state(&self, state: ProcessState) {
        self.state.store(state as u8, Ordering::Release);
    }

    /// The running process's pid.
    pub fn pid(&self) -> Option<u32> {
        Some(self.pid.load(Ordering::Acquire)).filter(|&p| p != 0)
    }

    pub fn restart_count(&self) -> u32 {
        self.restart_count.load(Ordering::Acquire)
    }

    pub fn last_exit(&self) -> Option<Arc<String>> {
        self.last_exit.load_full()
    }

    /// A process was started (`restart`: not the first one).
    pub fn on_started(&self, pid: u32, restart: bool) {
        if restart {
            self.restart_count.fetch_add(1, Ordering::AcqRel);
        }
        self.pid.store(pid, Ordering::Release);
        self.set_state(ProcessState::Running);
    }

    /// The process exited (`how`: "exit status 1", "killed by signal 9 (SIGKILL)").
    pub fn on_exited(&self, how: String) {
        self.pid.store(0, Ordering::Release);
        self.last_exit.store(Some(Arc::new(how)));
        self.exit_count.fetch_add(1, Ordering::AcqRel);
        self.exited.wake();
    }

    pub fn exit_count(&self) -> u64 {
        self.exit_count.load(Ordering::Acquire)
    }

    /// Resolves once more than `seen` processes have exited.
    pub async fn exited_after(&self, seen: u64) {
        poll_fn(|cx| {
            self.exited.register(cx.waker());
            if self.exit_count() > seen {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// `{"state":...,"pid":...,"restarts":...,"last_exit":...}` for `GET /workers`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "state": self.state().as_str(),
            "pid": self.pid(),
            "restarts": self.restart_count(),
            "last_exit": self.last_exit().map(|s| s.as_str().to_string()),
        })
    }
}

impl std::fmt::Debug for EngineState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EngineState({})", self.to_json())
    }
}

/// A worker's supervised engine, carried in its configuration. Two handles are equal when they
/// are the same engine.
#[derive(Debug, Clone)]
pub struct EngineHandle(pub Arc<EngineState>);

impl PartialEq for EngineHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shardgate_util::wake_count::WakeCount;
    use std::future::Future;
    use std::task::{Context, Waker};

    #[test]
    fn starts_restarts_and_exits_are_what_workers_show() {
        let e = EngineState::new("engine-31000".into());
        assert_eq!(
            e.to_json(),
            serde_json::json!({"name": "engine-31000", "state": "stopped", "pid": null, "restarts": 0, "last_exit": null})
        );
        e.on_started(41, false);
        e.on_exited("killed by signal 9 (SIGKILL)".into());
        e.set_state(ProcessState::Restarting);
        assert_eq!(e.to_json()["state"], "restarting");
        assert_eq!(e.to_json()["pid"], serde_json::Value::Null);
        e.on_started(42, true);
        assert_eq!(
            e.to_json(),
            serde_json::json!({"name": "engine-31000", "state": "running", "pid": 42, "restarts": 1,
                               "last_exit": "killed by signal 9 (SIGKILL)"})
        );
    }

    /// The worker's control loop waits for the next exit and is woken by it, not before.
    #[test]
    fn an_exit_wakes_whoever_waits_for_it() {
        let count = Arc::new(WakeCount::default());
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let e = EngineState::new("engine-1".into());
        e.on_started(7, false);
        let seen = e.exit_count();
        let mut next = std::pin::pin!(e.exited_after(seen));
        assert!(next.as_mut().poll(&mut cx).is_pending());
        e.on_started(8, true);
        assert_eq!(count.get(), 0, "a start is not an exit");
        assert!(next.as_mut().poll(&mut cx).is_pending());
        e.on_exited("exit status 1".into());
        assert_eq!(count.get(), 1);
        assert!(next.as_mut().poll(&mut cx).is_ready());
        assert!(
            std::pin::pin!(e.exited_after(seen)).poll(&mut cx).is_ready(),
            "an exit already seen is not waited for"
        );
    }
}
