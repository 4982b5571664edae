//! Constrained decoding end to end: `response_format` and the other constraint sources reach
//! the engine as vLLM's `structured_outputs`, and forced tool calls (`required`, a named
//! function) are sent with the JSON schema vLLM would build and read back from the JSON the
//! engine is held to. The simulator records the constraint and speaks the scripted JSON.

mod common;

use common::Gateway;
use serde_json::{json, Value};

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
            "properties": {"tz": {"type": "string"}}}}}
    ])
}

fn gateway() -> Gateway {
    Gateway::with_script(&[
        ("named call", "{\"city\": \"Paris\"}"),
        ("required calls", "[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}, {\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}]"),
        ("", "{\"answer\": 42}"),
    ])
}

fn chat(content: &str, extra: Value) -> Value {
    let mut body =
        json!({"model": "test-model", "messages": [{"role": "user", "content": content}], "max_tokens": 200});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn last_constraint(g: &Gateway) -> Value {
    g.adds().last().unwrap()["structured_outputs"].clone()
}

#[test]
fn response_format_and_extensions_reach_the_engine() {
    let g = gateway();
    let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]});
    let r = g.post_json(
        "/v1/chat/completions",
        &chat(
            "hi",
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}}),
        ),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["choices"][0]["message"]["content"], "{\"answer\": 42}");
    let c = last_constraint(&g);
    assert_eq!(serde_json::from_str::<Value>(c["json"].as_str().unwrap()).unwrap(), schema);
    assert_eq!(c["_backend"], "xgrammar");
    // Completions too, and the other sources.
    let cases = [
        (json!({"response_format": {"type": "json_object"}}), "json_object", json!(true)),
        (json!({"structured_outputs": {"regex": "[ab]{3}"}}), "regex", json!("[ab]{3}")),
        (json!({"structured_outputs": {"choice": ["yes", "no"]}}), "grammar", json!("root ::= \"yes\" | \"no\"")),
        (json!({"ebnf": "root ::= \"a\""}), "grammar", json!("root ::= \"a\"")),
    ];
    for (extra, key, want) in cases {
        let mut body = json!({"model": "test-model", "prompt": "hi", "max_tokens": 5});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = g.post_json("/v1/completions", &body);
        assert_eq!(r.status, 200, "{extra}: {}", r.text());
        assert_eq!(last_constraint(&g)[key], want, "{extra}");
    }
    // Plain text adds nothing; two sources are refused.
    let r = g.post_json("/v1/chat/completions", &chat("hi", json!({"response_format": {"type": "text"}})));
    assert_eq!(r.status, 200);
    assert!(last_constraint(&g).is_null());
    let r = g.post_json(
        "/v1/chat/completions",
        &chat(
            "hi",
            json!({"response_format": {"type": "json_object"},
                                                                  "regex": "a+"}),
        ),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], "invalid_request_parameters");
}

#[test]
fn a_named_tool_choice_returns_that_call_with_tool_calls() {
    let g = gateway();
    let extra = json!({"tools": tools(), "tool_choice": {"type": "function", "function": {"name": "get_weather"}}});
    let r = g.post_json("/v1/chat/completions", &chat("named call please", extra.clone()));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert!(choice["message"]["content"].is_null());
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(call["function"]["arguments"], "{\"city\": \"Paris\"}");
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    // The engine was held to the function's parameters.
    let c = last_constraint(&g);
    assert_eq!(
        serde_json::from_str::<Value>(c["json"].as_str().unwrap()).unwrap(),
        tools()[0]["function"]["parameters"]
    );
    // Streamed: the first delta names the call, the rest are argument fragments.
    let mut body = chat("named call please", extra);
    body["stream"] = json!(true);
    let events = g.post_json("/v1/chat/completions", &body).sse_json();
    let deltas: Vec<&Value> =
        events.iter().filter_map(|e| e["choices"][0]["delta"]["tool_calls"].as_array()).flatten().collect();
    assert_eq!(deltas[0]["function"]["name"], "get_weather");
    assert!(deltas[0]["id"].is_string() && deltas[0]["type"] == "function");
    assert!(deltas[1..].iter().all(|d| d.get("id").is_none() && d["function"].get("name").is_none()));
    let args: String = deltas.iter().filter_map(|d| d["function"]["arguments"].as_str()).collect();
    assert_eq!(args, "{\"city\": \"Paris\"}");
    let finish: Vec<&Value> =
        events.iter().map(|e| &e["choices"][0]["finish_reason"]).filter(|f| !f.is_null()).collect();
    assert_eq!(finish, vec!["tool_calls"]);
}

#[test]
fn required_tool_choice_returns_every_call_with_tool_calls() {
    let g = gateway();
    let extra = json!({"tools": tools(), "tool_choice": "required"});
    for stream in [false, true] {
        let mut body = chat("required calls please", extra.clone());
        body["stream"] = json!(stream);
        let r = g.post_json("/v1/chat/completions", &body);
        assert_eq!(r.status, 200, "{}", r.text());
        let (calls, finish): (Vec<(String, String)>, String) = if stream {
            let events = r.sse_json();
            let mut calls: Vec<(String, String)> = Vec::new();
            for d in events.iter().filter_map(|e| e["choices"][0]["delta"]["tool_calls"].as_array()).flatten() {
                let i = d["index"].as_u64().unwrap() as usize;
                if i == calls.len() {
                    calls.push((d["function"]["name"].as_str().unwrap().to_string(), String::new()));
                }
                calls[i].1.push_str(d["function"]["arguments"].as_str().unwrap_or(""));
            }
            let finish = events.iter().find_map(|e| e["choices"][0]["finish_reason"].as_str()).unwrap().to_string();
            (calls, finish)
        } else {
            let v = r.json();
            let calls = v["choices"][0]["message"]["tool_calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    (
                        c["function"]["name"].as_str().unwrap().to_string(),
                        c["function"]["arguments"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            (calls, v["choices"][0]["finish_reason"].as_str().unwrap().to_string())
        };
        assert_eq!(
            calls,
            vec![
                ("get_weather".into(), "{\"city\": \"Paris\"}".into()),
                ("get_time".into(), "{\"tz\": \"CET\"}".into())
            ]
        );
        assert_eq!(finish, "tool_calls");
    }
    let schema: Value = serde_json::from_str(last_constraint(&g)["json"].as_str().unwrap()).unwrap();
    assert_eq!(schema["type"], "array");
    assert_eq!(schema["items"]["anyOf"].as_array().unwrap().len(), 2);
    // parallel_tool_calls: false allows one call.
    let mut body = chat("required calls please", extra);
    body["parallel_tool_calls"] = json!(false);
    assert_eq!(g.post_json("/v1/chat/completions", &body).status, 200);
    let schema: Value = serde_json::from_str(last_constraint(&g)["json"].as_str().unwrap()).unwrap();
    assert_eq!(schema["maxItems"], 1);
}

#[test]
fn every_forced_call_finishes_with_tool_calls_unless_cut_by_length() {
    let g = gateway();
    let named = json!({"type": "function", "function": {"name": "get_weather"}});
    let allowed = json!({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}});
    let cases = [
        ("named call please", named.clone(), 200, "tool_calls"),
        ("required calls please", json!("required"), 200, "tool_calls"),
        ("required calls please", allowed, 200, "tool_calls"),
        // Cut short by max_tokens: the engine's reason stands.
        ("named call please", named, 3, "length"),
    ];
    for (prompt, choice, max_tokens, expected) in cases {
        for stream in [false, true] {
            let mut body = chat(prompt, json!({"tools": tools(), "tool_choice": choice, "max_tokens": max_tokens}));
            body["stream"] = json!(stream);
            let r = g.post_json("/v1/chat/completions", &body);
            assert_eq!(r.status, 200, "{}", r.text());
            let finish = if stream {
                r.sse_json().iter().find_map(|e| e["choices"][0]["finish_reason"].as_str().map(str::to_string))
            } else {
                r.json()["choices"][0]["finish_reason"].as_str().map(str::to_string)
            };
            assert_eq!(finish.as_deref(), Some(expected), "{body}");
        }
    }
}

/// Constraints the engine's xgrammar cannot compile (a real engine core fails the request or
/// dies on them) are answered 400 with vLLM's text and never sent: the simulator records no
/// ADD for any of them, and a valid request afterwards is served.
#[test]
fn constraints_xgrammar_refuses_never_reach_the_engine() {
    let g = gateway();
    let weird_tool = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"a": {"type": "nope"}}}}}]);
    let cases = [
        (json!({"structured_outputs": {"regex": "(((("}}), "Failed to transform regex into a grammar"),
        (json!({"regex": "(?=lookahead)"}), "Failed to transform regex into a grammar"),
        (json!({"structured_outputs": {"grammar": "root ::= ((("}}), "Invalid grammar specification."),
        (json!({"guided_grammar": "root ::= undefined_rule"}), "Invalid grammar specification."),
        (json!({"structured_outputs": {"structural_tag": "not json"}}), "Invalid structural tag specification."),
        (json!({"guided_json": {"type": "foo"}}), "Unsupported type \"foo\""),
        (
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "a",
                "schema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}}}}),
            "Cannot find field $defs",
        ),
        (json!({"tools": weird_tool, "tool_choice": "required"}), "Unsupported type \"nope\""),
    ];
    for (extra, want) in cases {
        let r = g.post_json("/v1/chat/completions", &chat("hi", extra.clone()));
        assert_eq!(r.status, 400, "{extra}: {}", r.text());
        let e = &r.json()["error"];
        assert!(e["message"].as_str().unwrap().contains(want), "{extra}: {e}");
        assert_eq!(e["type"], "invalid_request_error");
    }
    assert!(g.adds().is_empty(), "sent: {:?}", g.adds());
    let r = g.post_json("/v1/chat/completions", &chat("hi", json!({"structured_outputs": {"regex": "[ab]{3}"}})));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(g.adds().len(), 1);
}
