//! `MessagesFormat` on the pipeline's events: the message a client accumulates from the
//! events, block by block as the Anthropic SDK does, is the one-shot body, wherever the
//! engine's output was split; and the events come in Anthropic's order.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::api::test_events;
use crate::pipeline::events::{Collector, Finished};
use crate::pipeline::parse::{CallDelta, ParsedDelta};

const USAGE: Usage = Usage { prompt_tokens: 7, completion_tokens: 11, cached_tokens: 2 };

fn format(one_call: bool) -> MessagesFormat {
    MessagesFormat::new("msg_test".into(), "m".into(), USAGE.prompt_tokens, one_call)
}

/// A choice's events with the pipeline's parse stage (Qwen's syntax) or as plain text.
fn events(pieces: &[&str], parsed: bool) -> Vec<Event> {
    test_events::choice_events(pieces, parsed.then(test_events::qwen_spec).as_ref(), USAGE)
}

/// The named events of a stream.
fn stream_events(events: &[Event], one_call: bool) -> Vec<(&'static str, Value)> {
    let mut f = format(one_call);
    let mut out = SseOut::default();
    for e in events {
        f.stream(e, &mut out);
    }
    f.end_stream(&mut out);
    out.drain()
        .map(|(name, data)| {
            let name = name.expect("every event is named: the Anthropic SDKs drop unnamed ones");
            let v: Value = serde_json::from_str(&data).expect("every payload is JSON");
            assert_eq!(v["type"], name, "the event's name is its type");
            (name, v)
        })
        .collect()
}

/// Anthropic's order: `message_start`, `ping`, blocks with sequential indexes (each started,
/// its deltas, stopped; a thinking block's signature last), `message_delta`, `message_stop`.
fn check_order(events: &[(&str, Value)]) {
    let names: Vec<&str> = events.iter().map(|(n, _)| *n).collect();
    assert_eq!(names[..2], ["message_start", "ping"], "{names:?}");
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"], "{names:?}");
    let start = &events[0].1["message"];
    assert_eq!((&start["content"], &start["stop_reason"]), (&json!([]), &Value::Null));
    assert_eq!(start["usage"]["output_tokens"], 0);
    let (mut next, mut open): (u64, Option<(u64, String)>) = (0, None);
    let mut last_delta = String::new();
    for (name, v) in &events[2..events.len() - 2] {
        let index = v["index"].as_u64().expect("block events carry their index");
        match *name {
            "content_block_start" => {
                assert!(open.is_none(), "a block starts while {open:?} is open");
                assert_eq!(index, next, "indexes are sequential from 0");
                open = Some((index, v["content_block"]["type"].as_str().expect("type").into()));
                next += 1;
            }
            "content_block_delta" => {
                assert_eq!(open.as_ref().map(|o| o.0), Some(index), "a delta outside its block");
                last_delta = v["delta"]["type"].as_str().expect("type").into();
            }
            "content_block_stop" => {
                let (at, kind) = open.take().expect("a stop without a start");
                assert_eq!(at, index);
                if kind == "thinking" {
                    assert_eq!(last_delta, "signature_delta", "a thinking block ends with its signature");
                }
            }
            other => panic!("unexpected event {other} inside the message"),
        }
    }
    assert!(open.is_none(), "a block was never stopped");
}

/// What the SDK accumulates: the `message_start` message, blocks appended and grown by index,
/// tool inputs parsed from their `partial_json`, `message_delta`'s stop and usage over it.
fn accumulate(events: &[(&str, Value)]) -> Value {
    let mut message = events[0].1["message"].clone();
    let mut json_bufs: BTreeMap<usize, String> = BTreeMap::new();
    for (name, v) in events {
        let content = message["content"].as_array_mut().expect("content");
        match *name {
            "content_block_start" => content.push(v["content_block"].clone()),
            "content_block_delta" => {
                let index = v["index"].as_u64().expect("index") as usize;
                let (block, delta) = (&mut content[index], &v["delta"]);
                let mut grow = |field: &str| {
                    let more = delta[field].as_str().expect("delta text");
                    block[field] = Value::String(format!("{}{more}", block[field].as_str().expect("block text")));
                };
                match delta["type"].as_str().expect("delta type") {
                    "text_delta" => grow("text"),
                    "thinking_delta" => grow("thinking"),
                    "signature_delta" => block["signature"] = delta["signature"].clone(),
                    "input_json_delta" => {
                        json_bufs.entry(index).or_default().push_str(delta["partial_json"].as_str().expect("json"))
                    }
                    other => panic!("unknown delta {other}"),
                }
            }
            "message_delta" => {
                message["stop_reason"] = v["delta"]["stop_reason"].clone();
                message["stop_sequence"] = v["delta"]["stop_sequence"].clone();
                for (k, n) in v["usage"].as_object().expect("usage") {
                    message["usage"][k] = n.clone();
                }
            }
            _ => {}
        }
    }
    for (index, buf) in json_bufs {
        let buf = buf.trim();
        message["content"][index]["input"] =
            serde_json::from_str(buf).unwrap_or_else(|_| Value::String(buf.to_string()));
    }
    message
}

fn one_shot(events: Vec<Event>, one_call: bool) -> Value {
    let mut collector = Collector::default();
    for e in events {
        collector.add(e);
    }
    serde_json::from_str(&format(one_call).body(&collector.choices, &collector.usage)).expect("JSON body")
}

/// Call ids are minted per parse: compared by shape, the rest exactly.
fn without_ids(mut message: Value) -> Value {
    for block in message["content"].as_array_mut().expect("content") {
        if block["type"] == "tool_use" {
            assert!(block["id"].as_str().expect("id").starts_with("toolu_"), "{block}");
            block["id"] = json!("");
        }
    }
    message
}

fn streamed(events: &[Event], one_call: bool) -> Value {
    let named = stream_events(events, one_call);
    check_order(&named);
    without_ids(accumulate(&named))
}

#[test]
fn streamed_events_add_up_to_the_one_shot_body_at_every_split() {
    let usage = json!({"input_tokens": 7, "output_tokens": 11, "cache_read_input_tokens": 2,
                       "cache_creation_input_tokens": 0});
    for parsed in [false, true] {
        let whole = without_ids(one_shot(events(&[test_events::QWEN_TEXT], parsed), false));
        let (content, stop) = if parsed {
            let thinking = json!({"type": "thinking", "thinking": "plan \"a\"\n", "signature": ""});
            let call = json!({"type": "tool_use", "id": "", "name": "get_weather", "input": {"city": "Paris"}});
            (json!([thinking, {"type": "text", "text": "Hello, wörld 🎉 "}, call]), "tool_use")
        } else {
            (json!([{"type": "text", "text": test_events::QWEN_TEXT}]), "end_turn")
        };
        let expected = json!({"id": "msg_test", "type": "message", "role": "assistant", "model": "m",
            "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage});
        assert_eq!(whole, expected, "parsed {parsed}");
        for split in (0..=test_events::QWEN_TEXT.len()).filter(|&i| test_events::QWEN_TEXT.is_char_boundary(i)) {
            let pieces = [&test_events::QWEN_TEXT[..split], &test_events::QWEN_TEXT[split..]];
            let stream = streamed(&events(&pieces, parsed), false);
            assert_eq!(stream, without_ids(one_shot(events(&pieces, parsed), false)), "parsed {parsed}, split {split}");
            assert_eq!(stream, whole, "parsed {parsed}, split {split}");
        }
    }
}

#[test]
fn a_plain_stream_is_exactly_these_events() {
    let events = stream_events(&events(&["Hi", " there"], false), false);
    let got: Vec<(&str, String)> = events.iter().map(|(n, v)| (*n, v.to_string())).collect();
    let usage = |cached: u64, output: u64| {
        format!(
            "{{\"input_tokens\":7,\"output_tokens\":{output},\"cache_read_input_tokens\":{cached},\
             \"cache_creation_input_tokens\":0}}"
        )
    };
    let delta = |i: u32, text: &str| {
        format!(
            "{{\"type\":\"content_block_delta\",\"index\":{i},\"delta\":{{\"type\":\"text_delta\",\
             \"text\":\"{text}\"}}}}"
        )
    };
    let expected = vec![
        (
            "message_start",
            format!(
                "{{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_test\",\"type\":\"message\",\
                 \"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\
                 \"stop_sequence\":null,\"usage\":{}}}}}",
                usage(0, 0)
            ),
        ),
        ("ping", "{\"type\":\"ping\"}".to_string()),
        (
            "content_block_start",
            "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}".into(),
        ),
        ("content_block_delta", delta(0, "Hi")),
        ("content_block_delta", delta(0, " there")),
        ("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}".into()),
        (
            "message_delta",
            format!(
                "{{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\",\
                 \"stop_sequence\":null}},\"usage\":{}}}",
                usage(2, 11)
            ),
        ),
        ("message_stop", "{\"type\":\"message_stop\"}".into()),
    ];
    // The payloads are compared as written (key order included), through serde's rendering.
    let expected: Vec<(&str, String)> =
        expected.into_iter().map(|(n, s)| (n, serde_json::from_str::<Value>(&s).expect(&s).to_string())).collect();
    assert_eq!(got, expected);
}

fn finished(reason: FinishReason, stop_reason: Option<StopReason>, tool_calls: bool) -> Event {
    Event::Finished(Finished { choice: 0, finish: Finish { reason, stop_reason }, tool_calls, usage: None })
}

fn delta(output: ParsedDelta) -> Event {
    Event::Delta(Delta { choice: 0, output, logprobs: Vec::new(), usage: None })
}

#[test]
fn stop_reasons() {
    let text = || ParsedDelta::text("x".into());
    let cases = [
        (finished(FinishReason::Stop, None, false), "end_turn", Value::Null),
        (finished(FinishReason::Stop, Some(StopReason::TokenId(5)), false), "end_turn", Value::Null),
        (finished(FinishReason::Stop, Some(StopReason::Text("END".into())), false), "stop_sequence", json!("END")),
        (finished(FinishReason::Length, None, false), "max_tokens", Value::Null),
        (finished(FinishReason::Stop, None, true), "tool_use", Value::Null),
        (
            finished(FinishReason::Repetition, Some(StopReason::Text("repetition_detected".into())), false),
            "end_turn",
            Value::Null,
        ),
    ];
    for (finish, reason, sequence) in cases {
        let events = vec![Event::Start { choice: 0 }, delta(text()), finish.clone(), Event::Usage(USAGE)];
        for message in [one_shot(events.clone(), false), streamed(&events, false)] {
            assert_eq!((&message["stop_reason"], &message["stop_sequence"]), (&json!(reason), &sequence), "{finish:?}");
        }
    }
    let aborted = vec![Event::Start { choice: 0 }, finished(FinishReason::Abort, None, false), Event::Usage(USAGE)];
    assert_eq!(one_shot(aborted.clone(), false)["stop_reason"], Value::Null);
    assert_eq!(streamed(&aborted, false)["stop_reason"], Value::Null);
}

fn call(index: usize, first: Option<&str>, arguments: &str) -> CallDelta {
    CallDelta {
        index,
        id: first.map(|_| format!("call_{index}")),
        name: first.map(str::to_string),
        arguments: arguments.into(),
    }
}

/// Two calls, the second's arguments unparsable, after text.
fn two_calls() -> Vec<Event> {
    let calls = |list: Vec<CallDelta>| ParsedDelta { calls: list, ..Default::default() };
    vec![
        Event::Start { choice: 0 },
        delta(ParsedDelta::text("Checking.".into())),
        delta(calls(vec![call(0, Some("get_weather"), "{\"city\": "), call(0, None, "\"Paris\"}")])),
        delta(calls(vec![call(1, Some("get_time"), "{not json"), call(1, None, "")])),
        finished(FinishReason::Stop, None, true),
        Event::Usage(USAGE),
    ]
}

#[test]
fn tool_calls_become_tool_use_blocks() {
    let message = one_shot(two_calls(), false);
    assert_eq!(
        message["content"],
        json!([
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_0", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": "{not json"}
        ])
    );
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(without_ids(message), streamed(&two_calls(), false));
    // disable_parallel_tool_use: the first call only, streamed or not.
    let first = one_shot(two_calls(), true);
    assert_eq!(first["content"].as_array().map(Vec::len), Some(2), "{first}");
    assert_eq!(first["content"][1]["name"], "get_weather");
    assert_eq!(first["stop_reason"], "tool_use");
    assert_eq!(without_ids(first), streamed(&two_calls(), true));
}

#[test]
fn an_answer_without_output_has_one_empty_text_block() {
    let events = vec![Event::Start { choice: 0 }, finished(FinishReason::Length, None, false), Event::Usage(USAGE)];
    let message = one_shot(events.clone(), false);
    assert_eq!(message["content"], json!([{"type": "text", "text": ""}]));
    assert_eq!(streamed(&events, false), message);
}

#[test]
fn tool_inputs() {
    for (arguments, input) in [
        ("{\"a\": [1, {\"b\": null}]}", "{\"a\": [1, {\"b\": null}]}"),
        ("  {}\n", "{}"),
        ("", "{}"),
        ("{\"a\":", "\"{\\\"a\\\":\""),
        ("[1, 2]", "[1, 2]"),
    ] {
        let mut out = String::new();
        push_input(&mut out, arguments);
        assert_eq!(out, input, "{arguments:?}");
    }
    assert_eq!(tool_use_id("call_0a1b"), "toolu_0a1b");
    assert_eq!(tool_use_id("functions.get_weather:0"), "functions.get_weather:0");
}

#[test]
fn an_error_mid_stream_is_an_error_event_in_anthropics_shape() {
    let mut f = format(false);
    let mut out = SseOut::default();
    f.stream(&Event::Start { choice: 0 }, &mut out);
    out.clear();
    let e = f.client_error(&ApiError::internal("engine died"));
    f.stream_error(&e, &mut out);
    let events: Vec<_> = out.drain().collect();
    assert_eq!(
        events,
        vec![(
            Some("error"),
            "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"engine died\"}}".into()
        )]
    );
}
