//! The approximate prefix tree behind `cache_aware`: which workers were recently sent which
//! prompt prefixes, at the granularity of fixed-size token blocks.
//!
//! A prompt is cut into full blocks of `block_size` tokens (engines cache whole KV blocks only;
//! a partial tail block is never cached, so it is never indexed). Block `i` is named by a chained
//! hash of blocks `0..=i`, so one hash names a whole prefix and the tree is a flat map from
//! chained hash to node: the parent of a node is implied by its hash chain, never stored. Each
//! node lists the tenants (workers, by slot) that were sent that prefix, with when.
//!
//! Approximate by design: hashes can collide (a 64-bit collision only mis-attributes a match),
//! the tree records where requests were sent rather than what engines actually kept, and a
//! node's parent may be evicted first (the child is then unreachable until the prefix returns or
//! the node ages out).
//!
//! Invariants:
//! - Nodes sit on one LRU list ordered by last touch, and a touch always covers a whole path,
//!   deepest block first, so a parent is never older than a child touched with it: eviction from
//!   the old end removes leaves before their prefixes.
//! - `size_bytes` is the counted size of every live node (fixed part, index slot, extra tenant
//!   stamps); after each `insert` it is at most `size_max_bytes`.
//! - A stamp older than the TTL is ignored by matching, dropped when its node is next touched,
//!   and its node is freed by `expire` once every stamp on it is that old.
//! - `tenant_node_counts[t]` is the number of live nodes that carry a stamp of tenant `t`.
//!
//! Times are whole seconds on a clock the caller provides (the policy's monotonic epoch).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::mem::size_of;

/// No node (end of the LRU list).
const NIL: u32 = u32::MAX;
/// No tenant in a stamp slot.
const NO_TENANT: u32 = u32::MAX;
/// A tenant slot that maps to no candidate of the current selection.
pub(crate) const NO_CANDIDATE: u32 = u32::MAX;

/// Counted bytes of one node besides extra stamps: the node itself and its index entry, with the
/// index's slack (hashbrown keeps at most 7/8 of its slots full and doubles when it fills, so a
/// live entry costs about twice its slot, plus one control byte per slot).
const NODE_SIZE_BYTES: usize = size_of::<Node>() + 2 * (size_of::<(u64, u32)>() + 1);
const STAMP_SIZE_BYTES: usize = size_of::<Stamp>();

/// Chained block hashes are already mixed; hashing them again would only cost time.
#[derive(Default)]
struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Never called for u64 keys; defined so the hasher is total.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// For keys that may be small or sequential (worker keys): murmur3's fmix64, a few cycles where
/// std's SipHash costs tens of ns per lookup.
#[derive(Default)]
pub(crate) struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        fmix64(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Never called for u64 keys; defined so the hasher is total.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 ^= value;
    }
}

/// A map keyed by worker keys.
pub(crate) type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<MixHasher>>;

/// murmur3's 64-bit finalizer: every input bit affects every output bit.
fn fmix64(mut state: u64) -> u64 {
    state ^= state >> 33;
    state = state.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    state ^= state >> 33;
    state = state.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    state ^ state >> 33
}

/// A tenant's presence on a node: which tenant, and when it was last sent this prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    tenant: u32,
    touched_s: u32,
}

const EMPTY_STAMP: Stamp = Stamp { tenant: NO_TENANT, touched_s: 0 };

/// One block of one prefix. The first stamp is inline: most prefixes live on one worker, so most
/// nodes never allocate.
struct Node {
    block_hash: u64,
    first: Stamp,
    more: Vec<Stamp>,
    /// Toward the most recently touched end.
    newer: u32,
    /// Toward the least recently touched end.
    older: u32,
}

impl Node {
    fn stamps(&self) -> impl Iterator<Item = &Stamp> {
        let first = (self.first.tenant != NO_TENANT).then_some(&self.first);
        first.into_iter().chain(self.more.iter())
    }

    /// The last time any tenant touched the node (its place on the LRU list).
    fn touched_s(&self) -> u32 {
        self.stamps().map(|stamp| stamp.touched_s).max().unwrap_or(0)
    }

    fn is_empty(&self) -> bool {
        self.first.tenant == NO_TENANT
    }

    /// Removes the stamps `drop` selects, keeping `first` filled while any stamp remains;
    /// calls `dropped` with each removed tenant.
    fn remove_stamps(&mut self, mut drop: impl FnMut(&Stamp) -> bool, mut dropped: impl FnMut(u32)) {
        self.more.retain(|stamp| {
            let remove = drop(stamp);
            if remove {
                dropped(stamp.tenant);
            }
            !remove
        });
        if self.first.tenant != NO_TENANT && drop(&self.first) {
            dropped(self.first.tenant);
            self.first = self.more.pop().unwrap_or(EMPTY_STAMP);
        }
    }
}

pub(crate) struct PrefixTree {
    index: HashMap<u64, u32, BuildHasherDefault<PassThroughHasher>>,
    nodes: Vec<Node>,
    free_nodes: Vec<u32>,
    newest: u32,
    oldest: u32,
    size_bytes: usize,
    size_max_bytes: usize,
    ttl_s: u32,
    tenant_node_counts: Vec<u64>,
}

/// Chained hashes of the full `block_size`-token blocks of `tokens`, into `out` (cleared first).
pub(crate) fn hash_blocks(tokens: &[u32], block_size: usize, out: &mut Vec<u64>) {
    out.clear();
    let mut chain = 0x243F_6A88_85A3_08D3_u64; // any odd constant: the empty prefix
    for block in tokens.chunks_exact(block_size.max(1)) {
        chain = hash_block(chain, block);
        out.push(chain);
    }
}

/// FxHash-style absorption (rotate, xor, multiply) in four independent lanes of two tokens each,
/// so the multiplies pipeline instead of waiting on one another; the lanes start from constants,
/// so consecutive blocks overlap too. The parent and the lanes are then folded together and fully
/// avalanched so the result can index the table directly.
fn hash_block(parent: u64, block: &[u32]) -> u64 {
    const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;
    let absorb = |lane: u64, word: u64| (lane.rotate_left(23) ^ word).wrapping_mul(MULTIPLIER);
    // Digits of pi: four unrelated starting states.
    let mut lanes: [u64; 4] =
        [0x243F_6A88_85A3_08D3, 0x1319_8A2E_0370_7344, 0xA409_3822_299F_31D0, 0x082E_FA98_EC4E_6C89];
    let mut chunks = block.chunks_exact(8);
    for chunk in &mut chunks {
        for (lane_index, lane) in lanes.iter_mut().enumerate() {
            let word = u64::from(chunk[2 * lane_index]) | u64::from(chunk[2 * lane_index + 1]) << 32;
            *lane = absorb(*lane, word);
        }
    }
    for (position, &token) in chunks.remainder().iter().enumerate() {
        lanes[position % 4] = absorb(lanes[position % 4], u64::from(token));
    }
    let mut state = parent ^ block.len() as u64;
    for lane in lanes {
        state = absorb(state, lane);
    }
    fmix64(state)
}

impl PrefixTree {
    pub(crate) fn new(size_max_bytes: usize, ttl_s: u32) -> Self {
        PrefixTree {
            index: HashMap::default(),
            nodes: Vec::new(),
            free_nodes: Vec::new(),
            newest: NIL,
            oldest: NIL,
            size_bytes: 0,
            size_max_bytes,
            ttl_s,
            tenant_node_counts: Vec::new(),
        }
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    pub(crate) fn node_count(&self) -> usize {
        self.index.len()
    }

    /// Live nodes carrying a stamp of `tenant` (its share of the tree).
    pub(crate) fn tenant_node_count(&self, tenant: u32) -> u64 {
        self.tenant_node_counts.get(tenant as usize).copied().unwrap_or(0)
    }

    fn is_live(&self, stamp: &Stamp, now_s: u32) -> bool {
        now_s < stamp.touched_s.saturating_add(self.ttl_s)
    }

    /// For each candidate, how many leading blocks of `block_hashes` it holds: walks from the
    /// root, extending a candidate's run only while it is present at every depth; stops at the
    /// first block no candidate extends. `candidate_of_tenant[t]` is tenant `t`'s index in
    /// `matched_blocks`, or [`NO_CANDIDATE`]; `matched_blocks` must start zeroed.
    pub(crate) fn match_blocks(
        &self,
        block_hashes: &[u64],
        now_s: u32,
        candidate_of_tenant: &[u32],
        matched_blocks: &mut [u32],
    ) {
        for (depth, hash) in block_hashes.iter().enumerate() {
            let Some(&node_index) = self.index.get(hash) else { break };
            let mut extended = false;
            for stamp in self.nodes[node_index as usize].stamps() {
                let candidate = candidate_of_tenant.get(stamp.tenant as usize).copied().unwrap_or(NO_CANDIDATE);
                if candidate == NO_CANDIDATE || !self.is_live(stamp, now_s) {
                    continue;
                }
                let blocks = &mut matched_blocks[candidate as usize];
                if *blocks as usize == depth {
                    *blocks += 1;
                    extended = true;
                }
            }
            if !extended {
                break;
            }
        }
    }

    /// Records that `tenant` was sent the prefix `block_hashes`, then evicts the least recently
    /// touched nodes until the tree fits its byte budget.
    pub(crate) fn insert(&mut self, block_hashes: &[u64], tenant: u32, now_s: u32) {
        if self.tenant_node_counts.len() <= tenant as usize {
            self.tenant_node_counts.resize(tenant as usize + 1, 0);
        }
        // Deepest first, so each prefix ends up newer on the LRU list than its extensions.
        for &hash in block_hashes.iter().rev() {
            let node_index = match self.index.get(&hash) {
                Some(&node_index) => node_index,
                None => self.create_node(hash),
            };
            self.stamp(node_index, tenant, now_s);
            self.move_to_newest(node_index);
        }
        while self.size_bytes > self.size_max_bytes && self.oldest != NIL {
            self.free_node(self.oldest);
        }
    }

    /// Frees every node that no tenant has touched within the TTL. Cost: the nodes freed.
    pub(crate) fn expire(&mut self, now_s: u32) {
        while self.oldest != NIL {
            let touched_s = self.nodes[self.oldest as usize].touched_s();
            if now_s < touched_s.saturating_add(self.ttl_s) {
                break;
            }
            self.free_node(self.oldest);
        }
    }

    /// Forgets `tenant` everywhere (a removed worker); frees nodes left with no tenant. Cost: the
    /// whole tree, once per removal.
    pub(crate) fn remove_tenant(&mut self, tenant: u32) {
        let mut node_index = self.oldest;
        while node_index != NIL {
            let next = self.nodes[node_index as usize].newer;
            let counts = &mut self.tenant_node_counts;
            self.nodes[node_index as usize]
                .remove_stamps(|stamp| stamp.tenant == tenant, |removed| counts[removed as usize] -= 1);
            if self.nodes[node_index as usize].is_empty() {
                self.free_node(node_index);
            }
            node_index = next;
        }
    }

    fn create_node(&mut self, block_hash: u64) -> u32 {
        let node = Node { block_hash, first: EMPTY_STAMP, more: Vec::new(), newer: NIL, older: NIL };
        let node_index = match self.free_nodes.pop() {
            Some(node_index) => {
                self.nodes[node_index as usize] = node;
                node_index
            }
            None => {
                self.nodes.push(node);
                // A tree of 2^32 nodes would need hundreds of GiB: the byte budget stops it first.
                u32::try_from(self.nodes.len() - 1).unwrap_or(NIL - 1)
            }
        };
        self.index.insert(block_hash, node_index);
        self.size_bytes += NODE_SIZE_BYTES;
        // Link at the newest end; `move_to_newest` then finds it in place.
        self.link_newest(node_index);
        node_index
    }

    /// Sets `tenant`'s stamp on the node to `now_s`, dropping stamps past the TTL on the way.
    fn stamp(&mut self, node_index: u32, tenant: u32, now_s: u32) {
        let ttl_s = self.ttl_s;
        let counts = &mut self.tenant_node_counts;
        let node = &mut self.nodes[node_index as usize];
        node.remove_stamps(
            |stamp| stamp.tenant != tenant && now_s >= stamp.touched_s.saturating_add(ttl_s),
            |removed| counts[removed as usize] -= 1,
        );
        let fresh = Stamp { tenant, touched_s: now_s };
        if node.first.tenant == tenant {
            node.first = fresh;
        } else if let Some(stamp) = node.more.iter_mut().find(|stamp| stamp.tenant == tenant) {
            *stamp = fresh;
        } else if node.first.tenant == NO_TENANT {
            node.first = fresh;
            counts[tenant as usize] += 1;
        } else {
            // Exact growth: a node rarely has more than a few tenants, and bytes are counted.
            let capacity_before = node.more.capacity();
            node.more.reserve_exact(1);
            node.more.push(fresh);
            self.size_bytes += (node.more.capacity() - capacity_before) * STAMP_SIZE_BYTES;
            counts[tenant as usize] += 1;
        }
    }

    fn free_node(&mut self, node_index: u32) {
        self.unlink(node_index);
        let node = &mut self.nodes[node_index as usize];
        for stamp in node.stamps() {
            self.tenant_node_counts[stamp.tenant as usize] -= 1;
        }
        self.size_bytes -= NODE_SIZE_BYTES + node.more.capacity() * STAMP_SIZE_BYTES;
        node.more = Vec::new();
        node.first = EMPTY_STAMP;
        self.index.remove(&node.block_hash);
        self.free_nodes.push(node_index);
    }

    fn move_to_newest(&mut self, node_index: u32) {
        if self.newest != node_index {
            self.unlink(node_index);
            self.link_newest(node_index);
        }
    }

    fn link_newest(&mut self, node_index: u32) {
        let previous_newest = self.newest;
        let node = &mut self.nodes[node_index as usize];
        node.older = previous_newest;
        node.newer = NIL;
        if previous_newest == NIL {
            self.oldest = node_index;
        } else {
            self.nodes[previous_newest as usize].newer = node_index;
        }
        self.newest = node_index;
    }

    fn unlink(&mut self, node_index: u32) {
        let (newer, older) = {
            let node = &self.nodes[node_index as usize];
            (node.newer, node.older)
        };
        match newer {
            NIL => self.newest = older,
            newer => self.nodes[newer as usize].older = older,
        }
        match older {
            NIL => self.oldest = newer,
            older => self.nodes[older as usize].newer = newer,
        }
        let node = &mut self.nodes[node_index as usize];
        node.newer = NIL;
        node.older = NIL;
    }
}

#[cfg(test)]
#[path = "prefix_tree_tests.rs"]
mod tests;
