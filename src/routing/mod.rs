//! Routing: which worker, then which engine rank, gets a request.
//!
//! Two decisions, two scopes:
//! - [`policy`]: among replicas (independent workers, one `ipc://` URL each), the `--policy` picks
//!   one. One policy instance per shard, owned by the shard: no shared state, no locks, no `Send`.
//!   A grouped worker is one candidate; the policy never sees its ranks.
//! - [`rank_load`]: inside a grouped worker (N data-parallel engines behind one socket set), the
//!   rank with the lowest load score. The table is shared by every shard (`Arc<RankTable>`), lock
//!   free; each shard passes its own rotation cursor.
//!
//! Pure library code: nothing here knows about sockets, engines' wire formats, shards or the
//! clock of the runtime, so it compiles and is tested on its own. `docs/routing.md` explains the
//! design; the integrator calls `dispatched` / `finished` / `report` (see [`rank_load`]).

pub mod cache_aware;
pub mod kv_index;
pub mod policy;
mod prefix_tree;
pub mod rank_load;
mod simple;

pub use cache_aware::{CacheAwareConfig, CacheAwareError, CacheAwarePolicy};
pub use policy::{Candidate, Policy, PolicyKind, UnknownPolicy};
pub use rank_load::{score, RankLoad, RankOutOfRange, RankTable};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A policy seeded from the OS (so shards and gateways do not move in lockstep).
pub fn new_policy(kind: PolicyKind, config: &CacheAwareConfig) -> Box<dyn Policy> {
    new_policy_seeded(kind, config, rand::rng().random())
}

/// A policy with a fixed seed for its random choices (tests, simulations, benchmarks).
pub fn new_policy_seeded(kind: PolicyKind, config: &CacheAwareConfig, seed: u64) -> Box<dyn Policy> {
    match kind {
        PolicyKind::RoundRobin => Box::new(simple::RoundRobin { next_index: 0 }),
        PolicyKind::Random => Box::new(simple::Random { rng: SmallRng::seed_from_u64(seed) }),
        PolicyKind::PowerOfTwo => Box::new(simple::PowerOfTwo { rng: SmallRng::seed_from_u64(seed) }),
        PolicyKind::LeastLoad => Box::new(simple::LeastLoad { cursor: 0 }),
        PolicyKind::CacheAware => Box::new(CacheAwarePolicy::new(config)),
    }
}
