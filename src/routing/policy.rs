//! Worker selection among replicas: the `--policy` flag.
//!
//! Each shard owns one policy instance (`Box<dyn Policy>`, not `Send`): selection reads only the
//! candidate list the shard passes in and the policy's own state, and writes nothing shared. The
//! caller passes the candidates it may route to right now (healthy, serving the model) with a
//! stable key per worker and its current load; the policy returns an index into that slice.
//!
//! Policies, by their `--policy` names:
//! - `round_robin`: the next candidate after the last pick (per shard).
//! - `random`: uniform.
//! - `power_of_two`: two distinct candidates at random, the less loaded one.
//! - `least_load`: the least loaded; ties rotate.
//! - `cache_aware`: the candidate whose cache most likely holds the prompt's prefix, unless load
//!   is imbalanced (see [`crate::routing::cache_aware`]).
//!
//! Invariant: `select` returns `None` only for an empty candidate list, and otherwise an index
//! below `candidates.len()`.

use std::fmt;
use std::str::FromStr;

/// A worker the policy may pick. A grouped worker (several engine ranks) is one candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Stable identity of the worker (e.g. a hash of its URL); the same worker keeps its key for
    /// its lifetime, and `cache_aware` remembers prefixes by it.
    pub key: u64,
    /// Gateway in-flight requests on the worker plus the engine-reported queue; only compared.
    pub load: u64,
    /// The prompt's leading tokens the worker's engines hold, known exactly from their KV-cache
    /// events (`None`: the worker publishes none, and `cache_aware` estimates from its tree).
    pub cached_tokens: Option<u32>,
}

impl Candidate {
    /// A candidate without an exact view of its cache.
    pub fn new(key: u64, load: u64) -> Self {
        Candidate { key, load, cached_tokens: None }
    }
}

/// A routing policy instance. One per shard.
pub trait Policy {
    /// The `--policy` this instance implements.
    fn kind(&self) -> PolicyKind;

    /// Picks one of `candidates` for a request whose prompt is `tokens` (policies other than
    /// `cache_aware` ignore them). `None` only when `candidates` is empty.
    fn select(&mut self, candidates: &[Candidate], tokens: &[u32]) -> Option<usize>;

    /// The worker with this key was removed: forget what is remembered about it.
    fn on_removed(&mut self, _key: u64) {}
}

/// The `--policy` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    RoundRobin,
    Random,
    PowerOfTwo,
    LeastLoad,
    CacheAware,
}

impl PolicyKind {
    /// Every policy, in the order the error text lists them.
    pub const ALL: [PolicyKind; 5] = [
        PolicyKind::RoundRobin,
        PolicyKind::Random,
        PolicyKind::PowerOfTwo,
        PolicyKind::LeastLoad,
        PolicyKind::CacheAware,
    ];

    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::RoundRobin => "round_robin",
            PolicyKind::Random => "random",
            PolicyKind::PowerOfTwo => "power_of_two",
            PolicyKind::LeastLoad => "least_load",
            PolicyKind::CacheAware => "cache_aware",
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--policy` value that names no policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown policy '{}'; valid policies: ", self.0)?;
        for (index, kind) in PolicyKind::ALL.iter().enumerate() {
            let separator = if index == 0 { "" } else { ", " };
            write!(f, "{separator}{kind}")?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownPolicy {}

impl FromStr for PolicyKind {
    type Err = UnknownPolicy;

    /// Exact names only (as SMG's `--policy`): no case folding, no aliases.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        PolicyKind::ALL.into_iter().find(|kind| kind.name() == value).ok_or_else(|| UnknownPolicy(value.to_owned()))
    }
}

/// The index of the lowest `key(candidate)`, scanning from `*cursor` in rotation order so that
/// ties go to the first at or after the cursor; moves the cursor past the pick. `candidates` must
/// not be empty.
pub(super) fn lowest_rotating<K: PartialOrd>(
    candidates: &[Candidate],
    cursor: &mut usize,
    mut key: impl FnMut(usize, &Candidate) -> K,
) -> usize {
    let count = candidates.len();
    let start = if *cursor < count { *cursor } else { *cursor % count };
    let mut best_index = start;
    let mut best_key = key(start, &candidates[start]);
    for offset in 1..count {
        let index = if start + offset < count { start + offset } else { start + offset - count };
        let candidate_key = key(index, &candidates[index]);
        if candidate_key < best_key {
            best_key = candidate_key;
            best_index = index;
        }
    }
    *cursor = best_index + 1;
    best_index
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
