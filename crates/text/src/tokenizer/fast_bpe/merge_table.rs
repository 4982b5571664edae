//! The merge table: pair of token ids → the merge's rank, open-addressed so that a lookup's
//! slot is known from the key alone and can be prefetched a step before it is read (see
//! `window.rs`). hashbrown keeps control bytes and buckets apart and offers no prefetch.
//!
//! A slot is one `u64`, the pair and the rank packed, eight to a cache line: half the bytes
//! of a (key, rank, id) slot, so twice the table stays cached between requests. The merged
//! token comes from the rank: in Qwen and DeepSeek vocabularies it is the rank plus a fixed
//! offset, elsewhere it is read from a rank-indexed array, once per merge applied (not per
//! lookup) and prefetched when the lookup finds it.

use super::prefetch::prefetch;
use super::Unsupported;

/// The rank of a pair that does not merge (every real rank is lower).
pub(super) const NO_RANK: u32 = u32::MAX;

const EMPTY: u64 = u64::MAX;

/// A pair's key and where its lookup starts (computed once for the prefetch and the lookup).
#[derive(Clone, Copy)]
pub(super) struct Probe {
    key: u64,
    line: usize,
}

impl Probe {
    pub(super) const NONE: Probe = Probe { key: EMPTY, line: 0 };
}

const LINE_SLOTS: usize = 8;

/// One cache line of slots. A key's probe starts at the first slot of its home line and goes
/// on in order, so a lookup, absent keys included, ends in the one line prefetched unless that
/// line is full (the table is sized for a load of at most 2/3).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u64; LINE_SLOTS]);

pub(super) struct MergeTable {
    lines: Box<[Line]>,
    /// `64 - log2(lines.len())`: the hash's top bits pick the home line.
    shift: u32,
    /// Bits per token id in a key; a slot is `(a << id_bits | b) << rank_bits | rank`.
    id_bits: u32,
    rank_bits: u32,
    merged: MergedIds,
}

/// The token each rank's merge makes.
enum MergedIds {
    /// `rank + offset` for every rank.
    Offset(u32),
    ByRank(Box<[u32]>),
}

impl MergeTable {
    /// The table of `merges` (pairs in rank order, each with the token it makes), for token
    /// ids up to `id_max` (every id a lookup may name), or why they do not fit. Built once at
    /// its final size, with no list of the merges on the side: a freed temporary of a few MiB
    /// stays resident in the allocator's pages.
    pub(super) fn new(
        merges: impl ExactSizeIterator<Item = Result<(u32, u32, u32), Unsupported>>,
        id_max: u32,
    ) -> Result<MergeTable, Unsupported> {
        let count = merges.len();
        // One more than the largest id, so no key is all ones (`EMPTY`).
        let id_bits = 32 - id_max.checked_add(1).ok_or("token ids too large to pack")?.leading_zeros();
        let rank_bits = 64u32.checked_sub(2 * id_bits).filter(|&r| r >= 20).ok_or("token ids too large to pack")?;
        if (count as u64) >= (1u64 << rank_bits).min(u64::from(NO_RANK)) {
            return Err("too many merges to pack".into());
        }
        let lines = (count * 3 / 2 / LINE_SLOTS).next_power_of_two().max(2);
        let mut table = MergeTable {
            lines: vec![Line([EMPTY; LINE_SLOTS]); lines].into_boxed_slice(),
            shift: 64 - lines.trailing_zeros(),
            id_bits,
            rank_bits,
            merged: MergedIds::Offset(0),
        };
        // Ids by rank, kept only from the first merge whose id is not rank + offset on.
        let (mut offset, mut by_rank): (Option<u32>, Option<Vec<u32>>) = (None, None);
        for (rank, merge) in merges.enumerate() {
            let (a, b, id) = merge?;
            if a.max(b).max(id) > id_max {
                return Err(format!("merge {rank} names token ids beyond the vocabulary").into());
            }
            let offset = *offset.get_or_insert(id);
            match &mut by_rank {
                Some(ids) => ids.push(id),
                None if id.checked_sub(rank as u32) == Some(offset) => {}
                None => by_rank = Some((0..rank as u32).map(|r| r + offset).chain([id]).collect()),
            }
            table.insert(a, b, rank);
        }
        table.merged = match by_rank {
            Some(ids) => MergedIds::ByRank(ids.into_boxed_slice()),
            None => MergedIds::Offset(offset.unwrap_or(0)),
        };
        Ok(table)
    }

    fn insert(&mut self, a: u32, b: u32, rank: usize) {
        let probe = self.probe(a, b);
        let slot_value = probe.key << self.rank_bits | rank as u64;
        let (mut line, rank_bits) = (probe.line, self.rank_bits);
        // `tokenizers` keeps the last of duplicate merges; so does overwriting.
        loop {
            let found = self.lines[line].0.iter_mut().find(|s| **s == EMPTY || **s >> rank_bits == probe.key);
            if let Some(slot) = found {
                *slot = slot_value;
                return;
            }
            line = (line + 1) & (self.lines.len() - 1);
        }
    }

    pub(super) fn probe(&self, a: u32, b: u32) -> Probe {
        debug_assert!((a | b) >> self.id_bits == 0, "token id beyond the table's id_max");
        let key = u64::from(a) << self.id_bits | u64::from(b);
        Probe { key, line: ((key ^ (key >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize }
    }

    /// The rank of the probe's pair, or `NO_RANK`.
    pub(super) fn get(&self, probe: Probe) -> u32 {
        let mut line = probe.line;
        loop {
            for &slot in &self.lines[line].0 {
                if slot == EMPTY {
                    return NO_RANK;
                }
                if slot >> self.rank_bits == probe.key {
                    let rank = (slot & ((1 << self.rank_bits) - 1)) as u32;
                    if let MergedIds::ByRank(ids) = &self.merged {
                        // Read when (if) this merge is applied, a step or more later.
                        prefetch(&ids[rank as usize]);
                    }
                    return rank;
                }
            }
            line = (line + 1) & (self.lines.len() - 1);
        }
    }

    /// The token the merge of `rank` makes (`rank` from `get`, not `NO_RANK`).
    pub(super) fn merged(&self, rank: u32) -> u32 {
        match &self.merged {
            MergedIds::Offset(offset) => rank + offset,
            MergedIds::ByRank(ids) => ids[rank as usize],
        }
    }

    /// The pair's probe, its home line on the way into the cache: a later `get` finds it there.
    pub(super) fn prefetch(&self, a: u32, b: u32) -> Probe {
        let probe = self.probe(a, b);
        prefetch(&self.lines[probe.line]);
        probe
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(merges: &[(u32, u32, u32)], id_max: u32) -> Result<MergeTable, Unsupported> {
        MergeTable::new(merges.iter().map(|&m| Ok(m)), id_max)
    }

    fn pairs(n: u32, id: impl Fn(u32) -> u32) -> Vec<(u32, u32, u32)> {
        (0..n).map(|i| (i * 7 % 4099, i, id(i))).collect()
    }

    #[test]
    fn finds_every_entry_and_nothing_else() {
        // Merged ids at a fixed offset from the rank; unrelated to it; at an offset for the
        // first hundred ranks only (the ids kept by rank must include those before the break).
        let layouts = [pairs(5000, |i| i + 300), pairs(5000, |i| (i * 31) % 7919), pairs(5000, |i| i + 300 - i / 100)];
        for merges in layouts {
            let table = build(&merges, 105_000).expect("fits");
            assert!(table.lines.len() * LINE_SLOTS >= 7500);
            for (rank, &(a, b, id)) in merges.iter().enumerate() {
                let got = table.get(table.prefetch(a, b));
                assert_eq!((got, table.merged(got)), (rank as u32, id));
            }
            for i in 0..5000u32 {
                assert_eq!(table.get(table.probe(i, i + 100_000)), NO_RANK);
            }
        }
    }

    #[test]
    fn a_duplicate_pair_keeps_the_last() {
        let table = build(&[(3, 4, 9), (3, 4, 8)], 9).expect("fits");
        let rank = table.get(table.probe(3, 4));
        assert_eq!((rank, table.merged(rank)), (1, 8));
    }

    #[test]
    fn ids_too_wide_to_pack_are_refused() {
        assert!(build(&[(3, 4, 9)], 1 << 23).is_err());
        assert!(build(&[(3, 4, 9)], (1 << 21) - 2).is_ok());
        assert!(build(&[(3, 4, 9)], u32::MAX).is_err());
        assert!(build(&[(3, 4, 10)], 9).is_err(), "an id past id_max");
    }
}
