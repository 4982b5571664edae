//! Tests of the replica policies: names, the empty and in-range contract, and each policy's
//! distribution over many seeded picks.

use super::*;
use crate::routing::{new_policy, new_policy_seeded, CacheAwareConfig};

fn candidates(loads: &[u64]) -> Vec<Candidate> {
    loads.iter().enumerate().map(|(index, &load)| Candidate::new(100 + index as u64, load)).collect()
}

fn policy(kind: PolicyKind, seed: u64) -> Box<dyn Policy> {
    new_policy_seeded(kind, &CacheAwareConfig::default(), seed)
}

fn picks(kind: PolicyKind, loads: &[u64], count: usize, seed: u64) -> Vec<usize> {
    let mut policy = policy(kind, seed);
    let candidates = candidates(loads);
    (0..count).map(|_| policy.select(&candidates, &[]).expect("candidates")).collect()
}

#[test]
fn policy_names_parse_exactly() {
    let cases: &[(&str, Option<PolicyKind>)] = &[
        ("round_robin", Some(PolicyKind::RoundRobin)),
        ("random", Some(PolicyKind::Random)),
        ("power_of_two", Some(PolicyKind::PowerOfTwo)),
        ("least_load", Some(PolicyKind::LeastLoad)),
        ("cache_aware", Some(PolicyKind::CacheAware)),
        ("Round_Robin", None),
        ("cache-aware", None),
        (" random", None),
        ("", None),
        ("bucket", None),
    ];
    for (value, expected) in cases {
        assert_eq!(value.parse::<PolicyKind>().ok(), *expected, "{value:?}");
    }
    for kind in PolicyKind::ALL {
        assert_eq!(kind.to_string().parse::<PolicyKind>(), Ok(kind));
    }
}

#[test]
fn unknown_policy_error_lists_the_valid_names() {
    let error = "fastest".parse::<PolicyKind>().expect_err("not a policy");
    assert_eq!(
        error.to_string(),
        "unknown policy 'fastest'; valid policies: round_robin, random, power_of_two, least_load, cache_aware"
    );
}

#[test]
fn every_policy_returns_none_for_no_candidates_and_an_index_in_range() {
    let tokens: Vec<u32> = (0..64).collect();
    for kind in PolicyKind::ALL {
        let mut policy = policy(kind, 1);
        assert_eq!(policy.kind(), kind);
        assert_eq!(policy.select(&[], &tokens), None, "{kind}");
        // The candidate list grows and shrinks between calls.
        for count in [1, 5, 2, 7, 1, 3] {
            let candidates = candidates(&vec![3; count]);
            for _ in 0..10 {
                let index = policy.select(&candidates, &tokens).expect("candidates");
                assert!(index < count, "{kind}: {index} of {count}");
            }
        }
    }
}

#[test]
fn round_robin_cycles_in_order() {
    assert_eq!(picks(PolicyKind::RoundRobin, &[9, 0, 5], 7, 0), vec![0, 1, 2, 0, 1, 2, 0]);
}

#[test]
fn least_load_ties_rotate() {
    assert_eq!(picks(PolicyKind::LeastLoad, &[1, 0, 0, 5], 5, 0), vec![1, 2, 1, 2, 1]);
    assert_eq!(picks(PolicyKind::LeastLoad, &[4, 4, 4], 4, 0), vec![0, 1, 2, 0]);
}

#[test]
fn distribution_cases() {
    const PICKS: usize = 120_000;
    let sixth = 1.0 / 6.0;
    // (policy, loads, expected share of picks per candidate)
    let cases: &[(PolicyKind, &[u64], &[f64])] = &[
        (PolicyKind::RoundRobin, &[7, 0, 3], &[1.0 / 3.0; 3]),
        (PolicyKind::Random, &[0, 0, 0, 0], &[0.25; 4]),
        (PolicyKind::Random, &[0, 100, 0, 100], &[0.25; 4]),
        // The pair (i, j) is drawn uniformly among the 6 pairs; the lighter of the two wins.
        (PolicyKind::PowerOfTwo, &[0, 10, 20, 30], &[3.0 * sixth, 2.0 * sixth, sixth, 0.0]),
        (PolicyKind::PowerOfTwo, &[5, 5, 5, 5], &[0.25; 4]),
        (PolicyKind::PowerOfTwo, &[8, 1], &[0.0, 1.0]),
        (PolicyKind::LeastLoad, &[1, 0, 0, 5], &[0.0, 0.5, 0.5, 0.0]),
        (PolicyKind::CacheAware, &[1, 0, 0, 5], &[0.0, 0.5, 0.5, 0.0]),
    ];
    for &(kind, loads, expected) in cases {
        let mut counts = vec![0usize; loads.len()];
        for index in picks(kind, loads, PICKS, 42) {
            counts[index] += 1;
        }
        for (index, (&count, &share)) in counts.iter().zip(expected).enumerate() {
            let observed = count as f64 / PICKS as f64;
            assert!(
                (observed - share).abs() < 0.01,
                "{kind} {loads:?}: candidate {index} got {observed}, want {share}"
            );
        }
    }
}

#[test]
fn seeded_policies_repeat_and_seeds_differ() {
    for kind in [PolicyKind::Random, PolicyKind::PowerOfTwo] {
        let loads = [3, 1, 4, 1, 5, 9, 2, 6];
        assert_eq!(picks(kind, &loads, 200, 5), picks(kind, &loads, 200, 5), "{kind}");
        assert_ne!(picks(kind, &loads, 200, 5), picks(kind, &loads, 200, 6), "{kind}");
    }
}

#[test]
fn entropy_seeded_policies_work() {
    let candidates = candidates(&[0, 0, 0]);
    for kind in PolicyKind::ALL {
        let mut policy = new_policy(kind, &CacheAwareConfig::default());
        assert!(policy.select(&candidates, &[1, 2, 3]).is_some_and(|index| index < 3), "{kind}");
    }
}
