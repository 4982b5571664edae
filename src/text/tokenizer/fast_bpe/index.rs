//! Lookup tables of the fast encoder: the vocabulary by byte string (and its hasher),
//! and the byte-level (GPT-2) byte ↔ char map.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for keys that are already hashes (or packed ids): one multiply.
#[derive(Default)]
pub(super) struct PairHasher(u64);

impl Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The vocabulary by byte string (for `ignore_merges` models): ids behind a 64-bit
/// hash, the bytes kept once in an arena to confirm a hit.
pub(super) struct TokenIndex {
    by_hash: HashMap<u64, u32, BuildHasherDefault<PairHasher>>,
    arena: Vec<u8>,
    /// Per id: start and end in `arena` (empty for ids the model vocabulary lacks).
    spans: Vec<(u32, u32)>,
}

impl TokenIndex {
    pub(super) fn new(vocab: &HashMap<String, u32>) -> TokenIndex {
        let from_char = char_to_byte_table();
        let max_id = vocab.values().copied().max().unwrap_or(0) as usize;
        let mut index = TokenIndex {
            by_hash: HashMap::with_capacity_and_hasher(vocab.len(), Default::default()),
            arena: Vec::new(),
            spans: vec![(0, 0); max_id + 1],
        };
        let mut ordered: Vec<(&String, u32)> = vocab.iter().map(|(t, &id)| (t, id)).collect();
        ordered.sort_unstable_by_key(|&(_, id)| id);
        for (token, id) in ordered {
            let Some(bytes) = token.chars().map(|c| from_char.get(&c).copied()).collect::<Option<Vec<u8>>>() else {
                continue;
            };
            let start = index.arena.len() as u32;
            index.arena.extend_from_slice(&bytes);
            index.spans[id as usize] = (start, index.arena.len() as u32);
            // A second token with the same hash keeps the first's entry; its pieces simply
            // take the BPE path.
            index.by_hash.entry(hash_bytes(&bytes)).or_insert(id);
        }
        index
    }

    pub(super) fn get(&self, piece: &[u8]) -> Option<u32> {
        let id = *self.by_hash.get(&hash_bytes(piece))?;
        let (start, end) = self.spans[id as usize];
        (&self.arena[start as usize..end as usize] == piece).then_some(id)
    }
}

pub(super) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        h = (h.rotate_left(23) ^ u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h.rotate_left(23) ^ u64::from_le_bytes(tail)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 32)
}

/// GPT-2's byte ↔ printable-char map used by byte-level BPE vocabularies.
pub(super) fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for (b, slot) in table.iter_mut().enumerate() {
        let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        *slot = if printable {
            char::from(b as u8)
        } else {
            next += 1;
            char::from_u32(next - 1).unwrap_or('\0')
        };
    }
    table
}

pub(super) fn char_to_byte_table() -> HashMap<char, u8> {
    byte_to_char_table().iter().enumerate().map(|(b, &c)| (c, b as u8)).collect()
}
