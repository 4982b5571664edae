//! A model's assets as the gateway needs them: tokenizer, chat template, EOS ids, vocabulary
//! size and generation-config defaults, read from a local model directory.
//!
//! Sources, in vLLM's order: `tokenizer.json` from `--tokenizer-path` or the model directory
//! (else its `tiktoken.model`, as Kimi checkpoints ship it);
//! the chat template from `--chat-template`, then `chat_template.json` / `chat_template.jinja`
//! in the model directory, then `tokenizer_config.json`; EOS from the tokenizer's `eos_token`
//! plus `generation_config.json` (or `config.json` when that file is missing). `config.json`
//! also picks the renderer (`render::detect`): a native one replaces the chat template, and
//! `--chat-template` is then ignored, which the log says.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::tokenizer::Tokenizer;
use crate::error::ModelError;
use crate::render::{detect, harmony_encoding, RendererKind};
use openai_harmony::HarmonyEncoding;

/// Sampling defaults from `generation_config.json` (applied when the request leaves them unset,
/// as vLLM's `--generation-config auto` does).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationDefaults {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i32>,
    pub min_p: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub max_new_tokens: Option<u32>,
}

/// Everything loaded for one model. Immutable after load; shared by all shards.
pub struct ModelAssets {
    /// The name clients use in `model`.
    pub served_name: String,
    pub tokenizer: Tokenizer,
    pub chat_template: Option<String>,
    /// What renders the prompts: the chat template or a native encoder.
    pub renderer: RendererKind,
    /// gpt-oss's Harmony encoding (its renderer and output parser), for a Harmony model.
    pub harmony: Option<HarmonyEncoding>,
    /// `bos_token`, `eos_token`, ... as strings, passed to the chat template.
    pub special_tokens: Vec<(String, String)>,
    /// The primary EOS id (the tokenizer's `eos_token`).
    pub eos_token_id: Option<u32>,
    /// Extra EOS ids from the generation config (primary excluded), sent as stop token ids.
    pub extra_eos_token_ids: Vec<u32>,
    /// `config.json` `vocab_size` (the logits width), else the tokenizer's size.
    pub vocab_size: usize,
    /// Whether `tokenizer_config.json` asks for a BOS on encode (informational; the
    /// tokenizer's post-processor is authoritative).
    pub architectures: Vec<String>,
    pub model_type: Option<String>,
    pub generation_defaults: GenerationDefaults,
    /// Multimodal rotary positions (Qwen2-VL and kin): `rope_scaling` names `mrope_section`.
    pub uses_mrope: bool,
    /// A mixture-of-experts model: its data-parallel engines step in lockstep waves.
    pub is_moe: bool,
}

/// Where to load from.
#[derive(Debug, Clone)]
pub struct ModelSource {
    pub model_path: PathBuf,
    pub tokenizer_path: Option<PathBuf>,
    pub chat_template: Option<String>,
    pub served_name: String,
    /// Apply `generation_config.json` sampling defaults (`--generation-config auto`).
    pub use_generation_config: bool,
}

impl ModelAssets {
    pub fn load(src: &ModelSource) -> Result<Self, ModelError> {
        let model_dir = &src.model_path;
        if !model_dir.is_dir() {
            return Err(ModelError::NotADirectory(model_dir.clone()));
        }
        let tok_dir_or_file = src.tokenizer_path.clone().unwrap_or_else(|| model_dir.clone());
        let (tokenizer_file, tok_dir) = if tok_dir_or_file.is_file() {
            let dir = tok_dir_or_file.parent().map(Path::to_path_buf).unwrap_or_default();
            (tok_dir_or_file.clone(), dir)
        } else {
            (tok_dir_or_file.join("tokenizer.json"), tok_dir_or_file.clone())
        };
        let tokenizer_config = read_json(&tok_dir.join("tokenizer_config.json"))?.unwrap_or(Value::Null);
        // Kimi checkpoints ship a tiktoken vocabulary instead of `tokenizer.json`.
        let tiktoken_file = tok_dir.join("tiktoken.model");
        let mut tokenizer = if !tokenizer_file.is_file() && tiktoken_file.is_file() {
            Tokenizer::from_tiktoken_file(&tiktoken_file, &tokenizer_config)?
        } else {
            Tokenizer::from_file(&tokenizer_file)?
        };
        tokenizer.set_clean_up_tokenization_spaces(
            tokenizer_config.get("clean_up_tokenization_spaces").and_then(Value::as_bool).unwrap_or(false),
        );
        let config = read_json(&model_dir.join("config.json"))?.unwrap_or(Value::Null);
        let generation_config = read_json(&model_dir.join("generation_config.json"))?;

        let chat_template = load_chat_template(src.chat_template.as_deref(), model_dir, &tok_dir, &tokenizer_config)?;
        let renderer = detect::renderer_kind(&config, model_dir, &src.served_name);
        if renderer.replaces_jinja() && src.chat_template.is_some() {
            tracing::warn!(
                "--chat-template has no effect on {}: its prompts are rendered by the native {} renderer",
                src.served_name,
                renderer.name()
            );
        }
        let special_tokens = special_tokens_map(&tokenizer_config);
        let eos_token_id = special_tokens
            .iter()
            .find(|(k, _)| k == "eos_token")
            .and_then(|(_, v)| tokenizer.token_to_id(v))
            .or_else(|| config.get("eos_token_id").and_then(first_id));
        // transformers falls back to config.json when generation_config.json is absent.
        let eos_source = generation_config.as_ref().unwrap_or(&config);
        let mut extra_eos_token_ids: Vec<u32> = eos_source.get("eos_token_id").map(all_ids).unwrap_or_default();
        let harmony = match renderer {
            RendererKind::Harmony => Some(harmony_encoding::load(&tokenizer)?),
            _ => None,
        };
        // Harmony's stop tokens for the assistant (`<|return|>`, `<|call|>`) end the output
        // whatever the generation config says.
        if let Some(stops) = harmony.as_ref().and_then(|h| h.stop_tokens_for_assistant_actions().ok()) {
            extra_eos_token_ids.extend(stops);
        }
        extra_eos_token_ids.retain(|&id| Some(id) != eos_token_id);
        extra_eos_token_ids.sort_unstable();
        extra_eos_token_ids.dedup();

        let vocab_size = config
            .get("vocab_size")
            .and_then(Value::as_u64)
            .map(|v| v as usize)
            .unwrap_or_else(|| tokenizer.vocab_size());
        let architectures = config
            .get("architectures")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        let model_type = config.get("model_type").and_then(Value::as_str).map(str::to_string);
        let is_moe = [&config, config.get("text_config").unwrap_or(&Value::Null)].iter().any(|c| {
            ["num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"]
                .iter()
                .any(|k| c.get(*k).and_then(Value::as_u64).is_some_and(|n| n > 1))
        });
        let uses_mrope = [&config, config.get("text_config").unwrap_or(&Value::Null)].iter().any(|c| {
            c.get("rope_scaling").is_some_and(|r| {
                r.get("mrope_section").is_some()
                    || r.get("type")
                        .or_else(|| r.get("rope_type"))
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.contains("mrope"))
            })
        });
        let generation_defaults = match &generation_config {
            Some(g) if src.use_generation_config => generation_defaults(g),
            _ => GenerationDefaults::default(),
        };
        Ok(ModelAssets {
            served_name: src.served_name.clone(),
            tokenizer,
            chat_template,
            renderer,
            harmony,
            special_tokens,
            eos_token_id,
            extra_eos_token_ids,
            vocab_size,
            architectures,
            model_type,
            generation_defaults,
            uses_mrope,
            is_moe,
        })
    }
}

fn read_json(path: &Path) -> Result<Option<Value>, ModelError> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| ModelError::Parse { path: path.to_path_buf(), source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ModelError::Read { path: path.to_path_buf(), source }),
    }
}

fn first_id(v: &Value) -> Option<u32> {
    all_ids(v).into_iter().next()
}

/// An id or a list of ids.
fn all_ids(v: &Value) -> Vec<u32> {
    match v {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()).into_iter().collect(),
        Value::Array(a) => a.iter().filter_map(Value::as_u64).filter_map(|n| u32::try_from(n).ok()).collect(),
        _ => Vec::new(),
    }
}

/// A special token in `tokenizer_config.json` is a string or an `AddedToken` dict.
fn token_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

fn special_tokens_map(cfg: &Value) -> Vec<(String, String)> {
    ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]
        .iter()
        .filter_map(|k| cfg.get(*k).and_then(token_string).map(|v| (k.to_string(), v)))
        .collect()
}

fn load_chat_template(
    explicit: Option<&str>,
    model_dir: &Path,
    tok_dir: &Path,
    tokenizer_config: &Value,
) -> Result<Option<String>, ModelError> {
    if let Some(t) = explicit {
        let path = Path::new(t);
        // vLLM accepts a file path or the template text itself.
        return if path.is_file() {
            fs::read_to_string(path)
                .map(Some)
                .map_err(|source| ModelError::ReadTemplate { template: t.to_string(), source })
        } else if t.contains("{{") || t.contains("{%") {
            Ok(Some(t.to_string()))
        } else {
            Err(ModelError::TemplateArgument(t.to_string()))
        };
    }
    for dir in [model_dir, tok_dir] {
        if let Some(v) = read_json(&dir.join("chat_template.json"))? {
            if let Some(t) = template_from_value(v.get("chat_template").unwrap_or(&v)) {
                return Ok(Some(t));
            }
        }
        let jinja = dir.join("chat_template.jinja");
        if jinja.is_file() {
            return fs::read_to_string(&jinja).map(Some).map_err(|source| ModelError::Read { path: jinja, source });
        }
    }
    Ok(tokenizer_config.get("chat_template").and_then(template_from_value))
}

/// `chat_template` is a string, or a list of `{name, template}` where `default` wins.
fn template_from_value(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(list) => {
            let named = |name: &str| {
                list.iter()
                    .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
                    .and_then(|e| e.get("template"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            };
            named("default")
                .or_else(|| list.first().and_then(|e| e.get("template")).and_then(Value::as_str).map(str::to_string))
        }
        _ => None,
    }
}

fn generation_defaults(g: &Value) -> GenerationDefaults {
    let f = |k: &str| g.get(k).and_then(Value::as_f64);
    GenerationDefaults {
        temperature: f("temperature"),
        top_p: f("top_p"),
        top_k: g.get("top_k").and_then(Value::as_i64).and_then(|v| i32::try_from(v).ok()),
        min_p: f("min_p"),
        repetition_penalty: f("repetition_penalty"),
        max_new_tokens: g.get("max_new_tokens").and_then(Value::as_u64).and_then(|v| u32::try_from(v).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn eos_ids_come_as_int_or_list() {
        assert_eq!(all_ids(&json!(7)), vec![7]);
        assert_eq!(all_ids(&json!([151645, 151643])), vec![151645, 151643]);
        assert!(all_ids(&json!("x")).is_empty());
    }

    #[test]
    fn chat_template_lists_prefer_default() {
        let v = json!([{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]);
        assert_eq!(template_from_value(&v).as_deref(), Some("D"));
        assert_eq!(template_from_value(&json!("S")).as_deref(), Some("S"));
    }

    #[test]
    fn special_tokens_accept_added_token_dicts() {
        let cfg = json!({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null});
        assert_eq!(
            special_tokens_map(&cfg),
            vec![("bos_token".to_string(), "<s>".to_string()), ("eos_token".to_string(), "</s>".to_string())]
        );
    }
}
