//! Byte-level BPE encoding without the `tokenizers` pipeline's bookkeeping, for the tokenizer
//! shape the Qwen, Llama 3, DeepSeek, Mistral (Tekken) and gpt-oss families share: added-token split,
//! NFC (or no normalizer), regex splits, byte-level BPE.
//!
//! Why: on a 1,000-token chat prompt, tokenization was about three quarters of the gateway's
//! CPU per request, and most of that was not BPE but offsets, alignment vectors, normalizing
//! ASCII and a heap per word. This encoder keeps only what decides the ids. It must give exactly
//! the ids `tokenizers` gives: it is built from the loaded `tokenizers::Tokenizer` itself (its
//! added vocabulary, regexes and merge table), it is used only when every stage has a shape it
//! knows (anything else stays with `tokenizers`), and tests compare the two on every family.

mod decode;
mod index;
mod nfc;
mod nfc_inert;
mod shape;
mod split;

use std::borrow::Cow;

use aho_corasick::AhoCorasick;
use serde_json::Value;
use tokenizers::Model;

pub use decode::ByteDecoder;
use index::{byte_to_char_table, PairMap, TokenIndex};
use nfc::nfc;
use shape::{added_passes, normalizer_is_nfc, split_regexes, to_json, BpeModel};

/// Pieces longer than this (in bytes) go to `tokenizers`' own BPE: its heap is O(n log n)
/// where the linear scan here is O(n²).
const LINEAR_PIECE_BYTES_MAX: usize = 256;

#[derive(Clone, Copy)]
struct Merge {
    rank: u32,
    id: u32,
}

const NO_MERGE: Merge = Merge { rank: u32::MAX, id: 0 };

fn pair_key(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

/// One pass of added-token extraction: leftmost-longest, as `tokenizers`' tries match.
struct AddedPass {
    matcher: AhoCorasick,
    ids: Vec<u32>,
}

pub struct FastBpe {
    /// Added tokens matched on the raw text (`normalized: false`).
    raw_added: Option<AddedPass>,
    /// Added tokens matched on the normalized text (`normalized: true`).
    normalized_added: Option<AddedPass>,
    /// The normalizer is NFC (else there is none, or it is the identity).
    nfc: bool,
    /// Split pre-tokenizers, applied in order (behaviour `Isolated`).
    splits: Vec<split::Splitter>,
    /// With `ignore_merges` (Llama 3, Tekken): the vocabulary by byte string, since a piece
    /// that is a vocabulary entry is that token. (Not kept for the others: skipping BPE for
    /// whole-token pieces saved about a tenth on prose and nothing on random text, for
    /// about 6 MiB of resident memory.)
    whole_tokens: Option<TokenIndex>,
    byte_ids: [u32; 256],
    /// The merge of every byte pair (256 × 256): the first and most frequent lookups, kept
    /// off the hash table.
    byte_pairs: Box<[Merge]>,
    merges: PairMap,
    /// The post-processor adds no tokens even with `add_special_tokens`.
    post_adds_nothing: bool,
}

impl FastBpe {
    /// The fast encoder for `hf`, or why it cannot serve it (then `tokenizers` does).
    pub fn build(hf: &tokenizers::Tokenizer) -> Result<FastBpe, String> {
        if hf.get_truncation().is_some() || hf.get_padding().is_some() {
            return Err("truncation or padding configured".into());
        }
        let nfc = normalizer_is_nfc(hf)?;
        let splits = split_regexes(hf)?;
        let post_adds_nothing = match hf.get_post_processor() {
            None => true,
            Some(p) => to_json(p)?.get("type").and_then(Value::as_str) == Some("ByteLevel"),
        };
        let model: BpeModel = serde_json::from_value(to_json(hf.get_model())?).map_err(|e| format!("model: {e}"))?;
        if model.kind != "BPE" || model.dropout.is_some() || model.byte_fallback {
            return Err("model is not a plain BPE".into());
        }
        if !model.continuing_subword_prefix.as_deref().unwrap_or("").is_empty()
            || !model.end_of_word_suffix.as_deref().unwrap_or("").is_empty()
        {
            return Err("BPE with subword prefix or suffix".into());
        }
        let to_char = byte_to_char_table();
        let mut byte_ids = [0u32; 256];
        for (b, id) in byte_ids.iter_mut().enumerate() {
            *id = *model.vocab.get(to_char[b].to_string().as_str()).ok_or("a byte is missing from the vocabulary")?;
        }
        let mut merges = PairMap::with_capacity_and_hasher(model.merges.len(), Default::default());
        for (rank, (a, b)) in model.merges.iter().enumerate() {
            let (Some(&a_id), Some(&b_id), Some(&id)) =
                (model.vocab.get(a), model.vocab.get(b), model.vocab.get(format!("{a}{b}").as_str()))
            else {
                return Err(format!("merge {a:?} {b:?} is not in the vocabulary"));
            };
            merges.insert(pair_key(a_id, b_id), Merge { rank: rank as u32, id });
        }
        let byte_pairs = (0..256 * 256)
            .map(|k| merges.get(&pair_key(byte_ids[k >> 8], byte_ids[k & 0xff])).copied().unwrap_or(NO_MERGE))
            .collect();
        let whole_tokens = model.ignore_merges.then(|| TokenIndex::new(&model.vocab));
        let (raw_added, normalized_added) = added_passes(hf, nfc)?;
        Ok(FastBpe {
            raw_added,
            normalized_added,
            nfc,
            splits,
            whole_tokens,
            byte_ids,
            byte_pairs,
            merges,
            post_adds_nothing,
        })
    }

    /// Whether this encoder gives the ids `tokenizers` would for this flag.
    pub fn serves(&self, add_special_tokens: bool) -> bool {
        !add_special_tokens || self.post_adds_nothing
    }

    pub fn encode(&self, hf: &tokenizers::Tokenizer, text: &str) -> Result<Vec<u32>, String> {
        let mut out = Vec::with_capacity(text.len() / 3 + 8);
        let mut cx = Cx { hf, scratch: Scratch::default(), out: &mut out, result: Ok(()) };
        for_each_segment(self.raw_added.as_ref(), text, &mut |seg| match seg {
            Segment::Token(id) => cx.out.push(id),
            Segment::Text(gap) => self.encode_gap(&mut cx, gap),
        });
        cx.result.map(|()| out)
    }

    /// Text between raw added tokens: normalize, then the normalized added tokens, then split.
    fn encode_gap(&self, cx: &mut Cx, gap: &str) {
        let normalized = if self.nfc { nfc(gap) } else { Cow::Borrowed(gap) };
        for_each_segment(self.normalized_added.as_ref(), &normalized, &mut |seg| match seg {
            Segment::Token(id) => cx.out.push(id),
            Segment::Text(text) => self.split_and_encode(cx, 0, text),
        });
    }

    fn split_and_encode(&self, cx: &mut Cx, level: usize, text: &str) {
        let Some(re) = self.splits.get(level) else {
            if cx.result.is_ok() {
                let result = self.encode_piece(cx, text.as_bytes());
                cx.result = result;
            }
            return;
        };
        let mut prev = 0;
        re.for_each_match(text, &mut |start, end| {
            if start > prev {
                self.split_and_encode(cx, level + 1, &text[prev..start]);
            }
            if end > start {
                self.split_and_encode(cx, level + 1, &text[start..end]);
            }
            prev = end;
        });
        if prev < text.len() {
            self.split_and_encode(cx, level + 1, &text[prev..]);
        }
    }

    /// One pre-tokenized piece: the vocabulary entry it is (`ignore_merges`), else BPE.
    fn encode_piece(&self, cx: &mut Cx, piece: &[u8]) -> Result<(), String> {
        if let Some(id) = self.whole_tokens.as_ref().and_then(|t| t.get(piece)) {
            cx.out.push(id);
            return Ok(());
        }
        self.bpe(cx, piece)
    }

    fn bpe(&self, cx: &mut Cx, piece: &[u8]) -> Result<(), String> {
        let Cx { hf, scratch, out, .. } = cx;
        let n = piece.len();
        if n > LINEAR_PIECE_BYTES_MAX {
            let to_char = byte_to_char_table();
            let chars: String = piece.iter().map(|&b| to_char[b as usize]).collect();
            let tokens = hf.get_model().tokenize(&chars).map_err(|e| format!("tokenization failed: {e}"))?;
            out.extend(tokens.iter().map(|t| t.id));
            return Ok(());
        }
        if n < 2 {
            out.extend(piece.iter().map(|&b| self.byte_ids[b as usize]));
            return Ok(());
        }
        // Symbols stay where they started: a merge folds the right symbol into the left one and
        // unlinks it, so nothing is shifted. `ranks[i]` is the merge of i and its successor.
        let Scratch { symbols, next, prev, ranks } = scratch;
        symbols.clear();
        symbols.extend(piece.iter().map(|&b| self.byte_ids[b as usize]));
        next.clear();
        next.extend(1..=n as u16);
        prev.clear();
        prev.extend((0..n as u16).map(|i| i.saturating_sub(1)));
        ranks.clear();
        ranks.extend(piece.windows(2).map(|w| self.byte_pairs[(usize::from(w[0]) << 8) | usize::from(w[1])]));
        ranks.push(NO_MERGE);
        loop {
            // The lowest-ranked pair, leftmost on ties: what `tokenizers`' heap pops.
            let (mut best, mut merge) = (0usize, NO_MERGE);
            let mut i = 0usize;
            while i < n {
                if ranks[i].rank < merge.rank {
                    (best, merge) = (i, ranks[i]);
                }
                i = usize::from(next[i]);
            }
            if merge.rank == NO_MERGE.rank {
                break;
            }
            symbols[best] = merge.id;
            let after = usize::from(next[usize::from(next[best])]);
            next[best] = after as u16;
            if after < n {
                prev[after] = best as u16;
                ranks[best] = self.merge(symbols[best], symbols[after]);
            } else {
                ranks[best] = NO_MERGE;
            }
            if best > 0 {
                let left = usize::from(prev[best]);
                ranks[left] = self.merge(symbols[left], symbols[best]);
            }
        }
        let mut i = 0usize;
        while i < n {
            out.push(symbols[i]);
            i = usize::from(next[i]);
        }
        Ok(())
    }

    fn merge(&self, a: u32, b: u32) -> Merge {
        self.merges.get(&pair_key(a, b)).copied().unwrap_or(NO_MERGE)
    }
}

/// One encode's state: the output, the first error, and BPE buffers reused across pieces.
struct Cx<'a> {
    hf: &'a tokenizers::Tokenizer,
    scratch: Scratch,
    out: &'a mut Vec<u32>,
    result: Result<(), String>,
}

#[derive(Default)]
struct Scratch {
    symbols: Vec<u32>,
    next: Vec<u16>,
    prev: Vec<u16>,
    ranks: Vec<Merge>,
}

enum Segment<'a> {
    Token(u32),
    Text(&'a str),
}

fn for_each_segment<'a>(pass: Option<&AddedPass>, text: &'a str, f: &mut dyn FnMut(Segment<'a>)) {
    let Some(pass) = pass else {
        if !text.is_empty() {
            f(Segment::Text(text));
        }
        return;
    };
    let mut prev = 0;
    for m in pass.matcher.find_iter(text) {
        if m.start() > prev {
            f(Segment::Text(&text[prev..m.start()]));
        }
        f(Segment::Token(pass.ids[m.pattern().as_usize()]));
        prev = m.end();
    }
    if prev < text.len() {
        f(Segment::Text(&text[prev..]));
    }
}

/// Whether the fast encoder and decoder are used. `SHARDGATE_FAST_BPE=0` leaves every encode
/// and decode to `tokenizers`, so the perf harness can run both side by side.
pub fn enabled() -> bool {
    std::env::var("SHARDGATE_FAST_BPE").map_or(true, |v| v != "0")
}
