//! The engine processes: each started in its own process group and watched by its own thread
//! (never a shard), its output logged (`output`), restarted after an exit (`restart`), and at
//! shutdown stopped: SIGTERM to every group, SIGKILL to what is left after the grace period,
//! every process reaped, every worker's socket files removed.
//!
//! *Invariants:* no engine process outlives the gateway (the groups are killed at shutdown, and
//! each engine gets SIGTERM if the thread that started it dies with the gateway); an engine whose
//! first process exits takes the rest of its group with it before it is started again, so a
//! restart never leaves an orphan; a group is signalled only while its leader is unreaped, so
//! its id cannot have been reused.

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::command::EngineCommand;
use super::restart::{Decision, RestartPolicy, Restarts};
use crate::engine_process::{EngineState, ProcessState};
use crate::shutdown::Companion;
use crate::startup::StartupError;

/// One engine to run: its command, its shared state, and its worker's socket files.
pub struct EngineSpec {
    pub state: Arc<EngineState>,
    pub command: EngineCommand,
    pub socket_files: Vec<(String, String)>,
}

/// What one engine's thread and the fleet share.
struct Engine {
    spec: EngineSpec,
    /// The process group of the running engine, while its leader is unreaped.
    group: Mutex<Option<i32>>,
}

/// Set once at shutdown; wakes engines waiting out a backoff.
#[derive(Default)]
struct Stop {
    set: Mutex<bool>,
    changed: Condvar,
}

impl Stop {
    fn is_set(&self) -> bool {
        *lock(&self.set)
    }

    fn set(&self) {
        *lock(&self.set) = true;
        self.changed.notify_all();
    }

    /// Waits `d` unless stopped first; true when stopped.
    fn wait(&self, d: Duration) -> bool {
        let guard = lock(&self.set);
        match self.changed.wait_timeout_while(guard, d, |stopped| !*stopped) {
            Ok((stopped, _)) => *stopped,
            Err(poisoned) => *poisoned.into_inner().0,
        }
    }
}

/// A lock that a panicking holder did not leave unusable (the data is a plain value).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every engine of a `serve`, and their threads.
pub struct Fleet {
    engines: Vec<Arc<Engine>>,
    threads: Vec<JoinHandle<()>>,
    stop: Arc<Stop>,
    policy: RestartPolicy,
    shutdown_timeout: Duration,
    stopped: bool,
}

impl Fleet {
    pub fn new(specs: Vec<EngineSpec>, policy: RestartPolicy, shutdown_timeout: Duration) -> Fleet {
        Fleet {
            engines: specs.into_iter().map(|spec| Arc::new(Engine { spec, group: Mutex::new(None) })).collect(),
            threads: Vec::new(),
            stop: Arc::new(Stop::default()),
            policy,
            shutdown_timeout,
            stopped: false,
        }
    }

    fn signal_groups(&self, signal: i32, which: impl Fn(usize) -> bool) {
        for (i, engine) in self.engines.iter().enumerate().filter(|(i, _)| which(*i)) {
            if let Some(group) = *lock(&engine.group) {
                // SAFETY: kill(2) on a process group whose leader we have not reaped.
                unsafe { libc::killpg(group, signal) };
                if signal == libc::SIGKILL {
                    tracing::warn!(
                        "{} did not stop within {} s of SIGTERM: SIGKILL",
                        self.engines[i].spec.state.name,
                        self.shutdown_timeout.as_secs()
                    );
                }
            }
        }
    }
}

impl Companion for Fleet {
    fn start(&mut self) -> Result<(), StartupError> {
        for engine in &self.engines {
            let (engine, stop, policy) = (engine.clone(), self.stop.clone(), self.policy);
            let name = engine.spec.state.name.clone();
            let thread = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || supervise(&engine, &stop, &policy))
                .map_err(|source| StartupError::Thread { what: format!("the supervisor of {name}"), source })?;
            self.threads.push(thread);
        }
        Ok(())
    }

    fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        self.stop.set();
        for engine in &self.engines {
            if engine.spec.state.state() == ProcessState::Running {
                engine.spec.state.set_state(ProcessState::Stopping);
            }
        }
        tracing::info!("stopping {} engine(s): SIGTERM", self.engines.len());
        self.signal_groups(libc::SIGTERM, |_| true);
        let deadline = Instant::now() + self.shutdown_timeout;
        while self.threads.iter().any(|t| !t.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let running: Vec<bool> = self.threads.iter().map(|t| !t.is_finished()).collect();
        self.signal_groups(libc::SIGKILL, |i| running.get(i).copied().unwrap_or(false));
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        for engine in &self.engines {
            shardgate_wire::sockdir::remove_sockets(&engine.spec.socket_files);
        }
        tracing::info!("engines stopped; their socket files removed");
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One engine's life: start, wait, and restart or give up, until the fleet stops.
fn supervise(engine: &Engine, stop: &Stop, policy: &RestartPolicy) {
    let state = &engine.spec.state;
    let mut restarts = Restarts::default();
    let mut restart = false;
    loop {
        let exit = match spawn(engine, stop, restart) {
            Ok(None) => break,
            Ok(Some(child)) => describe(wait_for_exit(engine, child)),
            Err(e) => format!("could not start: {e}"),
        };
        state.on_exited(exit.clone());
        if stop.is_set() {
            tracing::info!("{} stopped: {exit}", state.name);
            break;
        }
        match restarts.decide(policy, Instant::now()) {
            Decision::GiveUp { restarts } => {
                state.set_state(ProcessState::Failed);
                tracing::error!(
                    "{} exited ({exit}) after {restarts} restart(s) within {} s (--engine-restart-limit {}): not \
                     restarting it again; its worker stays unready",
                    state.name,
                    policy.window.as_secs(),
                    policy.limit
                );
                return;
            }
            Decision::RestartAfter(backoff) => {
                state.set_state(ProcessState::Restarting);
                tracing::warn!("{} exited ({exit}); restarting it in {} ms", state.name, backoff.as_millis());
                if stop.wait(backoff) {
                    break;
                }
                restarts.record(Instant::now());
                restart = true;
            }
        }
    }
    state.set_state(ProcessState::Stopped);
}

/// Starts the engine unless the fleet is stopping (`None`).
fn spawn(engine: &Engine, stop: &Stop, restart: bool) -> io::Result<Option<Child>> {
    let mut group = lock(&engine.group);
    // Under the group lock, so the fleet either sees this process's group or stops it first.
    if stop.is_set() {
        return Ok(None);
    }
    let spec = &engine.spec;
    let (reader, writer) = io::pipe()?;
    let mut command = Command::new(&spec.command.program);
    command
        .args(&spec.command.args)
        .envs(spec.command.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .process_group(0);
    // SAFETY: getpid before the fork; in the child only async-signal-safe calls.
    unsafe {
        let parent = libc::getpid();
        command.pre_exec(move || {
            // The gateway's threads block SIGTERM and SIGINT (one thread takes them with
            // sigwait), and a child inherits the mask: unblocked, or the engine could only be
            // stopped with SIGKILL.
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            // If this thread dies (the gateway is gone), the engine gets SIGTERM.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() != parent {
                return Err(io::Error::other("the gateway exited while the engine started"));
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    // Our copies of the pipe's write end go with the command, so the pipe ends with the engine.
    drop(command);
    if let Err(e) = super::output::spawn_logger(&spec.state.name, reader) {
        tracing::warn!("{}: cannot log its output: {e}", spec.state.name);
    }
    *group = Some(child.id() as i32);
    spec.state.on_started(child.id(), restart);
    tracing::info!(
        "{} started (pid {}): {} {}",
        spec.state.name,
        child.id(),
        spec.command.program.display(),
        spec.command.args.join(" ")
    );
    Ok(Some(child))
}

/// Waits for the engine's first process to exit, kills what is left of its group, and reaps it.
fn wait_for_exit(engine: &Engine, mut child: Child) -> io::Result<ExitStatus> {
    let pid = child.id() as i32;
    // WNOWAIT leaves the leader a zombie, so its pid (the group's id) is not reused before the
    // group is killed below.
    loop {
        // SAFETY: siginfo_t is plain data; waitid writes it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child.
        let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break;
        }
    }
    {
        let mut group = lock(&engine.group);
        // The engine's other processes (vLLM's EngineCore) would live on without it.
        // SAFETY: kill(2) on the group of our unreaped child.
        unsafe { libc::killpg(pid, libc::SIGKILL) };
        *group = None;
    }
    child.wait()
}

/// "exit status 1", "killed by signal 9 (SIGKILL)".
fn describe(status: io::Result<ExitStatus>) -> String {
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}{}", signal_name(sig)),
            (None, None) => s.to_string(),
        },
        Err(e) => format!("cannot wait for it: {e}"),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => " (SIGHUP)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGTERM => " (SIGTERM)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn spec(name: &str, script: &str) -> EngineSpec {
        EngineSpec {
            state: Arc::new(EngineState::new(name.into())),
            command: EngineCommand {
                program: PathBuf::from("sh"),
                args: vec!["-c".into(), script.into()],
                env: vec![],
            },
            socket_files: vec![],
        }
    }

    fn alive(pid: u32) -> bool {
        // A zombie is not alive: only its exit status is left.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
            .unwrap_or(false)
    }

    fn eventually(what: &str, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !check() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the fleet from a thread that blocks SIGTERM and SIGINT, as every thread of the
    /// gateway does: the engines must still take SIGTERM.
    fn start_as_the_gateway_does(fleet: &mut Fleet) {
        std::thread::scope(|s| {
            s.spawn(|| {
                crate::shutdown::block_signals().unwrap();
                fleet.start().unwrap();
            });
        });
    }

    #[test]
    fn exit_statuses_read_as_operators_expect() {
        assert_eq!(describe(Ok(ExitStatus::from_raw(1 << 8))), "exit status 1");
        assert_eq!(describe(Ok(ExitStatus::from_raw(9))), "killed by signal 9 (SIGKILL)");
        assert_eq!(describe(Ok(ExitStatus::from_raw(10))), "killed by signal 10");
    }

    /// A group member the engine's first process left behind goes with it, and the engine is
    /// started again; the fleet's stop ends everything, SIGTERM first.
    #[test]
    fn an_exit_takes_the_group_along_and_the_engine_comes_back() {
        let dir = std::env::temp_dir().join(format!("sg-fleet-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("orphan");
        // The first process leaves a group member behind and exits; the next one stays.
        let script = format!(
            "cd {}; if [ -e started ]; then exec sleep 600; fi; touch started; sleep 600 & echo $! > orphan; \
             sleep 0.3; exit 3",
            dir.display()
        );
        let s = spec("engine-test", &script);
        let state = s.state.clone();
        let mut fleet = Fleet::new(vec![s], RestartPolicy::new(5, 60), Duration::from_secs(5));
        start_as_the_gateway_does(&mut fleet);
        eventually("the first exit", || state.last_exit().is_some());
        let orphan: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        // SIGKILL is delivered asynchronously: on a loaded machine the member may still read as
        // running for a moment after the exit was recorded (it would live 600 s unkilled).
        eventually("the first process's group member killed with it", || !alive(orphan));
        assert_eq!(state.last_exit().as_deref().map(String::as_str), Some("exit status 3"));
        eventually("a restart", || state.restart_count() == 1 && state.state() == ProcessState::Running);
        let pid = state.pid().unwrap();
        fleet.stop();
        assert!(!alive(pid));
        assert_eq!(state.state(), ProcessState::Stopped);
        assert_eq!(state.last_exit().as_deref().map(String::as_str), Some("killed by signal 15 (SIGTERM)"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn an_engine_that_ignores_sigterm_is_killed_after_the_grace_period() {
        let s = spec("engine-stubborn", "trap '' TERM; while true; do sleep 0.05; done");
        let state = s.state.clone();
        let mut fleet = Fleet::new(vec![s], RestartPolicy::new(5, 60), Duration::from_millis(300));
        fleet.start().unwrap();
        eventually("the start", || state.pid().is_some());
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        fleet.stop();
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(state.last_exit().as_deref().map(String::as_str), Some("killed by signal 9 (SIGKILL)"));
    }

    #[test]
    fn the_restart_limit_leaves_the_engine_failed() {
        let s = spec("engine-crashing", "exit 1");
        let state = s.state.clone();
        let mut fleet = Fleet::new(vec![s], RestartPolicy::new(1, 60), Duration::from_secs(1));
        fleet.start().unwrap();
        eventually("the give-up", || state.state() == ProcessState::Failed);
        assert_eq!(state.restart_count(), 1);
        fleet.stop();
        assert_eq!(state.state(), ProcessState::Failed, "a failed engine stays failed");
    }
}
