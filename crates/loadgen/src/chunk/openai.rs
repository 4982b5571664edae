//! OpenAI completions and chat completions chunks. Output chunks:
//!
//! - chat: non-empty `content`, `reasoning`/`reasoning_content`, `tool_calls` or
//!   `function_call`; an empty `content` counts only without `role` and before the finish
//!   (a token that decodes to nothing), so the opening role chunk never counts;
//! - completions: non-empty `text`, or an empty one before the finish;
//! - usage-only chunks (`choices: []`) and finish-only chunks update counts, never times.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::{stream_error, undecodable, Reading};
use crate::record::Failure;

#[derive(Deserialize)]
struct StreamChunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    finish_reason: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default)]
    role: Option<IgnoredAny>,
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<IgnoredAny>,
    #[serde(default)]
    function_call: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u32>,
    #[serde(default)]
    completion_tokens: Option<u32>,
}

/// What one chunk means; its output text goes to `text`.
pub fn read(data: &[u8], text: &mut String) -> Result<Reading, Failure> {
    let chunk: StreamChunk = serde_json::from_slice(data).map_err(|e| undecodable(data, &e))?;
    if let Some(error) = &chunk.error {
        return Err(stream_error(error));
    }
    let mut reading = Reading::default();
    if let Some(usage) = &chunk.usage {
        reading.prompt_tokens = usage.prompt_tokens;
        reading.completion_tokens = usage.completion_tokens;
    }
    if let Some(choice) = chunk.choices.as_ref().and_then(|c| c.first()) {
        reading.output = append_output(choice, text);
    }
    Ok(reading)
}

/// Appends the choice's output text; true when the chunk carries output.
fn append_output(choice: &Choice, text: &mut String) -> bool {
    let open = choice.finish_reason.is_none();
    if let Some(t) = &choice.text {
        text.push_str(t);
        return !t.is_empty() || open;
    }
    let Some(d) = &choice.delta else { return false };
    let mut carries = d.tool_calls.is_some() || d.function_call.is_some();
    for part in [&d.reasoning, &d.reasoning_content, &d.content].into_iter().flatten() {
        text.push_str(part);
        carries |= !part.is_empty();
    }
    carries || (d.content.as_deref() == Some("") && d.role.is_none() && open)
}

#[cfg(test)]
mod tests {
    use crate::chunk::{apply_event, Dialect};
    use crate::record::{Chunk, FailureKind, RequestRecord};

    fn apply(data: &[u8], time_ns: u64, rec: &mut RequestRecord) -> Result<bool, crate::record::Failure> {
        apply_event(Dialect::OpenAi, data, time_ns, rec)
    }

    #[test]
    fn which_chunks_carry_output() {
        let cases: &[(&str, bool, &str)] = &[
            (r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#, false, ""),
            (r#"{"choices":[{"delta":{"role":"assistant"}}]}"#, false, ""),
            (r#"{"choices":[{"delta":{"role":"assistant","content":"Hi"}}]}"#, true, "Hi"),
            (r#"{"choices":[{"delta":{"content":"x"},"finish_reason":null}]}"#, true, "x"),
            (r#"{"choices":[{"delta":{"content":""},"finish_reason":null}]}"#, true, ""),
            (r#"{"choices":[{"delta":{"content":""},"finish_reason":"stop"}]}"#, false, ""),
            (r#"{"choices":[{"delta":{"content":"end"},"finish_reason":"stop"}]}"#, true, "end"),
            (r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#, false, ""),
            (r#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#, true, "hm"),
            (r#"{"choices":[{"delta":{"reasoning":"hm","content":null}}]}"#, true, "hm"),
            (r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}"#, true, ""),
            (r#"{"choices":[{"text":"ab","finish_reason":null}]}"#, true, "ab"),
            (r#"{"choices":[{"text":"","finish_reason":null}]}"#, true, ""),
            (r#"{"choices":[{"text":"","finish_reason":"length"}]}"#, false, ""),
            (r#"{"choices":[{"text":"z","finish_reason":"length"}]}"#, true, "z"),
            (r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#, false, ""),
            (r#"{"choices":null}"#, false, ""),
            (r#"{"choices":[{"delta":{"content":"\u00e9\n"}}]}"#, true, "é\n"),
        ];
        for (data, carries, text) in cases {
            let mut rec = RequestRecord::default();
            assert_eq!(apply(data.as_bytes(), 5, &mut rec), Ok(false), "{data}");
            assert_eq!(rec.chunks.len(), usize::from(*carries), "{data}");
            assert_eq!(rec.text, *text, "{data}");
        }
    }

    #[test]
    fn usage_done_and_errors() {
        let mut rec = RequestRecord::default();
        let chunk = r#"{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":9,"completion_tokens":2}}"#;
        assert_eq!(apply(chunk.as_bytes(), 7, &mut rec), Ok(false));
        assert_eq!(rec.chunks, [Chunk { time_ns: 7, text_end: 1, completion_tokens_cum: Some(2) }]);
        assert_eq!((rec.usage_prompt_tokens, rec.usage_completion_tokens), (Some(9), Some(2)));
        let final_usage = r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3}}"#;
        assert_eq!(apply(final_usage.as_bytes(), 8, &mut rec), Ok(false));
        assert_eq!(rec.usage_completion_tokens, Some(3));
        assert_eq!(apply(b"[DONE]", 9, &mut rec), Ok(true));
        let err = apply(br#"{"error":{"message":"engine died","type":"x"}}"#, 9, &mut rec);
        assert_eq!(err.map_err(|f| (f.kind, f.message)), Err((FailureKind::StreamError, "engine died".into())));
        let bad = apply(b"{not json", 9, &mut rec);
        assert_eq!(bad.map_err(|f| f.kind), Err(FailureKind::Protocol));
    }
}
