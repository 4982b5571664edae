#!/usr/bin/env bash
# A real H.264 encoder with B-frames for the video tests: PyAV from PyPI (its wheels bundle
# FFmpeg built with libx264) in its own venv, beside the real-vLLM one and never inside it.
# The gateway's own encoder example (OpenH264) writes no B-frames; this one writes what
# x264, phones and ffmpeg write. Reruns return at once.
#
#   tools/video/setup-encoder.sh        # into $REAL_VLLM_HOME/venv-bframes
#   tools/video/make_bframes.py ...     # run with that venv's python
set -euo pipefail
home=${REAL_VLLM_HOME:-$HOME/.cache/real-vllm}
venv=$home/venv-bframes
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import av, numpy' 2>/dev/null; then
  mkdir -p "$home"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "av>=14" "numpy<3"
fi
"$venv/bin/python" -c 'import av; av.codec.Codec("libx264", "w")' \
  || { echo "PyAV's FFmpeg has no libx264 encoder" >&2; exit 1; }
echo "$venv/bin/python"
