#!/usr/bin/env bash
# SMG's VllmEngine gRPC service (PyPI smg-grpc-servicer) around a vLLM CPU engine, listening on
# 127.0.0.1:PORT, as `vllm serve MODEL --grpc` does on a GPU host.
#   run-servicer.sh PORT [more engine args...]
# REAL_VLLM_MODEL picks the model directory (default: tiny-chat). Needs setup.sh first; the
# engine settings are run-engine.sh's, so answers match the ZMQ tests' engine.
set -euo pipefail
port=${1:?listen port}
shift
home=${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}
model=${REAL_VLLM_MODEL:-$home/tiny-chat}
export VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
exec "$home/grpc-venv/bin/python" -m vllm.entrypoints.launchers.grpc_server \
  --host 127.0.0.1 --port "$port" --model "$model" \
  --dtype float32 --max-model-len 1024 --max-num-seqs 8 --enforce-eager "$@"
