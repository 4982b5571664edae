//! Which renderer builds a model's prompts, from its `config.json` (SMG's renderer table).
//!
//! | `config.json` has                     | renderer           |
//! |---------------------------------------|--------------------|
//! | architecture `DeepseekV32ForCausalLM` | DeepSeek-V3.2      |
//! | anything else                         | the Jinja template |

use serde_json::Value;

/// The renderer a model's prompts go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RendererKind {
    Jinja,
    DeepseekV32,
}

impl RendererKind {
    /// The name operators see in the log.
    pub fn name(self) -> &'static str {
        match self {
            RendererKind::Jinja => "Jinja chat template",
            RendererKind::DeepseekV32 => "DeepSeek-V3.2",
        }
    }

    /// Whether the renderer replaces the Jinja template (so `--chat-template` has no effect).
    pub fn replaces_jinja(self) -> bool {
        !matches!(self, RendererKind::Jinja)
    }
}

/// The renderer for the model whose `config.json` is `config`.
pub fn renderer_kind(config: &Value) -> RendererKind {
    let architecture = |name: &str| {
        config
            .get("architectures")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(name)))
    };
    if architecture("DeepseekV32ForCausalLM") {
        RendererKind::DeepseekV32
    } else {
        RendererKind::Jinja
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table() {
        let cases = [
            (json!({"architectures": ["DeepseekV32ForCausalLM"]}), RendererKind::DeepseekV32),
            (json!({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}), RendererKind::Jinja),
            (json!({"architectures": ["Qwen3ForCausalLM"]}), RendererKind::Jinja),
            (json!(null), RendererKind::Jinja),
        ];
        for (config, kind) in cases {
            assert_eq!(renderer_kind(&config), kind, "{config}");
        }
    }
}
