//! Anthropic Messages events (`POST /v1/messages`). Output chunks: `content_block_delta` with
//! a `text_delta` or a `thinking_delta` (reasoning, counted as output as the chat backend
//! counts it), even an empty one. `input_json_delta` (tool input) and `signature_delta` are
//! not output. `message_start` gives the prompt tokens (`message.usage.input_tokens`),
//! `message_delta` the cumulative output tokens (`usage.output_tokens`), `message_stop` ends
//! the stream and an `error` event (any event with an `error` object) fails the request with
//! its message. `ping`, block starts and stops, and any event this client does not know, mean
//! nothing; the kind of an event is its data's `type` (the `event:` line repeats it).

use std::borrow::Cow;

use serde::Deserialize;

use super::{stream_error, undecodable, untold_error, Reading};
use crate::record::Failure;

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    message: Option<Message>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

/// A `content_block_delta`'s delta (typed), or a `message_delta`'s (stop reason, untyped).
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    usage: Option<Usage>,
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
        "content_block_delta" => {
            let Some(delta) = &event.delta else { return Ok(reading) };
            let piece = match delta.kind.as_deref() {
                Some("text_delta") => &delta.text,
                Some("thinking_delta") => &delta.thinking,
                _ => return Ok(reading),
            };
            text.push_str(piece.as_deref().unwrap_or(""));
            reading.output = true;
        }
        "message_start" => {
            let usage = event.message.as_ref().and_then(|m| m.usage.as_ref());
            reading.prompt_tokens = usage.and_then(|u| u.input_tokens);
        }
        "message_delta" => {
            reading.prompt_tokens = event.usage.as_ref().and_then(|u| u.input_tokens);
            reading.completion_tokens = event.usage.as_ref().and_then(|u| u.output_tokens);
        }
        "message_stop" => reading.end = true,
        "error" => return Err(untold_error("error")),
        _ => {}
    }
    Ok(reading)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::tests::{check_failures, check_readings, framed, read_at_every_split, Want};
    use crate::chunk::Dialect;
    use crate::record::{Chunk, FailureKind};

    #[test]
    fn what_each_event_means() {
        let cases: &[(&str, Want)] = &[
            (
                r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m",
                   "content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#,
                (false, "", Some(25), None, false),
            ),
            (r#"{"type":"ping"}"#, (false, "", None, None, false)),
            (
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                (false, "", None, None, false),
            ),
            (
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
                (true, "Hi", None, None, false),
            ),
            (
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}"#,
                (true, "", None, None, false),
            ),
            (
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
                (true, "hm", None, None, false),
            ),
            (
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
                (false, "", None, None, false),
            ),
            (
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
                (false, "", None, None, false),
            ),
            (r#"{"type":"content_block_stop","index":0}"#, (false, "", None, None, false)),
            (
                r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},
                   "usage":{"output_tokens":16}}"#,
                (false, "", None, Some(16), false),
            ),
            (
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":9,"output_tokens":3}}"#,
                (false, "", Some(9), Some(3), false),
            ),
            (r#"{"type":"message_stop"}"#, (false, "", None, None, true)),
            (
                r#"{"type":"some_future_event","delta":{"type":"text_delta","text":"x"}}"#,
                (false, "", None, None, false),
            ),
        ];
        check_readings(read, cases);
    }

    #[test]
    fn errors_fail_the_request_with_their_message() {
        let cases: &[(&str, FailureKind, &str)] = &[
            (
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                FailureKind::StreamError,
                "Overloaded",
            ),
            (r#"{"error":{"type":"api_error","message":"engine died"}}"#, FailureKind::StreamError, "engine died"),
            (r#"{"type":"error"}"#, FailureKind::StreamError, "the error event carried no message"),
            (r#"{"type":"content_block_delta","delta":"#, FailureKind::Protocol, ""),
        ];
        check_failures(read, cases);
    }

    /// A stream as the API sends one: thinking, text (with a character of two bytes), a tool
    /// call, pings; events after `message_stop` are not read.
    #[test]
    fn a_whole_stream_at_every_split() {
        let stream = framed(&[
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me"}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":" think."}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Caf"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"é!"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Oslo\"}"}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}"#,
            r#"{"type":"message_stop"}"#,
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"late"}}"#,
        ]);
        let (rec, ended) = read_at_every_split(Dialect::AnthropicMessages, &stream);
        assert_eq!(ended, Ok(true));
        assert_eq!(rec.text, "Let me think.Café!");
        let ends: Vec<u32> = rec.chunks.iter().map(|c| c.text_end).collect();
        assert_eq!(ends, [6, 13, 16, 19]);
        assert!(rec.chunks.iter().all(|c| c.completion_tokens_cum.is_none()));
        assert_eq!((rec.usage_prompt_tokens, rec.usage_completion_tokens), (Some(12), Some(9)));
    }

    #[test]
    fn an_error_event_mid_stream() {
        let stream = framed(&[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}"#,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ]);
        let (rec, ended) = read_at_every_split(Dialect::AnthropicMessages, &stream);
        assert_eq!(rec.chunks, [Chunk { time_ns: 0, text_end: 1, completion_tokens_cum: None }]);
        assert_eq!(ended.map_err(|f| (f.kind, f.message)), Err((FailureKind::StreamError, "Overloaded".into())));
    }
}
