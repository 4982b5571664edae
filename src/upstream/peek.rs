//! The few fields of a request body that routing needs, read without parsing the rest:
//! one pass over the top-level object finds where `model`, `stream` and the prompt (the text a
//! cache-aware choice keys on) lie, and only `model` and `stream` are decoded. `splice_model`
//! replaces the `model` value's bytes and leaves every other byte as the client sent it.

use std::ops::Range;

/// What routing reads of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peek {
    pub model: Option<String>,
    pub stream: bool,
    /// Where the value of `model` lies (for the splice).
    model_at: Option<Range<usize>>,
    /// Where the prompt lies: `messages`, `prompt` or `input`, whichever comes first.
    pub prompt_at: Option<Range<usize>>,
}

/// Reads `body`; `None` when it is not a JSON object (the API adapter then says why).
pub fn peek(body: &[u8]) -> Option<Peek> {
    let mut p = Peek { model: None, stream: false, model_at: None, prompt_at: None };
    let mut i = skip_ws(body, 0);
    if body.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(body, i + 1);
    if body.get(i) == Some(&b'}') {
        return Some(p);
    }
    loop {
        let key_end = skip_string(body, i)?;
        let key = &body[i..key_end];
        i = skip_ws(body, key_end);
        if body.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(body, i + 1);
        let end = skip_value(body, start)?;
        match key {
            b"\"model\"" => {
                p.model = serde_json::from_slice::<Option<String>>(&body[start..end]).ok()?;
                p.model_at = Some(start..end);
            }
            b"\"stream\"" => p.stream = &body[start..end] == b"true",
            b"\"messages\"" | b"\"prompt\"" | b"\"input\"" if p.prompt_at.is_none() => p.prompt_at = Some(start..end),
            _ => {}
        }
        i = skip_ws(body, end);
        match body.get(i) {
            Some(b',') => i = skip_ws(body, i + 1),
            Some(b'}') => return (skip_ws(body, i + 1) == body.len()).then_some(p),
            _ => return None,
        }
    }
}

/// `body` with the value of `model` replaced by `name` (a JSON string); every other byte kept.
pub fn splice_model(body: &[u8], peek: &Peek, name: &str) -> Vec<u8> {
    let Some(at) = &peek.model_at else { return body.to_vec() };
    let value = serde_json::Value::String(name.to_string()).to_string();
    let mut out = Vec::with_capacity(body.len() + value.len());
    out.extend_from_slice(&body[..at.start]);
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(&body[at.end..]);
    out
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end of the string starting at `i` (just past its closing quote).
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    loop {
        j += memchr::memchr2(b'"', b'\\', b.get(j..)?)?;
        if b[j] == b'\\' {
            j += 2;
        } else {
            return Some(j + 1);
        }
    }
}

/// The end of the value starting at `i`. Nested values are skipped by bracket depth (strings
/// skipped whole); the upstream checks the rest of the JSON.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let end = b[i..].iter().position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'));
            let end = i + end.unwrap_or(b.len() - i);
            (end > i).then_some(end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `model`, `stream` and the prompt's text, or `None` for a body that is not an object.
    type Read<'a> = Option<(Option<&'a str>, bool, Option<&'a str>)>;

    #[test]
    fn routing_fields_are_read_and_the_rest_skipped() {
        let cases: &[(&str, Read<'_>)] = &[
            (
                r#"{"model":"m","messages":[{"role":"user","content":"a \"}]\" b"}],"stream":true}"#,
                Some((Some("m"), true, Some(r#"[{"role":"user","content":"a \"}]\" b"}]"#))),
            ),
            (r#" { "prompt" : "hi" , "stream" : false , "model" : null } "#, Some((None, false, Some(r#""hi""#)))),
            (r#"{"input":[1,2,{"a":[]}],"max_tokens":5,"n":-1.5e3}"#, Some((None, false, Some(r#"[1,2,{"a":[]}]"#)))),
            (r#"{}"#, Some((None, false, None))),
            (r#"{"model":"\u00e9"}"#, Some((Some("é"), false, None))),
            (r#"[1]"#, None),
            (r#"{"model":"m""#, None),
            (r#"{"model":"m"} x"#, None),
            (r#"{"model":5}"#, None),
            (r#"{"a":[1,2}"#, None),
            (r#"{"a" 1}"#, None),
        ];
        for (body, want) in cases {
            let got = peek(body.as_bytes())
                .map(|p| (p.model.clone(), p.stream, p.prompt_at.clone().map(|r| body[r].to_string())));
            let want = want.map(|(m, s, prompt)| (m.map(str::to_string), s, prompt.map(str::to_string)));
            assert_eq!(got, want, "{body}");
        }
    }

    #[test]
    fn the_model_splice_changes_only_the_model_value() {
        let body = br#"{ "messages": [{"content": "model"}], "model" : "alias", "x": 1.50}"#;
        let p = peek(body).unwrap();
        let out = splice_model(body, &p, "real/\"name\"");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{ "messages": [{"content": "model"}], "model" : "real/\"name\"", "x": 1.50}"#
        );
        let no_model = br#"{"prompt":"p"}"#;
        assert_eq!(splice_model(no_model, &peek(no_model).unwrap(), "m"), no_model.to_vec());
    }
}
