#!/usr/bin/env bash
# The passthrough overhead of an HTTP worker, side by side in one run: `shardgate bench` against
# a simulator-backed shardgate (the upstream) directly, then against a second shardgate that
# has that upstream as its only (HTTP) worker. Prints both results, their ratios (through /
# direct) and the relaying gateway's CPU per request (utime + stime from /proc).
#   perf/http-worker/run.sh [PORT_BASE] [more shardgate bench flags...]
# Uses PORT_BASE..PORT_BASE+3 (default 19100); writes into perf/http-worker/results/<stamp>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${1:-19100}
shift $(($# > 0 ? 1 : 0))
bin=${SHARDGATE_BIN:-${CARGO_TARGET_DIR:-target}/release/shardgate}
out=perf/http-worker/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
up=$base front=$((base + 1))
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# The upstream: simulator + gateway on the demo model (its first run fetches the tokenizer).
"$bin" demo --port "$up" >"$out/upstream.log" 2>&1 &
up_pid=$!
pids+=("$up_pid")
model=${HOME}/.cache/shardgate/models/qwen3-demo
wait_ready() {
  for _ in $(seq 300); do
    curl -fs "http://127.0.0.1:$1/$2" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "port $1 not ready; logs in $out" >&2
  exit 1
}
wait_ready "$up" readiness
"$bin" launch --worker-urls "http://127.0.0.1:$up" --model-path "$model" --served-model-name qwen3-demo \
  --host 127.0.0.1 --port "$front" --metrics-port $((base + 2)) --health-check-interval-secs 1 \
  >"$out/front.log" 2>&1 &
front_pid=$!
pids+=("$front_pid")
wait_ready "$front" readiness

bench() {
  local port=$1 name=$2
  shift 2
  "$bin" bench --base-url "http://127.0.0.1:$port" --model qwen3-demo --backend openai-chat \
    --random-input-len 128 --random-output-len 32 --ignore-eos --num-prompts 1000 --max-concurrency 16 \
    --result-dir "$out" --result-filename "$name.json" --save-result "$@" >"$out/$name.txt" 2>&1
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# The upstream gateway's own CPU per request (it tokenizes, renders and detokenizes; its
# simulator is another process) is the yardstick for the relaying gateway's.
up_before=$(cpu_ticks "$up_pid")
bench "$up" direct "$@"
up_after=$(cpu_ticks "$up_pid")
before=$(cpu_ticks "$front_pid")
bench "$front" through "$@"
after=$(cpu_ticks "$front_pid")
{
  echo "upstream gateway CPU (direct run): $(( (up_after - up_before) * 1000000 / hz / 1000 )) us per request"
  echo "relaying gateway CPU (through run): $(( (after - before) * 1000000 / hz / 1000 )) us per request"
} | tee "$out/cpu.txt"
"$bin" bench compare "$out/direct.json" "$out/through.json" | tee "$out/compare.txt"
