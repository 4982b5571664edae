//! Which `tokenizers` configurations the fast encoder serves, read from the loaded tokenizer
//! itself (serialised), and the parts of it the encoder needs.

use std::collections::HashMap;

use aho_corasick::{AhoCorasickBuilder, MatchKind};
use serde::Deserialize;
use serde_json::Value;
use tokenizers::{NormalizedString, Normalizer};

use super::Unsupported;

use super::AddedPass;

#[derive(Deserialize)]
pub(super) struct BpeModel {
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) dropout: Option<f32>,
    #[serde(default)]
    pub(super) continuing_subword_prefix: Option<String>,
    #[serde(default)]
    pub(super) end_of_word_suffix: Option<String>,
    #[serde(default)]
    pub(super) byte_fallback: bool,
    #[serde(default)]
    pub(super) ignore_merges: bool,
    pub(super) vocab: HashMap<String, u32>,
    pub(super) merges: Vec<(String, String)>,
}

pub(super) fn normalize(hf: &tokenizers::Tokenizer, text: &str) -> Result<String, Unsupported> {
    let mut n = NormalizedString::from(text);
    if let Some(normalizer) = hf.get_normalizer() {
        normalizer.normalize(&mut n).map_err(|e| format!("normalization failed: {e}"))?;
    }
    Ok(n.get().to_string())
}

pub(super) fn to_json<T: serde::Serialize>(v: &T) -> Result<Value, Unsupported> {
    serde_json::to_value(v).map_err(|e| e.to_string().into())
}

/// NFC, or no normalizer at all (also an empty sequence); anything else is not served here.
pub(super) fn normalizer_is_nfc(hf: &tokenizers::Tokenizer) -> Result<bool, Unsupported> {
    let Some(n) = hf.get_normalizer() else { return Ok(false) };
    let v = to_json(n)?;
    let kind = |v: &Value| v.get("type").and_then(Value::as_str).map(str::to_string);
    match kind(&v).as_deref() {
        Some("NFC") => Ok(true),
        Some("Sequence") => {
            let list = v.get("normalizers").and_then(Value::as_array).cloned().unwrap_or_default();
            match list.as_slice() {
                [] => Ok(false),
                [one] if kind(one).as_deref() == Some("NFC") => Ok(true),
                _ => Err("normalizer sequence".into()),
            }
        }
        other => Err(format!("normalizer {other:?}").into()),
    }
}

/// `Split` regexes (isolated, not inverted) followed by a plain `ByteLevel`.
pub(super) fn split_regexes(hf: &tokenizers::Tokenizer) -> Result<Vec<super::split::Splitter>, Unsupported> {
    let pre = to_json(hf.get_pre_tokenizer().ok_or("no pre-tokenizer")?)?;
    let steps = match pre.get("type").and_then(Value::as_str) {
        Some("Sequence") => pre.get("pretokenizers").and_then(Value::as_array).cloned().unwrap_or_default(),
        _ => vec![pre],
    };
    let Some((last, splits)) = steps.split_last() else { return Err("empty pre-tokenizer".into()) };
    let byte_level_plain = last.get("type").and_then(Value::as_str) == Some("ByteLevel")
        && last.get("add_prefix_space").and_then(Value::as_bool) == Some(false)
        && last.get("use_regex").and_then(Value::as_bool) == Some(false);
    if !byte_level_plain {
        return Err("pre-tokenizer does not end in a plain ByteLevel".into());
    }
    splits
        .iter()
        .map(|s| {
            let pattern = s.pointer("/pattern/Regex").and_then(Value::as_str);
            let isolated = s.get("behavior").and_then(Value::as_str) == Some("Isolated");
            let inverted = s.get("invert").and_then(Value::as_bool) != Some(false);
            match (s.get("type").and_then(Value::as_str), pattern) {
                (Some("Split"), Some(p)) if isolated && !inverted => super::split::Splitter::new(p),
                _ => Err("pre-tokenizer step is not an isolated regex split".into()),
            }
        })
        .collect()
}

/// The two added-token passes, or an error when a token needs lstrip/rstrip/single_word.
pub(super) fn added_passes(
    hf: &tokenizers::Tokenizer,
    nfc: bool,
) -> Result<(Option<AddedPass>, Option<AddedPass>), Unsupported> {
    let mut raw = (Vec::new(), Vec::new());
    let mut normalized = (Vec::new(), Vec::new());
    let mut added: Vec<_> = hf.get_added_tokens_decoder().into_iter().collect();
    added.sort_unstable_by_key(|(id, _)| *id);
    for (id, t) in added {
        if t.lstrip || t.rstrip || t.single_word {
            return Err(format!("added token {:?} strips or is single-word", t.content).into());
        }
        if t.content.is_empty() {
            continue;
        }
        if t.normalized {
            let content = if nfc { normalize(hf, &t.content)? } else { t.content.clone() };
            normalized.0.push(content);
            normalized.1.push(id);
        } else {
            raw.0.push(t.content.clone());
            raw.1.push(id);
        }
    }
    let build = |(patterns, ids): (Vec<String>, Vec<u32>)| -> Result<Option<AddedPass>, Unsupported> {
        if patterns.is_empty() {
            return Ok(None);
        }
        let matcher = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&patterns)
            .map_err(|e| format!("added tokens: {e}"))?;
        Ok(Some(AddedPass { matcher, ids }))
    };
    Ok((build(raw)?, build(normalized)?))
}
