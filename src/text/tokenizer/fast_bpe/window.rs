//! BPE over a window of pieces, one merge step per piece in turn.
//!
//! Why: nearly every merge ends in two merge-table lookups, and on a 151k-entry table with
//! random pairs most miss the cache. Within one piece each lookup waits for the last merge, so
//! a piece alone pays every miss in full. A step here prefetches its lookups and the other
//! pieces in the window take their steps meanwhile, so the misses overlap. A piece that is
//! done leaves the window and the next one pushed takes its place.
//!
//! Each piece runs exactly the merge loop `tokenizers` does (lowest rank first, leftmost on
//! ties), only interleaved with the others; the pieces' tokens come out in push order.

use super::merge_table::{pair_key, Merge, MergeTable, Probe, NO_MERGE};

/// Pieces merging at once: enough steps of other pieces to cover a miss to memory.
const WINDOW_PIECES: usize = 16;

/// Symbols kept before the buffers are drained and reused (the thread keeps them; ~18 bytes
/// each).
const SYMBOLS_MAX: usize = 4096;

#[derive(Clone, Copy)]
struct Piece {
    /// Start in the flat arrays.
    base: u32,
    /// Symbols at the start (bytes, or 1 for a piece pushed as a token).
    len: u16,
    /// Lookups this piece's last step prefetched, read at the start of its next: the position
    /// whose rank each one gives, and its probe.
    pending: [(u16, Probe); 2],
    pending_len: u8,
    done: bool,
}

/// Symbols stay where they started: a merge folds the right symbol into the left one and
/// unlinks it, so nothing is shifted. `ranks[i]` and `merged[i]` are the merge of i and its
/// successor (apart, so the scan for the lowest rank reads only ranks).
#[derive(Default)]
pub(super) struct PieceWindow {
    symbols: Vec<u32>,
    next: Vec<u16>,
    prev: Vec<u16>,
    ranks: Vec<u32>,
    merged: Vec<u32>,
    /// In push order; the first `emitted` are in the output.
    pieces: Vec<Piece>,
    emitted: usize,
    /// Pieces still merging (indices into `pieces`), at most `WINDOW_PIECES`.
    window: Vec<u32>,
}

impl PieceWindow {
    /// A piece that is already one token (an added token, or a whole vocabulary entry).
    pub(super) fn push_token(&mut self, id: u32, merges: &MergeTable, out: &mut Vec<u32>) {
        self.push_symbols(std::iter::once(id), std::iter::once(NO_MERGE));
        self.advance(merges, out);
    }

    /// A piece of at most `u16::MAX` bytes, as byte-level symbols; `byte_pairs` gives the merge
    /// of every byte pair (`(a << 8) | b`).
    pub(super) fn push_bytes(
        &mut self,
        piece: &[u8],
        tables: (&[u32; 256], &[Merge]),
        merges: &MergeTable,
        out: &mut Vec<u32>,
    ) {
        debug_assert!(piece.len() < usize::from(u16::MAX));
        let (byte_ids, byte_pairs) = tables;
        let pairs = piece.windows(2).map(|w| byte_pairs[(usize::from(w[0]) << 8) | usize::from(w[1])]);
        self.push_symbols(piece.iter().map(|&b| byte_ids[usize::from(b)]), pairs.chain(std::iter::once(NO_MERGE)));
        self.advance(merges, out);
    }

    fn push_symbols(&mut self, symbols: impl Iterator<Item = u32>, merges: impl Iterator<Item = Merge>) {
        let base = self.symbols.len();
        self.symbols.extend(symbols);
        for m in merges {
            self.ranks.push(m.rank);
            self.merged.push(m.id);
        }
        let n = self.symbols.len() - base;
        debug_assert_eq!(self.ranks.len(), self.symbols.len());
        self.next.extend(1..=n as u16);
        self.prev.extend((0..n as u16).map(|i| i.saturating_sub(1)));
        if n >= 2 {
            self.window.push(self.pieces.len() as u32);
        }
        let piece =
            Piece { base: base as u32, len: n as u16, pending: [(0, Probe::NONE); 2], pending_len: 0, done: n < 2 };
        self.pieces.push(piece);
    }

    /// Steps the window until it has room, then moves every done piece at the front to `out`.
    fn advance(&mut self, merges: &MergeTable, out: &mut Vec<u32>) {
        if self.symbols.len() > SYMBOLS_MAX {
            return self.finish(merges, out);
        }
        while self.window.len() >= WINDOW_PIECES {
            self.round(merges);
        }
        self.emit(out);
    }

    /// Runs every piece's merges to the end, appends their tokens to `out` in push order, and
    /// empties the buffers.
    pub(super) fn finish(&mut self, merges: &MergeTable, out: &mut Vec<u32>) {
        while !self.window.is_empty() {
            self.round(merges);
        }
        self.emit(out);
        debug_assert_eq!(self.emitted, self.pieces.len());
        self.symbols.clear();
        self.next.clear();
        self.prev.clear();
        self.ranks.clear();
        self.merged.clear();
        self.pieces.clear();
        self.emitted = 0;
    }

    /// One step of every piece in the window; a piece with nothing left to merge leaves it.
    fn round(&mut self, merges: &MergeTable) {
        let mut k = 0;
        while k < self.window.len() {
            let p = self.window[k] as usize;
            if self.step(p, merges) {
                k += 1;
            } else {
                self.pieces[p].done = true;
                self.window.swap_remove(k);
            }
        }
    }

    fn emit(&mut self, out: &mut Vec<u32>) {
        while let Some(piece) = self.pieces.get(self.emitted).filter(|p| p.done) {
            let (base, n) = (piece.base as usize, usize::from(piece.len));
            let mut i = 0usize;
            while i < n {
                out.push(self.symbols[base + i]);
                i = usize::from(self.next[base + i]);
            }
            self.emitted += 1;
        }
    }

    /// One merge of one piece: reads the lookups its last step prefetched, applies the
    /// lowest-ranked merge and prefetches the two it changes. False once nothing merges.
    fn step(&mut self, p: usize, merges: &MergeTable) -> bool {
        let piece = &mut self.pieces[p];
        let (base, n) = (piece.base as usize, usize::from(piece.len));
        let symbols = &mut self.symbols[base..base + n];
        let next = &mut self.next[base..base + n];
        let prev = &mut self.prev[base..base + n];
        let ranks = &mut self.ranks[base..base + n];
        let merged = &mut self.merged[base..base + n];
        for &(pos, probe) in &piece.pending[..usize::from(piece.pending_len)] {
            let m = merges.get(probe);
            (ranks[usize::from(pos)], merged[usize::from(pos)]) = (m.rank, m.id);
        }
        piece.pending_len = 0;
        let (best, low) = lowest_rank(ranks, next);
        if low == NO_MERGE.rank {
            return false;
        }
        symbols[best] = merged[best];
        let after = usize::from(next[usize::from(next[best])]);
        next[best] = after as u16;
        let mut defer = |pos: usize, key: u64| {
            let probe = merges.prefetch(key);
            piece.pending[usize::from(piece.pending_len)] = (pos as u16, probe);
            piece.pending_len += 1;
        };
        if after < n {
            prev[after] = best as u16;
            defer(best, pair_key(symbols[best], symbols[after]));
        } else {
            ranks[best] = NO_MERGE.rank;
        }
        if best > 0 {
            let left = usize::from(prev[best]);
            defer(left, pair_key(symbols[left], symbols[best]));
        }
        true
    }
}

/// The lowest-ranked pair and its rank, leftmost on ties: what `tokenizers`' heap pops. Only
/// linked symbols are visited (a select, not a branch, on the rank).
fn lowest_rank(ranks: &[u32], next: &[u16]) -> (usize, u32) {
    let (mut best, mut low) = (0usize, NO_MERGE.rank);
    let mut i = 0usize;
    while i < ranks.len() {
        if ranks[i] < low {
            (best, low) = (i, ranks[i]);
        }
        i = usize::from(next[i]);
    }
    (best, low)
}
