#!/usr/bin/env bash
# A real headless vLLM engine core on the CPU that dials the gateway's handshake address
# tcp://127.0.0.1:PORT, as `vllm serve MODEL --headless` does on a GPU host.
#   run-engine.sh PORT [DP_SIZE] [more vllm serve args...]
# REAL_VLLM_MODEL picks the model directory (default: tiny-chat), REAL_VLLM_VENV the vLLM release
# (default: $REAL_VLLM_HOME/venv; install-version.sh makes others). Needs setup.sh first;
# registration takes 35-45 s on 2 cores.
set -euo pipefail
port=${1:?handshake port}
dp=${2:-1}
shift $(($# >= 2 ? 2 : 1))
home=${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}
model=${REAL_VLLM_MODEL:-$home/tiny-chat}
export VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
exec "${REAL_VLLM_VENV:-$home/venv}/bin/vllm" serve "$model" --headless \
  --data-parallel-size "$dp" --data-parallel-size-local "$dp" \
  --data-parallel-address 127.0.0.1 --data-parallel-rpc-port "$port" \
  --dtype float32 --max-model-len 1024 --max-num-seqs 8 --enforce-eager "$@"
