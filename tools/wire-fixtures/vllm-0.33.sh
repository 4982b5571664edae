#!/usr/bin/env bash
# Wire fixtures for vLLM 0.33, whose wheel is GPU-only (no engine runs here): fetches the wheel
# (no dependencies), unpacks its Python sources, and has vllm_0_33.py encode representative
# messages with 0.33's own msgspec structs and encoder. The real-vLLM venv (setup.sh) supplies
# msgspec, numpy and torch; 0.33's sources shadow its vllm package.
#
#   tools/wire-fixtures/vllm-0.33.sh    # writes tests/wire/vllm/structs-0.33.0.json
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
home=${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}
python=$home/venv/bin/python
wheels=$home/wheels
mkdir -p "$wheels"
ls "$wheels"/vllm-0.33.0-*.whl > /dev/null 2>&1 \
  || "$python" -m pip download -q --no-deps -d "$wheels" vllm==0.33.0
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
"$python" -c 'import sys, zipfile
w = zipfile.ZipFile(sys.argv[1])
w.extractall(sys.argv[2], [n for n in w.namelist() if n.startswith("vllm/") and n.endswith(".py")])' \
  "$(ls "$wheels"/vllm-0.33.0-*.whl | head -1)" "$src"
VLLM_TARGET_DEVICE=cpu PYTHONPATH=$src "$python" "$here/vllm_0_33.py" \
  "$root/tests/wire/vllm/structs-0.33.0.json"
