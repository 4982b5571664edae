//! Replica policies: the cost of one `Policy::select` for 8 and 64 candidates, per policy, on a
//! workload of 1,024-token prompts in 64 families sharing 768-token prefixes (what
//! `cache_aware` is for). For `cache_aware` the cost includes hashing the prompt, matching it and
//! recording it in the tree; the per-token column shows that part.
//!
//!     cargo bench --bench policy_select         (SHARDGATE_BENCH_QUICK=1 for a smoke run)
//!
//! Medians of repeated rounds within one run; the checksum of the picks is printed so a change
//! in routing decisions shows.

use std::hint::black_box;
use std::time::Instant;

use shardgate::routing::{new_policy_seeded, CacheAwareConfig, Candidate, PolicyKind};

const PROMPT_TOKENS: u32 = 1_024;
const SHARED_TOKENS: u32 = 768;
const FAMILIES: u32 = 64;
const PROMPTS: u32 = 512;

fn prompts() -> Vec<Vec<u32>> {
    (0..PROMPTS)
        .map(|index| {
            let family = index % FAMILIES;
            let shared = (0..SHARED_TOKENS).map(|position| family * 100_000 + position);
            let own = (SHARED_TOKENS..PROMPT_TOKENS).map(|position| 10_000_000 + index * 10_000 + position);
            shared.chain(own).collect()
        })
        .collect()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Nanoseconds per select (median of rounds) and a checksum of the picks.
fn measure(
    kind: PolicyKind,
    candidate_count: usize,
    prompts: &[Vec<u32>],
    rounds: usize,
    selects: usize,
) -> (f64, u64) {
    let mut policy = new_policy_seeded(kind, &CacheAwareConfig::default(), 7);
    let mut candidates: Vec<Candidate> =
        (0..candidate_count).map(|index| Candidate::new(1_000 + index as u64, (index % 3) as u64)).collect();
    let mut checksum = 0u64;
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        for step in 0..selects {
            let prompt = &prompts[step % prompts.len()];
            let index = black_box(policy.select(&candidates, prompt)).unwrap_or(0);
            // The pick gets a request and an older one finishes somewhere: loads drift a little.
            candidates[index].load += 1;
            let finished = step * 7 % candidate_count;
            candidates[finished].load = candidates[finished].load.saturating_sub(1);
            checksum = checksum.wrapping_mul(31).wrapping_add(index as u64);
        }
        samples.push(started.elapsed().as_nanos() as f64 / selects as f64);
    }
    (median(samples), checksum)
}

fn main() {
    let quick = std::env::var_os("SHARDGATE_BENCH_QUICK").is_some();
    let (rounds, selects) = if quick { (1, 2_000) } else { (7, 50_000) };
    let prompts = prompts();
    println!("policy        candidates  ns/select  ns/prompt-token  checksum");
    for kind in PolicyKind::ALL {
        for candidate_count in [8, 64] {
            let (ns, checksum) = measure(kind, candidate_count, &prompts, rounds, selects);
            println!(
                "{:<12}  {candidate_count:>10}  {ns:>9.1}  {:>15.3}  {checksum:016x}",
                kind.name(),
                ns / f64::from(PROMPT_TOKENS),
            );
        }
    }
}
