//! Tests of the rank load table: the score and selection as tables of cases, the packed report's
//! edges, the last-finish reset, and a multi-threaded stress test that checks the two promises
//! made to the shards (in-flight counts return to zero; no reader ever sees a torn report).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

fn rank_count(count: usize) -> NonZeroUsize {
    NonZeroUsize::new(count).expect("tests use at least one rank")
}

/// A rank's state to set up: gateway in-flight count, then the engine report.
#[derive(Clone, Copy)]
struct Setup {
    in_flight: u64,
    running: u64,
    waiting: u64,
    kv_cache_usage: f64,
}

const IDLE: Setup = Setup { in_flight: 0, running: 0, waiting: 0, kv_cache_usage: 0.0 };

fn table_with(setups: &[Setup]) -> RankTable {
    let table = RankTable::new(rank_count(setups.len()));
    for (rank, setup) in setups.iter().enumerate() {
        for _ in 0..setup.in_flight {
            table.dispatched(rank);
        }
        table.report(rank, setup.running, setup.waiting, setup.kv_cache_usage).expect("rank in range");
    }
    table
}

#[test]
fn score_cases() {
    let cases: &[(&str, RankLoad, f64)] = &[
        ("idle", RankLoad::default(), 0.0),
        ("stale report floored by in-flight", RankLoad { in_flight: 5, running: 1, ..Default::default() }, 5.0),
        ("report above in-flight", RankLoad { in_flight: 1, running: 3, waiting: 2, ..Default::default() }, 5.0),
        ("no report: in-flight alone", RankLoad { in_flight: 7, ..Default::default() }, 7.0),
        ("kv at the knee: no penalty", RankLoad { waiting: 4, kv_cache_usage: 0.5, ..Default::default() }, 4.0),
        ("kv penalty", RankLoad { waiting: 4, kv_cache_usage: 0.75, ..Default::default() }, 4.0 + 4.0 * 6.0 * 0.25),
        ("kv full", RankLoad { running: 1, waiting: 2, kv_cache_usage: 1.0, ..Default::default() }, 3.0 + 6.0),
        ("penalty counts waiting only", RankLoad { running: 10, kv_cache_usage: 0.9, ..Default::default() }, 10.0),
        (
            "penalty on top of the floor",
            RankLoad { in_flight: 9, waiting: 1, kv_cache_usage: 1.0, ..Default::default() },
            12.0,
        ),
        ("NaN kv: no penalty", RankLoad { waiting: 3, kv_cache_usage: f64::NAN, ..Default::default() }, 3.0),
    ];
    for (name, load, expected) in cases {
        assert_eq!(score(load), *expected, "{name}");
    }
}

#[test]
fn selection_cases() {
    let busy = |in_flight, running, waiting, kv_cache_usage| Setup { in_flight, running, waiting, kv_cache_usage };
    // (name, ranks, starting cursor, expected picks in order); the table does not change between
    // picks, so the sequence shows how ties rotate.
    let cases: &[(&str, Vec<Setup>, usize, Vec<usize>)] = &[
        ("one rank", vec![IDLE], 0, vec![0, 0, 0]),
        ("all idle: round robin", vec![IDLE; 3], 0, vec![0, 1, 2, 0]),
        ("all idle from cursor 2", vec![IDLE; 3], 2, vec![2, 0, 1]),
        ("cursor past the end wraps", vec![IDLE; 3], 7, vec![1, 2, 0]),
        ("cursor usize::MAX", vec![IDLE; 4], usize::MAX, vec![3, 0]),
        ("lowest wins", vec![busy(3, 0, 0, 0.0), busy(1, 0, 0, 0.0), busy(2, 0, 0, 0.0)], 0, vec![1, 1]),
        ("ties among the lowest rotate", vec![busy(2, 0, 0, 0.0), IDLE, IDLE, busy(3, 0, 0, 0.0)], 0, vec![1, 2, 1, 2]),
        ("stale idle report floored by in-flight", vec![busy(3, 0, 0, 0.0), busy(0, 2, 0, 0.0)], 0, vec![1, 1]),
        ("report beats in-flight", vec![busy(1, 4, 0, 0.0), busy(2, 0, 0, 0.0)], 0, vec![1]),
        ("kv penalty flips the choice", vec![busy(0, 0, 2, 0.9), busy(0, 5, 0, 0.1)], 0, vec![1, 1]),
        ("kv below the knee does not", vec![busy(0, 0, 2, 0.5), busy(0, 3, 0, 0.1)], 0, vec![0, 0]),
    ];
    for (name, setups, cursor, expected) in cases {
        let table = table_with(setups);
        let mut cursor = *cursor;
        let picks: Vec<usize> = expected.iter().map(|_| table.select(&mut cursor)).collect();
        assert_eq!(&picks, expected, "{name}");
    }
}

#[test]
fn select_agrees_with_score_of_snapshots() {
    let mut rng = SmallRng::seed_from_u64(7);
    for round in 0..500 {
        let ranks = rng.random_range(1..=16);
        let setups: Vec<Setup> = (0..ranks)
            .map(|_| Setup {
                in_flight: rng.random_range(0..6),
                running: rng.random_range(0..6),
                waiting: rng.random_range(0..6),
                kv_cache_usage: rng.random_range(0.0..=1.0),
            })
            .collect();
        let table = table_with(&setups);
        let mut cursor = rng.random_range(0..ranks);
        let picked = table.select(&mut cursor);
        let scores: Vec<f64> = table.snapshots().map(|load| score(&load)).collect();
        for (rank, slot) in table.slots.iter().enumerate() {
            let fixed = slot.score_fixed_relaxed() as f64 / KV_SCALE;
            assert_eq!(fixed, scores[rank], "round {round}: select's fixed-point score of rank {rank}");
        }
        let lowest = scores.iter().copied().fold(f64::INFINITY, f64::min);
        assert_eq!(scores[picked], lowest, "round {round}: picked {picked} of {scores:?}");
    }
}

#[test]
fn report_packing_cases() {
    let max = u64::from(REPORT_COUNT_MAX);
    // (running, waiting, kv in) → (running, waiting, kv out)
    let cases: &[(u64, u64, f64, u32, u32, f64)] = &[
        (0, 0, 0.0, 0, 0, 0.0),
        (3, 9, 0.5, 3, 9, 0.5),
        (max, max, 1.0, REPORT_COUNT_MAX, REPORT_COUNT_MAX, 1.0),
        (max + 1, u64::MAX, 0.25, REPORT_COUNT_MAX, REPORT_COUNT_MAX, 0.25),
        (1, 2, -0.3, 1, 2, 0.0),
        (1, 2, 1.7, 1, 2, 1.0),
        (1, 2, f64::NAN, 1, 2, 0.0),
        (1, 2, f64::INFINITY, 1, 2, 1.0),
        (1, 2, 0.123456, 1, 2, (0.123456f64 * 32768.0).round() / 32768.0),
    ];
    for &(running, waiting, kv_in, running_out, waiting_out, kv_out) in cases {
        let packed = PackedReport::new(running, waiting, kv_in);
        let decoded = (packed.running(), packed.waiting(), packed.kv_cache_usage());
        assert_eq!(decoded, (running_out, waiting_out, kv_out), "({running}, {waiting}, {kv_in})");
        assert_eq!(packed.idle().kv_cache_usage(), kv_out);
        assert_eq!((packed.idle().running(), packed.idle().waiting()), (0, 0));
    }
}

#[test]
fn last_finish_resets_running_and_waiting_and_keeps_kv() {
    let table = RankTable::new(rank_count(2));
    // Dyadic fractions: exact in the 2^15 encoding.
    table.report(0, 3, 2, 0.75).expect("rank 0");
    table.report(1, 1, 1, 0.625).expect("rank 1");
    table.dispatched(0);
    table.dispatched(0);
    table.dispatched(1);
    table.finished(0);
    let load = table.snapshot(0).expect("rank 0");
    assert_eq!((load.in_flight, load.running, load.waiting, load.kv_cache_usage), (1, 3, 2, 0.75));
    table.finished(0);
    let load = table.snapshot(0).expect("rank 0");
    assert_eq!((load.in_flight, load.running, load.waiting), (0, 0, 0));
    assert_eq!(load.kv_cache_usage, 0.75, "KV usage kept");
    let other = table.snapshot(1).expect("rank 1");
    assert_eq!((other.in_flight, other.running, other.waiting), (1, 1, 1), "other ranks untouched");
}

#[test]
fn report_out_of_range_is_an_error_not_a_panic() {
    let table = RankTable::new(rank_count(2));
    let error = table.report(2, 1, 1, 0.1).expect_err("rank 2 of 2");
    assert_eq!(error.to_string(), "rank 2 out of range for a group of 2 engines");
    assert_eq!(table.snapshot(2), None);
}

#[test]
fn report_age_is_none_until_the_first_report() {
    let table = RankTable::new(rank_count(1));
    assert_eq!(table.snapshot(0).map(|load| load.report_age_ms), Some(None));
    table.report(0, 1, 0, 0.0).expect("rank 0");
    let age_ms = table.snapshot(0).and_then(|load| load.report_age_ms).expect("reported");
    assert!(age_ms < 60_000, "age {age_ms} ms");
}

#[test]
fn request_totals_count_dispatches_and_survive_a_new_table() {
    let table = RankTable::new(rank_count(2));
    for rank in [0, 1, 1, 1] {
        table.dispatched(rank);
        table.finished(rank);
    }
    let totals = |t: &RankTable| t.snapshots().map(|l| l.requests_total).collect::<Vec<_>>();
    assert_eq!(totals(&table), vec![1, 3]);
    // A reconnect builds a new table: the counter goes on from where it was, in-flight does not.
    let next = RankTable::new(rank_count(2));
    next.carry_totals(&table);
    next.dispatched(0);
    assert_eq!(totals(&next), vec![2, 3]);
    assert_eq!(next.snapshot(0).map(|l| l.in_flight), Some(1));
}

#[test]
fn slots_do_not_share_cache_lines() {
    assert_eq!(std::mem::align_of::<RankSlot>(), 128);
    assert_eq!(std::mem::size_of::<RankSlot>(), 128);
}

/// The value a stress reporter publishes: running == waiting == `value`, KV derived from it, so a
/// reader can tell one whole report from a mix of two.
fn stress_report(value: u64) -> (u64, u64, f64) {
    (value, value, (value % 97) as f64 / 96.0)
}

fn assert_whole_report(load: &RankLoad) {
    let (running, waiting, kv) = stress_report(u64::from(load.running));
    let expected_kv = PackedReport::new(running, waiting, kv).kv_cache_usage();
    let whole = load.running == load.waiting && load.kv_cache_usage == expected_kv;
    // After a rank's last finish: running and waiting 0, KV kept from whichever report.
    let reset = load.running == 0 && load.waiting == 0;
    assert!(whole || reset, "torn report: {load:?}");
}

fn stress_worker(table: &RankTable, seed: u64, pairs: usize) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut cursor = 0;
    let mut outstanding: Vec<usize> = Vec::with_capacity(8);
    for _ in 0..pairs {
        let rank = if rng.random_bool(0.5) { table.select(&mut cursor) } else { rng.random_range(0..table.len()) };
        table.dispatched(rank);
        outstanding.push(rank);
        if outstanding.len() >= rng.random_range(1..=6) {
            let done = outstanding.swap_remove(rng.random_range(0..outstanding.len()));
            table.finished(done);
        }
    }
    for rank in outstanding.drain(..) {
        table.finished(rank);
    }
}

#[test]
fn stress_in_flight_returns_to_zero_and_reports_never_tear() {
    const RANKS: usize = 8;
    const WORKERS: u64 = 8;
    let pairs = if cfg!(debug_assertions) { 20_000 } else { 200_000 };
    let table = Arc::new(RankTable::new(rank_count(RANKS)));
    let stop = Arc::new(AtomicBool::new(false));
    let (reads, reports) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));

    let reporters: Vec<_> = (0..2u64)
        .map(|id| {
            let (table, stop, reports) = (Arc::clone(&table), Arc::clone(&stop), Arc::clone(&reports));
            thread::spawn(move || {
                let mut value = id * 1_000_000;
                while !stop.load(Ordering::Relaxed) {
                    value += 1;
                    let (running, waiting, kv) = stress_report(value % 4_000_000);
                    table.report((value as usize) % RANKS, running, waiting, kv).expect("rank in range");
                    reports.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let reader = {
        let (table, stop, reads) = (Arc::clone(&table), Arc::clone(&stop), Arc::clone(&reads));
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                table.snapshots().for_each(|load| assert_whole_report(&load));
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let workers: Vec<_> = (0..WORKERS)
        .map(|seed| {
            let table = Arc::clone(&table);
            thread::spawn(move || stress_worker(&table, seed, pairs))
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    stop.store(true, Ordering::Relaxed);
    for thread in reporters.into_iter().chain(std::iter::once(reader)) {
        thread.join().expect("reporter or reader");
    }

    for (rank, load) in table.snapshots().enumerate() {
        assert_eq!(load.in_flight, 0, "rank {rank}: {load:?}");
        assert_whole_report(&load);
    }
    let (reads, reports) = (reads.load(Ordering::Relaxed), reports.load(Ordering::Relaxed));
    assert!(reads > 0 && reports > 0, "reader and reporters ran: {reads} reads, {reports} reports");
    // With the reporters stopped, one more request per rank ends in the idle state.
    for rank in 0..RANKS {
        table.dispatched(rank);
        table.finished(rank);
        let load = table.snapshot(rank).expect("rank in range");
        assert_eq!((load.in_flight, load.running, load.waiting), (0, 0, 0), "rank {rank}");
    }
}
