//! The merge table: pair of token ids → (rank, merged id), open-addressed so that a lookup's
//! slot is known from the key alone and can be prefetched a step before it is read (see
//! `window.rs`). hashbrown keeps control bytes and buckets apart and offers no prefetch.

use super::prefetch::prefetch;

#[derive(Clone, Copy)]
pub(super) struct Merge {
    pub rank: u32,
    pub id: u32,
}

pub(super) const NO_MERGE: Merge = Merge { rank: u32::MAX, id: 0 };

/// No pair has this key: token ids are far below `u32::MAX`.
const EMPTY: u64 = u64::MAX;

pub(super) fn pair_key(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

/// A key and where its lookup starts (computed once for the prefetch and the lookup).
#[derive(Clone, Copy)]
pub(super) struct Probe {
    key: u64,
    line: usize,
}

impl Probe {
    pub(super) const NONE: Probe = Probe { key: EMPTY, line: 0 };
}

#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    merge: Merge,
}

const EMPTY_SLOT: Slot = Slot { key: EMPTY, merge: NO_MERGE };

/// One cache line of slots. A key's probe starts at the first slot of its home line and goes
/// on in order, so a lookup, absent keys included, ends in the one line prefetched unless that
/// line is full (the table is sized for a load of at most 2/3).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([Slot; 4]);

pub(super) struct MergeTable {
    lines: Box<[Line]>,
    /// `64 - log2(lines.len())`: the hash's top bits pick the home line.
    shift: u32,
}

impl MergeTable {
    /// Built once at its final size (no growth, so no freed pages left resident).
    pub(super) fn new(entries: &[(u64, Merge)]) -> MergeTable {
        let lines = (entries.len() * 3 / 2 / 4).next_power_of_two().max(2);
        let mut table = MergeTable {
            lines: vec![Line([EMPTY_SLOT; 4]); lines].into_boxed_slice(),
            shift: 64 - lines.trailing_zeros(),
        };
        for &(key, merge) in entries {
            debug_assert_ne!(key, EMPTY);
            let mut line = table.probe(key).line;
            // `tokenizers` keeps the last of duplicate merges; so does overwriting.
            loop {
                if let Some(slot) = table.lines[line].0.iter_mut().find(|s| s.key == EMPTY || s.key == key) {
                    *slot = Slot { key, merge };
                    break;
                }
                line = (line + 1) & (lines - 1);
            }
        }
        table
    }

    pub(super) fn probe(&self, key: u64) -> Probe {
        Probe { key, line: ((key ^ (key >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize }
    }

    pub(super) fn get(&self, probe: Probe) -> Merge {
        let mut line = probe.line;
        loop {
            for slot in &self.lines[line].0 {
                if slot.key == probe.key {
                    return slot.merge;
                }
                if slot.key == EMPTY {
                    return NO_MERGE;
                }
            }
            line = (line + 1) & (self.lines.len() - 1);
        }
    }

    /// `key`'s probe, its home line on the way into the cache: a later `get` finds it there.
    pub(super) fn prefetch(&self, key: u64) -> Probe {
        let probe = self.probe(key);
        prefetch(&self.lines[probe.line]);
        probe
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_entry_and_nothing_else() {
        let entries: Vec<(u64, Merge)> =
            (0..5000u32).map(|i| (pair_key(i * 7 % 4099, i), Merge { rank: i, id: i + 1 })).collect();
        let table = MergeTable::new(&entries);
        assert!(table.lines.len() * 4 >= 7500);
        for &(key, merge) in &entries {
            let got = table.get(table.prefetch(key));
            assert_eq!((got.rank, got.id), (merge.rank, merge.id));
        }
        for i in 0..5000u32 {
            assert_eq!(table.get(table.probe(pair_key(i, i + 100_000))).rank, NO_MERGE.rank);
        }
    }

    #[test]
    fn a_duplicate_key_keeps_the_last() {
        let key = pair_key(3, 4);
        let table = MergeTable::new(&[(key, Merge { rank: 1, id: 9 }), (key, Merge { rank: 2, id: 8 })]);
        assert_eq!(table.get(table.probe(key)).id, 8);
    }
}
