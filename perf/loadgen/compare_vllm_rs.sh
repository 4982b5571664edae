#!/usr/bin/env bash
# `shardgate bench` side by side with `vllm-rs bench serve` (the Rust client inside the PyPI
# vllm wheel), same workload, same pinning, the two clients alternating run by run (which goes
# first alternates by round) so that machine noise hits both alike. Two targets:
#   TARGET=sim   shardgate-sim behind shardgate with zero engine delay (the issue's setup),
#                started fresh for every run;
#   TARGET=sink  `shardgate bench sink`, which answers at once: what remains is client overhead.
#
# Usage: perf/loadgen/compare_vllm_rs.sh   (env: TARGET, ROUNDS, CONFIGS, SERVER_CPU, CLIENT_CPU)
# Writes perf/loadgen/results/<UTC date>-<target>/: every result JSON and summary, summary.md.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILT=${CARGO_TARGET_DIR:-target}/release                # where `cargo build --release` put them
SHARDGATE=${SHARDGATE:-$BUILT/shardgate}               # gateway + `demo --prepare`
SIM=${SIM:-$BUILT/shardgate-sim}
BENCH=${BENCH:-$SHARDGATE}                             # the binary with `bench`
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ROUNDS=${ROUNDS:-7}
# cN:P = closed loop, max-concurrency N; rR:P = open loop, Poisson R req/s; P prompts each.
CONFIGS=${CONFIGS:-"c32:2000 c1:1000 r1500:6000"}
PORT=${PORT:-31610}
TARGET=${TARGET:-sim}
OUT=${OUT:-perf/loadgen/results/$(date -u +%Y%m%d-%H%M%S)-$TARGET}
mkdir -p "$OUT"

for bin in "$SHARDGATE" "$SIM" "$BENCH"; do
  [ -x "$bin" ] || { echo "$bin is missing: cargo build --release --bin shardgate --bin shardgate-sim" >&2; exit 1; }
done
if [ -z "${VLLM_RS:-}" ]; then
  # The harness's setup fetches vllm-rs (only the Rust client out of the vllm wheel), cached.
  VLLM_RS=$(perf/harness/setup.sh | sed -n 's/^VLLM_RS=//p')
fi

MODEL_DIR=$("$SHARDGATE" demo --prepare)
SOCK_DIR=$(mktemp -d /tmp/sgbench.XXXXXX)
SIM_PID=; GW_PID=
stop_server() {
  [ -n "$GW_PID" ] && kill "$GW_PID" 2>/dev/null && wait "$GW_PID" 2>/dev/null || true
  [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null || true
  SIM_PID=; GW_PID=
}
trap stop_server EXIT
# A fresh simulator and gateway for every run: the gateway measured here slows down as it
# serves more requests (see README.md), which would favour whichever client ran first.
start_server() {  # log name
  local sock=$SOCK_DIR/engine-$1 ready=/readiness
  if [ "$TARGET" = sink ]; then
    "$BENCH" bench sink --port "$PORT" --output-len 32 --cpu "$SERVER_CPU" > "$OUT/$1.sink.log" 2>&1 &
    GW_PID=$!
    ready=/v1/models
  else
    taskset -c "$SERVER_CPU" "$SIM" --worker-url "ipc://$sock" --model-path "$MODEL_DIR" \
      --ttft-ms 0 --itl-ms 0 --log-level warn > "$OUT/$1.sim.log" 2>&1 &
    SIM_PID=$!
    taskset -c "$SERVER_CPU" "$SHARDGATE" launch --worker-urls "ipc://$sock" --model-path "$MODEL_DIR" \
      --served-model-name qwen3-demo --host 127.0.0.1 --port "$PORT" --shards 1 --log-level warn \
      > "$OUT/$1.gateway.log" 2>&1 &
    GW_PID=$!
  fi
  for _ in $(seq 150); do
    curl -sf "http://127.0.0.1:$PORT$ready" > /dev/null && return
    sleep 0.2
  done
  echo "server did not become ready; see $OUT/$1.*.log" >&2
  ss -tanp 2>/dev/null | grep ":$PORT " >&2 || true
  exit 1
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), kernel $(uname -r)"
  if [ "$TARGET" = sink ]; then
    echo "target: shardgate bench sink (32 output tokens, answers at once) on CPU $SERVER_CPU, clients on CPU $CLIENT_CPU"
  else
    echo "target: gateway --shards 1 + sim --ttft-ms 0 --itl-ms 0, fresh for every run, on CPU $SERVER_CPU; clients on CPU $CLIENT_CPU"
  fi
  echo "bench: $("$BENCH" --version 2>/dev/null || echo "$BENCH")"
  echo "vllm-rs: $VLLM_RS"
} > "$OUT/setup.txt"

run_vllm_rs() {  # load-flags prompts name
  taskset -c "$CLIENT_CPU" "$VLLM_RS" bench serve --backend openai --base-url "http://127.0.0.1:$PORT" \
    --model qwen3-demo --tokenizer "$MODEL_DIR" --dataset-name random --random-input-len 128 \
    --random-output-len 32 --num-prompts "$2" $1 --num-warmups 32 --ignore-eos \
    --prompt-token-ids --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
    --disable-tqdm --save-result --result-dir "$OUT" --result-filename "$3.json" > "$OUT/$3.txt" 2>&1
}
run_shardgate() {
  taskset -c "$CLIENT_CPU" "$BENCH" bench --base-url "http://127.0.0.1:$PORT" \
    --model qwen3-demo --tokenizer "$MODEL_DIR" --dataset-name random --random-input-len 128 \
    --random-output-len 32 --num-prompts "$2" $1 --num-warmups 32 --ignore-eos \
    --prompt-token-ids --no-per-chunk-usage --percentiles 50,90,99 --disable-progress --no-plots \
    --result-dir "$OUT" --result-filename "$3.json" > "$OUT/$3.txt" 2>&1
}

# Busy % of all CPUs over one second (the server idles between runs, so this is other load).
busy_pct() {
  local a b
  read -r _ a1 a2 a3 a4 a5 a6 a7 a8 _ < /proc/stat
  sleep 1
  read -r _ b1 b2 b3 b4 b5 b6 b7 b8 _ < /proc/stat
  a=$((a1 + a2 + a3 + a6 + a7 + a8)); b=$((b1 + b2 + b3 + b6 + b7 + b8))
  echo $((100 * (b - a) / (b - a + b4 - a4 + b5 - a5 + 1)))
}
# On a shared machine, wait (at most QUIET_WAIT_S) until other jobs leave the CPUs alone.
wait_quiet() {
  local pct
  for _ in $(seq "${QUIET_WAIT_S:-120}"); do
    pct=$(busy_pct)
    [ "$pct" -le "${QUIET_PCT:-15}" ] && break
  done
  echo "$pct"
}

for round in $(seq "$ROUNDS"); do
  for cfg in $CONFIGS; do
    load=${cfg%%:*}; n=${cfg##*:}
    case $load in
      c*) flags="--max-concurrency ${load#c}" ;;
      r*) flags="--request-rate ${load#r}" ;;
      *) echo "bad config $cfg" >&2; exit 2 ;;
    esac
    echo "${load}-r${round}: machine busy $(wait_quiet) % before the pair" >> "$OUT/quiet.txt"
    if [ $((round % 2)) -eq 1 ]; then order="vllm_rs shardgate"; else order="shardgate vllm_rs"; fi
    for tool in $order; do
      name="${load}-r${round}-${tool}"
      start_server "$name"
      "run_$tool" "$flags" "$n" "$name"
      stop_server
      echo "round $round $load $tool: $(grep -m1 -E '^Median TTFT' "$OUT/$name.txt" | tr -s ' ')"
    done
  done
done
# The per-request JSONL files are large and recomputable: keep the result JSONs.
rm -f "$OUT"/*.requests.jsonl
find "$OUT" -name '*.log' -empty -delete
python3 perf/loadgen/summarize.py "$OUT" | tee "$OUT/summary.md"
