//! Which renderer builds a model's prompts, from its `config.json` (SMG's renderer table).
//!
//! | `config.json` has                                            | renderer        |
//! |--------------------------------------------------------------|-----------------|
//! | architecture `DeepseekV32ForCausalLM`                        | DeepSeek-V3.2   |
//! | architecture `DeepseekV4ForCausalLM`                         | DeepSeek-V4     |
//! | architecture `DeepseekV41ForCausalLM`, or `model_type` `deepseek_v41` | DeepSeek-V4.1 |
//! | architecture `GptOssForCausalLM`, or `model_type` `gpt_oss` (or a served name with `gpt-oss`) | Harmony |
//! | anything else                                                | the Jinja template |
//!
//! DeepSeek-V4 checkpoints share one `config.json`, but the 0731 refresh changed what the
//! effort levels render: the checkpoint's own `encoding/encoding_dsv4.py` says which
//! revision it is (only the 0731 file has the "Beyond maximum" prompt); without that file a
//! `0731` in the model path marks the refresh, and otherwise the original encoding holds.

use std::path::Path;

use serde_json::Value;

/// The DeepSeek-V4 effort revision a checkpoint was trained with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V4Revision {
    /// DeepSeek-V4-Flash / -Pro as first released: `high` (no text) and `max`.
    Original,
    /// The 0731 refresh: `low` (no text), `high` (the original `max` text) and a new `max`.
    R0731,
}

/// The renderer a model's prompts go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RendererKind {
    Jinja,
    DeepseekV32,
    DeepseekV4(V4Revision),
    DeepseekV41,
    Harmony,
}

impl RendererKind {
    /// The name operators see in the log.
    pub fn name(self) -> &'static str {
        match self {
            RendererKind::Jinja => "Jinja chat template",
            RendererKind::DeepseekV32 => "DeepSeek-V3.2",
            RendererKind::DeepseekV4(V4Revision::Original) => "DeepSeek-V4",
            RendererKind::DeepseekV4(V4Revision::R0731) => "DeepSeek-V4 (0731)",
            RendererKind::DeepseekV41 => "DeepSeek-V4.1",
            RendererKind::Harmony => "Harmony (gpt-oss)",
        }
    }

    /// Whether the renderer replaces the Jinja template (so `--chat-template` has no effect).
    pub fn replaces_jinja(self) -> bool {
        !matches!(self, RendererKind::Jinja)
    }
}

/// The first line of the 0731 encoder's `max` prompt, which the original encoder lacks.
const R0731_MARKER: &str = "Reasoning Effort: Beyond maximum";

/// The renderer for the model in `model_dir`, whose `config.json` is `config`, served as
/// `served_name`.
pub fn renderer_kind(config: &Value, model_dir: &Path, served_name: &str) -> RendererKind {
    let architecture = |name: &str| {
        config
            .get("architectures")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(name)))
    };
    let model_type = config.get("model_type").and_then(Value::as_str);
    if architecture("DeepseekV32ForCausalLM") {
        RendererKind::DeepseekV32
    } else if architecture("DeepseekV41ForCausalLM") || model_type == Some("deepseek_v41") {
        RendererKind::DeepseekV41
    } else if architecture("DeepseekV4ForCausalLM") {
        RendererKind::DeepseekV4(v4_revision(model_dir))
    } else if architecture("GptOssForCausalLM")
        || model_type == Some("gpt_oss")
        || served_name.to_lowercase().contains("gpt-oss")
    {
        RendererKind::Harmony
    } else {
        RendererKind::Jinja
    }
}

fn v4_revision(model_dir: &Path) -> V4Revision {
    match std::fs::read_to_string(model_dir.join("encoding").join("encoding_dsv4.py")) {
        Ok(source) if source.contains(R0731_MARKER) => V4Revision::R0731,
        Ok(_) => V4Revision::Original,
        Err(_) if model_dir.to_string_lossy().contains("0731") => V4Revision::R0731,
        Err(_) => V4Revision::Original,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table() {
        let dir = Path::new("/nonexistent/model");
        let cases = [
            (json!({"architectures": ["DeepseekV32ForCausalLM"]}), RendererKind::DeepseekV32),
            (json!({"architectures": ["DeepseekV4ForCausalLM"]}), RendererKind::DeepseekV4(V4Revision::Original)),
            (json!({"architectures": ["DeepseekV41ForCausalLM"]}), RendererKind::DeepseekV41),
            (json!({"model_type": "deepseek_v41"}), RendererKind::DeepseekV41),
            (json!({"architectures": ["GptOssForCausalLM"]}), RendererKind::Harmony),
            (json!({"model_type": "gpt_oss"}), RendererKind::Harmony),
            (json!({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}), RendererKind::Jinja),
            (json!({"architectures": ["Qwen3ForCausalLM"]}), RendererKind::Jinja),
            (json!(null), RendererKind::Jinja),
        ];
        for (config, kind) in cases {
            assert_eq!(renderer_kind(&config, dir, "m"), kind, "{config}");
        }
        assert_eq!(renderer_kind(&json!({}), dir, "openai/GPT-OSS-20b"), RendererKind::Harmony);
    }

    #[test]
    fn v4_revisions() {
        let root = std::env::temp_dir().join(format!("sg-v4rev-{}", shardgate_util::ids::random_hex(8)));
        let with_file = |name: &str, source: Option<&str>| {
            let dir = root.join(name);
            std::fs::create_dir_all(dir.join("encoding")).unwrap();
            if let Some(s) = source {
                std::fs::write(dir.join("encoding/encoding_dsv4.py"), s).unwrap();
            }
            dir
        };
        let v4 = json!({"architectures": ["DeepseekV4ForCausalLM"]});
        let cases = [
            (with_file("a", Some("\"max\": (\"Reasoning Effort: Beyond maximum — ...")), V4Revision::R0731),
            // The file decides over the path.
            (with_file("DeepSeek-V4-Flash-0731", Some("REASONING_EFFORT_MAX = ...")), V4Revision::Original),
            (with_file("DeepSeek-V4-Flash-0731-nofile", None), V4Revision::R0731),
            (with_file("DeepSeek-V4-Flash", None), V4Revision::Original),
        ];
        for (dir, revision) in cases {
            assert_eq!(renderer_kind(&v4, &dir, "m"), RendererKind::DeepseekV4(revision), "{}", dir.display());
        }
        let _ = std::fs::remove_dir_all(&root);
    }
}
