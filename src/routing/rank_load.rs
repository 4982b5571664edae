//! The rank load table: one per grouped worker, one slot per data-parallel engine rank, shared by
//! every shard without locks. It answers one question per request, "which rank gets this one?",
//! with SMG's documented score, and it is kept current by three writers: each shard counts the requests
//! it dispatches to and finishes on a rank, and whichever shard decodes a rank's output batch
//! publishes that rank's scheduler load report.
//!
//! Score (lowest wins, ties rotate):
//!
//! ```text
//! score = max(in_flight, running + waiting) + waiting × 6 × max(0, kv_cache_usage − 0.5)
//! ```
//!
//! # Invariants
//! - A report is published as one `AtomicU64` (the layout below), so a reader sees one whole
//!   report or another, never the running count of one and the waiting count of the next.
//! - `in_flight` never goes below zero: `finished` without a matching `dispatched` is a bug, caught
//!   by a debug assertion and otherwise ignored rather than wrapped to 2^64.
//! - When a rank's last in-flight request finishes its running and waiting counts read 0 and its
//!   KV usage is kept (engines report only while they produce output, so the last report would
//!   otherwise keep an idle rank looking busy). The reset is a CAS on the report word, so it never
//!   overwrites a report it has not seen, and it backs off when a dispatch raced in.
//!
//! # Why one packed word and not a seqlock
//! Reports for one rank can be published by several shards at once (a rank's outputs go to the
//! shard that owns each request), so a seqlock would need its writers to exclude each other with
//! a spin, and its readers retry while a writer is mid-way. The three fields fit in 64 bits with
//! room to spare, so one `store` publishes a report and one `load` reads it: wait-free on both
//! sides, and the last-finish reset is a plain CAS on the same word.
//!
//! # Report word layout (bit 63 on the left)
//! ```text
//! | running: 24 bits (63..40) | waiting: 24 bits (39..16) | kv_cache_usage: 16 bits (15..0) |
//! ```
//! - running and waiting saturate at 2^24 − 1 (16,777,215): far above any engine's queue, and a
//!   saturated rank scores high anyway.
//! - kv_cache_usage is clamped to 0..=1 (NaN reads as 0) and stored as `round(kv × 2^15)`, so 1.0
//!   is 32768, the 0.5 knee of the penalty is exact, and the step is 1/32768 (about 3e-5).
//!
//! The report time is a second word, stored before the report word (release), so a reader that
//! acquires a report sees a time at least as recent as that report's. It is only read for
//! metrics; the score never uses it.
//!
//! # Memory layout
//! Each rank's slot is aligned to 128 bytes (two cache lines, covering the adjacent-line
//! prefetcher), so shards hammering rank 0 never invalidate the line that holds rank 1.
//!
//! This module knows nothing about engines, sockets or shards: it is plain data behind atomics.

use std::fmt;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const RUNNING_SHIFT: u32 = 40;
const WAITING_SHIFT: u32 = 16;
const COUNT_BITS: u32 = 24;
const KV_BITS: u32 = 16;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const KV_MASK: u64 = (1 << KV_BITS) - 1;
/// 2^15: 1.0 encodes as 32768 (fits 16 bits) and every k/32768 decodes exactly.
const KV_SCALE_BITS: u32 = 15;
const KV_SCALE: f64 = (1u64 << KV_SCALE_BITS) as f64;
/// [`KV_PENALTY_KNEE`] and [`KV_PENALTY_WEIGHT`] for the fixed-point score of `select`.
const KV_KNEE_FIXED: u64 = 1 << (KV_SCALE_BITS - 1);
const KV_PENALTY_WEIGHT_FIXED: u64 = 6;
const _: () = assert!(KV_KNEE_FIXED as f64 == KV_PENALTY_KNEE * KV_SCALE);
const _: () = assert!(KV_PENALTY_WEIGHT_FIXED as f64 == KV_PENALTY_WEIGHT);
const _: () = assert!(RUNNING_SHIFT == WAITING_SHIFT + COUNT_BITS && WAITING_SHIFT == KV_BITS);
const _: () = assert!(RUNNING_SHIFT + COUNT_BITS == 64);
const _: () = assert!(KV_SCALE as u64 <= KV_MASK);

/// The largest running or waiting count a report can carry; larger values saturate to it.
pub const REPORT_COUNT_MAX: u32 = COUNT_MASK as u32;
/// Weight of the KV-pressure term: waiting requests cost this much more per unit of KV usage
/// above the knee, because they will queue behind preemptions.
pub const KV_PENALTY_WEIGHT: f64 = 6.0;
/// KV usage below which waiting requests carry no extra cost.
pub const KV_PENALTY_KNEE: f64 = 0.5;

/// One rank's load as the table sees it at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RankLoad {
    /// Requests the gateway (all shards) has dispatched to the rank and not yet finished.
    pub in_flight: u64,
    /// The engine's last reported running requests (0 after the rank's last request finished).
    pub running: u32,
    /// The engine's last reported waiting requests (0 after the rank's last request finished).
    pub waiting: u32,
    /// The engine's last reported KV-cache usage, 0..=1 (kept when the rank goes idle).
    pub kv_cache_usage: f64,
    /// Milliseconds since the last report; `None` if the rank never reported.
    pub report_age_ms: Option<u64>,
    /// Requests ever dispatched to the rank (across reconnects, see [`RankTable::carry_totals`]).
    pub requests_total: u64,
}

/// The score of a rank's load: lower is better. Pure, so metrics and tests use the same formula
/// as [`RankTable::select`]. A NaN `kv_cache_usage` counts as no KV pressure.
pub fn score(load: &RankLoad) -> f64 {
    score_parts(load.in_flight, load.running, load.waiting, load.kv_cache_usage)
}

#[inline(always)]
fn score_parts(in_flight: u64, running: u32, waiting: u32, kv_cache_usage: f64) -> f64 {
    // The in-flight floor keeps a stale report from making a busy rank look idle between reports.
    let queued = u64::from(running) + u64::from(waiting);
    let floor = in_flight.max(queued) as f64;
    // f64::max ignores NaN, so a NaN usage adds nothing.
    floor + f64::from(waiting) * KV_PENALTY_WEIGHT * (kv_cache_usage - KV_PENALTY_KNEE).max(0.0)
}

/// A report as it travels in one `u64` (layout in the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PackedReport(u64);

impl PackedReport {
    fn new(running: u64, waiting: u64, kv_cache_usage: f64) -> Self {
        let running = running.min(COUNT_MASK);
        let waiting = waiting.min(COUNT_MASK);
        // NaN fails both comparisons of clamp's result, so map it to 0 first.
        let kv = if kv_cache_usage.is_nan() { 0.0 } else { kv_cache_usage.clamp(0.0, 1.0) };
        let kv_raw = (kv * KV_SCALE).round() as u64;
        PackedReport(running << RUNNING_SHIFT | waiting << WAITING_SHIFT | kv_raw)
    }

    #[inline(always)]
    fn running(self) -> u32 {
        ((self.0 >> RUNNING_SHIFT) & COUNT_MASK) as u32
    }

    #[inline(always)]
    fn waiting(self) -> u32 {
        ((self.0 >> WAITING_SHIFT) & COUNT_MASK) as u32
    }

    #[inline(always)]
    fn kv_cache_usage(self) -> f64 {
        (self.0 & KV_MASK) as f64 / KV_SCALE
    }

    /// The same report with no running or waiting requests, keeping the KV usage.
    fn idle(self) -> Self {
        PackedReport(self.0 & KV_MASK)
    }
}

/// One rank's shared state, alone on its pair of cache lines.
#[repr(C, align(128))]
#[derive(Default)]
struct RankSlot {
    in_flight: AtomicU64,
    /// Dispatches ever made: on the line `in_flight` already brings into cache at each dispatch.
    requests_total: AtomicU64,
    /// A [`PackedReport`]; 0 (no running, no waiting, no KV usage) until the first report.
    report: AtomicU64,
    /// Milliseconds since the table's epoch, plus one, of the last report; 0 = never.
    reported_at_ms: AtomicU64,
}

impl RankSlot {
    /// The score in fixed point, `score × 2^15`, from relaxed loads: a score is a heuristic over
    /// values that change every millisecond, and the report word cannot tear whatever the
    /// ordering. Integer arithmetic is exact here (KV usage is already a multiple of 2^-15) and
    /// needs no int-to-float conversions, which is most of the per-rank cost of `select`.
    #[inline(always)]
    fn score_fixed_relaxed(&self) -> u64 {
        let in_flight = self.in_flight.load(Ordering::Relaxed);
        let report = PackedReport(self.report.load(Ordering::Relaxed));
        let queued = u64::from(report.running()) + u64::from(report.waiting());
        // Capped so the shift cannot overflow; 2^48 requests in flight is not a real state.
        let floor = in_flight.max(queued).min(1 << 48);
        let kv_above_knee = (report.0 & KV_MASK).saturating_sub(KV_KNEE_FIXED);
        (floor << KV_SCALE_BITS) + u64::from(report.waiting()) * KV_PENALTY_WEIGHT_FIXED * kv_above_knee
    }

    /// Called when `in_flight` went from 1 to 0: zero running and waiting, keep KV usage.
    fn reset_when_idle(&self) {
        let mut current = self.report.load(Ordering::Acquire);
        loop {
            // Read after acquiring `current`: a report published after a new dispatch carries that
            // dispatch with it, so a fresh report is never mistaken for a stale one.
            if self.in_flight.load(Ordering::Acquire) != 0 {
                return;
            }
            let idle = PackedReport(current).idle().0;
            if idle == current {
                return;
            }
            match self.report.compare_exchange_weak(current, idle, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }
}

/// A report named a rank the group does not have (the rank comes from the engine's output).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankOutOfRange {
    pub rank: usize,
    pub rank_count: usize,
}

impl fmt::Display for RankOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {} out of range for a group of {} engines", self.rank, self.rank_count)
    }
}

impl std::error::Error for RankOutOfRange {}

/// The load of every rank of one grouped worker. `Sync`: share it as `Arc<RankTable>`.
pub struct RankTable {
    slots: Box<[RankSlot]>,
    epoch: Instant,
}

impl RankTable {
    /// A table for `rank_count` ranks, all idle and unreported.
    pub fn new(rank_count: NonZeroUsize) -> Self {
        let slots = (0..rank_count.get()).map(|_| RankSlot::default()).collect();
        RankTable { slots, epoch: Instant::now() }
    }

    /// The number of ranks (at least 1).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Always false (a group has at least one rank); here for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The rank with the lowest score. Among equal scores the first at or after `*cursor` (in
    /// rotation order) wins, and `*cursor` moves past it, so ties rotate. Each shard keeps its own
    /// cursor: nothing shared is written here. Any cursor value is accepted.
    ///
    /// Selection does not count the request: call [`RankTable::dispatched`] when it is sent.
    #[inline]
    pub fn select(&self, cursor: &mut usize) -> usize {
        let rank_count = self.slots.len();
        if rank_count == 1 {
            return 0;
        }
        let start = if *cursor < rank_count { *cursor } else { *cursor % rank_count };
        let (before, from_start) = self.slots.split_at(start);
        let mut best_rank = start;
        let mut best_score = from_start[0].score_fixed_relaxed();
        // Strictly lower only: the earliest tie in rotation order keeps the win.
        let mut consider = |rank: usize, slot: &RankSlot| {
            let score = slot.score_fixed_relaxed();
            if score < best_score {
                best_score = score;
                best_rank = rank;
            }
        };
        for (offset, slot) in from_start.iter().enumerate().skip(1) {
            consider(start + offset, slot);
        }
        for (rank, slot) in before.iter().enumerate() {
            consider(rank, slot);
        }
        *cursor = if best_rank + 1 == rank_count { 0 } else { best_rank + 1 };
        best_rank
    }

    /// A request was sent to `rank`. Panics if `rank >= len()` (ranks come from `select`).
    pub fn dispatched(&self, rank: usize) {
        let slot = &self.slots[rank];
        slot.in_flight.fetch_add(1, Ordering::AcqRel);
        slot.requests_total.fetch_add(1, Ordering::Relaxed);
    }

    /// Continues the request totals of `previous` (the table of the worker's last connection),
    /// so that the cumulative per-rank counter survives an engine restart. Call it before the
    /// table is shared.
    pub fn carry_totals(&self, previous: &RankTable) {
        for (slot, old) in self.slots.iter().zip(previous.slots.iter()) {
            slot.requests_total.store(old.requests_total.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// A request on `rank` ended (finished, aborted or failed). When it was the rank's last,
    /// running and waiting reset to 0 and KV usage is kept. Panics if `rank >= len()`.
    pub fn finished(&self, rank: usize) {
        let slot = &self.slots[rank];
        match slot.in_flight.fetch_update(Ordering::AcqRel, Ordering::Acquire, |count| count.checked_sub(1)) {
            Ok(1) => slot.reset_when_idle(),
            Ok(_) => {}
            Err(_) => debug_assert!(false, "finished() on rank {rank} without a matching dispatched()"),
        }
    }

    /// Publishes an engine load report for `rank` as one unit. Counts above [`REPORT_COUNT_MAX`]
    /// saturate; KV usage is clamped to 0..=1 (NaN reads as 0).
    pub fn report(&self, rank: usize, running: u64, waiting: u64, kv_cache_usage: f64) -> Result<(), RankOutOfRange> {
        let rank_count = self.slots.len();
        let slot = self.slots.get(rank).ok_or(RankOutOfRange { rank, rank_count })?;
        // The time goes first so that whoever acquires this report sees a time at least as new.
        slot.reported_at_ms.store(self.now_ms() + 1, Ordering::Relaxed);
        slot.report.store(PackedReport::new(running, waiting, kv_cache_usage).0, Ordering::Release);
        Ok(())
    }

    /// The load of `rank` now, for metrics and `GET /workers`; `None` if out of range.
    pub fn snapshot(&self, rank: usize) -> Option<RankLoad> {
        let slot = self.slots.get(rank)?;
        let report = PackedReport(slot.report.load(Ordering::Acquire));
        let reported_at_ms = slot.reported_at_ms.load(Ordering::Relaxed);
        let report_age_ms = reported_at_ms.checked_sub(1).map(|at_ms| self.now_ms().saturating_sub(at_ms));
        Some(RankLoad {
            in_flight: slot.in_flight.load(Ordering::Acquire),
            running: report.running(),
            waiting: report.waiting(),
            kv_cache_usage: report.kv_cache_usage(),
            report_age_ms,
            requests_total: slot.requests_total.load(Ordering::Relaxed),
        })
    }

    /// Every rank's load, rank 0 first.
    pub fn snapshots(&self) -> impl Iterator<Item = RankLoad> + '_ {
        (0..self.slots.len()).filter_map(|rank| self.snapshot(rank))
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }
}

impl fmt::Debug for RankTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.snapshots()).finish()
    }
}

#[cfg(test)]
#[path = "rank_load_tests.rs"]
mod tests;
