//! `POST /v1/responses` end to end: shardgate-sim behind shardgate, the response object and the
//! typed event stream (checked on the bytes: `event:` and `data:` lines), the output bound,
//! constraints, tool calls and reasoning through the parsers, refusals, the history interface,
//! metrics.

mod common;

use common::{Gateway, Options, Response};
use serde_json::{json, Value};

const SCRIPT_TEXT: &str = "Hello, wörld! 日本語のテキスト 🙂 and done.";
/// Qwen's reasoning and call syntax, as the simulator speaks it for `call a tool`.
const CALL_TEXT: &str = "<think>check the weather</think>Let me look.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

fn gateway() -> Gateway {
    let script = [
        json!({"prompt_contains": "Answer in JSON.", "text": "{\"answer\": 42}"}),
        json!({"prompt_contains": "Be terse.", "text": "Terse."}),
        json!({"prompt_contains": "call a tool", "text": CALL_TEXT}),
        json!({"text": SCRIPT_TEXT}),
    ];
    let script = script.iter().map(Value::to_string).collect::<Vec<_>>().join("\n");
    let gateway_args = ["--reasoning-parser", "qwen3", "--tool-call-parser", "qwen"].map(String::from).to_vec();
    Gateway::start_with(Options { script: Some(script), gateway_args, ..Default::default() })
}

fn request(input: Value, extra: Value) -> Value {
    let mut body = json!({"model": "test-model", "input": input});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn weather_tool() -> Value {
    json!({"type": "function", "name": "get_weather", "description": "Weather by city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}})
}

/// The stream's events as (name, JSON) (`Response::named_events` checks the framing), with
/// sequence numbers counting from 0.
fn events(r: &Response) -> Vec<(String, Value)> {
    let events = r.named_events();
    for (k, (_, v)) in events.iter().enumerate() {
        assert_eq!(v["sequence_number"], k);
    }
    events
}

fn output_text(response: &Value) -> String {
    let items = response["output"].as_array().expect("output");
    items
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().unwrap().iter())
        .map(|p| p["text"].as_str().unwrap())
        .collect()
}

#[test]
fn a_response_carries_the_engine_text_and_usage() {
    let g = gateway();
    let r = g.post_json("/v1/responses", &request(json!("hi"), json!({"metadata": {"k": "v"}, "user": "u1"})));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    assert!(v["id"].as_str().unwrap().starts_with("resp_"), "{v}");
    assert_eq!(
        (v["object"].as_str(), v["status"].as_str(), v["model"].as_str()),
        (Some("response"), Some("completed"), Some("test-model"))
    );
    assert_eq!((v["error"].clone(), v["incomplete_details"].clone()), (Value::Null, Value::Null));
    assert_eq!(
        (v["metadata"].clone(), v["user"].clone(), v["store"].clone()),
        (json!({"k": "v"}), json!("u1"), json!(true))
    );
    assert_eq!(
        (v["tools"].clone(), v["tool_choice"].clone(), v["parallel_tool_calls"].clone()),
        (json!([]), json!("auto"), json!(true))
    );
    let item = &v["output"][0];
    assert_eq!(v["output"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(
        (item["type"].as_str(), item["role"].as_str(), item["status"].as_str()),
        (Some("message"), Some("assistant"), Some("completed"))
    );
    assert!(item["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(
        item["content"],
        json!([{"type": "output_text", "text": SCRIPT_TEXT, "annotations": [], "logprobs": []}])
    );
    let adds = g.adds();
    let completion = common::tokenizer().encode(SCRIPT_TEXT, false).unwrap().len() as u64 + 1; // + EOS
    let u = &v["usage"];
    assert_eq!(
        (u["input_tokens"].clone(), u["output_tokens"].as_u64()),
        (adds[0]["prompt_len"].clone(), Some(completion))
    );
    assert_eq!(u["total_tokens"].as_u64(), Some(adds[0]["prompt_len"].as_u64().unwrap() + completion));
    assert_eq!(
        (u["input_tokens_details"]["cached_tokens"].as_u64(), u["output_tokens_details"]["reasoning_tokens"].as_u64()),
        (Some(0), Some(0))
    );
    // Instructions reach the template as the system message.
    let r = g.post_json(
        "/v1/responses",
        &request(json!([{"role": "user", "content": "hi"}]), json!({"instructions": "Be terse."})),
    );
    assert_eq!((r.status, output_text(&r.json())), (200, "Terse.".to_string()));
    assert_eq!(r.json()["instructions"], "Be terse.");
}

#[test]
fn a_stream_is_typed_events_adding_up_to_the_response() {
    let g = gateway();
    let r = g.post_json("/v1/responses", &request(json!("hi"), json!({"stream": true})));
    assert_eq!(r.status, 200);
    let events = events(&r);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        &names[..4],
        ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
    );
    assert_eq!(
        &names[names.len() - 4..],
        ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]
    );
    let id = events[0].1["response"]["id"].as_str().unwrap().to_string();
    assert_eq!(events[0].1["response"]["status"], "in_progress");
    let item_id = events[2].1["item"]["id"].as_str().unwrap().to_string();
    let mut text = String::new();
    for (name, v) in &events {
        if name == "response.output_text.delta" {
            assert_eq!(
                (v["item_id"].as_str(), v["output_index"].as_u64(), v["content_index"].as_u64()),
                (Some(item_id.as_str()), Some(0), Some(0))
            );
            text.push_str(v["delta"].as_str().unwrap());
        }
    }
    assert_eq!(text, SCRIPT_TEXT);
    assert!(names.iter().filter(|n| **n == "response.output_text.delta").count() > 5, "{names:?}");
    let done = &events.last().unwrap().1["response"];
    assert_eq!((done["id"].as_str(), done["status"].as_str()), (Some(id.as_str()), Some("completed")));
    assert_eq!(output_text(done), SCRIPT_TEXT);
    assert_eq!(done["output"][0]["id"], item_id.as_str());
    assert!(done["usage"]["output_tokens"].as_u64().unwrap() > 5);
}

#[test]
fn the_output_bound_makes_the_response_incomplete() {
    let g = gateway();
    let r = g.post_json("/v1/responses", &request(json!("hi"), json!({"max_output_tokens": 3})));
    let v = r.json();
    assert_eq!(
        (v["status"].as_str(), v["incomplete_details"].clone()),
        (Some("incomplete"), json!({"reason": "max_output_tokens"}))
    );
    assert_eq!((v["max_output_tokens"].as_u64(), v["usage"]["output_tokens"].as_u64()), (Some(3), Some(3)));
    assert_eq!(v["output"][0]["status"], "incomplete");
    assert_eq!(g.adds()[0]["max_tokens"], 3);
    let r = g.post_json("/v1/responses", &request(json!("hi"), json!({"max_output_tokens": 3, "stream": true})));
    let events = events(&r);
    let (name, last) = events.last().unwrap();
    assert_eq!((name.as_str(), last["response"]["status"].as_str()), ("response.incomplete", Some("incomplete")));
    assert_eq!(output_text(&last["response"]), output_text(&v));
}

#[test]
fn text_format_json_schema_constrains_the_engine() {
    let g = gateway();
    let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]});
    let format = json!({"type": "json_schema", "name": "a", "schema": schema, "strict": true});
    let r = g.post_json("/v1/responses", &request(json!("Answer in JSON."), json!({"text": {"format": format}})));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(output_text(&r.json()), "{\"answer\": 42}");
    assert_eq!(r.json()["text"]["format"], format);
    let sent = &g.adds()[0]["structured_outputs"];
    assert_eq!(serde_json::from_str::<Value>(sent["json"].as_str().unwrap()).unwrap(), schema);
}

#[test]
fn tool_calls_and_reasoning_become_output_items_streamed_and_not() {
    let g = gateway();
    let body = request(json!("call a tool"), json!({"tools": [weather_tool()]}));
    let v = g.post_json("/v1/responses", &body).json();
    let kinds: Vec<&str> = v["output"].as_array().unwrap().iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["reasoning", "message", "function_call"], "{v}");
    assert_eq!(v["output"][0]["content"], json!([{"type": "reasoning_text", "text": "check the weather"}]));
    assert_eq!(output_text(&v), "Let me look.");
    let call = &v["output"][2];
    assert_eq!((call["name"].as_str(), call["status"].as_str()), (Some("get_weather"), Some("completed")));
    assert!(call["call_id"].as_str().unwrap().starts_with("call_") && call["id"].as_str().unwrap().starts_with("fc_"));
    assert_eq!(serde_json::from_str::<Value>(call["arguments"].as_str().unwrap()).unwrap(), json!({"city": "Paris"}));
    let reasoning_tokens = common::tokenizer().encode("check the weather", false).unwrap().len() as u64;
    assert_eq!(v["usage"]["output_tokens_details"]["reasoning_tokens"].as_u64(), Some(reasoning_tokens));
    let mut stream_body = body.clone();
    stream_body["stream"] = json!(true);
    let events = events(&g.post_json("/v1/responses", &stream_body));
    let arguments: String = events
        .iter()
        .filter(|(n, _)| n == "response.function_call_arguments.delta")
        .map(|(_, v)| v["delta"].as_str().unwrap())
        .collect();
    assert_eq!(arguments, call["arguments"].as_str().unwrap());
    let done = &events.last().unwrap().1["response"];
    let streamed: Vec<&str> = done["output"].as_array().unwrap().iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(streamed, kinds);
    assert_eq!(done["usage"]["output_tokens_details"], v["usage"]["output_tokens_details"]);
    // The call's output goes back as the next turn's input.
    let next = request(
        json!([{"role": "user", "content": "call a tool"}, call.clone(),
               {"type": "function_call_output", "call_id": call["call_id"], "output": "18C"}]),
        json!({"tools": [weather_tool()]}),
    );
    assert_eq!(g.post_json("/v1/responses", &next).status, 200);
}

#[test]
fn bad_requests_are_refused_naming_the_field() {
    let g = gateway();
    let image =
        json!([{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AA"}]}]);
    let cases = [
        (request(image, json!({})), "input[0].content[0].image_url", "does not take images"),
        (json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}), "messages", "'input'"),
        (request(json!("hi"), json!({"max_tokens": 5})), "max_tokens", "'max_output_tokens'"),
        (request(json!("hi"), json!({"response_format": {"type": "json_object"}})), "response_format", "'text.format'"),
        (request(json!("hi"), json!({"n": 2})), "n", "one response per request"),
        (
            request(json!("hi"), json!({"text": {"format": {"type": "json_schema", "name": "a"}}})),
            "text.format",
            "'schema'",
        ),
        (
            request(
                json!("hi"),
                json!({"tools": [weather_tool()], "tool_choice": {"type": "function", "name": "nope"}}),
            ),
            "tool_choice",
            "'nope'",
        ),
        (request(json!("hi"), json!({"tools": [{"type": "web_search"}]})), "tools[0].type", "'web_search'"),
        (request(json!("hi"), json!({"background": true})), "background", "not supported"),
        (
            request(json!([{"role": "user", "content": "a"}, {"type": "item_reference", "id": "x"}]), json!({})),
            "input[1].type",
            "'item_reference'",
        ),
        (json!({"model": "test-model"}), "input", "required"),
        (request(json!("hi"), json!({"temperature": 3})), "temperature", "temperature"),
        (request(json!("hi"), json!({"max_output_tokens": 100000})), "max_output_tokens", "max_output_tokens=100000"),
    ];
    for (body, param, words) in cases {
        for stream in [false, true] {
            let mut body = body.clone();
            body["stream"] = json!(stream);
            let r = g.post_json("/v1/responses", &body);
            assert_eq!(r.status, 400, "{body}: {}", r.text());
            assert_eq!(r.header("content-type"), Some("application/json"));
            let e = &r.json()["error"];
            assert_eq!(
                (e["param"].as_str(), e["type"].as_str()),
                (Some(param), Some("invalid_request_error")),
                "{body}: {e}"
            );
            assert!(e["message"].as_str().unwrap().contains(words), "{body}: {e}");
        }
    }
    assert!(g.adds().is_empty(), "a refused request reached the engine");
}

#[test]
fn an_unknown_previous_response_is_not_found() {
    let g = gateway();
    let r = g.post_json("/v1/responses", &request(json!("hi"), json!({"previous_response_id": "resp_missing"})));
    assert_eq!(r.status, 404, "{}", r.text());
    let e = &r.json()["error"];
    assert_eq!(e["param"], "previous_response_id");
    assert!(e["message"].as_str().unwrap().contains("resp_missing"), "{e}");
    assert_eq!(
        g.post_json("/v1/responses", &request(json!("hi"), json!({"conversation": {"id": "conv_x"}}))).status,
        404
    );
    assert!(g.adds().is_empty());
}

#[test]
fn responses_are_counted_under_their_own_endpoint() {
    let g = gateway();
    assert_eq!(g.post_json("/v1/responses", &request(json!("hi"), json!({}))).status, 200);
    assert_eq!(g.post_json("/v1/responses", &request(json!("hi"), json!({"stream": true}))).status, 200);
    let m = g.metrics();
    for streaming in ["false", "true"] {
        let line = format!(
            "smg_router_requests_total{{router_type=\"zmq\",connection_mode=\"zmq\",model=\"test-model\",endpoint=\"responses\",streaming=\"{streaming}\"}} 1"
        );
        assert!(m.contains(&line), "{line} missing:\n{m}");
    }
    let r = g.get("/v1/responses");
    assert_eq!(r.status, 405, "{}", r.text());
}
