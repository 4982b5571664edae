//! BPE for pieces too long for the window's quadratic scan (over `LINEAR_PIECE_BYTES_MAX`
//! bytes: long runs of spaces, digits or base64 that a split regex keeps whole).
//!
//! The merge loop `tokenizers`' `Word::merge_all` runs: a min-heap of candidate merges keyed by
//! (rank, position of the left symbol), stale entries skipped when popped, so O(n log n).
//! Doing it here rather than through `tokenizers` means the loaded `tokenizers::Tokenizer` is
//! not needed after load (it is most of the idle memory).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::merge_table::{MergeTable, NO_RANK};

/// Vocabulary entries longer than the window takes (bytes → id), for `ignore_merges`
/// tokenizers, which take a piece that is a whole entry as that entry before merging. Usually
/// empty.
#[derive(Default)]
pub(super) struct LongTokens(HashMap<Box<[u8]>, u32>);

impl LongTokens {
    pub(super) fn insert(&mut self, bytes: &[u8], id: u32) {
        self.0.insert(bytes.into(), id);
    }

    pub(super) fn get(&self, bytes: &[u8]) -> Option<u32> {
        self.0.get(bytes).copied()
    }
}

/// A symbol of the piece: its token, and its live neighbours (`NONE` at the ends). A merged-away
/// symbol keeps its slot with `id == GONE`, so heap entries name stable positions.
#[derive(Clone, Copy)]
struct Sym {
    id: u32,
    prev: u32,
    next: u32,
}

const NONE: u32 = u32::MAX;
const GONE: u32 = u32::MAX;

/// The piece's tokens, appended to `out`.
pub(super) fn encode(piece: &[u8], byte_ids: &[u32; 256], merges: &MergeTable, out: &mut Vec<u32>) {
    let n = piece.len();
    let mut syms: Vec<Sym> = piece
        .iter()
        .enumerate()
        .map(|(i, &b)| Sym {
            id: byte_ids[usize::from(b)],
            prev: if i == 0 { NONE } else { i as u32 - 1 },
            next: if i + 1 == n { NONE } else { i as u32 + 1 },
        })
        .collect();
    let rank_at = |syms: &[Sym], pos: usize| -> u32 {
        let next = syms[pos].next;
        if next == NONE {
            return NO_RANK;
        }
        merges.get(merges.probe(syms[pos].id, syms[next as usize].id))
    };
    let mut heap: BinaryHeap<Reverse<(u32, u32)>> = (0..n.saturating_sub(1))
        .filter_map(|pos| Some(rank_at(&syms, pos)).filter(|&r| r != NO_RANK).map(|r| Reverse((r, pos as u32))))
        .collect();
    while let Some(Reverse((rank, pos))) = heap.pop() {
        let pos = pos as usize;
        // Stale: the symbol was merged away, or its right neighbour changed since.
        if syms[pos].id == GONE || rank_at(&syms, pos) != rank {
            continue;
        }
        let right = syms[pos].next as usize;
        syms[pos].id = merges.merged(rank);
        syms[pos].next = syms[right].next;
        syms[right].id = GONE;
        let after = syms[pos].next as usize;
        if let Some(after) = syms.get_mut(after) {
            after.prev = pos as u32;
        }
        for at in [syms[pos].prev, pos as u32] {
            if at != NONE {
                let r = rank_at(&syms, at as usize);
                if r != NO_RANK {
                    heap.push(Reverse((r, at)));
                }
            }
        }
    }
    out.extend(syms.iter().filter(|s| s.id != GONE).map(|s| s.id));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes `a`=0, `b`=1, `c`=2 (all other bytes map to 3); merges in rank order.
    fn table(merges: &[(u32, u32, u32)]) -> ([u32; 256], MergeTable) {
        let mut byte_ids = [3u32; 256];
        byte_ids[usize::from(b'a')] = 0;
        byte_ids[usize::from(b'b')] = 1;
        byte_ids[usize::from(b'c')] = 2;
        (byte_ids, MergeTable::new(merges.iter().map(|&m| Ok(m)), 20).expect("fits"))
    }

    #[test]
    fn merges_lowest_rank_first_and_leftmost_on_ties() {
        // ab=4 (rank 0), aa=5 (rank 1), 4c=6 (rank 2), 55=7 (rank 3), bc=8 (rank 4).
        let (bytes, merges) = table(&[(0, 1, 4), (0, 0, 5), (4, 2, 6), (5, 5, 7), (1, 2, 8)]);
        let cases: &[(&str, &[u32])] = &[
            ("", &[]),
            ("a", &[0]),
            ("abc", &[6]),
            // Leftmost `aa` first: (aa)(aa)a, then (aaaa)a.
            ("aaaaa", &[7, 0]),
            ("aaab", &[5, 4]),
            ("bcbc", &[8, 8]),
            ("zz", &[3, 3]),
        ];
        for (text, want) in cases {
            let mut out = Vec::new();
            encode(text.as_bytes(), &bytes, &merges, &mut out);
            assert_eq!(&out, want, "{text:?}");
        }
    }
}
