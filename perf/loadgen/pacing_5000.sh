#!/usr/bin/env bash
# The issue's pacing criterion: open-loop Poisson arrivals at 5,000 req/s for 30 s must achieve
# the offered rate within 1 %. Runs the real runner, pacer and client (one pinned client core)
# against an in-process sink server on another core that answers every request at once, so the
# server cannot be what falls behind. The test asserts the criterion and prints the numbers.
#
# Usage: perf/loadgen/pacing_5000.sh   (writes perf/loadgen/results/<UTC date>-pacing/pacing.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-perf/loadgen/results/$(date -u +%Y%m%d-%H%M%S)-pacing}
mkdir -p "$OUT"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
  cargo test --release -p shardgate-loadgen --lib loopback::pacing_holds_5000_per_s_for_30_s -- --ignored --nocapture 2>&1 \
    | grep -E '^(offered|first failure|test )|panicked'
} | tee "$OUT/pacing.txt"
