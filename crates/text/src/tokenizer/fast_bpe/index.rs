//! Lookup tables of the fast encoder: the whole-token index (pieces that are one token, by
//! their bytes) and the byte-level (GPT-2) byte ↔ char map.

use std::sync::Arc;

use super::prefetch::prefetch;
use super::ByteDecoder;

/// Slots per line: one 64-byte cache line, which one prefetch or miss brings in whole.
const LINE_SLOTS: usize = 16;

/// Slots kept free: a lookup, absent pieces included, nearly always ends in its home line.
const LOAD_MAX: f64 = 0.7;

/// The fewest fingerprint bits worth having: fewer and most probes would compare bytes.
const FINGERPRINT_BITS_MIN: u32 = 8;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u32; LINE_SLOTS]);

/// The tokens a piece of their exact bytes encodes to, by those bytes.
///
/// Why this shape: a prompt's pieces are mostly single tokens (on `shardgate bench`'s random
/// prompts, 317 of 571 per 1,000 tokens, and 37 % of the merge steps), and one lookup replaces
/// their whole merge loop. A map from byte strings would cost several MiB; here a slot is a
/// `u32`, the id in the low bits and a fingerprint of the bytes above it, about 1 MiB for a
/// 151k vocabulary. A fingerprint match is confirmed against the token's bytes in the decode
/// table, which the gateway keeps anyway, so a lookup is exact.
pub(super) struct TokenIndex {
    lines: Box<[Line]>,
    id_bits: u32,
    /// The longest token's length in bytes (pieces longer are not looked up).
    len_max: usize,
    bytes: Arc<ByteDecoder>,
}

impl TokenIndex {
    /// An index of `tokens` (ids whose bytes `bytes` holds), or `None` if ids need too many
    /// bits to leave room for a fingerprint.
    pub(super) fn new(tokens: &[u32], bytes: Arc<ByteDecoder>) -> Option<TokenIndex> {
        let max_id = tokens.iter().copied().max().unwrap_or(0);
        let id_bits = 32 - max_id.leading_zeros();
        if 32 - id_bits < FINGERPRINT_BITS_MIN {
            return None;
        }
        let lines = ((tokens.len() as f64 / LOAD_MAX / LINE_SLOTS as f64).ceil() as usize).max(1);
        let mut index =
            TokenIndex { lines: vec![Line([0; LINE_SLOTS]); lines].into_boxed_slice(), id_bits, len_max: 0, bytes };
        for &id in tokens {
            let token = index.bytes.token(id)?;
            index.len_max = index.len_max.max(token.len());
            let (mut line, fingerprint) = index.home(token);
            loop {
                if let Some(slot) = index.lines[line].0.iter_mut().find(|s| **s == 0) {
                    *slot = fingerprint | id;
                    break;
                }
                line = (line + 1) % lines;
            }
        }
        Some(index)
    }

    /// The token `piece` is, if it is one of the index's (all loads at once; `probe` and
    /// `candidate` split them up).
    pub(super) fn get(&self, piece: &[u8]) -> Option<u32> {
        let (mut line, fingerprint) = self.home(piece);
        loop {
            for &slot in &self.lines[line].0 {
                if slot == 0 {
                    return None;
                }
                if slot & !self.id_mask() == fingerprint && self.is(slot & self.id_mask(), piece) {
                    return Some(slot & self.id_mask());
                }
            }
            line = (line + 1) % self.lines.len();
        }
    }

    /// Whether `piece` is long enough to be a token here and not too long (single bytes are
    /// never looked up: they merge with nothing).
    pub(super) fn may_hold(&self, piece: &[u8]) -> bool {
        (2..=self.len_max).contains(&piece.len())
    }

    /// Where `piece`'s lookup starts, its index line on the way into the cache.
    pub(super) fn probe(&self, piece: &[u8]) -> Probe {
        let (line, fingerprint) = self.home(piece);
        prefetch(&self.lines[line]);
        Probe { line, fingerprint }
    }

    /// What the probe's line says, its candidate's span on the way into the cache. Slots fill
    /// a line from its start and are never freed, so the occupied ones are a prefix.
    pub(super) fn candidate(&self, probe: Probe) -> Candidate {
        let line = &self.lines[probe.line].0;
        let matches = matching_slots(line, !self.id_mask(), probe.fingerprint);
        let line_full = line[LINE_SLOTS - 1] != 0;
        match matches.count_ones() {
            0 if !line_full => Candidate::Absent,
            1 => {
                let id = line[matches.trailing_zeros() as usize] & self.id_mask();
                self.bytes.prefetch_span(id);
                Candidate::Only { id, line_full }
            }
            _ => Candidate::Unsure,
        }
    }

    /// Starts loading the bytes `is` compares (after `candidate` prefetched their span).
    pub(super) fn prefetch_bytes(&self, id: u32) {
        self.bytes.prefetch_bytes(id);
    }

    /// Whether token `id` is exactly `piece`.
    pub(super) fn is(&self, id: u32, piece: &[u8]) -> bool {
        self.bytes.token(id) == Some(piece)
    }

    /// Lines with no free slot (their probes may go on into the next line), for tests.
    #[cfg(test)]
    pub(super) fn full_lines(&self) -> usize {
        self.lines.iter().filter(|l| l.0[LINE_SLOTS - 1] != 0).count()
    }

    fn id_mask(&self) -> u32 {
        (1u32 << self.id_bits) - 1
    }

    /// The line a probe for `bytes` starts at, and the fingerprint its slot holds (above the
    /// id bits, never zero, so a zero slot is empty).
    fn home(&self, bytes: &[u8]) -> (usize, u32) {
        let h = hash_bytes(bytes);
        let line = ((u128::from(h) * self.lines.len() as u128) >> 64) as usize;
        let fingerprint = ((h as u32) >> self.id_bits | 1) << self.id_bits;
        (line, fingerprint)
    }
}

/// A bit per slot of `line` whose `slot & keep` is `want`, without a branch per slot.
#[cfg(target_arch = "x86_64")]
fn matching_slots(line: &[u32; LINE_SLOTS], keep: u32, want: u32) -> u32 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_loadu_si128, _mm_movemask_ps, _mm_set1_epi32,
    };
    // SAFETY: SSE2 is part of every x86_64 CPU, and each load reads the 16 bytes of one
    // `quad` (4 `u32`s).
    unsafe {
        let (keep, want) = (_mm_set1_epi32(keep as i32), _mm_set1_epi32(want as i32));
        let mut mask = 0u32;
        for (q, quad) in line.chunks_exact(4).enumerate() {
            let slots = _mm_loadu_si128(quad.as_ptr().cast::<__m128i>());
            let eq = _mm_cmpeq_epi32(_mm_and_si128(slots, keep), want);
            mask |= (_mm_movemask_ps(_mm_castsi128_ps(eq)) as u32) << (4 * q);
        }
        mask
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn matching_slots(line: &[u32; LINE_SLOTS], keep: u32, want: u32) -> u32 {
    line.iter().enumerate().fold(0, |mask, (i, &slot)| mask | u32::from(slot & keep == want) << i)
}

/// A lookup under way: its home line and the fingerprint sought there.
#[derive(Clone, Copy)]
pub(super) struct Probe {
    line: usize,
    fingerprint: u32,
}

impl Probe {
    /// For pieces not looked up.
    pub(super) const NONE: Probe = Probe { line: 0, fingerprint: 0 };
}

/// What one index line says about a piece.
#[derive(Clone, Copy)]
pub(super) enum Candidate {
    /// Not a token of the index.
    Absent,
    /// This token, if its bytes are the piece's. Else, with `line_full`, the piece may still
    /// be past the line.
    Only { id: u32, line_full: bool },
    /// Several fingerprints match, or none in a full line: only `get` can tell.
    Unsure,
}

/// A hash of a piece, from whole-word reads: the last word overlaps the one before it rather
/// than being padded byte by byte (the length, hashed first, keeps such overlaps apart).
fn hash_bytes(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default());
    let half = |at: usize| u64::from(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default()));
    let n = bytes.len();
    let mut h = (n as u64).wrapping_mul(K);
    let last = match n {
        0 => 0,
        1..=3 => u64::from(bytes[0]) << 16 | u64::from(bytes[n / 2]) << 8 | u64::from(bytes[n - 1]),
        4..=8 => half(0) << 32 | half(n - 4),
        _ => {
            let mut at = 0;
            while at + 8 < n {
                h = (h.rotate_left(23) ^ word(at)).wrapping_mul(K);
                at += 8;
            }
            word(n - 8)
        }
    };
    h = (h.rotate_left(23) ^ last).wrapping_mul(K);
    h ^ (h >> 32)
}
