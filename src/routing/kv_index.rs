//! The exact index of the prefix-cache blocks one engine rank holds, built from the KV-cache
//! events it publishes (`shardgate_wire::vllm::kv_events`), and how many leading blocks of a
//! prompt it holds.
//!
//! The engine's own block hashes cannot be recomputed here without its hash function and seed,
//! and need not be: a `BlockStored` event carries the blocks' token ids and the hash of the
//! parent block. So each stored block gets a content key of our own, chained like the engine's
//! (`chain(parent's key, the block's tokens)`), and the index maps the engine's hash to that
//! key (to follow removals and later children) and counts the keys present. A prompt's keys are
//! computed the same way, and its cached length is the run of leading keys present.
//!
//! What is deliberately not indexed: blocks whose hash also covers more than tokens (LoRA,
//! media, a cache salt: no plain prompt can match them), blocks of an offload tier (not the
//! engine's KV cache), groups other than the first of a hybrid model, and blocks whose parent
//! was stored before the subscription began (their content chain is unknown). Each of these
//! can only make the index report less than the engine holds, never more.
//!
//! Invariant: after any sequence of events, `cached_blocks` counts only blocks whose store was
//! seen and whose removal was not; memory is bounded by `kv_index_blocks_max` keys per rank.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use shardgate_wire::vllm::kv_events::{BlockStored, KvEvent};

/// The key of the (empty) chain before a prompt's first block.
const ROOT_KEY: u64 = 0x6b76_5f72_6f6f_7421;

/// One engine rank's blocks.
#[derive(Debug, Default)]
pub struct KvIndex {
    /// Tokens per block, from the first stored event (0 until then).
    block_size: u32,
    /// The engine's block hash -> our content key.
    by_engine_hash: HashMap<u64, u64>,
    /// Content key -> how many engine blocks have it (two hashes can share content when the
    /// engine's hash also covers something this index does not see).
    present: HashMap<u64, u32>,
    /// Indexing stopped at the size bound; cleared with the index.
    pub full: bool,
    limit_blocks: usize,
}

impl KvIndex {
    pub fn new(limit_blocks: usize) -> Self {
        KvIndex { limit_blocks, ..Default::default() }
    }

    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Blocks indexed now.
    pub fn blocks(&self) -> usize {
        self.by_engine_hash.len()
    }

    pub fn apply(&mut self, event: &KvEvent) {
        match event {
            KvEvent::Stored(stored) => self.store(stored),
            KvEvent::Removed { block_hashes, on_gpu: true } => {
                for hash in block_hashes {
                    self.remove(*hash);
                }
            }
            KvEvent::Removed { on_gpu: false, .. } => {}
            KvEvent::AllCleared => self.clear(),
        }
    }

    /// Forgets everything (the engine cleared its cache, or events were lost).
    pub fn clear(&mut self) {
        self.by_engine_hash.clear();
        self.present.clear();
        self.full = false;
    }

    fn store(&mut self, s: &BlockStored) {
        if !s.on_gpu || s.has_extra_keys || s.group_idx.is_some_and(|g| g != 0) || s.block_size == 0 {
            return;
        }
        if self.block_size != s.block_size {
            // A different block size means a different engine configuration: start over.
            self.clear();
            self.block_size = s.block_size;
        }
        let mut parent = match s.parent_block_hash {
            None => ROOT_KEY,
            Some(hash) => match self.by_engine_hash.get(&hash) {
                Some(&key) => key,
                None => return,
            },
        };
        let size = s.block_size as usize;
        for (hash, tokens) in s.block_hashes.iter().zip(s.token_ids.chunks_exact(size)) {
            if self.by_engine_hash.len() >= self.limit_blocks {
                self.full = true;
                return;
            }
            let key = chain(parent, tokens);
            if let Some(old) = self.by_engine_hash.insert(*hash, key) {
                self.release(old);
            }
            *self.present.entry(key).or_insert(0) += 1;
            parent = key;
        }
    }

    fn remove(&mut self, hash: u64) {
        if let Some(key) = self.by_engine_hash.remove(&hash) {
            self.release(key);
        }
    }

    fn release(&mut self, key: u64) {
        if let Some(count) = self.present.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                self.present.remove(&key);
            }
        }
    }

    /// How many of the leading blocks whose content keys are `keys` this rank holds.
    pub fn cached_blocks(&self, keys: &[u64]) -> usize {
        keys.iter().take_while(|k| self.present.contains_key(k)).count()
    }
}

/// The content keys of `tokens`' full blocks of `block_size` (a partial last block is never
/// cached by the engine), into `out`.
pub fn prompt_keys(tokens: &[u32], block_size: u32, out: &mut Vec<u64>) {
    out.clear();
    if block_size == 0 {
        return;
    }
    let mut parent = ROOT_KEY;
    for block in tokens.chunks_exact(block_size as usize) {
        parent = chain(parent, block);
        out.push(parent);
    }
}

/// Load imbalance past which cache affinity yields to load: both the absolute and the relative
/// threshold exceeded (`cache_aware`'s `--balance-abs-threshold`, `--balance-rel-threshold`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Balance {
    pub abs: f64,
    pub rel: f64,
}

/// The rank to send a prompt to by what the ranks hold, or `None` to leave it to load: the rank
/// with the most cached tokens (ties: the lower load score), unless nothing is cached or its
/// load score is imbalanced against the least loaded rank's. `cached[r]` is `None` for a rank
/// without an exact view, which never wins.
pub fn prefer_rank(cached: &[Option<u32>], scores: &[f64], balance: Balance) -> Option<usize> {
    let mut best: Option<(usize, u32)> = None;
    for (rank, tokens) in cached.iter().enumerate() {
        let Some(tokens) = *tokens else { continue };
        let better = match best {
            None => true,
            Some((b, bt)) => tokens > bt || (tokens == bt && scores[rank] < scores[b]),
        };
        if better {
            best = Some((rank, tokens));
        }
    }
    let (rank, tokens) = best?;
    if tokens == 0 {
        return None;
    }
    let min = scores.iter().copied().fold(f64::INFINITY, f64::min);
    let imbalanced = scores[rank] - min > balance.abs && scores[rank] > balance.rel * min;
    (!imbalanced).then_some(rank)
}

fn chain(parent: u64, tokens: &[u32]) -> u64 {
    // SipHash with fixed keys: the same key on every shard and every run.
    let mut h = std::hash::DefaultHasher::new();
    parent.hash(&mut h);
    tokens.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(hashes: &[u64], parent: Option<u64>, tokens: std::ops::Range<u32>) -> KvEvent {
        KvEvent::Stored(BlockStored {
            block_hashes: hashes.to_vec(),
            parent_block_hash: parent,
            token_ids: tokens.collect(),
            block_size: 4,
            on_gpu: true,
            has_extra_keys: false,
            group_idx: None,
        })
    }

    fn cached(index: &KvIndex, prompt: std::ops::Range<u32>) -> usize {
        let mut keys = Vec::new();
        prompt_keys(&prompt.collect::<Vec<u32>>(), 4, &mut keys);
        index.cached_blocks(&keys)
    }

    #[test]
    fn follows_stores_chains_removals_and_clears() {
        // (events so far, prompt, leading blocks held)
        let steps: Vec<(KvEvent, std::ops::Range<u32>, usize)> = vec![
            (stored(&[11, 12], None, 0..8), 0..10, 2),
            // A child stored in a later step, chained through its parent's engine hash.
            (stored(&[13], Some(12), 8..12), 0..12, 3),
            // Same tokens at another position are not the same block.
            (stored(&[21], None, 4..8), 4..8, 1),
            // Removing a middle block cuts the run there.
            (KvEvent::Removed { block_hashes: vec![12], on_gpu: true }, 0..12, 1),
            // An offload tier's removal is not the engine's.
            (KvEvent::Removed { block_hashes: vec![11], on_gpu: false }, 0..12, 1),
            // A parent never seen: its children cannot be keyed, so they are not counted.
            (stored(&[31], Some(999), 12..16), 0..16, 1),
            (KvEvent::AllCleared, 0..12, 0),
        ];
        let mut index = KvIndex::new(100);
        for (i, (event, prompt, want)) in steps.into_iter().enumerate() {
            index.apply(&event);
            assert_eq!(cached(&index, prompt), want, "step {i}: {event:?}");
        }
        assert_eq!(index.blocks(), 0);
    }

    #[test]
    fn prefers_the_holder_unless_it_is_overloaded() {
        let balance = Balance { abs: 4.0, rel: 1.5 };
        // (cached tokens per rank, load scores, chosen)
        type Case<'a> = (&'a [Option<u32>], &'a [f64], Option<usize>);
        let cases: &[Case] = &[
            (&[Some(0), Some(32)], &[0.0, 3.0], Some(1)),
            (&[Some(32), Some(32)], &[2.0, 1.0], Some(1)),
            (&[Some(0), Some(0)], &[0.0, 0.0], None),
            // Too busy against the idlest rank: both thresholds exceeded.
            (&[Some(0), Some(32)], &[1.0, 6.0], None),
            // Over the absolute threshold only: still the holder.
            (&[Some(0), Some(32)], &[10.0, 15.0], Some(1)),
            // A rank without an exact view never wins.
            (&[None, Some(16)], &[0.0, 0.0], Some(1)),
            (&[None, None], &[0.0, 0.0], None),
        ];
        for (cached, scores, want) in cases {
            assert_eq!(prefer_rank(cached, scores, balance), *want, "{cached:?} {scores:?}");
        }
    }

    #[test]
    fn skips_what_no_plain_prompt_can_match_and_stays_bounded() {
        let mut salted = stored(&[1], None, 0..4);
        if let KvEvent::Stored(s) = &mut salted {
            s.has_extra_keys = true;
        }
        let mut index = KvIndex::new(3);
        index.apply(&salted);
        assert_eq!(cached(&index, 0..4), 0);
        index.apply(&stored(&[1, 2, 3, 4, 5], None, 0..20));
        assert_eq!((index.blocks(), index.full, cached(&index, 0..20)), (3, true, 3));
        index.apply(&KvEvent::AllCleared);
        assert!(!index.full);
    }
}
