//! OpenAI Responses events (`POST /v1/responses`), read as vLLM's `openai-responses` backend
//! reads them. Output chunks: `response.output_text.delta` and `response.reasoning_text.delta`
//! (reasoning, counted as output as the chat backend counts it), even an empty one; the
//! `.done` events repeat the text and are not output, nor are tool-call argument deltas.
//! `response.completed` and `response.incomplete` (a length limit: a success) carry the usage
//! (`response.usage.input_tokens`, `output_tokens`) and end the stream; `response.failed`, `error`
//! and any event with an `error` object fail the request with their message. Every other event
//! means nothing; the kind of an event is its data's `type` (the `event:` line repeats it).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{stream_error, undecodable, untold_error, Reading};
use crate::record::{Failure, FailureKind};

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Loose<'a>>,
    #[serde(default)]
    response: Option<Response>,
    /// An `error` event's own message.
    #[serde(default)]
    message: Option<serde_json::Value>,
    /// An error object, as some servers send it (with or without a type).
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u32>,
    #[serde(default)]
    output_tokens: Option<u32>,
}

/// What one event means; its output text goes to `text`.
pub fn read(data: &[u8], text: &mut String) -> Result<Reading, Failure> {
    let event: Event = serde_json::from_slice(data).map_err(|e| undecodable(data, &e))?;
    if let Some(error) = event.error.as_ref().filter(|e| !e.is_null()) {
        return Err(stream_error(error));
    }
    let mut reading = Reading::default();
    match event.kind.as_deref().unwrap_or("") {
        "response.output_text.delta" | "response.reasoning_text.delta" => {
            if let Some(Loose::Text(delta)) = &event.delta {
                text.push_str(delta);
            }
            reading.output = true;
        }
        "response.completed" | "response.incomplete" => {
            let usage = event.response.as_ref().and_then(|r| r.usage.as_ref());
            reading.prompt_tokens = usage.and_then(|u| u.input_tokens);
            reading.completion_tokens = usage.and_then(|u| u.output_tokens);
            reading.end = true;
        }
        "response.failed" => {
            let error = event.response.as_ref().and_then(|r| r.error.as_ref()).filter(|e| !e.is_null());
            return Err(error.map_or_else(|| untold_error("response.failed"), stream_error));
        }
        "error" => {
            return Err(match &event.message {
                Some(serde_json::Value::String(m)) => Failure::new(FailureKind::StreamError, m.clone()),
                _ => untold_error("error"),
            })
        }
        _ => {}
    }
    Ok(reading)
}

/// A field that is text in the events read here and may be anything in others (a future
/// event's `delta` object must not fail the request).
enum Loose<'a> {
    Text(Cow<'a, str>),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Loose<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LooseVisitor)
    }
}

struct LooseVisitor;

impl<'de> Visitor<'de> for LooseVisitor {
    type Value = Loose<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Loose<'de>, E> {
        Ok(Loose::Text(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Loose<'de>, E> {
        Ok(Loose::Text(Cow::Owned(v.to_string())))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Loose<'de>, E> {
        Ok(Loose::Other)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Loose<'de>, E> {
        Ok(Loose::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Loose<'de>, E> {
        Ok(Loose::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Loose<'de>, E> {
        Ok(Loose::Other)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Loose<'de>, E> {
        Ok(Loose::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Loose<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Loose::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Loose<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Loose::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::tests::{check_failures, check_readings, framed, read_at_every_split, Want};
    use crate::chunk::Dialect;

    #[test]
    fn what_each_event_means() {
        let cases: &[(&str, Want)] = &[
            (
                r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response",
                   "status":"in_progress","output":[],"usage":null,"error":null}}"#,
                (false, "", None, None, false),
            ),
            (
                r#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,
                   "content_index":0,"delta":"Hi","logprobs":[]}"#,
                (true, "Hi", None, None, false),
            ),
            (r#"{"type":"response.output_text.delta","delta":""}"#, (true, "", None, None, false)),
            (r#"{"type":"response.reasoning_text.delta","delta":"hm"}"#, (true, "hm", None, None, false)),
            (r#"{"type":"response.output_text.done","text":"Hi there"}"#, (false, "", None, None, false)),
            (r#"{"type":"response.reasoning_text.done","text":"hm"}"#, (false, "", None, None, false)),
            (
                r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":"{\"a\":"}"#,
                (false, "", None, None, false),
            ),
            (r#"{"type":"response.reasoning_summary.delta","delta":{"text":"x"}}"#, (false, "", None, None, false)),
            (
                r#"{"type":"response.completed","response":{"status":"completed","output":[],
                   "usage":{"input_tokens":17,"input_tokens_details":{"cached_tokens":0},"output_tokens":4,
                   "output_tokens_details":{"reasoning_tokens":1},"total_tokens":21}}}"#,
                (false, "", Some(17), Some(4), true),
            ),
            (
                r#"{"type":"response.incomplete","response":{"status":"incomplete",
                   "incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":17,"output_tokens":16}}}"#,
                (false, "", Some(17), Some(16), true),
            ),
            (r#"{"type":"response.completed","response":{"status":"completed"}}"#, (false, "", None, None, true)),
            (r#"{"delta":"no type"}"#, (false, "", None, None, false)),
        ];
        check_readings(read, cases);
    }

    #[test]
    fn errors_fail_the_request_with_their_message() {
        let cases: &[(&str, FailureKind, &str)] = &[
            (
                r#"{"type":"error","code":"server_error","message":"boom","param":null}"#,
                FailureKind::StreamError,
                "boom",
            ),
            (r#"{"error":{"message":"boom","code":500}}"#, FailureKind::StreamError, "boom"),
            (
                r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"engine died"}}}"#,
                FailureKind::StreamError,
                "engine died",
            ),
            (
                r#"{"type":"response.failed","response":{"status":"failed","error":null}}"#,
                FailureKind::StreamError,
                "the response.failed event carried no message",
            ),
            (r#"{"type":"error"}"#, FailureKind::StreamError, "the error event carried no message"),
            (r#"{"type":"response.output_text.delta","delta":"#, FailureKind::Protocol, "undecodable"),
        ];
        check_failures(read, cases);
    }

    /// A stream as vLLM and OpenAI send one: lifecycle events, reasoning, text (with a character
    /// of three bytes), a tool call, a keep-alive comment, one event without its `event:` line;
    /// events after the terminal one are not read.
    #[test]
    fn a_whole_stream_at_every_split() {
        let mut stream = framed(&[
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}"#,
            r#"{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}"#,
            r#"{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}}"#,
            r#"{"type":"response.reasoning_text.delta","sequence_number":3,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"Think"}"#,
            r#"{"type":"response.reasoning_text.done","sequence_number":4,"item_id":"rs_1","output_index":0,"content_index":0,"text":"Think"}"#,
            r#"{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}}"#,
            r#"{"type":"response.output_item.added","sequence_number":6,"output_index":1,"item":{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]}}"#,
            r#"{"type":"response.content_part.added","sequence_number":7,"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}"#,
        ]);
        stream.extend_from_slice(b": keep-alive\n\n");
        stream.extend_from_slice(
            br#"data: {"type":"response.output_text.delta","sequence_number":8,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Sky ","logprobs":[]}"#,
        );
        stream.extend_from_slice(b"\n\n");
        stream.extend_from_slice(&framed(&[
            r#"{"type":"response.output_text.delta","sequence_number":9,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"中","logprobs":[]}"#,
            r#"{"type":"response.output_text.done","sequence_number":10,"item_id":"msg_1","output_index":1,"content_index":0,"text":"Sky 中","logprobs":[]}"#,
            r#"{"type":"response.content_part.done","sequence_number":11,"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"Sky 中","annotations":[]}}"#,
            r#"{"type":"response.output_item.done","sequence_number":12,"output_index":1,"item":{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Sky 中","annotations":[]}]}}"#,
            r#"{"type":"response.function_call_arguments.delta","sequence_number":13,"item_id":"fc_1","output_index":2,"delta":"{\"q\":1}"}"#,
            r#"{"type":"response.function_call_arguments.done","sequence_number":14,"item_id":"fc_1","output_index":2,"arguments":"{\"q\":1}"}"#,
            r#"{"type":"response.completed","sequence_number":15,"response":{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Sky 中","annotations":[]}]}],"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":8,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":13}}}"#,
            r#"{"type":"response.output_text.delta","sequence_number":16,"delta":"late"}"#,
        ]));
        let (rec, ended) = read_at_every_split(Dialect::OpenAiResponses, &stream);
        assert_eq!(ended, Ok(true));
        assert_eq!(rec.text, "ThinkSky 中");
        let ends: Vec<u32> = rec.chunks.iter().map(|c| c.text_end).collect();
        assert_eq!(ends, [5, 9, 12]);
        assert!(rec.chunks.iter().all(|c| c.completion_tokens_cum.is_none()));
        assert_eq!((rec.usage_prompt_tokens, rec.usage_completion_tokens), (Some(5), Some(8)));
    }

    #[test]
    fn a_failed_response_after_output() {
        let stream = framed(&[
            r#"{"type":"response.output_text.delta","delta":"a"}"#,
            r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"engine died"}}}"#,
        ]);
        let (rec, ended) = read_at_every_split(Dialect::OpenAiResponses, &stream);
        assert_eq!(rec.chunks.len(), 1);
        assert_eq!(ended.map_err(|f| (f.kind, f.message)), Err((FailureKind::StreamError, "engine died".into())));
    }
}
