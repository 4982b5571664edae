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

use super::merge_table::{MergeTable, Probe, NO_RANK};

/// Pieces merging at once: enough steps of other pieces to cover a miss to memory.
const WINDOW_PIECES: usize = 16;

/// Symbols kept before the buffers are drained and reused (the thread keeps them; 16 bytes
/// each).
const SYMBOLS_MAX: usize = 4096;

#[derive(Clone, Copy)]
struct Piece {
    /// Start in `syms`.
    base: u32,
    /// Symbols left (bytes at the start, or 1 for a piece pushed as a token); each merge
    /// removes one.
    len: u16,
    /// Lookups this piece's last step prefetched, read at the start of its next: the position
    /// whose rank each one gives, and its probe.
    pending: [(u16, Probe); 2],
    pending_len: u8,
    done: bool,
}

/// One symbol of a piece; a piece's symbols are contiguous. A merge folds the right symbol
/// into the left one and moves the rest down, as tiktoken does: pieces are short (at most
/// `LINEAR_PIECE_BYTES_MAX`, 17 bytes on average in random-token prompts), and a scan of
/// contiguous ranks has no chain of dependent loads as a linked list does. `rank` is the merge
/// of this symbol and its successor.
#[derive(Clone, Copy)]
struct Sym {
    rank: u32,
    id: u32,
}

#[derive(Default)]
pub(super) struct PieceWindow {
    syms: Vec<Sym>,
    /// In push order; the first `emitted` are in the output.
    pieces: Vec<Piece>,
    emitted: usize,
    /// Pieces still merging (indices into `pieces`), at most `WINDOW_PIECES`.
    window: Vec<u32>,
}

impl PieceWindow {
    /// A piece that is already one token (an added token, or a whole vocabulary entry).
    pub(super) fn push_token(&mut self, id: u32, merges: &MergeTable, out: &mut Vec<u32>) {
        let base = self.syms.len();
        self.syms.push(Sym { rank: NO_RANK, id });
        self.add_piece(base);
        self.advance(merges, out);
    }

    /// A piece of 1 to `u16::MAX` bytes, as byte-level symbols; `byte_pairs` gives the rank of
    /// every byte pair's merge (`(a << 8) | b`).
    pub(super) fn push_bytes(
        &mut self,
        piece: &[u8],
        byte_ids: &[u32; 256],
        byte_pairs: &[u32],
        merges: &MergeTable,
        out: &mut Vec<u32>,
    ) {
        debug_assert!(!piece.is_empty() && piece.len() < usize::from(u16::MAX));
        let base = self.syms.len();
        self.syms.extend(piece.iter().enumerate().map(|(i, &b)| {
            let rank = piece.get(i + 1).map_or(NO_RANK, |&c| byte_pairs[(usize::from(b) << 8) | usize::from(c)]);
            Sym { rank, id: byte_ids[usize::from(b)] }
        }));
        self.add_piece(base);
        self.advance(merges, out);
    }

    /// Makes the symbols pushed from `base` on one piece.
    fn add_piece(&mut self, base: usize) {
        let n = self.syms.len() - base;
        if n >= 2 {
            self.window.push(self.pieces.len() as u32);
        }
        let piece =
            Piece { base: base as u32, len: n as u16, pending: [(0, Probe::NONE); 2], pending_len: 0, done: n < 2 };
        self.pieces.push(piece);
    }

    /// Steps the window until it has room, then moves every done piece at the front to `out`.
    fn advance(&mut self, merges: &MergeTable, out: &mut Vec<u32>) {
        if self.syms.len() > SYMBOLS_MAX {
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
        self.syms.clear();
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
            out.extend(self.syms[base..base + n].iter().map(|s| s.id));
            self.emitted += 1;
        }
    }

    /// One merge of one piece: reads the lookups its last step prefetched, applies the
    /// lowest-ranked merge and prefetches the two it changes. False once nothing merges.
    fn step(&mut self, p: usize, merges: &MergeTable) -> bool {
        let piece = &mut self.pieces[p];
        let (base, n) = (piece.base as usize, usize::from(piece.len));
        let syms = &mut self.syms[base..base + n];
        for &(pos, probe) in &piece.pending[..usize::from(piece.pending_len)] {
            syms[usize::from(pos)].rank = merges.get(probe);
        }
        piece.pending_len = 0;
        let (best, low) = lowest_rank(syms);
        if low == NO_RANK {
            return false;
        }
        syms[best].id = merges.merged(low);
        syms.copy_within(best + 2..n, best + 1);
        let n = n - 1;
        piece.len = n as u16;
        let syms = &mut syms[..n];
        let mut defer = |pos: usize, a: u32, b: u32| {
            let probe = merges.prefetch(a, b);
            piece.pending[usize::from(piece.pending_len)] = (pos as u16, probe);
            piece.pending_len += 1;
        };
        if best + 1 < n {
            defer(best, syms[best].id, syms[best + 1].id);
        } else {
            syms[best].rank = NO_RANK;
        }
        if best > 0 {
            defer(best - 1, syms[best - 1].id, syms[best].id);
        }
        true
    }
}

/// The lowest-ranked pair and its rank, leftmost on ties: what `tokenizers`' heap pops. Each
/// comparison is a select, not a branch: where the lowest rank sits is random, so a branch on
/// it would be mispredicted (and a packed `min` of rank and position measured slower).
fn lowest_rank(syms: &[Sym]) -> (usize, u32) {
    let (mut best, mut low) = (0usize, NO_RANK);
    for (i, sym) in syms.iter().enumerate() {
        let lower = sym.rank < low;
        best = std::hint::select_unpredictable(lower, i, best);
        low = std::hint::select_unpredictable(lower, sym.rank, low);
    }
    (best, low)
}
