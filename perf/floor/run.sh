#!/usr/bin/env bash
# The kernel's per-chunk floor for the paced regime (see write_floor.c), with the harness's
# pinning: the writer (a gateway's place) on CPU 1, the reader (the client's) on CPU 0.
# Usage: perf/floor/run.sh [STEPS]      (default 1000 steps of 20 ms: about 20 s per row)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
STEPS=${1:-1000}
BIN=$(mktemp -d /tmp/write_floor.XXXXXX)/write_floor
cc -O2 -pthread -o "$BIN" "$HERE/write_floor.c"
for n in 8 64; do
  "$BIN" "$n" 20 "$STEPS" 1 0
done
