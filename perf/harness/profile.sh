#!/usr/bin/env bash
# Profile shardgate (sim attached directly, no shim) under one workload with `perf record`, then
# print self time by function with perf_top.py (this perf cannot resolve the release binary's
# symbols itself). Same pinning as run.py: gateway on CPU 1, sim + bench on CPU 0.
#
# Usage: perf/harness/profile.sh [b|c8|c64|d|t|a][h2]  (env: PORT, BIN_DIR, EXPAND, H2_CONNECTIONS,
# PERF_FLAGS: more `perf record` flags, e.g. -g for the kernel's call chains).
# A workload name ending in h2 runs it over HTTP/2 (h2c), its streams over H2_CONNECTIONS (8).
# Uses the binaries run.py copied to /tmp/perf-bin (run run.py once, or copy them there).
# Needs `perf` (Debian: apt-get install linux-perf).
set -euo pipefail
WL=${1:-b}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN_DIR:-/tmp/perf-bin}
PORT=${PORT:-32100}
EXPAND=${EXPAND:-PollFn}
H2F=""
if [[ $WL == *h2 ]]; then WL=${WL%h2}; H2F="--http2 --connections ${H2_CONNECTIONS:-8}"; fi
case $WL in
  a)   SIMF="--ttft-ms 0 --itl-ms 0";  BF="--backend openai-chat --random-input-len 1000 --random-output-len 16 --max-concurrency 8 --num-prompts 3000" ;;
  b)   SIMF="--ttft-ms 0 --itl-ms 0";  BF="--random-input-len 128 --random-output-len 512 --max-concurrency 64 --num-prompts 3000" ;;
  c8)  SIMF="--ttft-ms 0 --itl-ms 20"; BF="--random-input-len 128 --random-output-len 512 --max-concurrency 8 --num-prompts 16" ;;
  c64) SIMF="--ttft-ms 0 --itl-ms 20"; BF="--random-input-len 128 --random-output-len 512 --max-concurrency 64 --num-prompts 128" ;;
  d)   SIMF="--ttft-ms 0 --itl-ms 50"; BF="--random-input-len 128 --random-output-len 400 --max-concurrency 2000 --num-prompts 2000" ;;
  t)   SIMF="--ttft-ms 0 --itl-ms 0";  BF="--random-input-len 128 --random-output-len 16 --max-concurrency 1 --num-prompts 4000" ;;
  *) echo "unknown workload $WL" >&2; exit 2 ;;
esac
M=$("$BIN/shardgate" demo --prepare)
D=$(mktemp -d /tmp/sgprof.XXXXXX); mkdir -m 700 "$D/sock"
taskset -c 1 "$BIN/shardgate" launch --worker-urls "ipc://$D/sock/engine" --model-path "$M" --served-model-name qwen3-demo \
  --host 127.0.0.1 --port "$PORT" --shards 1 --log-level warn --metrics-port $((PORT + 1)) --metrics-host 127.0.0.1 \
  --health-check-interval-secs 1 > "$D/gateway.log" 2>&1 &
G=$!
# shellcheck disable=SC2086
taskset -c 0 "$BIN/shardgate-sim" --worker-url "ipc://$D/sock/engine" --model-path "$M" $SIMF --max-num-seqs 4096 \
  --log-level warn > "$D/sim.log" 2>&1 &
SIM=$!
trap 'kill $G $SIM 2>/dev/null || true' EXIT
for _ in $(seq 80); do curl -sf "http://127.0.0.1:$PORT/readiness" > /dev/null && break; sleep 0.25; done
common=(--base-url "http://127.0.0.1:$PORT" --tokenizer "$M" --ignore-eos --no-per-chunk-usage --disable-progress --no-plots --client-cores 0)
taskset -c 0 "$BIN/shardgate" bench "${common[@]}" --random-input-len 128 --random-output-len 16 --max-concurrency 8 \
  --num-prompts 64 --seed 1 --no-save > "$D/warmup.out" 2>&1
# shellcheck disable=SC2086
taskset -c 0 "$BIN/shardgate" bench "${common[@]}" $BF $H2F --result-dir "$D" --result-filename bench.json > "$D/bench.out" 2>&1 &
B=$!
# Record for the whole bench, not a fixed window: how long it spends building prompts before
# the load starts, and how long the load lasts, both change with the gateway's speed. The
# gateway is idle (no samples) while the bench builds its prompts.
# shellcheck disable=SC2086
perf record -F 2000 ${PERF_FLAGS:-} -o "$D/perf.data" -p "$G" > "$D/perf.out" 2>&1 &
P=$!
wait $B
kill -INT "$P"
wait "$P" || true
grep -E "Successful|duration|Median TTFT" "$D/bench.out"
python3 "$HERE/perf_top.py" "$D/perf.data" "$BIN/shardgate" --top 30 --expand "$EXPAND"
echo "files in $D"
