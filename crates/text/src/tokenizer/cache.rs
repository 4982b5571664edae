//! Per-shard tokenizer caches (SMG's documented two-level cache, "Tokenization Caching").
//!
//! L0 maps an exact prompt to its ids. L1 maps a prompt *prefix that ends right after a special
//! token* to the ids of that prefix: a later prompt that shares the prefix (the next turn of a
//! conversation, the same system prompt) only tokenizes its suffix. Special tokens are atomic
//! (split out before normalization and pre-tokenization), so ids(prefix + suffix) =
//! ids(prefix) + ids(suffix); to keep the suffix's first piece from being tokenized as the
//! start of a text (metaspace "first" prefixes), the suffix is encoded together with the
//! boundary's special token, whose id is then dropped. Both levels are bounded in bytes, LRU,
//! and owned by one shard (no locks). L1 only serves encodes without added special tokens
//! (rendered chat prompts), where the property holds.
//!
//! Keys are two independently keyed 64-bit hashes plus the length: a false hit would need both
//! to collide on equal-length text.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::rc::Rc;

use aho_corasick::{AhoCorasick, MatchKind};

use super::lru::ByteLru;
use super::Tokenizer;
use crate::error::TokenizerError;

/// Bytes of bookkeeping charged per entry on top of its ids.
const ENTRY_OVERHEAD_BYTES: usize = 96;
/// L1 entries recorded per prompt: its last boundaries (the next turn's shared prefix) and its
/// first ones (a shared system prompt).
const L1_LAST_BOUNDARIES: usize = 4;
const L1_FIRST_BOUNDARIES: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    pub l0_enabled: bool,
    pub l0_bytes_max: usize,
    pub l0_entries_max: usize,
    pub l1_enabled: bool,
    pub l1_bytes_max: usize,
}

impl CacheConfig {
    pub fn disabled() -> Self {
        CacheConfig { l0_enabled: false, l0_bytes_max: 0, l0_entries_max: 0, l1_enabled: false, l1_bytes_max: 0 }
    }
}

/// Counters for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub l0_hits: u64,
    pub l0_misses: u64,
    pub l1_hits: u64,
    pub l1_misses: u64,
    pub l0_bytes: usize,
    pub l1_bytes: usize,
    pub l0_entries: usize,
    pub l1_entries: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    a: u64,
    b: u64,
    len: usize,
    add_special_tokens: bool,
}

/// Special tokens as text, their ids, and a matcher that finds them as the tokenizer does
/// (leftmost-longest).
struct Boundaries {
    matcher: AhoCorasick,
    ids: Vec<u32>,
}

pub struct TokenizerCache {
    config: CacheConfig,
    hash_a: RandomState,
    hash_b: RandomState,
    l0: ByteLru<Key, Rc<[u32]>>,
    l1: ByteLru<Key, Rc<[u32]>>,
    boundaries: Option<Boundaries>,
    stats: CacheStats,
}

impl TokenizerCache {
    pub fn new(config: CacheConfig, tokenizer: &Tokenizer) -> Self {
        let boundaries = if config.l1_enabled { special_boundaries(tokenizer) } else { None };
        TokenizerCache {
            config,
            hash_a: RandomState::new(),
            hash_b: RandomState::new(),
            l0: ByteLru::new(config.l0_bytes_max, config.l0_entries_max.max(1)),
            l1: ByteLru::new(config.l1_bytes_max, usize::MAX),
            boundaries,
            stats: CacheStats::default(),
        }
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            l0_bytes: self.l0.bytes(),
            l1_bytes: self.l1.bytes(),
            l0_entries: self.l0.len(),
            l1_entries: self.l1.len(),
            ..self.stats
        }
    }

    /// Encodes `text`, from cache where possible. Always equal to `tokenizer.encode`.
    pub fn encode(
        &mut self,
        tokenizer: &Tokenizer,
        text: &str,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        let key = self.key(text.as_bytes(), add_special_tokens);
        if self.config.l0_enabled {
            if let Some(ids) = self.l0.get(&key) {
                self.stats.l0_hits += 1;
                return Ok(ids.to_vec());
            }
            self.stats.l0_misses += 1;
        }
        let ids = if self.boundaries.is_some() && !add_special_tokens {
            self.encode_with_prefixes(tokenizer, text)?
        } else {
            tokenizer.encode(text, add_special_tokens)?
        };
        if self.config.l0_enabled {
            self.l0.insert(key, Rc::from(ids.as_slice()), weight(ids.len()));
        }
        Ok(ids)
    }

    fn key(&self, bytes: &[u8], add_special_tokens: bool) -> Key {
        let mut a = self.hash_a.build_hasher();
        let mut b = self.hash_b.build_hasher();
        a.write(bytes);
        b.write(bytes);
        Key { a: a.finish(), b: b.finish(), len: bytes.len(), add_special_tokens }
    }

    /// L1: the longest cached boundary prefix plus the encoded suffix; records this prompt's
    /// boundaries for later prompts.
    fn encode_with_prefixes(&mut self, tokenizer: &Tokenizer, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let Some(b) = &self.boundaries else { return tokenizer.encode(text, false) };
        // (end of the special token in the text, its id), in text order.
        let found: Vec<(usize, u32)> =
            b.matcher.find_iter(text).map(|m| (m.end(), b.ids[m.pattern().as_usize()])).collect();
        let keys = self.prefix_keys(text.as_bytes(), &found);
        let mut ids = None;
        for (k, &(end, special)) in found.iter().enumerate().rev() {
            let Some(prefix) = self.l1.get(&keys[k]).cloned() else { continue };
            if let Some(full) = encode_suffix(tokenizer, text, end, special, &prefix)? {
                ids = Some(full);
                break;
            }
        }
        let ids = match ids {
            Some(ids) => {
                self.stats.l1_hits += 1;
                ids
            }
            None => {
                self.stats.l1_misses += 1;
                tokenizer.encode(text, false)?
            }
        };
        self.record_prefixes(&found, &keys, &ids);
        Ok(ids)
    }

    /// Keys of every boundary prefix, hashed incrementally in one pass.
    fn prefix_keys(&self, bytes: &[u8], found: &[(usize, u32)]) -> Vec<Key> {
        let mut a = self.hash_a.build_hasher();
        let mut b = self.hash_b.build_hasher();
        let mut at = 0;
        found
            .iter()
            .map(|&(end, _)| {
                a.write(&bytes[at..end]);
                b.write(&bytes[at..end]);
                at = end;
                Key { a: a.finish(), b: b.finish(), len: end, add_special_tokens: false }
            })
            .collect()
    }

    /// Stores the prefixes at this prompt's first and last boundaries. The k-th special token
    /// in the text is the k-th special id in the ids; if they disagree, nothing is stored.
    fn record_prefixes(&mut self, found: &[(usize, u32)], keys: &[Key], ids: &[u32]) {
        let specials: Vec<usize> = {
            let wanted: std::collections::HashSet<u32> = found.iter().map(|&(_, id)| id).collect();
            ids.iter().enumerate().filter(|(_, id)| wanted.contains(id)).map(|(i, _)| i).collect()
        };
        if specials.len() != found.len() {
            return;
        }
        let n = found.len();
        for k in (0..n).filter(|&k| k < L1_FIRST_BOUNDARIES || k + L1_LAST_BOUNDARIES >= n) {
            if ids[specials[k]] != found[k].1 {
                return;
            }
            let prefix = &ids[..=specials[k]];
            self.l1.insert(keys[k], Rc::from(prefix), weight(prefix.len()));
        }
    }
}

/// ids(text) from a cached prefix ending (in the text) at byte `end` with special token
/// `special`: the prefix ids, then the suffix encoded behind the same special token.
fn encode_suffix(
    tokenizer: &Tokenizer,
    text: &str,
    end: usize,
    special: u32,
    prefix: &[u32],
) -> Result<Option<Vec<u32>>, TokenizerError> {
    let Some(special_text) = tokenizer.added_token(special) else { return Ok(None) };
    let mut tail = String::with_capacity(special_text.len() + text.len() - end);
    tail.push_str(special_text);
    tail.push_str(&text[end..]);
    let suffix = tokenizer.encode(&tail, false)?;
    if suffix.first() != Some(&special) {
        return Ok(None);
    }
    let mut ids = Vec::with_capacity(prefix.len() + suffix.len() - 1);
    ids.extend_from_slice(prefix);
    ids.extend_from_slice(&suffix[1..]);
    Ok(Some(ids))
}

fn weight(ids: usize) -> usize {
    ids * std::mem::size_of::<u32>() + ENTRY_OVERHEAD_BYTES
}

fn special_boundaries(tokenizer: &Tokenizer) -> Option<Boundaries> {
    let specials = tokenizer.special_tokens();
    if specials.is_empty() {
        return None;
    }
    let (texts, ids): (Vec<String>, Vec<u32>) = specials.into_iter().map(|(id, t)| (t, id)).unzip();
    let matcher = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&texts).ok()?;
    Some(Boundaries { matcher, ids })
}
