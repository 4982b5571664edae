//! Thread-per-core load: one OS thread per client CPU, each running its own monoio runtime
//! with its own connection pool; request i belongs to core i mod cores, so cores share
//! nothing but the read-only request bytes and the progress counters.
//!
//! Open loop: a pacer per core (`pacer`, a timerfd) sends against the precomputed schedule,
//! never waiting for responses. With --max-concurrency too, a request whose time has come but
//! finds no free slot waits in a FIFO queue and the wait is recorded (scheduled vs actual
//! send). Closed loop (no rate): `cap` workers per core, each sending its next request as soon
//! as its previous one ends. The cap is split evenly across cores.
//!
//! Warm-up requests and connection setup happen before the shared origin; every thread then
//! starts from the same origin instant.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Barrier, OnceLock};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use super::chunk::Dialect;
use super::client::{execute, Clock, Pool};
use super::error::{FlagError, RunError};
use super::http2::{self, H2Pool, H2Request};
use super::pacer::Pacer;
use super::progress::Progress;
use super::record::RequestRecord;
use crate::limits;

/// Lets every thread get from the start barrier to its first deadline.
const START_DELAY: Duration = Duration::from_millis(20);

/// One prompt's request, as every core sends it.
pub struct PreparedRequest {
    /// The HTTP request bytes.
    pub bytes: Vec<u8>,
    /// The output tokens it asks for (`max_tokens`).
    pub output_tokens: u32,
}

#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub index: u32,
    pub prompt_index: u32,
    /// Offset from the origin; None when unpaced (ready at the origin).
    pub scheduled_ns: Option<u64>,
}

pub struct RunSpec {
    pub cpus: Vec<Option<usize>>,
    /// Each prompt's request.
    pub requests: Arc<Vec<PreparedRequest>>,
    /// The stream format of every response.
    pub dialect: Dialect,
    /// Open-loop send offsets in request order; None: unpaced.
    pub schedule: Option<Vec<u64>>,
    /// Unpaced runs: the request count, or None to run until `duration`.
    pub request_count: Option<usize>,
    pub duration: Option<Duration>,
    pub concurrency_max: Option<usize>,
    pub warmup_count: usize,
    pub addr: SocketAddr,
    pub reuse_connections: bool,
    /// `--http2`: the streams go over this many HTTP/2 connections, split across the cores
    /// (at least one each); None: HTTP/1.1.
    pub http2_connections: Option<usize>,
    pub request_timeout: Duration,
    pub progress: Arc<Progress>,
    pub show_progress: bool,
}

pub struct RunOutput {
    pub records: Vec<RequestRecord>,
    pub origin_unix_s: f64,
    pub warmup_failed: usize,
    /// User + system CPU seconds of this process during the run.
    pub client_cpu_s: f64,
}

/// What one core runs.
struct CorePlan {
    index: u16,
    cpu: Option<usize>,
    feed: Feed,
    paced: bool,
    concurrency_max: Option<usize>,
    warmups: Vec<u32>,
}

enum Feed {
    List(std::vec::IntoIter<Arrival>),
    /// Unpaced until a deadline: indices core, core + step, ...
    Endless {
        next_index: u64,
        step: u64,
        prompt_count: usize,
        run_for: Duration,
        deadline: Option<Instant>,
    },
}

impl Feed {
    fn next(&mut self, now: Instant) -> Option<Arrival> {
        match self {
            Feed::List(list) => list.next(),
            Feed::Endless { next_index, step, prompt_count, run_for, deadline } => {
                if now >= *deadline.get_or_insert(now + *run_for) {
                    return None;
                }
                let index = u32::try_from(*next_index).ok()?;
                *next_index += *step;
                let prompt_index = u32::try_from(index as usize % (*prompt_count).max(1)).unwrap_or(0);
                Some(Arrival { index, prompt_index, scheduled_ns: None })
            }
        }
    }
}

struct StartSync {
    ready: Barrier,
    start: Barrier,
    origin: OnceLock<Instant>,
}

pub fn run(spec: RunSpec) -> Result<RunOutput, RunError> {
    let plans = plan_cores(&spec)?;
    let h2_requests = spec
        .http2_connections
        .map(|_| spec.requests.iter().map(|r| H2Request::from_http1(&r.bytes)).collect::<Result<Vec<_>, _>>())
        .transpose()?
        .map(Arc::new);
    raise_open_files_limit();
    let sync = Arc::new(StartSync {
        ready: Barrier::new(plans.len() + 1),
        start: Barrier::new(plans.len() + 1),
        origin: OnceLock::new(),
    });
    let cores = plans.len();
    let mut handles = Vec::with_capacity(plans.len());
    for plan in plans {
        let shared = Shared {
            requests: spec.requests.clone(),
            dialect: spec.dialect,
            addr: spec.addr,
            reuse: spec.reuse_connections,
            h2_requests: h2_requests.clone(),
            http2_connections: spec.http2_connections.map(|n| share_of(n, cores, plan.index.into()).max(1)),
            timeout: spec.request_timeout,
            progress: spec.progress.clone(),
        };
        let sync = sync.clone();
        let handle = std::thread::Builder::new()
            .name(format!("bench-{}", plan.index))
            .spawn(move || core_thread(plan, shared, sync))
            .map_err(RunError::SpawnThread)?;
        handles.push(handle);
    }
    sync.ready.wait();
    spec.progress.reset();
    let cpu_before = cpu_time_s();
    let origin = Instant::now() + START_DELAY;
    let origin_unix_s = super::report::unix_time_s() + START_DELAY.as_secs_f64();
    let _ = sync.origin.set(origin);
    sync.start.wait();
    spec.progress.watch(origin, spec.show_progress, || handles.iter().all(|h| h.is_finished()));
    let mut records = Vec::new();
    let mut warmup_failed = 0;
    for h in handles {
        let out = h.join().map_err(|_| RunError::ThreadPanicked)??;
        records.extend(out.records);
        warmup_failed += out.warmup_failed;
    }
    records.sort_by_key(|r| r.index);
    Ok(RunOutput { records, origin_unix_s, warmup_failed, client_cpu_s: cpu_time_s() - cpu_before })
}

fn plan_cores(spec: &RunSpec) -> Result<Vec<CorePlan>, FlagError> {
    let cores = spec.cpus.len();
    if let Some(cap) = spec.concurrency_max.filter(|&c| c < cores) {
        return Err(FlagError::ConcurrencyBelowCores { cap, cores });
    }
    if spec.schedule.is_none() && spec.request_count.is_none() && spec.concurrency_max.is_none() {
        return Err(FlagError::DurationWithoutConcurrency);
    }
    let prompt_count = spec.requests.len();
    let total = spec.schedule.as_ref().map(Vec::len).or(spec.request_count);
    let mut plans = Vec::with_capacity(cores);
    for (c, &cpu) in spec.cpus.iter().enumerate() {
        let share = |n: usize| share_of(n, cores, c);
        let feed = match total {
            Some(n) => Feed::List(
                (c..n)
                    .step_by(cores)
                    .map(|i| Arrival {
                        index: u32::try_from(i).unwrap_or(u32::MAX),
                        prompt_index: u32::try_from(i % prompt_count).unwrap_or(0),
                        scheduled_ns: spec.schedule.as_ref().map(|s| s[i]),
                    })
                    .collect::<Vec<_>>()
                    .into_iter(),
            ),
            None => Feed::Endless {
                next_index: c as u64,
                step: cores as u64,
                prompt_count,
                run_for: spec.duration.unwrap_or_default(),
                deadline: None,
            },
        };
        let warmups = (0..share(spec.warmup_count)).map(|i| u32::try_from((i * cores + c) % prompt_count).unwrap_or(0));
        plans.push(CorePlan {
            index: u16::try_from(c).unwrap_or(u16::MAX),
            cpu,
            feed,
            paced: spec.schedule.is_some(),
            concurrency_max: spec.concurrency_max.map(share),
            warmups: warmups.collect(),
        });
    }
    Ok(plans)
}

/// Core `c`'s part of `n` split evenly across `cores`.
fn share_of(n: usize, cores: usize, c: usize) -> usize {
    n / cores + usize::from(c < n % cores)
}

/// What every core reads and nothing writes (but the progress counters).
struct Shared {
    requests: Arc<Vec<PreparedRequest>>,
    dialect: Dialect,
    addr: SocketAddr,
    reuse: bool,
    /// `--http2`: every request's stream form, and this core's connection count.
    h2_requests: Option<Arc<Vec<H2Request>>>,
    http2_connections: Option<usize>,
    timeout: Duration,
    progress: Arc<Progress>,
}

struct CoreOutput {
    records: Vec<RequestRecord>,
    warmup_failed: usize,
}

fn core_thread(plan: CorePlan, shared: Shared, sync: Arc<StartSync>) -> Result<CoreOutput, RunError> {
    if let Some(cpu) = plan.cpu {
        pin_to_cpu(cpu);
    }
    // epoll, not io_uring: io_uring queues a write until the runtime has run every ready task,
    // so under load a request would leave after its send timestamp, inflating its TTFT by
    // the client's own work. epoll writes when the request is sent, as a peer client does.
    let mut rt = match monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build() {
        Ok(rt) => rt,
        Err(e) => {
            sync.ready.wait();
            sync.start.wait();
            return Err(RunError::Runtime { core: plan.index, source: e });
        }
    };
    rt.block_on(core_main(plan, shared, sync))
}

/// One core's request executor and its results.
struct Core {
    index: u16,
    clock: Cell<Clock>,
    pool: Pool,
    h2_pool: Option<H2Pool>,
    shared: Shared,
    records: RefCell<Vec<RequestRecord>>,
}

impl Core {
    async fn send(&self, a: Arrival) {
        let clock = self.clock.get();
        let request = &self.shared.requests[a.prompt_index as usize];
        // Sized for the whole output up front: the streams of a wave would otherwise grow their
        // records at the same chunk counts, and thousands of reallocations in one read loop
        // delay the reads after them. In a 2,000-stream run that showed as an ITL spike of
        // 20 ms at chunk 257 of every stream, the bench's own, not the server's.
        let tokens = (request.output_tokens as usize).min(limits::record_presize_tokens_max) + 2;
        let mut rec = RequestRecord {
            index: a.index,
            prompt_index: a.prompt_index,
            core_index: self.index,
            // Unpaced: every request is ready at the origin (vLLM's client queue time).
            scheduled_ns: a.scheduled_ns.unwrap_or(0),
            chunks: Vec::with_capacity(tokens),
            text: String::with_capacity(tokens * limits::record_text_bytes_per_token),
            ..RequestRecord::default()
        };
        self.shared.progress.on_send();
        let (dialect, timeout) = (self.shared.dialect, self.shared.timeout);
        match (&self.h2_pool, &self.shared.h2_requests) {
            (Some(pool), Some(streams)) => {
                let stream = &streams[a.prompt_index as usize];
                http2::execute(pool, &clock, stream, dialect, &mut rec, timeout).await;
            }
            _ => execute(&self.pool, &clock, &request.bytes, dialect, &mut rec, timeout).await,
        }
        // Records are kept to the end of the run: a short answer gives its room back.
        rec.chunks.shrink_to_fit();
        rec.text.shrink_to_fit();
        self.shared.progress.on_done(&rec);
        self.records.borrow_mut().push(rec);
    }
}

async fn core_main(mut plan: CorePlan, shared: Shared, sync: Arc<StartSync>) -> Result<CoreOutput, RunError> {
    let pool = Pool::new(shared.addr, shared.reuse);
    let preopen = plan.concurrency_max.unwrap_or(0).min(limits::preopen_connections_per_core_max);
    let h2_pool = shared.http2_connections.map(|n| H2Pool::new(shared.addr, n));
    let filled = match &h2_pool {
        Some(h2) => h2.fill().await,
        None => pool.fill(preopen).await,
    };
    let core = Rc::new(Core {
        index: plan.index,
        clock: Cell::new(Clock { origin: Instant::now() }),
        pool,
        h2_pool,
        shared,
        records: RefCell::new(Vec::new()),
    });
    let warmups = plan.warmups.iter().enumerate().map(|(i, &p)| Arrival {
        index: u32::try_from(i).unwrap_or(0),
        prompt_index: p,
        scheduled_ns: None,
    });
    let warmup_feed = Rc::new(RefCell::new(Feed::List(warmups.collect::<Vec<_>>().into_iter())));
    closed_loop(&core, warmup_feed, plan.concurrency_max.unwrap_or(plan.warmups.len())).await;
    let warmup_failed = core.records.borrow_mut().drain(..).filter(|r| !r.succeeded()).count();
    sync.ready.wait();
    sync.start.wait();
    filled?;
    let origin = *sync.origin.get().ok_or(RunError::NoOrigin)?;
    core.clock.set(Clock { origin });
    let pacer = Pacer::new().map_err(|source| RunError::Timerfd { core: plan.index, source })?;
    pacer.wait_until(origin).await;
    let feed = std::mem::replace(&mut plan.feed, Feed::List(Vec::new().into_iter()));
    if plan.paced {
        let Feed::List(arrivals) = feed else { return Err(RunError::NoSchedule) };
        open_loop(&core, &pacer, arrivals, plan.concurrency_max).await;
    } else {
        let workers = plan.concurrency_max.unwrap_or(usize::MAX);
        closed_loop(&core, Rc::new(RefCell::new(feed)), workers).await;
    }
    let records = std::mem::take(&mut *core.records.borrow_mut());
    Ok(CoreOutput { records, warmup_failed })
}

/// `workers` tasks, each sending the feed's next request when its previous one ends.
async fn closed_loop(core: &Rc<Core>, feed: Rc<RefCell<Feed>>, workers: usize) {
    let in_flight: Rc<InFlight> = Rc::default();
    while in_flight.count.get() < workers {
        let Some(first) = feed.borrow_mut().next(Instant::now()) else { break };
        in_flight.enter();
        let (core, feed, in_flight) = (core.clone(), feed.clone(), in_flight.clone());
        monoio::spawn(async move {
            let mut next = Some(first);
            while let Some(a) = next {
                core.send(a).await;
                next = feed.borrow_mut().next(Instant::now());
            }
            in_flight.leave();
        });
    }
    in_flight.drained().await;
}

/// Sends each arrival at its scheduled time; past the cap, arrivals queue for a free slot.
async fn open_loop(core: &Rc<Core>, pacer: &Pacer, arrivals: std::vec::IntoIter<Arrival>, cap: Option<usize>) {
    let queue: Rc<RefCell<VecDeque<Arrival>>> = Rc::default();
    let in_flight: Rc<InFlight> = Rc::default();
    let clock = core.clock.get();
    for a in arrivals {
        pacer.wait_until(clock.at(a.scheduled_ns.unwrap_or(0))).await;
        if cap.is_some_and(|c| in_flight.count.get() >= c) {
            queue.borrow_mut().push_back(a);
            continue;
        }
        in_flight.enter();
        let (core, queue, in_flight) = (core.clone(), queue.clone(), in_flight.clone());
        monoio::spawn(async move {
            let mut next = Some(a);
            while let Some(a) = next {
                core.send(a).await;
                next = queue.borrow_mut().pop_front();
            }
            in_flight.leave();
        });
    }
    in_flight.drained().await;
}

/// A core's running request tasks. Not a list of join handles: awaiting 100k finished handles
/// in a row keeps the runtime from running the last requests while it does.
#[derive(Default)]
struct InFlight {
    count: Cell<usize>,
    waiter: Cell<Option<Waker>>,
}

impl InFlight {
    fn enter(&self) {
        self.count.set(self.count.get() + 1);
    }

    fn leave(&self) {
        self.count.set(self.count.get() - 1);
        if self.count.get() == 0 {
            if let Some(w) = self.waiter.take() {
                w.wake();
            }
        }
    }

    /// Resolves when no task runs.
    async fn drained(&self) {
        std::future::poll_fn(|cx| {
            if self.count.get() == 0 {
                return Poll::Ready(());
            }
            self.waiter.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }
}

pub(super) fn pin_to_cpu(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity only reads it.
    let failed = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
    };
    if failed {
        eprintln!("warning: cannot pin a client thread to cpu {cpu}: {}", std::io::Error::last_os_error());
    }
}

/// User + system CPU time of the whole process.
fn cpu_time_s() -> f64 {
    // SAFETY: getrusage fills the zeroed struct.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Thousands of concurrent streams need thousands of descriptors: lift the soft limit to the
/// hard one.
fn raise_open_files_limit() {
    // SAFETY: getrlimit/setrlimit read and write a plain struct we own.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
