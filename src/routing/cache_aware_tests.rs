//! Tests of `cache_aware`: affinity for shared prefixes, the threshold, the imbalance fallback,
//! the memory bound, TTL expiry, and forgetting removed workers.

use super::*;

const BLOCK: usize = 4;

fn config() -> CacheAwareConfig {
    CacheAwareConfig { block_size: BLOCK, ..CacheAwareConfig::default() }
}

fn workers(loads: &[u64]) -> Vec<Candidate> {
    loads.iter().enumerate().map(|(index, &load)| Candidate::new(100 + index as u64, load)).collect()
}

/// A 40-token prompt: a 32-token prefix shared by its family, then an 8-token suffix.
fn prompt(family: u32, suffix: u32) -> Vec<u32> {
    let prefix = (0..32).map(|position| family * 1_000 + position);
    let tail = (0..8).map(|position| 1_000_000 + suffix * 100 + position);
    prefix.chain(tail).collect()
}

#[test]
fn a_shared_prefix_stays_on_one_worker_and_families_spread() {
    let mut policy = CacheAwarePolicy::new(&config());
    let candidates = workers(&[0, 0, 0, 0]);
    let mut worker_of_family: Vec<Option<usize>> = vec![None; 8];
    for suffix in 0..6 {
        for family in 0..8 {
            let chosen = policy.select_at(&candidates, &prompt(family, suffix), 0).expect("workers");
            let first = *worker_of_family[family as usize].get_or_insert(chosen);
            assert_eq!(chosen, first, "family {family}, request {suffix}");
        }
    }
    let mut families_per_worker = [0; 4];
    for worker in worker_of_family.iter().flatten() {
        families_per_worker[*worker] += 1;
    }
    assert_eq!(families_per_worker, [2, 2, 2, 2], "new prefixes go to the smallest share of the tree");
}

#[test]
fn load_balance_cases() {
    // Family 0 was first routed to worker 0; then the loads change. Defaults: abs 64, rel 1.5.
    let cases: &[(&str, [u64; 2], usize)] = &[
        ("balanced: affinity wins over a small difference", [10, 0], 0),
        ("both thresholds exceeded: least load", [100, 0], 1),
        ("absolute difference within 64: balanced", [100, 40], 0),
        ("ratio within 1.5: balanced", [300, 230], 0),
        ("both exceeded again", [300, 100], 1),
    ];
    for (name, loads, expected) in cases {
        let mut policy = CacheAwarePolicy::new(&config());
        assert_eq!(policy.select_at(&workers(&[0, 1]), &prompt(0, 0), 0), Some(0));
        assert_eq!(policy.select_at(&workers(loads), &prompt(0, 1), 0), Some(*expected), "{name}");
    }
}

#[test]
fn match_ratio_cases() {
    // Worker 0 was sent `seen`; the request then shares a prefix of it while worker 0 carries more
    // load (balanced), so only the ratio decides.
    let seen: Vec<u32> = (0..40).collect();
    let shared_then =
        |shared: u32, total: u32| -> Vec<u32> { (0..shared).chain(5_000..5_000 + total - shared).collect() };
    let cases: &[(&str, f64, Vec<u32>, usize)] = &[
        ("same prompt", 0.3, seen.clone(), 0),
        ("8 of 80 tokens: 0.1 < 0.3", 0.3, shared_then(8, 80), 1),
        ("32 of 40 tokens: 0.8", 0.3, shared_then(32, 40), 0),
        ("8 of 16 tokens at threshold 0.5: not above", 0.5, shared_then(8, 16), 1),
        ("12 of 16 tokens at threshold 0.5", 0.5, shared_then(12, 16), 0),
        ("a partial block does not match", 0.3, shared_then(3, 6), 1),
        ("threshold 0 still needs a match", 0.0, shared_then(0, 40), 1),
    ];
    for (name, threshold, request, expected) in cases {
        let mut policy = CacheAwarePolicy::new(&CacheAwareConfig { cache_threshold: *threshold, ..config() });
        assert_eq!(policy.select_at(&workers(&[0, 1]), &seen, 0), Some(0));
        assert_eq!(policy.select_at(&workers(&[2, 0]), request, 0), Some(*expected), "{name}");
    }
}

#[test]
fn the_tree_stays_within_its_byte_budget() {
    let budget_bytes = 16 << 10;
    let mut policy = CacheAwarePolicy::new(&CacheAwareConfig { max_tree_size: budget_bytes, ..config() });
    let candidates = workers(&[0, 0]);
    let worker_of = |family: u32, policy: &mut CacheAwarePolicy| policy.select_at(&candidates, &prompt(family, 0), 0);
    let first_worker = worker_of(0, &mut policy).expect("workers");
    let mut last_worker = first_worker;
    for family in 1..2_000 {
        last_worker = worker_of(family, &mut policy).expect("workers");
        assert!(policy.tree_size_bytes() <= budget_bytes, "family {family}: {} bytes", policy.tree_size_bytes());
    }
    assert!(policy.tree_block_count() > 100, "the budget is used: {} blocks", policy.tree_block_count());
    // Sent to its worker while that worker is a little busier: affinity if remembered, else the
    // other worker.
    let busier = |worker: usize| if worker == 0 { [3, 0] } else { [0, 3] };
    let recent = policy.select_at(&workers(&busier(last_worker)), &prompt(1_999, 1), 0);
    assert_eq!(recent, Some(last_worker), "the most recent prefix survived");
    let oldest = policy.select_at(&workers(&busier(first_worker)), &prompt(0, 1), 0);
    assert_eq!(oldest, Some(1 - first_worker), "the oldest prefix was evicted");
}

#[test]
fn entries_expire_after_their_ttl() {
    let ttl_config = CacheAwareConfig { entry_ttl_secs: 60, eviction_interval_secs: 10, ..config() };
    let mut policy = CacheAwarePolicy::new(&ttl_config);
    assert_eq!(policy.select_at(&workers(&[0, 1]), &prompt(0, 0), 0), Some(0));
    // Each hit refreshes the entry; worker 0 is busier but balanced, so affinity keeps it.
    for now_s in [59, 118] {
        assert_eq!(policy.select_at(&workers(&[1, 0]), &prompt(0, 1), now_s), Some(0), "at {now_s} s");
    }
    assert_eq!(policy.select_at(&workers(&[1, 0]), &prompt(0, 1), 178), Some(1), "stale at 178 s");
    // With no more traffic, a sweep frees everything past its TTL.
    assert_eq!(policy.select_at(&workers(&[0, 0]), &[], 238), Some(0));
    assert_eq!((policy.tree_block_count(), policy.tree_size_bytes()), (0, 0));
}

#[test]
fn a_removed_worker_is_forgotten() {
    let mut policy = CacheAwarePolicy::new(&config());
    assert_eq!(policy.select_at(&workers(&[0, 1]), &prompt(0, 0), 0), Some(0));
    assert_eq!(policy.select_at(&workers(&[1, 0]), &prompt(0, 1), 0), Some(0), "affinity before removal");
    policy.on_removed(100);
    policy.on_removed(12_345); // unknown keys are ignored
    assert_eq!(policy.tree_block_count(), 0, "only worker 100 held these blocks");
    // A new worker reuses worker 100's slot; the old prefix must not follow it.
    let replacement = [Candidate::new(300, 1), Candidate::new(101, 0)];
    assert_eq!(policy.select_at(&replacement, &prompt(0, 2), 0), Some(1));
}

#[test]
fn prompts_shorter_than_a_block_are_not_recorded() {
    let mut policy = CacheAwarePolicy::new(&config());
    assert_eq!(policy.select_at(&workers(&[3, 0, 3]), &[1, 2, 3], 0), Some(1));
    assert_eq!(policy.tree_block_count(), 0);
}

#[test]
fn config_validation_cases() {
    let cases: &[(&str, CacheAwareConfig, Option<&str>)] = &[
        ("defaults", CacheAwareConfig::default(), None),
        (
            "threshold above 1",
            CacheAwareConfig { cache_threshold: 1.5, ..CacheAwareConfig::default() },
            Some("--cache-threshold must be between 0.0 and 1.0, got 1.5"),
        ),
        (
            "NaN threshold",
            CacheAwareConfig { cache_threshold: f64::NAN, ..CacheAwareConfig::default() },
            Some("--cache-threshold must be between 0.0 and 1.0, got NaN"),
        ),
        (
            "negative ratio",
            CacheAwareConfig { balance_rel_threshold: -1.0, ..CacheAwareConfig::default() },
            Some("--balance-rel-threshold must be a non-negative number, got -1"),
        ),
        (
            "zero block size",
            CacheAwareConfig { block_size: 0, ..CacheAwareConfig::default() },
            Some("--block-size must be a positive integer, got 0"),
        ),
    ];
    for (name, config, expected) in cases {
        assert_eq!(config.validate().err().map(|e| e.to_string()).as_deref(), *expected, "{name}");
    }
    // An unvalidated config still yields a working policy.
    let mut policy = CacheAwarePolicy::new(&CacheAwareConfig { block_size: 0, cache_threshold: f64::NAN, ..config() });
    assert_eq!(policy.select_at(&workers(&[0]), &prompt(0, 0), 0), Some(0));
}
