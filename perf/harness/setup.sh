#!/usr/bin/env bash
# The perf harness's setup step, idempotent, needing only python3 (with venv), pip and unzip.
# Fetches into CACHE (default ~/.cache/shardgate):
#   vllm-rs   : the Rust front end inside the PyPI vllm 0.33.0 wheel (only vllm/vllm-rs is
#               unzipped; the wheel, about 400 MB, is deleted after)
#   perf-venv : a venv with PyPI `smg` (the SMG gateway)
# Env: VLLM_VERSION (0.33.0), SMG_VERSION (unset: newest), CACHE.
# Prints the paths it settled on as KEY=VALUE lines (run.py reads them).
set -euo pipefail
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardgate}
VLLM_VERSION=${VLLM_VERSION:-0.33.0}
SMG_SPEC=smg${SMG_VERSION:+==$SMG_VERSION}

# --- vllm-rs -------------------------------------------------------------------------------
VDIR=$CACHE/vllm-$VLLM_VERSION
if [ ! -x "$VDIR/vllm/vllm-rs" ]; then
  mkdir -p "$VDIR"
  pip download -q --no-deps --only-binary=:all: "vllm==$VLLM_VERSION" -d "$VDIR" >&2
  (cd "$VDIR" && unzip -o -q vllm-"$VLLM_VERSION"-*.whl 'vllm/vllm-rs' && rm -f vllm-"$VLLM_VERSION"-*.whl)
  chmod +x "$VDIR/vllm/vllm-rs"
fi
"$VDIR/vllm/vllm-rs" --version >&2

# --- smg ----------------------------------------------------------------------------------
VENV=$CACHE/perf-venv
if [ ! -x "$VENV/bin/smg" ]; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip >&2
  "$VENV/bin/pip" install -q "$SMG_SPEC" >&2
fi
SMG_VER=$("$VENV/bin/pip" show smg 2>/dev/null | awk '/^Version:/{print $2}')
echo "smg $SMG_VER" >&2

echo "VLLM_RS=$VDIR/vllm/vllm-rs"
echo "SMG=$VENV/bin/smg"
echo "SMG_VERSION=$SMG_VER"
