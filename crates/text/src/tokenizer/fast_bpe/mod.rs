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
//! Once built it needs nothing of the `tokenizers::Tokenizer` it came from.

pub(super) mod byte_chars;
mod decode;
mod index;
mod long_piece;
mod lookahead;
mod merge_table;
mod nfc;
mod nfc_inert;
mod post_process;
mod prefetch;
mod shape;
mod split;
mod window;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use aho_corasick::AhoCorasick;
use byte_chars::{byte_to_char_table, char_to_byte_table};
pub use decode::ByteDecoder;
use index::TokenIndex;
use long_piece::LongTokens;
use lookahead::Lookahead;
use merge_table::MergeTable;
use nfc::nfc;
use post_process::Specials;
use shape::{added_passes, normalizer_is_nfc, split_regexes, to_json, BpeModel};
use window::PieceWindow;

/// Why the fast encoder (or its decode table) cannot serve a tokenizer: a stage it does not
/// know the shape of. Never an error for the client: `tokenizers` serves it instead, and the
/// reason is logged at debug level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(Cow<'static, str>);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

impl From<&'static str> for Unsupported {
    fn from(why: &'static str) -> Self {
        Unsupported(Cow::Borrowed(why))
    }
}

impl From<String> for Unsupported {
    fn from(why: String) -> Self {
        Unsupported(Cow::Owned(why))
    }
}

/// Pieces longer than this (in bytes) go to the heap BPE (`long_piece`): O(n log n) where
/// the window's scan is O(n²).
const LINEAR_PIECE_BYTES_MAX: usize = 256;

/// Tokens checked together at load (`whole_token_index`): one window's worth.
const INDEX_CHECK_BATCH: usize = 16;

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
    /// The tokens a piece of exactly their bytes encodes to: with `ignore_merges` (Llama 3,
    /// Tekken) every vocabulary entry, else those BPE merges back from their own bytes
    /// (checked at load). A piece found here skips the merge loop.
    whole_tokens: Option<TokenIndex>,
    byte_ids: [u32; 256],
    /// The rank of every byte pair's merge (256 × 256): the first and most frequent lookups,
    /// kept off the hash table.
    byte_pairs: Box<[u32]>,
    merges: MergeTable,
    /// With `ignore_merges` (Llama 3, Tekken) a piece that is a whole vocabulary entry is that
    /// entry; these are the entries too long for `whole_tokens` (empty otherwise).
    long_tokens: LongTokens,
    /// What `add_special_tokens` adds, or why this encoder cannot add it (`tokenizers` does).
    specials: Result<Specials, Unsupported>,
}

impl FastBpe {
    /// The fast encoder for `hf`, or why it cannot serve it (then `tokenizers` does).
    /// `token_bytes` (the decode table) confirms whole-token lookups; without it there are
    /// none, which only `ignore_merges` models cannot do without.
    pub fn build(hf: &tokenizers::Tokenizer, token_bytes: Option<Arc<ByteDecoder>>) -> Result<FastBpe, Unsupported> {
        if hf.get_truncation().is_some() || hf.get_padding().is_some() {
            return Err("truncation or padding configured".into());
        }
        let nfc = normalizer_is_nfc(hf)?;
        let splits = split_regexes(hf)?;
        let specials = post_process::specials(hf);
        let model: BpeModel = serde_json::from_value(to_json(hf.get_model())?).map_err(|e| format!("model: {e}"))?;
        // The model's JSON is garbage now, and the tables below are kept for good.
        shardgate_util::memory::release_freed();
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
        let merges = model.merges.iter().map(|(a, b)| {
            match (model.vocab.get(a), model.vocab.get(b), model.vocab.get(format!("{a}{b}").as_str())) {
                (Some(&a_id), Some(&b_id), Some(&id)) => Ok((a_id, b_id, id)),
                _ => Err(format!("merge {a:?} {b:?} is not in the vocabulary").into()),
            }
        });
        // Every id a piece's symbols can have: bytes and merges (added tokens are never merged).
        let id_max = model.vocab.values().copied().max().unwrap_or(0);
        let merges = MergeTable::new(merges, id_max)?;
        let byte_pairs =
            (0..256 * 256).map(|k| merges.get(merges.probe(byte_ids[k >> 8], byte_ids[k & 0xff]))).collect();
        let (raw_added, normalized_added) = added_passes(hf, nfc)?;
        let mut long_tokens = LongTokens::default();
        if model.ignore_merges {
            let from_char = char_to_byte_table();
            for (token, &id) in &model.vocab {
                let bytes: Option<Vec<u8>> = token.chars().map(|c| from_char.get(&c).copied()).collect();
                if let Some(bytes) = bytes.filter(|b| b.len() > LINEAR_PIECE_BYTES_MAX) {
                    long_tokens.insert(&bytes, id);
                }
            }
        }
        let mut fast = FastBpe {
            raw_added,
            normalized_added,
            nfc,
            splits,
            whole_tokens: None,
            byte_ids,
            byte_pairs,
            merges,
            long_tokens,
            specials,
        };
        fast.whole_tokens = match token_bytes {
            Some(bytes) => fast.whole_token_index(&model, bytes)?,
            None if model.ignore_merges => return Err("ignore_merges without a byte-level decode table".into()),
            None => None,
        };
        Ok(fast)
    }

    /// The whole-token index: every vocabulary entry of 2 to `LINEAR_PIECE_BYTES_MAX` bytes
    /// (shorter pieces have nothing to merge, longer ones go to `tokenizers`) that a piece of
    /// its bytes encodes to. With `ignore_merges` that is all of them, and the index must hold
    /// them all; without, it is those BPE merges back into themselves (most; a token whose
    /// bytes merge otherwise, like "abc" with only `b c` and `a b`, is left to BPE).
    fn whole_token_index(
        &self,
        model: &BpeModel,
        token_bytes: Arc<ByteDecoder>,
    ) -> Result<Option<TokenIndex>, Unsupported> {
        let to_char = byte_to_char_table();
        let from_char = char_to_byte_table();
        let mut ids = Vec::with_capacity(model.vocab.len());
        let mut batch: Vec<(u32, &[u8])> = Vec::with_capacity(INDEX_CHECK_BATCH);
        let (mut window, mut out) = (PieceWindow::default(), Vec::new());
        let mut check = |batch: &mut Vec<(u32, &[u8])>, ids: &mut Vec<u32>| {
            // A batch merges in one window, its misses overlapped; one that does not give
            // exactly its ids is checked again token by token.
            if self.merges_back(&mut window, &mut out, batch) {
                ids.extend(batch.iter().map(|&(id, _)| id));
            } else {
                for token in batch.chunks(1) {
                    if self.merges_back(&mut window, &mut out, token) {
                        ids.push(token[0].0);
                    }
                }
            }
            batch.clear();
        };
        for (token, &id) in &model.vocab {
            // The id's bytes in the decode table, if they are what the vocabulary entry's
            // byte stand-ins say.
            let bytes = token_bytes.token(id).filter(|b| token.chars().eq(b.iter().map(|&b| to_char[usize::from(b)])));
            let Some(bytes) = bytes else {
                if model.ignore_merges && token.chars().all(|c| from_char.contains_key(&c)) {
                    return Err(format!("token {id} decodes to other bytes than its vocabulary entry").into());
                }
                // Not made of byte stand-ins: no piece can be this token.
                continue;
            };
            if !(2..=LINEAR_PIECE_BYTES_MAX).contains(&bytes.len()) {
                continue;
            }
            if model.ignore_merges {
                ids.push(id);
                continue;
            }
            batch.push((id, bytes));
            if batch.len() == INDEX_CHECK_BATCH {
                check(&mut batch, &mut ids);
            }
        }
        check(&mut batch, &mut ids);
        // In id order, not the vocabulary map's (seeded) order: the same slots every load, so
        // instruction counts (perf/callgrind) repeat.
        ids.sort_unstable();
        let index = TokenIndex::new(&ids, token_bytes);
        if index.is_none() && model.ignore_merges {
            return Err("token ids too large for the whole-token index".into());
        }
        Ok(index)
    }

    /// Whether BPE gives each of `tokens`' bytes (as pieces) back as exactly its id.
    fn merges_back(&self, window: &mut PieceWindow, out: &mut Vec<u32>, tokens: &[(u32, &[u8])]) -> bool {
        out.clear();
        for (_, bytes) in tokens {
            window.push_bytes(bytes, &self.byte_ids, &self.byte_pairs, &self.merges, out);
        }
        window.finish(&self.merges, out);
        out.iter().copied().eq(tokens.iter().map(|&(id, _)| id))
    }

    /// Whether this encoder gives the ids `tokenizers` would for this flag.
    pub fn serves(&self, add_special_tokens: bool) -> bool {
        !add_special_tokens || self.specials.is_ok()
    }

    /// Why `add_special_tokens` is left to `tokenizers`, if it is.
    pub fn specials_unsupported(&self) -> Option<&Unsupported> {
        self.specials.as_ref().err()
    }

    /// The text's ids (only for a flag it `serves`).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Vec<u32> {
        let specials = self.specials.as_ref().ok().filter(|_| add_special_tokens);
        let mut out = Vec::with_capacity(text.len() / 3 + 8);
        out.extend(specials.iter().flat_map(|s| s.prefix.iter().copied()));
        // The window's buffers are the thread's, kept between encodes (a few KiB).
        let window = WINDOW.with(|b| std::mem::take(&mut *b.borrow_mut()));
        let mut cx = Cx { window, out: &mut out };
        for_each_segment(self.raw_added.as_ref(), text, &mut |seg| match seg {
            Segment::Token(id) => cx.window.push_token(id, &self.merges, cx.out),
            Segment::Text(gap) => self.encode_gap(&mut cx, gap),
        });
        cx.window.finish(&self.merges, cx.out);
        let Cx { window, .. } = cx;
        WINDOW.with(|w| *w.borrow_mut() = window);
        out.extend(specials.iter().flat_map(|s| s.suffix.iter().copied()));
        out
    }

    /// Text between raw added tokens: normalize, then the normalized added tokens, then split.
    /// Pieces wait in `ahead` while their whole-token lookups load (see `lookahead.rs`).
    fn encode_gap(&self, cx: &mut Cx, gap: &str) {
        let normalized = if self.nfc { nfc(gap) } else { Cow::Borrowed(gap) };
        let mut ahead = Lookahead::new();
        for_each_segment(self.normalized_added.as_ref(), &normalized, &mut |seg| match seg {
            Segment::Token(id) => {
                self.drain(cx, &mut ahead);
                cx.window.push_token(id, &self.merges, cx.out);
            }
            Segment::Text(text) => self.split_and_encode(cx, &mut ahead, 0, text),
        });
        self.drain(cx, &mut ahead);
    }

    fn split_and_encode<'t>(&self, cx: &mut Cx, ahead: &mut Lookahead<'t>, level: usize, text: &'t str) {
        let Some(re) = self.splits.get(level) else {
            if let Some((piece, id)) = ahead.push(text.as_bytes(), self.whole_tokens.as_ref()) {
                self.encode_piece(cx, piece, id);
            }
            return;
        };
        let mut prev = 0;
        re.for_each_match(text, &mut |start, end| {
            if start > prev {
                self.split_and_encode(cx, ahead, level + 1, &text[prev..start]);
            }
            if end > start {
                self.split_and_encode(cx, ahead, level + 1, &text[start..end]);
            }
            prev = end;
        });
        if prev < text.len() {
            self.split_and_encode(cx, ahead, level + 1, &text[prev..]);
        }
    }

    /// Every piece still waiting for its lookup, in order.
    fn drain(&self, cx: &mut Cx, ahead: &mut Lookahead) {
        while let Some((piece, id)) = ahead.pop(self.whole_tokens.as_ref()) {
            self.encode_piece(cx, piece, id);
        }
    }

    /// One pre-tokenized piece: the token it is whole (`whole`), else BPE, in the window (see
    /// `window.rs`).
    fn encode_piece(&self, cx: &mut Cx, piece: &[u8], whole: Option<u32>) {
        match whole {
            Some(id) => cx.window.push_token(id, &self.merges, cx.out),
            None if piece.len() > LINEAR_PIECE_BYTES_MAX => self.bpe_long(cx, piece),
            None => cx.window.push_bytes(piece, &self.byte_ids, &self.byte_pairs, &self.merges, cx.out),
        }
    }

    /// A piece too long for the window's quadratic scan, after the window's pieces (which come
    /// before it).
    fn bpe_long(&self, cx: &mut Cx, piece: &[u8]) {
        cx.window.finish(&self.merges, cx.out);
        match self.long_tokens.get(piece) {
            Some(id) => cx.out.push(id),
            None => long_piece::encode(piece, &self.byte_ids, &self.merges, cx.out),
        }
    }
}

thread_local! {
    static WINDOW: std::cell::RefCell<PieceWindow> = std::cell::RefCell::new(PieceWindow::default());
}

/// One encode's state: the output and the pieces not yet merged.
struct Cx<'a> {
    window: PieceWindow,
    out: &'a mut Vec<u32>,
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
