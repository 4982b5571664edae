//! What the post-processor adds with `add_special_tokens`, for the shapes that only put fixed
//! special tokens around the text: none, `ByteLevel` (offsets only), `TemplateProcessing` with
//! one sequence (Llama 3 and DeepSeek's BOS), or a `Sequence` of those.

use serde_json::Value;

use super::shape::to_json;
use super::Unsupported;

/// The ids before and after the text's with `add_special_tokens`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Specials {
    pub(super) prefix: Vec<u32>,
    pub(super) suffix: Vec<u32>,
}

pub(super) fn specials(hf: &tokenizers::Tokenizer) -> Result<Specials, Unsupported> {
    match hf.get_post_processor() {
        None => Ok(Specials::default()),
        Some(p) => from_json(&to_json(p)?),
    }
}

fn from_json(p: &Value) -> Result<Specials, Unsupported> {
    match p.get("type").and_then(Value::as_str) {
        Some("ByteLevel") => Ok(Specials::default()),
        Some("TemplateProcessing") => template(p),
        Some("Sequence") => {
            let mut found = Specials::default();
            for step in p.get("processors").and_then(Value::as_array).into_iter().flatten() {
                let s = from_json(step)?;
                if s != Specials::default() {
                    if found != Specials::default() {
                        return Err("two post-processors add tokens".into());
                    }
                    found = s;
                }
            }
            Ok(found)
        }
        other => Err(format!("post-processor {other:?}").into()),
    }
}

/// `single`: special tokens and exactly one `Sequence` (the text).
fn template(p: &Value) -> Result<Specials, Unsupported> {
    let single = p.get("single").and_then(Value::as_array).ok_or("template without `single`")?;
    let (mut specials, mut seen_text) = (Specials::default(), false);
    for item in single {
        if item.get("Sequence").is_some() {
            if seen_text {
                return Err("template with two sequences".into());
            }
            seen_text = true;
            continue;
        }
        let name = item.pointer("/SpecialToken/id").and_then(Value::as_str).ok_or("template item of unknown shape")?;
        let ids = p
            .pointer(&format!("/special_tokens/{}/ids", name.replace('~', "~0").replace('/', "~1")))
            .and_then(Value::as_array)
            .ok_or_else(|| format!("template token {name:?} has no ids"))?;
        let side = if seen_text { &mut specials.suffix } else { &mut specials.prefix };
        for id in ids {
            side.push(id.as_u64().and_then(|v| u32::try_from(v).ok()).ok_or("template token id is not a u32")?);
        }
    }
    if !seen_text {
        return Err("template without the sequence".into());
    }
    Ok(specials)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The ids before and after the text, or refused.
    type Want = Result<(Vec<u32>, Vec<u32>), ()>;

    #[test]
    fn shapes() {
        let bos = json!({"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}});
        let around = json!({"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[C]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "a/b", "type_id": 0}}],
            "special_tokens": {"[C]": {"ids": [5]}, "a/b": {"ids": [6, 7]}}});
        let level = json!({"type": "ByteLevel", "trim_offsets": false});
        let cases: Vec<(Value, Want)> = vec![
            (level.clone(), Ok((vec![], vec![]))),
            (bos.clone(), Ok((vec![1], vec![]))),
            (around, Ok((vec![5], vec![6, 7]))),
            (json!({"type": "Sequence", "processors": [level, bos.clone()]}), Ok((vec![1], vec![]))),
            (json!({"type": "Sequence", "processors": [bos.clone(), bos]}), Err(())),
            (json!({"type": "BertProcessing"}), Err(())),
            (
                json!({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "x"}}], "special_tokens": {}}),
                Err(()),
            ),
            (
                json!({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}}, {"Sequence": {"id": "B"}}]}),
                Err(()),
            ),
        ];
        for (p, want) in cases {
            let got = from_json(&p).map(|s| (s.prefix, s.suffix)).map_err(|_| ());
            assert_eq!(got, want, "{p}");
        }
    }
}
