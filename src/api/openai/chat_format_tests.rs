//! `ChatFormat` on the pipeline's events: what a streaming client accumulates from the chunks is
//! the one-shot body's message, wherever the engine's output was split.

use serde_json::Value;

use super::*;
use crate::engine::FinishReason;
use crate::pipeline::choice::Finish;
use crate::pipeline::events::{Collector, Delta, Finished};
use crate::pipeline::parse::{OutputParser, ParseSpec, ParsedDelta};
use shardgate_parsers::tool::ToolSpec;

const USAGE: Usage = Usage { prompt_tokens: 7, completion_tokens: 11, cached_tokens: 2 };

fn format() -> ChatFormat {
    ChatFormat::new("chatcmpl-test".into(), 1_700_000_000, "m".into(), true, Some(1), Names::chat(false))
}

/// Reasoning, text and a tool call in Qwen's syntax.
fn spec() -> ParseSpec {
    ParseSpec {
        reasoning_parser: Some("qwen3"),
        tool_parser: Some("qwen"),
        tools: vec![ToolSpec { name: "get_weather".into(), parameters: None }],
        separate_reasoning: true,
        model_name: "m".into(),
        ..Default::default()
    }
}

const TEXT: &str =
    "<think>plan \"a\"\n</think>Hello, wörld 🎉 <tool_call>\n{\"name\": \"get_weather\", \"arguments\": \
                    {\"city\": \"Paris\"}}\n</tool_call>";

/// A choice's events as the pipeline hands them out: one `Delta` per piece (the parse stage
/// closed with the last), then the end.
fn events(pieces: &[&str], parsed: bool) -> Vec<Event> {
    let mut parser = parsed.then(|| OutputParser::new(&spec()).expect("parsers exist"));
    let mut out = vec![Event::Start { choice: 0 }];
    for (k, piece) in pieces.iter().enumerate() {
        let mut output = match &mut parser {
            Some(p) => p.push(piece),
            None => ParsedDelta::text(piece.to_string()),
        };
        if let (Some(p), true) = (&mut parser, k + 1 == pieces.len()) {
            let tail = p.finish();
            output.content.push_str(&tail.content);
            output.reasoning.push_str(&tail.reasoning);
            output.calls.extend(tail.calls);
        }
        // One logprob row per piece, so that rows travel with text.
        let row = TokenLogprob {
            token: piece.to_string(),
            logprob: Some(-0.5),
            alternatives: vec![(piece.to_string(), -0.5)],
        };
        let logprobs = if parsed { Vec::new() } else { vec![row] };
        if !output.is_empty() || !logprobs.is_empty() {
            out.push(Event::Delta(Delta { choice: 0, output, logprobs, usage: None }));
        }
    }
    let tool_calls = parser.as_ref().is_some_and(OutputParser::ends_in_tool_calls);
    let finish = Finish { reason: FinishReason::Stop, stop_reason: None };
    out.push(Event::Finished(Finished { choice: 0, finish, tool_calls, usage: None }));
    out.push(Event::Usage(USAGE));
    out
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
        let whole = one_shot(events(&[TEXT], parsed));
        if parsed {
            assert_eq!((whole.reasoning.as_str(), whole.content.as_str()), ("plan \"a\"\n", "Hello, wörld 🎉 "));
            assert_eq!(whole.calls.len(), 1, "{whole:?}");
            assert_eq!(whole.finish_reason, "tool_calls");
        } else {
            assert_eq!((whole.content.as_str(), whole.finish_reason.as_str()), (TEXT, "stop"));
        }
        let whole = Accumulated { logprob_tokens: Vec::new(), ..without_ids(whole) };
        for split in (0..=TEXT.len()).filter(|&i| TEXT.is_char_boundary(i)) {
            let pieces = [&TEXT[..split], &TEXT[split..]];
            let (stream, shot) =
                (without_ids(streamed(&events(&pieces, parsed))), without_ids(one_shot(events(&pieces, parsed))));
            assert_eq!(stream, shot, "parsed {parsed}, split {split}");
            // The logprob rows are the pieces' (one per token); everything else is the text's.
            assert_eq!(shot.logprob_tokens.concat(), if parsed { "" } else { TEXT }, "split {split}");
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
