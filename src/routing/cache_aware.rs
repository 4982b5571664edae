//! `cache_aware`: send a prompt to the worker most likely to hold its prefix in KV cache, unless
//! that would pile work onto an overloaded worker. SMG's semantics and flag names:
//!
//! 1. Imbalanced, when both `max_load − min_load > balance_abs_threshold` and
//!    `max_load > balance_rel_threshold × min_load`: the least loaded worker.
//! 2. Otherwise match the prompt against the prefix tree: the worker holding the longest run of
//!    leading blocks wins if `matched tokens / prompt tokens > cache_threshold` (strictly, as SMG).
//! 3. Otherwise the least loaded worker.
//!
//! Whichever way it chose, the chosen worker is recorded as holding the prompt's blocks. Ties:
//! among equal matches the lower load wins; among equal loads the worker with the smaller share
//! of the tree wins (it has the most cache to spare, and new prefixes spread even when every load
//! reads 0), then rotation.
//!
//! The tree (`prefix_tree.rs`) is per shard and bounded in counted bytes
//! (`max_tree_size`); entries unused for `entry_ttl_secs` are ignored at once and swept every
//! `eviction_interval_secs`. There is no background thread: sweeps run inside `select`, and cost
//! only the entries they free.

use std::fmt;
use std::time::Instant;

use super::policy::{lowest_rotating, Candidate, Policy, PolicyKind};
use super::prefix_tree::{hash_blocks, KeyMap, PrefixTree, NO_CANDIDATE};

/// The `cache_aware` settings, named after SMG's flags.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheAwareConfig {
    /// `--cache-threshold`: the prefix match ratio (matched prompt tokens / prompt tokens) above
    /// which the best-matching worker is preferred. 0.0..=1.0.
    pub cache_threshold: f64,
    /// `--balance-abs-threshold`: load difference (max − min) above which, together with the
    /// relative threshold, load is imbalanced and cache affinity is ignored.
    pub balance_abs_threshold: u64,
    /// `--balance-rel-threshold`: load ratio (max / min) above which, together with the absolute
    /// threshold, load is imbalanced.
    pub balance_rel_threshold: f64,
    /// `--eviction-interval-secs`: seconds between sweeps that free entries past their TTL.
    /// 0 sweeps on every selection.
    pub eviction_interval_secs: u64,
    /// `--max-tree-size`: the prefix tree's budget in counted bytes, per shard. (SMG counts
    /// nodes with the same default number; about 80 bytes per 16-token block here.)
    pub max_tree_size: usize,
    /// `--block-size`: tokens per tree block; match the engine's KV block size (vLLM: 16).
    pub block_size: usize,
    /// Seconds after which a worker's entry for a prefix is stale (shardgate; no SMG flag).
    pub entry_ttl_secs: u64,
}

impl Default for CacheAwareConfig {
    fn default() -> Self {
        use crate::limits;
        CacheAwareConfig {
            cache_threshold: limits::cache_aware_threshold_default,
            balance_abs_threshold: limits::cache_aware_balance_abs_threshold_default,
            balance_rel_threshold: limits::cache_aware_balance_rel_threshold_default,
            eviction_interval_secs: limits::cache_aware_eviction_interval_s_default,
            max_tree_size: limits::cache_aware_tree_bytes_max_default,
            block_size: limits::cache_aware_block_tokens_default,
            entry_ttl_secs: limits::cache_aware_entry_ttl_s_default,
        }
    }
}

/// A `cache_aware` setting out of range; the message names the flag.
#[derive(Debug, Clone, PartialEq)]
pub enum CacheAwareError {
    CacheThreshold(f64),
    BalanceRelThreshold(f64),
    BlockSize,
}

impl std::fmt::Display for CacheAwareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheAwareError::CacheThreshold(v) => write!(f, "--cache-threshold must be between 0.0 and 1.0, got {v}"),
            CacheAwareError::BalanceRelThreshold(v) => {
                write!(f, "--balance-rel-threshold must be a non-negative number, got {v}")
            }
            CacheAwareError::BlockSize => f.write_str("--block-size must be a positive integer, got 0"),
        }
    }
}

impl std::error::Error for CacheAwareError {}

impl CacheAwareConfig {
    /// Checks values that came from flags.
    pub fn validate(&self) -> Result<(), CacheAwareError> {
        if !(0.0..=1.0).contains(&self.cache_threshold) {
            return Err(CacheAwareError::CacheThreshold(self.cache_threshold));
        }
        if !self.balance_rel_threshold.is_finite() || self.balance_rel_threshold < 0.0 {
            return Err(CacheAwareError::BalanceRelThreshold(self.balance_rel_threshold));
        }
        if self.block_size == 0 {
            return Err(CacheAwareError::BlockSize);
        }
        Ok(())
    }
}

/// Worker keys to small dense slots, so tree nodes store 4-byte tenants and matching indexes an
/// array. A removed worker's slot is reused only after the tree forgot it.
#[derive(Default)]
struct TenantSlots {
    slot_of_key: KeyMap<u32>,
    slot_count: u32,
    free_slots: Vec<u32>,
}

impl TenantSlots {
    fn get(&self, key: u64) -> Option<u32> {
        self.slot_of_key.get(&key).copied()
    }

    fn get_or_assign(&mut self, key: u64) -> u32 {
        if let Some(slot) = self.get(key) {
            return slot;
        }
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.slot_count += 1;
            self.slot_count - 1
        });
        self.slot_of_key.insert(key, slot);
        slot
    }
}

/// The `cache_aware` policy of one shard.
pub struct CacheAwarePolicy {
    config: CacheAwareConfig,
    tree: PrefixTree,
    tenants: TenantSlots,
    epoch: Instant,
    next_sweep_s: u64,
    cursor: usize,
    // Scratch reused across selections, so a selection allocates nothing once warm.
    block_hashes: Vec<u64>,
    candidate_of_tenant: Vec<u32>,
    matched_blocks: Vec<u32>,
}

impl CacheAwarePolicy {
    /// A policy with `config`; out-of-range values are made usable (block size at least 1, a NaN
    /// threshold as 1.0) so construction never fails. Validate flags with
    /// [`CacheAwareConfig::validate`] first.
    pub fn new(config: &CacheAwareConfig) -> Self {
        let mut config = config.clone();
        config.block_size = config.block_size.max(1);
        if config.cache_threshold.is_nan() {
            config.cache_threshold = 1.0;
        }
        let ttl_s = u32::try_from(config.entry_ttl_secs).unwrap_or(u32::MAX);
        CacheAwarePolicy {
            tree: PrefixTree::new(config.max_tree_size, ttl_s),
            config,
            tenants: TenantSlots::default(),
            epoch: Instant::now(),
            next_sweep_s: 0,
            cursor: 0,
            block_hashes: Vec::new(),
            candidate_of_tenant: Vec::new(),
            matched_blocks: Vec::new(),
        }
    }

    /// [`Policy::select`] at `now_s` seconds on the policy's clock (non-decreasing); `select`
    /// passes the seconds since construction. Public for simulations that drive time.
    pub fn select_at(&mut self, candidates: &[Candidate], tokens: &[u32], now_s: u64) -> Option<usize> {
        if candidates.is_empty() {
            return None;
        }
        let now_s = u32::try_from(now_s).unwrap_or(u32::MAX);
        if u64::from(now_s) >= self.next_sweep_s {
            self.tree.expire(now_s);
            self.next_sweep_s = u64::from(now_s) + self.config.eviction_interval_secs;
        }
        hash_blocks(tokens, self.config.block_size, &mut self.block_hashes);
        let chosen = if is_imbalanced(candidates, &self.config) {
            self.least_loaded(candidates)
        } else {
            self.best_match_or_least_loaded(candidates, tokens.len(), now_s)
        };
        if !self.block_hashes.is_empty() {
            let tenant = self.tenants.get_or_assign(candidates[chosen].key);
            self.tree.insert(&self.block_hashes, tenant, now_s);
        }
        Some(chosen)
    }

    /// The tree's counted size in bytes (at most `max_tree_size` between selections).
    pub fn tree_size_bytes(&self) -> usize {
        self.tree.size_bytes()
    }

    /// Blocks the tree holds.
    pub fn tree_block_count(&self) -> usize {
        self.tree.node_count()
    }

    fn best_match_or_least_loaded(&mut self, candidates: &[Candidate], token_count: usize, now_s: u32) -> usize {
        self.candidate_of_tenant.clear();
        self.candidate_of_tenant.resize(self.tenants.slot_count as usize, NO_CANDIDATE);
        for (index, candidate) in candidates.iter().enumerate() {
            if let Some(slot) = self.tenants.get(candidate.key) {
                self.candidate_of_tenant[slot as usize] = index as u32;
            }
        }
        self.matched_blocks.clear();
        self.matched_blocks.resize(candidates.len(), 0);
        self.tree.match_blocks(&self.block_hashes, now_s, &self.candidate_of_tenant, &mut self.matched_blocks);
        // What a worker's engines report holding beats the tree's estimate for it.
        let matched = |index: usize| match candidates[index].cached_tokens {
            Some(tokens) => tokens as usize,
            None => self.matched_blocks[index] as usize * self.config.block_size,
        };

        // Most tokens, then lowest load, then earliest.
        let mut best = 0;
        for index in 1..candidates.len() {
            let (tokens, best_tokens) = (matched(index), matched(best));
            if tokens > best_tokens || (tokens == best_tokens && candidates[index].load < candidates[best].load) {
                best = index;
            }
        }
        let matched_tokens = matched(best).min(token_count);
        let match_ratio = matched_tokens as f64 / token_count.max(1) as f64;
        if matched_tokens > 0 && match_ratio > self.config.cache_threshold {
            best
        } else {
            self.least_loaded(candidates)
        }
    }

    /// Lowest load, then the smallest share of the tree, then rotation.
    fn least_loaded(&mut self, candidates: &[Candidate]) -> usize {
        let mut cursor = self.cursor;
        let (tenants, tree) = (&self.tenants, &self.tree);
        let chosen = lowest_rotating(candidates, &mut cursor, |_, candidate| {
            let share = tenants.get(candidate.key).map_or(0, |slot| tree.tenant_node_count(slot));
            (candidate.load, share)
        });
        self.cursor = cursor;
        chosen
    }
}

fn is_imbalanced(candidates: &[Candidate], config: &CacheAwareConfig) -> bool {
    let (min_load, max_load) = candidates.iter().fold((u64::MAX, 0), |(min_load, max_load), candidate| {
        (min_load.min(candidate.load), max_load.max(candidate.load))
    });
    max_load - min_load > config.balance_abs_threshold
        && max_load as f64 > config.balance_rel_threshold * min_load as f64
}

impl Policy for CacheAwarePolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::CacheAware
    }

    fn select(&mut self, candidates: &[Candidate], tokens: &[u32]) -> Option<usize> {
        let now_s = self.epoch.elapsed().as_secs();
        self.select_at(candidates, tokens, now_s)
    }

    fn on_removed(&mut self, key: u64) {
        if let Some(slot) = self.tenants.slot_of_key.remove(&key) {
            self.tree.remove_tenant(slot);
            self.tenants.free_slots.push(slot);
        }
    }
}

impl fmt::Debug for CacheAwarePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheAwarePolicy")
            .field("config", &self.config)
            .field("tree_block_count", &self.tree.node_count())
            .field("tree_size_bytes", &self.tree.size_bytes())
            .field("tenant_count", &self.tenants.slot_of_key.len())
            .finish()
    }
}

#[cfg(test)]
#[path = "cache_aware_tests.rs"]
mod tests;
