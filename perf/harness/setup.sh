#!/usr/bin/env bash
# Fetch the peer gateways of the perf harness, once, into ~/.cache/shardgate (idempotent):
#   vllm-rs  : the Rust front end inside the PyPI vllm 0.33.0 wheel (only vllm/vllm-rs is unzipped)
#   smg      : PyPI `smg` in its own venv (~/.cache/shardgate/perf-venv)
# Env: VLLM_VERSION (0.33.0), SMG_VERSION (unset: newest), CACHE (~/.cache/shardgate).
# Prints the paths it settled on as KEY=VALUE lines (run.py reads them the same way).
set -euo pipefail
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardgate}
VLLM_VERSION=${VLLM_VERSION:-0.33.0}
SMG_SPEC=smg${SMG_VERSION:+==$SMG_VERSION}

# --- vllm-rs -------------------------------------------------------------------------------
VDIR=$CACHE/vllm-$VLLM_VERSION
if [ ! -x "$VDIR/vllm/vllm-rs" ]; then
  mkdir -p "$VDIR"
  # a copy an earlier session already unzipped (same wheel) saves a 400 MB download
  if [ "$VLLM_VERSION" = 0.33.0 ] && [ -x /work/scratch/vllm-wheel/vllm/vllm-rs ] \
     && [ "$(/work/scratch/vllm-wheel/vllm/vllm-rs --version 2>/dev/null)" = "vllm-rs 0.33.0" ]; then
    mkdir -p "$VDIR/vllm" && cp /work/scratch/vllm-wheel/vllm/vllm-rs "$VDIR/vllm/vllm-rs"
  else
    pip download --no-deps --only-binary=:all: "vllm==$VLLM_VERSION" -d "$VDIR" >&2
    (cd "$VDIR" && unzip -o -q vllm-"$VLLM_VERSION"-*.whl 'vllm/vllm-rs' && rm -f vllm-"$VLLM_VERSION"-*.whl)
  fi
  chmod +x "$VDIR/vllm/vllm-rs"
fi
"$VDIR/vllm/vllm-rs" --version >&2

# --- smg -----------------------------------------------------------------------------------
VENV=$CACHE/perf-venv
if [ ! -x "$VENV/bin/smg" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip >&2
  "$VENV/bin/pip" install -q "$SMG_SPEC" >&2
fi
SMG_VER=$("$VENV/bin/pip" show smg 2>/dev/null | awk '/^Version:/{print $2}')
echo "smg $SMG_VER" >&2

echo "VLLM_RS=$VDIR/vllm/vllm-rs"
echo "SMG=$VENV/bin/smg"
echo "SMG_VERSION=$SMG_VER"
