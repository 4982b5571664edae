//! Rank selection: the cost of `RankTable::select` for 1 to 64 ranks, side by side with a naive
//! baseline (a `Mutex<Vec<RankLoad>>` table computing the same score), as a ratio.
//! Target (issue "Workers", item 2): selection cost flat per rank from 1 to 64 ranks, i.e. the
//! per-rank column stays constant and small (a few ns), and no worse than the baseline.
//!
//!     cargo bench --bench rank_selection        (SHARDGATE_BENCH_QUICK=1 for a smoke run)
//!
//! Part 1: one thread selecting. Part 2: the same while another thread dispatches, finishes and
//! reports on the same table, as the other shards do. Medians of repeated rounds within one run,
//! the two tables measured alternately; the checksum shows both picked the same ranks.

use std::hint::black_box;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Instant;

use shardgate::routing::rank_load::{score, RankLoad, RankTable};

const RANK_COUNTS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// What a shard does with a table; implemented by the real one and the baseline.
trait Table: Sync + Send {
    fn select(&self, cursor: &mut usize) -> usize;
    fn dispatched(&self, rank: usize);
    fn finished(&self, rank: usize);
    fn report(&self, rank: usize, running: u64, waiting: u64, kv_cache_usage: f64);
}

impl Table for RankTable {
    fn select(&self, cursor: &mut usize) -> usize {
        RankTable::select(self, cursor)
    }
    fn dispatched(&self, rank: usize) {
        RankTable::dispatched(self, rank)
    }
    fn finished(&self, rank: usize) {
        RankTable::finished(self, rank)
    }
    fn report(&self, rank: usize, running: u64, waiting: u64, kv_cache_usage: f64) {
        let _ = RankTable::report(self, rank, running, waiting, kv_cache_usage);
    }
}

/// The obvious implementation: one lock around every rank's load.
struct MutexTable {
    ranks: Mutex<Vec<RankLoad>>,
}

impl MutexTable {
    fn new(rank_count: usize) -> Self {
        MutexTable { ranks: Mutex::new(vec![RankLoad::default(); rank_count]) }
    }
}

impl Table for MutexTable {
    fn select(&self, cursor: &mut usize) -> usize {
        let ranks = self.ranks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let start = *cursor % ranks.len();
        let (mut best_rank, mut best_score) = (start, score(&ranks[start]));
        for offset in 1..ranks.len() {
            let rank = (start + offset) % ranks.len();
            let rank_score = score(&ranks[rank]);
            if rank_score < best_score {
                (best_rank, best_score) = (rank, rank_score);
            }
        }
        *cursor = best_rank + 1;
        best_rank
    }
    fn dispatched(&self, rank: usize) {
        self.ranks.lock().unwrap_or_else(|poisoned| poisoned.into_inner())[rank].in_flight += 1;
    }
    fn finished(&self, rank: usize) {
        let mut ranks = self.ranks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let load = &mut ranks[rank];
        load.in_flight = load.in_flight.saturating_sub(1);
        if load.in_flight == 0 {
            (load.running, load.waiting) = (0, 0);
        }
    }
    fn report(&self, rank: usize, running: u64, waiting: u64, kv_cache_usage: f64) {
        let mut ranks = self.ranks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let load = &mut ranks[rank];
        (load.running, load.waiting, load.kv_cache_usage) = (running as u32, waiting as u32, kv_cache_usage);
    }
}

/// Varied, deterministic loads, so the minimum moves around and ties exist.
fn fill<T: Table + ?Sized>(table: &T, rank_count: usize) {
    for rank in 0..rank_count {
        for _ in 0..rank % 5 {
            table.dispatched(rank);
        }
        table.report(rank, (rank * 7 % 11) as u64, (rank * 3 % 4) as u64, (rank * 37 % 100) as f64 / 100.0);
    }
}

/// Nanoseconds per select over `iterations`, and a checksum of the picks. Generic, not `dyn`,
/// so both tables are measured as a shard would call them.
fn time_selects<T: Table + ?Sized>(table: &T, iterations: usize) -> (f64, u64) {
    let mut cursor = 0;
    let mut checksum = 0u64;
    let started = Instant::now();
    for _ in 0..iterations {
        let rank = black_box(table.select(black_box(&mut cursor)));
        checksum = checksum.wrapping_mul(31).wrapping_add(rank as u64);
    }
    (started.elapsed().as_nanos() as f64 / iterations as f64, checksum)
}

/// What the other shards do meanwhile: dispatch, report, finish, on rotating ranks.
fn churn<T: Table + ?Sized>(table: &T, rank_count: usize, stop: &AtomicBool) {
    let mut step = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let rank = step % rank_count;
        table.dispatched(rank);
        table.report(rank, (step % 13) as u64, (step % 5) as u64, (step % 100) as f64 / 100.0);
        table.finished(rank);
        step = step.wrapping_add(7);
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

struct Row {
    atomic_ns: f64,
    mutex_ns: f64,
    checksums_match: bool,
}

/// One timed run on `table`, with a churning thread beside it when `contended`.
fn run<T: Table + 'static>(table: &Arc<T>, rank_count: usize, iterations: usize, contended: bool) -> (f64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let churner = contended.then(|| {
        let (table, stop) = (Arc::clone(table), Arc::clone(&stop));
        thread::spawn(move || churn(table.as_ref(), rank_count, &stop))
    });
    let result = time_selects(table.as_ref(), iterations);
    stop.store(true, Ordering::Relaxed);
    if let Some(churner) = churner {
        churner.join().expect("churn thread");
    }
    result
}

fn measure(rank_count: usize, rounds: usize, rank_visits: usize, contended: bool) -> Row {
    let ranks = NonZeroUsize::new(rank_count).expect("at least one rank");
    let atomic = Arc::new(RankTable::new(ranks));
    let naive = Arc::new(MutexTable::new(rank_count));
    fill(atomic.as_ref(), rank_count);
    fill(naive.as_ref(), rank_count);
    let iterations = (rank_visits / rank_count).max(50_000);
    let (mut atomic_ns, mut mutex_ns, mut checksums_match) = (Vec::new(), Vec::new(), true);
    for _ in 0..rounds {
        let (atomic_round_ns, atomic_checksum) = run(&atomic, rank_count, iterations, contended);
        let (mutex_round_ns, mutex_checksum) = run(&naive, rank_count, iterations, contended);
        atomic_ns.push(atomic_round_ns);
        mutex_ns.push(mutex_round_ns);
        // Under churn the loads differ between the runs, so only the quiet picks must agree.
        checksums_match &= contended || atomic_checksum == mutex_checksum;
    }
    Row { atomic_ns: median(atomic_ns), mutex_ns: median(mutex_ns), checksums_match }
}

fn print_part(title: &str, rounds: usize, rank_visits: usize, contended: bool) {
    println!("\n{title}");
    println!("ranks  RankTable ns/select  ns/rank  Mutex<Vec> ns/select  ns/rank  RankTable/Mutex");
    for rank_count in RANK_COUNTS {
        let row = measure(rank_count, rounds, rank_visits, contended);
        let same = if row.checksums_match { "" } else { "  (picks differ!)" };
        println!(
            "{rank_count:>5}  {:>19.2}  {:>7.2}  {:>20.2}  {:>7.2}  {:>15.2}{same}",
            row.atomic_ns,
            row.atomic_ns / rank_count as f64,
            row.mutex_ns,
            row.mutex_ns / rank_count as f64,
            row.atomic_ns / row.mutex_ns,
        );
    }
}

fn main() {
    let quick = std::env::var_os("SHARDGATE_BENCH_QUICK").is_some();
    let (rounds, rank_visits) = if quick { (1, 200_000) } else { (7, 8_000_000) };
    // Warm-up, discarded: the first timed loop of a process otherwise pays for clock ramp-up.
    measure(8, 1, rank_visits, false);
    print_part("select, one thread (picks checked equal between the two tables)", rounds, rank_visits, false);
    let (rounds, rank_visits) = if quick { (1, 100_000) } else { (5, 2_000_000) };
    print_part(
        "select while another thread dispatches, reports and finishes on the same table",
        rounds,
        rank_visits,
        true,
    );
}
