//! `ChatFormat` on the pipeline's events: what a streaming client accumulates from the chunks is
//! the one-shot body's message, wherever the engine's output was split.

use serde_json::Value;

use super::*;
use crate::api::test_events;
use crate::pipeline::events::Collector;

const USAGE: Usage = Usage { prompt_tokens: 7, completion_tokens: 11, cached_tokens: 2 };

fn format() -> ChatFormat {
    ChatFormat::new("chatcmpl-test".into(), 1_700_000_000, "m".into(), true, Some(1), Names::chat(false))
}

/// A choice's events with the pipeline's parse stage (Qwen's syntax) or as plain text.
fn events(pieces: &[&str], parsed: bool) -> Vec<Event> {
    test_events::choice_events(pieces, parsed.then(test_events::qwen_spec).as_ref(), USAGE)
}

/// What a client accumulates: message fields, tool calls (id, name, arguments), logprob tokens,
/// finish reason, usage.
#[derive(Debug, Default, PartialEq)]
struct Accumulated {
    content: String,
    reasoning: String,
    calls: Vec<(String, String, String)>,
    logprob_tokens: Vec<String>,
    finish_reason: String,
    usage: Value,
}

fn streamed(events: &[Event]) -> Accumulated {
    let mut f = format();
    let mut out = SseOut::default();
    for e in events {
        f.stream(e, &mut out);
    }
    let payloads: Vec<String> = out.drain().map(|(_, data)| data).collect();
    let mut a = Accumulated::default();
    for p in &payloads {
        let chunk: Value = serde_json::from_str(p).expect("every payload is JSON");
        assert_eq!(chunk["object"], "chat.completion.chunk");
        if chunk["choices"].as_array().is_some_and(Vec::is_empty) {
            a.usage = chunk["usage"].clone();
            continue;
        }
        let c = &chunk["choices"][0];
        a.content.push_str(c["delta"]["content"].as_str().unwrap_or(""));
        a.reasoning.push_str(c["delta"]["reasoning_content"].as_str().unwrap_or(""));
        for call in c["delta"]["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().expect("index") as usize;
            if index == a.calls.len() {
                let id = call["id"].as_str().expect("a call's first piece has its id");
                let name = call["function"]["name"].as_str().expect("and its name");
                a.calls.push((id.into(), name.into(), String::new()));
            }
            a.calls[index].2.push_str(call["function"]["arguments"].as_str().expect("arguments"));
        }
        for row in c["logprobs"]["content"].as_array().into_iter().flatten() {
            a.logprob_tokens.push(row["token"].as_str().expect("token").into());
        }
        if let Some(reason) = c["finish_reason"].as_str() {
            a.finish_reason = reason.into();
        }
    }
    a
}

fn one_shot(events: Vec<Event>) -> Accumulated {
    let mut collector = Collector::default();
    for e in events {
        collector.add(e);
    }
    let body: Value = serde_json::from_str(&format().body(&collector.choices, &collector.usage)).expect("JSON body");
    assert_eq!(body["object"], "chat.completion");
    let c = &body["choices"][0];
    let m = &c["message"];
    let calls = m["tool_calls"].as_array().into_iter().flatten();
    Accumulated {
        content: m["content"].as_str().unwrap_or("").into(),
        reasoning: m["reasoning_content"].as_str().unwrap_or("").into(),
        calls: calls
            .map(|t| {
                let text = |v: &Value| v.as_str().expect("a string").to_string();
                (text(&t["id"]), text(&t["function"]["name"]), text(&t["function"]["arguments"]))
            })
            .collect(),
        logprob_tokens: c["logprobs"]["content"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["token"].as_str().expect("token").into())
            .collect(),
        finish_reason: c["finish_reason"].as_str().expect("finish_reason").into(),
        usage: body["usage"].clone(),
    }
}

/// Call ids are minted per parse: compared by shape, the rest exactly.
fn without_ids(mut a: Accumulated) -> Accumulated {
    for call in &mut a.calls {
        assert!(call.0.starts_with("call_"), "{call:?}");
        call.0.clear();
    }
    a
}

#[test]
fn streamed_chunks_add_up_to_the_one_shot_body_at_every_split() {
    for parsed in [false, true] {
        let whole = one_shot(events(&[test_events::QWEN_TEXT], parsed));
        if parsed {
            assert_eq!((whole.reasoning.as_str(), whole.content.as_str()), ("plan \"a\"\n", "Hello, wörld 🎉 "));
            assert_eq!(whole.calls.len(), 1, "{whole:?}");
            assert_eq!(whole.finish_reason, "tool_calls");
        } else {
            assert_eq!((whole.content.as_str(), whole.finish_reason.as_str()), (test_events::QWEN_TEXT, "stop"));
        }
        let whole = Accumulated { logprob_tokens: Vec::new(), ..without_ids(whole) };
        for split in (0..=test_events::QWEN_TEXT.len()).filter(|&i| test_events::QWEN_TEXT.is_char_boundary(i)) {
            let pieces = [&test_events::QWEN_TEXT[..split], &test_events::QWEN_TEXT[split..]];
            let (stream, shot) =
                (without_ids(streamed(&events(&pieces, parsed))), without_ids(one_shot(events(&pieces, parsed))));
            assert_eq!(stream, shot, "parsed {parsed}, split {split}");
            // The logprob rows are the pieces' (one per token); everything else is the text's.
            assert_eq!(shot.logprob_tokens.concat(), if parsed { "" } else { test_events::QWEN_TEXT }, "split {split}");
            assert_eq!(Accumulated { logprob_tokens: Vec::new(), ..shot }, whole, "parsed {parsed}, split {split}");
        }
    }
}

#[test]
fn a_stream_opens_with_the_role_and_ends_with_finish_and_usage() {
    let mut f = format();
    let mut sse = SseOut::default();
    for e in events(&["Hi"], false) {
        f.stream(&e, &mut sse);
    }
    let out: Vec<String> = sse.drain().map(|(_, data)| data).collect();
    let head = "{\"id\":\"chatcmpl-test\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"m\",\
                \"choices\":[{\"index\":0,";
    let usage = "{\"prompt_tokens\":7,\"total_tokens\":18,\"completion_tokens\":11,\"prompt_tokens_details\":\
                 {\"cached_tokens\":2}}";
    assert_eq!(
        out,
        vec![
            format!("{head}\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null}}"),
            format!(
                "{head}\"delta\":{{\"content\":\"Hi\"}},\"logprobs\":{{\"content\":[{{\"token\":\"Hi\",\"logprob\":-0.5,\
                 \"bytes\":[72,105],\"top_logprobs\":[{{\"token\":\"Hi\",\"logprob\":-0.5,\"bytes\":[72,105]}}]}}]}},\
                 \"finish_reason\":null}}],\"usage\":null}}"
            ),
            format!(
                "{head}\"delta\":{{}},\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":null}}],\"usage\":null}}"
            ),
            format!(
                "{{\"id\":\"chatcmpl-test\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"m\",\
                 \"choices\":[],\"usage\":{usage}}}"
            ),
        ]
    );
}
