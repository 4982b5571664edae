//! `ResponsesFormat` on the pipeline's events: what a streaming client accumulates (items by
//! output index, text and argument deltas, the response in the terminal event) is the one-shot
//! body, wherever the engine's output was split; the event sequence is well formed.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::api::openai::responses::object::Echo;
use crate::api::test_events;
use crate::pipeline::events::Collector;

const USAGE: Usage = Usage { prompt_tokens: 7, completion_tokens: 11, cached_tokens: 2 };

fn format(parallel_tool_calls: bool) -> ResponsesFormat {
    let echo = Echo::new(&[("model", json!("m")), ("tools", json!([]))]);
    let response = Response { id: "resp_test".into(), created_at: 1_700_000_000, echo };
    // Words stand in for tokens.
    ResponsesFormat::new(response, Box::new(|t| t.split_whitespace().count() as u64), parallel_tool_calls, None)
}

/// A choice's events through Qwen's parsers or as plain text, ending for `reason`.
fn events(pieces: &[&str], parsed: bool, reason: FinishReason) -> Vec<Event> {
    let mut events = test_events::choice_events(pieces, parsed.then(test_events::qwen_spec).as_ref(), USAGE);
    for e in &mut events {
        if let Event::Finished(f) = e {
            f.finish.reason = reason;
        }
    }
    events
}

/// The stream's events as (SSE event name, JSON), checked for framing: the name is the JSON
/// `type`, sequence numbers count from 0, every `.added` has its `.done`.
fn stream_events(format: &mut ResponsesFormat, events: &[Event]) -> Vec<(String, Value)> {
    let mut out = SseOut::default();
    for e in events {
        format.stream(e, &mut out);
    }
    format.end_stream(&mut out);
    let parsed: Vec<(String, Value)> = out
        .drain()
        .map(|(name, data)| {
            (name.expect("every event is named").to_string(), serde_json::from_str(&data).expect("JSON"))
        })
        .collect();
    let mut open: BTreeMap<String, usize> = BTreeMap::new();
    for (k, (name, v)) in parsed.iter().enumerate() {
        assert_eq!(v["type"], name.as_str(), "{v}");
        assert_eq!(v["sequence_number"], k, "{v}");
        let key = format!("{}/{}", v["output_index"], v["content_index"]);
        if let Some(kind) = name.strip_suffix(".added") {
            *open.entry(format!("{kind}:{key}")).or_default() += 1;
        }
        if let Some(kind) =
            name.strip_suffix(".done").filter(|k| k.ends_with("output_item") || k.ends_with("content_part"))
        {
            let entry = open.get_mut(&format!("{kind}:{key}")).unwrap_or_else(|| panic!("{name} without .added: {v}"));
            *entry -= 1;
        }
    }
    assert!(open.values().all(|&n| n == 0), "unbalanced: {open:?}");
    parsed
}

/// An output item as a client compares it: type, id, text (or arguments), name and call id.
type Flat = (String, String, String, String, String);

fn flat(item: &Value) -> Flat {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let text = match item["type"].as_str() {
        Some("function_call") => s(&item["arguments"]),
        _ => item["content"].as_array().map_or(String::new(), |parts| parts.iter().map(|p| s(&p["text"])).collect()),
    };
    (s(&item["type"]), s(&item["id"]), text, s(&item["name"]), s(&item["call_id"]))
}

/// What a client accumulates from the events: the items by output index, and the terminal
/// event's response.
fn accumulate(events: &[(String, Value)]) -> (Vec<Flat>, Value) {
    let mut items: BTreeMap<u64, Flat> = BTreeMap::new();
    let mut terminal = Value::Null;
    for (name, v) in events {
        let index = v["output_index"].as_u64().unwrap_or(u64::MAX);
        match name.as_str() {
            "response.output_item.added" => {
                assert!(items.insert(index, flat(&v["item"])).is_none(), "output index {index} added twice");
                assert_eq!(v["item"]["status"], "in_progress");
            }
            "response.output_text.delta"
            | "response.reasoning_text.delta"
            | "response.function_call_arguments.delta" => {
                let item = items.get_mut(&index).expect("a delta for an added item");
                assert_eq!(v["item_id"], item.1.as_str(), "item_id is the item's id on every event");
                item.2.push_str(v["delta"].as_str().expect("delta"));
            }
            "response.output_text.done" | "response.reasoning_text.done" => {
                assert_eq!(v["text"].as_str(), Some(items[&index].2.as_str()));
            }
            "response.function_call_arguments.done" => {
                assert_eq!(v["arguments"].as_str(), Some(items[&index].2.as_str()));
            }
            "response.output_item.done" => assert_eq!(flat(&v["item"]), items[&index]),
            "response.completed" | "response.incomplete" => terminal = v["response"].clone(),
            _ => {}
        }
    }
    (items.into_values().collect(), terminal)
}

fn one_shot(events: Vec<Event>, parallel_tool_calls: bool) -> Value {
    let mut collector = Collector::default();
    for e in events {
        collector.add(e);
    }
    let body = format(parallel_tool_calls).body(&collector.choices, &collector.usage);
    serde_json::from_str(&body).expect("JSON body")
}

/// Item and call ids are minted per response: checked for shape, then cleared.
fn without_ids(mut response: Value) -> Value {
    for item in response["output"].as_array_mut().into_iter().flatten() {
        let prefix = match item["type"].as_str() {
            Some("reasoning") => "rs_",
            Some("message") => "msg_",
            _ => "fc_",
        };
        assert!(item["id"].as_str().is_some_and(|id| id.starts_with(prefix)), "{item}");
        item["id"] = Value::Null;
        if item["type"] == "function_call" {
            assert!(item["call_id"].as_str().is_some_and(|id| id.starts_with("call_")), "{item}");
            item["call_id"] = Value::Null;
        }
    }
    response
}

#[test]
fn streamed_events_add_up_to_the_one_shot_body_at_every_split() {
    let text = test_events::QWEN_TEXT;
    for parsed in [false, true] {
        for reason in [FinishReason::Stop, FinishReason::Length] {
            let whole = without_ids(one_shot(events(&[text], parsed, reason), true));
            for split in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
                let pieces = [&text[..split], &text[split..]];
                let streamed = stream_events(&mut format(true), &events(&pieces, parsed, reason));
                let (items, terminal) = accumulate(&streamed);
                let final_items: Vec<Flat> = terminal["output"].as_array().expect("output").iter().map(flat).collect();
                assert_eq!(items, final_items, "parsed {parsed}, split {split}");
                let at = format!("parsed {parsed}, {reason:?}, split {split}");
                assert_eq!(without_ids(terminal), whole, "{at}");
                assert_eq!(without_ids(one_shot(events(&pieces, parsed, reason), true)), whole, "{at}");
            }
        }
    }
}

#[test]
fn the_body_has_the_items_status_and_usage() {
    let body = one_shot(events(&[test_events::QWEN_TEXT], true, FinishReason::Stop), true);
    let kinds: Vec<&str> = body["output"].as_array().unwrap().iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["reasoning", "message", "function_call"]);
    assert_eq!(body["output"][0]["content"], json!([{"type": "reasoning_text", "text": "plan \"a\"\n"}]));
    assert_eq!(body["output"][0]["summary"], json!([]));
    assert_eq!(
        body["output"][1]["content"],
        json!([{"type": "output_text", "text": "Hello, wörld 🎉 ", "annotations": [], "logprobs": []}])
    );
    assert_eq!(
        (body["output"][2]["name"].as_str(), body["output"][2]["status"].as_str()),
        (Some("get_weather"), Some("completed"))
    );
    assert_eq!(
        serde_json::from_str::<Value>(body["output"][2]["arguments"].as_str().unwrap()).unwrap(),
        json!({"city": "Paris"})
    );
    assert_eq!(
        (body["id"].as_str(), body["object"].as_str(), body["status"].as_str()),
        (Some("resp_test"), Some("response"), Some("completed"))
    );
    assert_eq!(
        (body["error"].clone(), body["incomplete_details"].clone(), body["model"].clone()),
        (Value::Null, Value::Null, json!("m"))
    );
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 7, "input_tokens_details": {"cached_tokens": 2}, "output_tokens": 11,
               "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 18})
    );
    let cut = one_shot(events(&["Hello there"], false, FinishReason::Length), true);
    assert_eq!(
        (cut["status"].as_str(), cut["incomplete_details"].clone()),
        (Some("incomplete"), json!({"reason": "max_output_tokens"}))
    );
    assert_eq!(cut["output"][0]["status"], "incomplete");
    assert_eq!(cut["usage"]["output_tokens_details"]["reasoning_tokens"], 0);
}

#[test]
fn a_stream_opens_with_the_response_in_progress_and_ends_with_it_complete() {
    let streamed = stream_events(&mut format(true), &events(&["Hi", " there"], false, FinishReason::Stop));
    let names: Vec<&str> = streamed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    for (_, v) in &streamed[..2] {
        assert_eq!(
            (v["response"]["status"].as_str(), v["response"]["output"].clone()),
            (Some("in_progress"), json!([]))
        );
        assert_eq!((v["response"]["id"].as_str(), v["response"]["usage"].clone()), (Some("resp_test"), Value::Null));
    }
    let delta = &streamed[4].1;
    assert_eq!(
        (delta["delta"].as_str(), delta["logprobs"].clone(), delta["content_index"].clone()),
        (Some("Hi"), json!([]), json!(0))
    );
    assert_eq!(streamed[9].1["response"]["status"], "completed");
    let cut = stream_events(&mut format(true), &events(&["Hi"], false, FinishReason::Length));
    let (name, last) = cut.last().expect("events");
    assert_eq!((name.as_str(), last["response"]["status"].as_str()), ("response.incomplete", Some("incomplete")));
}

#[test]
fn reasoning_streams_as_reasoning_text_parts() {
    let streamed = stream_events(&mut format(true), &events(&[test_events::QWEN_TEXT], true, FinishReason::Stop));
    let added = streamed.iter().find(|(n, _)| n == "response.content_part.added").expect("a part");
    assert_eq!(added.1["part"], json!({"type": "reasoning_text", "text": ""}));
    assert_eq!(streamed.iter().filter(|(n, _)| n == "response.reasoning_text.delta").count(), 1);
}

#[test]
fn without_parallel_tool_calls_only_the_first_call_is_kept() {
    let call = |city: &str| {
        format!("<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"{city}\"}}}}\n</tool_call>")
    };
    let text = format!("{}{}", call("Paris"), call("Rome"));
    for parallel in [true, false] {
        let want = if parallel { 2 } else { 1 };
        let body = one_shot(events(&[&text], true, FinishReason::Stop), parallel);
        assert_eq!(body["output"].as_array().map(Vec::len), Some(want), "{body}");
        let (items, _) = accumulate(&stream_events(&mut format(parallel), &events(&[&text], true, FinishReason::Stop)));
        assert_eq!(items.len(), want, "{items:?}");
        assert!(items[0].2.contains("Paris"));
    }
}

#[test]
fn failures_end_the_stream_with_an_error_or_the_failed_response() {
    let e = ApiError::internal("the engine failed the request: boom").with_code("engine_error");
    let mut out = SseOut::default();
    let mut f = format(true);
    f.stream_error(&ApiError::invalid_param("input", "bad"), &mut out);
    let events: Vec<(Option<&str>, String)> = out.drain().collect();
    let v: Value = serde_json::from_str(&events[0].1).unwrap();
    assert_eq!(events[0].0, Some("error"));
    assert_eq!(
        v,
        json!({"type": "error", "sequence_number": 0, "code": "invalid_value", "message": "bad", "param": "input"})
    );
    let mut f = format(true);
    let mut out = SseOut::default();
    for e in &events_before_finish() {
        f.stream(e, &mut out);
    }
    f.stream_error(&e, &mut out);
    let (name, data) = out.drain().last().expect("events");
    let v: Value = serde_json::from_str(&data).unwrap();
    assert_eq!((name, v["type"].as_str()), (Some("response.failed"), Some("response.failed")));
    assert_eq!(v["response"]["status"], "failed");
    assert_eq!(
        v["response"]["error"],
        json!({"code": "server_error", "message": "the engine failed the request: boom"})
    );
}

fn events_before_finish() -> Vec<Event> {
    let mut all = events(&["Hi"], false, FinishReason::Stop);
    all.truncate(2);
    all
}
