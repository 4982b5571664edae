//! Anthropic's Messages API end to end through real sockets: shardgate-sim behind shardgate,
//! `/v1/messages` streamed and not (the SSE checked for its `event:` lines), tool calls,
//! thinking, stop reasons, `/v1/messages/count_tokens`, errors and keys in Anthropic's shape,
//! and the requests counted under their own metrics label.

mod common;

use common::{Gateway, Options, Response};
use serde_json::{json, Value};

const TEXT: &str = "Hello, wörld! 日本語 🙂 and done.";

fn message(extra: Value) -> Value {
    let mut body =
        json!({"model": "test-model", "max_tokens": 64, "messages": [{"role": "user", "content": "hi there"}]});
    for (k, v) in extra.as_object().expect("an object") {
        body[k] = v.clone();
    }
    body
}

fn events(r: &Response) -> Vec<(String, Value)> {
    r.named_events()
}

/// The text of every `text_delta`, and the `message_delta`.
fn streamed_text(events: &[(String, Value)]) -> (String, Value) {
    let text = events
        .iter()
        .filter(|(n, v)| n == "content_block_delta" && v["delta"]["type"] == "text_delta")
        .map(|(_, v)| v["delta"]["text"].as_str().expect("text").to_string())
        .collect();
    let delta = events.iter().find(|(n, _)| n == "message_delta").expect("a message_delta").1.clone();
    (text, delta)
}

fn error_of(r: &Response) -> (u16, String, String) {
    let v = r.json();
    assert_eq!(v["type"], "error", "{v}");
    (r.status, v["error"]["type"].as_str().unwrap_or("").into(), v["error"]["message"].as_str().unwrap_or("").into())
}

#[test]
fn a_message_answers_with_text_and_usage() {
    let g = Gateway::with_script(&[("", TEXT)]);
    let r = g.post_json("/v1/messages", &message(json!({"system": "Be brief.", "metadata": {"user_id": "u1"}})));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    assert!(v["id"].as_str().expect("id").starts_with("msg_"), "{v}");
    assert_eq!((&v["type"], &v["role"], &v["model"]), (&json!("message"), &json!("assistant"), &json!("test-model")));
    assert_eq!(v["content"], json!([{"type": "text", "text": TEXT}]));
    assert_eq!((&v["stop_reason"], &v["stop_sequence"]), (&json!("end_turn"), &Value::Null));
    let output_tokens = common::tokenizer().encode(TEXT, false).expect("encode").len() as u64 + 1; // + EOS
    let adds = g.adds();
    assert_eq!(v["usage"]["input_tokens"], adds[0]["prompt_len"]);
    assert_eq!(v["usage"]["output_tokens"], output_tokens);
    assert!(v["usage"]["cache_read_input_tokens"].is_u64(), "{v}");
    assert_eq!(v["usage"]["cache_creation_input_tokens"], 0);
    assert_eq!(adds[0]["max_tokens"], 64);
}

#[test]
fn a_stream_is_named_events_and_count_tokens_agrees_with_it() {
    let g = Gateway::with_script(&[("", TEXT)]);
    let r = g.post_json("/v1/messages", &message(json!({"stream": true})));
    let events = events(&r);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[..3], ["message_start", "ping", "content_block_start"], "{names:?}");
    assert_eq!(names[names.len() - 3..], ["content_block_stop", "message_delta", "message_stop"], "{names:?}");
    assert!(names[3..names.len() - 3].iter().all(|n| *n == "content_block_delta"), "{names:?}");
    let start = &events[0].1["message"];
    assert_eq!((&start["content"], &start["stop_reason"]), (&json!([]), &Value::Null));
    assert_eq!(
        events[2].1,
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    );
    let (text, delta) = streamed_text(&events);
    assert_eq!(text, TEXT);
    assert_eq!(delta["delta"], json!({"stop_reason": "end_turn", "stop_sequence": null}));
    let output_tokens = common::tokenizer().encode(TEXT, false).expect("encode").len() as u64 + 1;
    assert_eq!(delta["usage"]["output_tokens"], output_tokens);
    // message_start's count is the prompt's, and count_tokens counts the same prompt.
    let input_tokens = start["usage"]["input_tokens"].as_u64().expect("input_tokens");
    assert_eq!(input_tokens, g.adds()[0]["prompt_len"].as_u64().expect("prompt_len"));
    let mut counted = message(json!({}));
    counted.as_object_mut().expect("object").remove("max_tokens");
    let r = g.post_json("/v1/messages/count_tokens", &counted);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"input_tokens": input_tokens}));
    // A system prompt and tools are part of the count.
    let more = json!({"system": "Be brief.", "tools": [{"name": "f", "input_schema": {"type": "object"}}]});
    let mut with_tools = counted.clone();
    with_tools.as_object_mut().expect("object").extend(more.as_object().expect("object").clone());
    let bigger = g.post_json("/v1/messages/count_tokens", &with_tools).json()["input_tokens"].as_u64().expect("count");
    assert!(bigger > input_tokens + 5, "{bigger} vs {input_tokens}");
}

#[test]
fn stop_reasons_stop_sequence_and_max_tokens() {
    let g = Gateway::with_script(&[("", "alpha beta STOP gamma delta")]);
    for stream in [false, true] {
        let r = g.post_json("/v1/messages", &message(json!({"stream": stream, "stop_sequences": ["never", "STOP"]})));
        let (text, stop_reason, stop_sequence) = if stream {
            let (text, delta) = streamed_text(&events(&r));
            (text, delta["delta"]["stop_reason"].clone(), delta["delta"]["stop_sequence"].clone())
        } else {
            let v = r.json();
            (
                v["content"][0]["text"].as_str().expect("text").into(),
                v["stop_reason"].clone(),
                v["stop_sequence"].clone(),
            )
        };
        assert_eq!((text.as_str(), stop_reason, stop_sequence), ("alpha beta ", json!("stop_sequence"), json!("STOP")));
        let r = g.post_json("/v1/messages", &message(json!({"stream": stream, "max_tokens": 2})));
        let (stop_reason, output_tokens) = if stream {
            let (_, delta) = streamed_text(&events(&r));
            (delta["delta"]["stop_reason"].clone(), delta["usage"]["output_tokens"].clone())
        } else {
            let v = r.json();
            (v["stop_reason"].clone(), v["usage"]["output_tokens"].clone())
        };
        assert_eq!((stop_reason, output_tokens), (json!("max_tokens"), json!(2)), "stream {stream}");
    }
    // Sampling values reach the engine (the simulator records the temperature).
    let r = g.post_json("/v1/messages", &message(json!({"temperature": 0.5, "top_p": 0.9, "top_k": 5})));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(g.adds().last().expect("an add")["temperature"], 0.5);
}

#[test]
fn errors_answer_in_anthropics_shape() {
    let g = Gateway::with_script(&[("", TEXT)]);
    let no_max = json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}]});
    let image = json!([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]);
    let cases = [
        (no_max.to_string(), 400, "invalid_request_error", "max_tokens: Field required"),
        (message(json!({"model": "nope"})).to_string(), 404, "not_found_error", "The model `nope` does not exist."),
        (
            message(json!({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": image}]}))
                .to_string(),
            400,
            "invalid_request_error",
            "messages.1.content.0.source: the model 'test-model' does not take images",
        ),
        (
            message(json!({"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}]}))
                .to_string(),
            400,
            "invalid_request_error",
            "messages.0.role: ",
        ),
        (message(json!({"max_completion_tokens": 5})).to_string(), 400, "invalid_request_error", "Chat Completions"),
        (message(json!({"messages": []})).to_string(), 400, "invalid_request_error", "messages: "),
        (message(json!({"tool_choice": {"type": "any"}})).to_string(), 400, "invalid_request_error", "tool_choice: "),
        (message(json!({"temperature": 3})).to_string(), 400, "invalid_request_error", "temperature must be in"),
        (message(json!({"top_k": -2})).to_string(), 400, "invalid_request_error", "top_k must be 0"),
        (message(json!({"stop_sequences": [""]})).to_string(), 400, "invalid_request_error", "stop_sequences: "),
        (message(json!({"max_tokens": 0})).to_string(), 400, "invalid_request_error", "max_tokens must be at least 1"),
        ("[1, 2]".to_string(), 400, "invalid_request_error", "must be a JSON object"),
        ("{\"model\": ".to_string(), 400, "invalid_request_error", "invalid JSON body"),
    ];
    for (body, status, kind, words) in cases {
        for stream in [false, true] {
            // Refused before any byte of a stream: a status and a JSON body, never SSE.
            let body = match serde_json::from_str::<Value>(&body) {
                Ok(Value::Object(mut o)) if stream => {
                    o.insert("stream".into(), json!(true));
                    Value::Object(o).to_string()
                }
                _ => body.clone(),
            };
            let r = g.post("/v1/messages", &body);
            assert_eq!(r.header("content-type"), Some("application/json"), "{body}");
            let (got_status, got_kind, message) = error_of(&r);
            assert_eq!((got_status, got_kind.as_str()), (status, kind), "{body}: {message}");
            assert!(message.contains(words), "{body}: {message}");
        }
    }
    let r = g.post_json("/v1/messages/count_tokens", &json!({"model": "nope", "messages": []}));
    assert_eq!(error_of(&r).0, 404);
    let r = g.try_request("GET", "/v1/messages", None, &[]).expect("a response");
    assert_eq!((r.status, r.json()["type"].clone()), (405, json!("error")));
    // The gateway still serves afterwards.
    assert_eq!(g.post_json("/v1/messages", &message(json!({}))).status, 200);
}

#[test]
fn keys_by_x_api_key_or_bearer_and_anthropic_headers() {
    let key = "sk-ant-test";
    let g = Gateway::start_with(Options {
        script: Some(json!({"text": TEXT}).to_string()),
        gateway_args: vec!["--api-key".into(), key.into(), "--cors-allow-origin".into(), "*".into()],
        ..Default::default()
    });
    let body = message(json!({})).to_string();
    let version = ("anthropic-version", "2023-06-01");
    let beta = ("anthropic-beta", "tools-2024-04-04");
    let bearer = format!("Bearer {key}");
    let send =
        |path: &str, headers: &[(&str, &str)]| g.try_request("POST", path, Some(&body), headers).expect("a response");
    for path in ["/v1/messages", "/v1/messages/count_tokens"] {
        for headers in [vec![version], vec![("x-api-key", "wrong"), version], vec![("authorization", "Bearer wrong")]] {
            let (status, kind, _) = error_of(&send(path, &headers));
            assert_eq!((status, kind.as_str()), (401, "authentication_error"), "{path} {headers:?}");
        }
        for headers in [vec![("x-api-key", key), version, beta], vec![("authorization", bearer.as_str()), version]] {
            let r = send(path, &headers);
            assert_eq!(r.status, 200, "{path} {headers:?}: {}", r.text());
        }
    }
    // A browser's preflight may ask for Anthropic's headers, without a key.
    let r = g
        .try_request(
            "OPTIONS",
            "/v1/messages",
            None,
            &[
                ("origin", "https://app.example"),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", "x-api-key,anthropic-version,content-type"),
            ],
        )
        .expect("a response");
    assert_eq!(r.status, 204);
    let allowed = r.header("access-control-allow-headers").unwrap_or("");
    assert!(allowed.contains("x-api-key") && allowed.contains("anthropic-version"), "{allowed}");
}

fn weather_tools() -> Value {
    json!([
        {"name": "get_weather", "description": "Weather for a city",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        {"name": "get_time", "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}}}
    ])
}

/// A tool's calls from a body or a stream: (id, name, input), and the stop reason.
fn tool_uses(r: &Response, stream: bool) -> (Vec<(String, String, Value)>, Value) {
    if !stream {
        let v = r.json();
        let calls = v["content"].as_array().expect("content").iter().filter(|b| b["type"] == "tool_use");
        let calls = calls.map(|b| {
            (b["id"].as_str().expect("id").into(), b["name"].as_str().expect("name").into(), b["input"].clone())
        });
        return (calls.collect(), v["stop_reason"].clone());
    }
    let events = events(r);
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut blocks: Vec<Option<usize>> = Vec::new();
    for (name, v) in &events {
        match name.as_str() {
            "content_block_start" if v["content_block"]["type"] == "tool_use" => {
                let b = &v["content_block"];
                assert_eq!(b["input"], json!({}), "a tool_use block starts with an empty input");
                blocks.push(Some(calls.len()));
                calls.push((
                    b["id"].as_str().expect("id").into(),
                    b["name"].as_str().expect("name").into(),
                    String::new(),
                ));
            }
            "content_block_start" => blocks.push(None),
            "content_block_delta" if v["delta"]["type"] == "input_json_delta" => {
                let at = blocks[v["index"].as_u64().expect("index") as usize].expect("a tool_use block");
                calls[at].2.push_str(v["delta"]["partial_json"].as_str().expect("partial_json"));
            }
            _ => {}
        }
    }
    let stop =
        events.iter().find(|(n, _)| n == "message_delta").expect("message_delta").1["delta"]["stop_reason"].clone();
    let calls = calls.into_iter().map(|(id, name, json)| (id, name, serde_json::from_str(&json).expect("input JSON")));
    (calls.collect(), stop)
}

#[test]
fn a_forced_tool_is_constrained_and_answered_as_tool_use() {
    let g = Gateway::with_script(&[("forced", "{\"city\": \"Paris\"}"), ("", TEXT)]);
    for stream in [false, true] {
        let body = message(json!({"stream": stream, "tools": weather_tools(),
            "tool_choice": {"type": "tool", "name": "get_weather"},
            "messages": [{"role": "user", "content": "forced weather"}]}));
        let r = g.post_json("/v1/messages", &body);
        let (calls, stop) = tool_uses(&r, stream);
        assert_eq!(stop, "tool_use");
        assert_eq!(calls.len(), 1, "{calls:?}");
        let (id, name, input) = &calls[0];
        assert!(id.starts_with("toolu_"), "{id}");
        assert_eq!((name.as_str(), input), ("get_weather", &json!({"city": "Paris"})));
        // The engine was held to the tool's input schema.
        let constraint = g.adds().last().expect("an add")["structured_outputs"]["json"].clone();
        let schema: Value = serde_json::from_str(constraint.as_str().expect("a JSON schema")).expect("schema");
        assert_eq!(schema, weather_tools()[0]["input_schema"]);
    }
}

#[test]
fn model_tool_calls_thinking_and_a_tool_round_trip() {
    let calls = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n\
                 <tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>";
    let script = [
        json!({"prompt_contains": "two calls", "text": calls}),
        json!({"prompt_contains": "sunny", "text": "It is sunny in Paris."}),
        json!({"prompt_contains": "think", "text": "<think>plan it</think>The answer."}),
    ];
    let g = Gateway::start_with(Options {
        script: Some(script.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")),
        gateway_args: ["--tool-call-parser", "qwen", "--reasoning-parser", "qwen3"].map(String::from).to_vec(),
        ..Default::default()
    });
    let ask = json!([{"role": "user", "content": "two calls please"}]);
    for (stream, one_call) in [(false, false), (true, false), (false, true), (true, true)] {
        let choice = json!({"type": "auto", "disable_parallel_tool_use": one_call});
        let body = message(json!({"stream": stream, "tools": weather_tools(), "tool_choice": choice, "messages": ask}));
        let (calls, stop) = tool_uses(&g.post_json("/v1/messages", &body), stream);
        let got: Vec<(String, Value)> = calls.into_iter().map(|(_, n, i)| (n, i)).collect();
        let mut want =
            vec![("get_weather".to_string(), json!({"city": "Paris"})), ("get_time".into(), json!({"tz": "CET"}))];
        want.truncate(if one_call { 1 } else { 2 });
        assert_eq!((got, stop), (want, json!("tool_use")), "stream {stream}, one call {one_call}");
    }
    // The calls and their results go back as history: the tool results reach the template.
    let history = json!([
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
            {"type": "text", "text": "And now?"}]}
    ]);
    let r = g.post_json("/v1/messages", &message(json!({"tools": weather_tools(), "messages": history})));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["content"], json!([{"type": "text", "text": "It is sunny in Paris."}]));
    // Thinking on: the reasoning is a thinking block before the text.
    for stream in [false, true] {
        let body = message(json!({"stream": stream, "thinking": {"type": "enabled", "budget_tokens": 32},
                                  "messages": [{"role": "user", "content": "think first"}]}));
        let r = g.post_json("/v1/messages", &body);
        let content = if stream {
            let events = events(&r);
            let thinking: String = events
                .iter()
                .filter(|(n, v)| n == "content_block_delta" && v["delta"]["type"] == "thinking_delta")
                .map(|(_, v)| v["delta"]["thinking"].as_str().expect("thinking").to_string())
                .collect();
            assert!(events.iter().any(|(_, v)| v["delta"]["type"] == "signature_delta"));
            json!([{"thinking": thinking}, {"text": streamed_text(&events).0}])
        } else {
            let v = r.json();
            assert_eq!(v["content"][0]["signature"], "");
            json!([{"thinking": v["content"][0]["thinking"]}, {"text": v["content"][1]["text"]}])
        };
        assert_eq!(content, json!([{"thinking": "plan it"}, {"text": "The answer."}]), "stream {stream}");
    }
    // The switch reaches the template: thinking off renders Qwen3's empty thinking block.
    let count = |thinking: Value| {
        let body =
            json!({"model": "test-model", "thinking": thinking, "messages": [{"role": "user", "content": "hi"}]});
        g.post_json("/v1/messages/count_tokens", &body).json()["input_tokens"].as_u64().expect("count")
    };
    assert!(count(json!({"type": "disabled"})) > count(json!({"type": "enabled", "budget_tokens": 1024})));
}

/// An engine lost after its output began: the stream ends with one `event: error` in
/// Anthropic's shape (nothing after it), and a body request gets the status and envelope.
#[test]
fn an_engine_lost_mid_stream_ends_the_stream_with_an_error_event() {
    for stream in [true, false] {
        let g = Gateway::start_with(Options {
            script: Some(json!({"text": TEXT.repeat(20)}).to_string()),
            sim_args: ["--fault", "die@1:3"].map(String::from).to_vec(),
            ..Default::default()
        });
        let r = g.post_json("/v1/messages", &message(json!({"stream": stream, "max_tokens": 500})));
        if !stream {
            let (status, kind, message) = error_of(&r);
            assert_eq!((status, kind.as_str()), (500, "api_error"), "{message}");
            continue;
        }
        let events = events(&r);
        let (last, error) = events.last().expect("events");
        assert_eq!(last, "error", "{events:?}");
        assert_eq!(error["error"]["type"], "api_error", "{error}");
        assert!(error["error"]["message"].as_str().unwrap_or("").contains("ENGINE_CORE_DEAD"), "{error}");
        assert_eq!(events[0].0, "message_start");
        assert!(!events.iter().any(|(n, _)| n == "message_stop"), "{events:?}");
    }
}

#[test]
fn messages_are_counted_under_their_own_label() {
    let g = Gateway::with_script(&[("", TEXT)]);
    for stream in [false, true] {
        assert_eq!(g.post_json("/v1/messages", &message(json!({"stream": stream}))).status, 200);
    }
    let m = g.metrics();
    let base = "smg_router_requests_total{router_type=\"zmq\",connection_mode=\"zmq\",model=\"test-model\",endpoint=";
    for streaming in ["false", "true"] {
        let line = format!("{base}\"messages\",streaming=\"{streaming}\"}} 1");
        assert!(m.contains(&line), "no {line} in\n{m}");
        let chat = format!("{base}\"chat\",streaming=\"{streaming}\"}} 0");
        assert!(m.contains(&chat), "no {chat} in\n{m}");
    }
}
