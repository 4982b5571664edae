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
mod merge_table;
mod nfc;
mod nfc_inert;
mod shape;
mod split;
mod window;

use std::borrow::Cow;

use aho_corasick::AhoCorasick;
use serde_json::Value;
use tokenizers::Model;

pub use decode::ByteDecoder;
use index::{byte_to_char_table, TokenIndex};
use merge_table::{pair_key, Merge, MergeTable};
use nfc::nfc;
use shape::{added_passes, normalizer_is_nfc, split_regexes, to_json, BpeModel};
use window::PieceWindow;

/// Pieces longer than this (in bytes) go to `tokenizers`' own BPE: its heap is O(n log n)
/// where the linear scan here is O(n²).
const LINEAR_PIECE_BYTES_MAX: usize = 256;

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
    merges: MergeTable,
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
        let mut entries = Vec::with_capacity(model.merges.len());
        for (rank, (a, b)) in model.merges.iter().enumerate() {
            let (Some(&a_id), Some(&b_id), Some(&id)) =
                (model.vocab.get(a), model.vocab.get(b), model.vocab.get(format!("{a}{b}").as_str()))
            else {
                return Err(format!("merge {a:?} {b:?} is not in the vocabulary"));
            };
            entries.push((pair_key(a_id, b_id), Merge { rank: rank as u32, id }));
        }
        let merges = MergeTable::new(&entries);
        drop(entries);
        let byte_pairs =
            (0..256 * 256).map(|k| merges.get(merges.probe(pair_key(byte_ids[k >> 8], byte_ids[k & 0xff])))).collect();
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
        // The window's buffers are the thread's, kept between encodes (a few KiB).
        let window = WINDOW.with(|b| std::mem::take(&mut *b.borrow_mut()));
        let mut cx = Cx { hf, window, out: &mut out, result: Ok(()) };
        for_each_segment(self.raw_added.as_ref(), text, &mut |seg| match seg {
            Segment::Token(id) => cx.window.push_token(id, &self.merges, cx.out),
            Segment::Text(gap) => self.encode_gap(&mut cx, gap),
        });
        cx.window.finish(&self.merges, cx.out);
        let Cx { window, result, .. } = cx;
        WINDOW.with(|w| *w.borrow_mut() = window);
        result.map(|()| out)
    }

    /// Text between raw added tokens: normalize, then the normalized added tokens, then split.
    fn encode_gap(&self, cx: &mut Cx, gap: &str) {
        let normalized = if self.nfc { nfc(gap) } else { Cow::Borrowed(gap) };
        for_each_segment(self.normalized_added.as_ref(), &normalized, &mut |seg| match seg {
            Segment::Token(id) => cx.window.push_token(id, &self.merges, cx.out),
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

    /// One pre-tokenized piece: the vocabulary entry it is (`ignore_merges`), else BPE, in
    /// the window (see `window.rs`).
    fn encode_piece(&self, cx: &mut Cx, piece: &[u8]) -> Result<(), String> {
        if piece.len() > LINEAR_PIECE_BYTES_MAX {
            return self.bpe_long(cx, piece);
        }
        match self.whole_tokens.as_ref().and_then(|t| t.get(piece)) {
            Some(id) => cx.window.push_token(id, &self.merges, cx.out),
            None => cx.window.push_bytes(piece, &self.byte_ids, &self.byte_pairs, &self.merges, cx.out),
        }
        Ok(())
    }

    /// A piece too long for the window's quadratic scan: `tokenizers`' own BPE, after the
    /// window's pieces (which come before it).
    fn bpe_long(&self, cx: &mut Cx, piece: &[u8]) -> Result<(), String> {
        cx.window.finish(&self.merges, cx.out);
        let to_char = byte_to_char_table();
        let chars: String = piece.iter().map(|&b| to_char[b as usize]).collect();
        let tokens = cx.hf.get_model().tokenize(&chars).map_err(|e| format!("tokenization failed: {e}"))?;
        cx.out.extend(tokens.iter().map(|t| t.id));
        Ok(())
    }
}

thread_local! {
    static WINDOW: std::cell::RefCell<PieceWindow> = std::cell::RefCell::new(PieceWindow::default());
}

/// One encode's state: the output, the first error, and the pieces not yet merged.
struct Cx<'a> {
    hf: &'a tokenizers::Tokenizer,
    window: PieceWindow,
    out: &'a mut Vec<u32>,
    result: Result<(), String>,
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
