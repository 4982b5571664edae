#!/usr/bin/env bash
# Instructions and allocations per streamed token of the whole gateway, from callgrind: the
# gateway runs under valgrind (one shard), the simulator and `shardgate bench` beside it; the
# instrumentation starts after a warm-up (start-up runs uninstrumented, which is also what
# keeps it from taking many minutes) and the counters are dumped after the measured bench. Deterministic enough to compare two builds side by side where wall time on a shared
# machine is not (run both in one invocation: BIN_DIRS="new old").
#
# The engine's step is slowed (ITL_MS, 200 by default) so that the gateway, ~50x slower under
# valgrind, still handles every step apart, as it does at full speed in the paced workloads:
# the instructions per token are those of the paced regime, the time per token is not.
# The gateway runs on monoio's epoll driver here (MONOIO_FORCE_LEGACY_DRIVER): valgrind runs one
# thread at a time and a shard waiting in io_uring_enter kept the others from running at all.
# The h2 path makes one write per connection per step on either driver; HTTP/1.1's per-chunk
# writes are system calls here where io_uring queues them, so compare like with like.
#
# Usage: perf/callgrind/gateway.sh [c64|c64h2|d|dh2|b|bh2 ...]
#   env: BIN_DIRS (directories holding shardgate and shardgate-sim; default: the release build),
#   PORT (21480), ITL_MS, STREAMS, TOKENS, H2_CONNECTIONS (8), KEEP=1 keeps the callgrind files, TOP=N lists the N functions with the most instructions.
# Prints one line per workload and build: instructions, malloc+realloc+calloc calls, wakes of
# monoio tasks, and each per output token.
# Needs valgrind (Debian: apt-get install valgrind) and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=perf/callgrind
DEF_BIN=${CARGO_TARGET_DIR:-target}/release
BIN_DIRS=${BIN_DIRS:-$DEF_BIN}
PORT=${PORT:-21480}
WLS=("$@")
[[ ${#WLS[@]} -gt 0 ]] || WLS=(c64 c64h2)
M=$("$(echo "$BIN_DIRS" | cut -d' ' -f1)/shardgate" demo --prepare)
for wl in "${WLS[@]}"; do
  base=${wl%h2}
  h2f=()
  [[ $wl == *h2 ]] && h2f=(--http2 --connections "${H2_CONNECTIONS:-8}")
  case $base in
    c64) itl=${ITL_MS:-200}; streams=${STREAMS:-64}; tokens=${TOKENS:-64} ;;
    d)   itl=${ITL_MS:-2000}; streams=${STREAMS:-500}; tokens=${TOKENS:-8} ;;
    b)   itl=0; streams=${STREAMS:-64}; tokens=${TOKENS:-64} ;;
    *) echo "unknown workload $wl" >&2; exit 2 ;;
  esac
  for bin in $BIN_DIRS; do
    D=$(mktemp -d /tmp/sgcg.XXXXXX); mkdir -m 700 "$D/sock"
    taskset -c 0 "$bin/shardgate-sim" --worker-url "ipc://$D/sock/engine" --model-path "$M" --ttft-ms 0 \
      --itl-ms "$itl" --max-num-seqs 4096 --log-level warn > "$D/sim.log" 2>&1 &
    SIM=$!
    MONOIO_FORCE_LEGACY_DRIVER=1 taskset -c 1 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$D/cg.out" --dump-instr=no \
      "$bin/shardgate" launch --worker-urls "ipc://$D/sock/engine" --model-path "$M" \
      --served-model-name qwen3-demo --host 127.0.0.1 --port "$PORT" --shards 1 --log-level warn \
      --metrics-port $((PORT + 1)) --metrics-host 127.0.0.1 > "$D/gateway.log" 2>&1 &
    G=$!
    trap 'kill $G $SIM 2>/dev/null || true' EXIT
    for _ in $(seq 1200); do curl -sf "http://127.0.0.1:$PORT/readiness" > /dev/null && break; sleep 0.5; done
    common=(--base-url "http://127.0.0.1:$PORT" --tokenizer "$M" --ignore-eos --no-per-chunk-usage
      --disable-progress --no-plots --client-cores 0 --random-input-len 128 --model qwen3-demo)
    taskset -c 0 "$bin/shardgate" bench "${common[@]}" --random-output-len 4 --max-concurrency 8 --num-prompts 16 \
      --seed 1 --no-save "${h2f[@]}" > "$D/warmup.out" 2>&1 || true
    callgrind_control -i on "$G" > /dev/null
    callgrind_control -z "$G" > /dev/null
    taskset -c 0 "$bin/shardgate" bench "${common[@]}" --random-output-len "$tokens" --max-concurrency "$streams" \
      --num-prompts "$streams" "${h2f[@]}" --result-dir "$D" --result-filename bench.json > "$D/bench.out" 2>&1 || true
    callgrind_control -d "$G" > /dev/null
    kill -INT $G; wait $G 2>/dev/null || true
    kill $SIM 2>/dev/null || true; wait $SIM 2>/dev/null || true
    trap - EXIT
    dump=$(ls "$D"/cg.out.* 2>/dev/null | head -1 || true)
    [[ -n $dump && -s $D/bench.json ]] || { echo "$wl $bin: no callgrind dump or bench result (see $D)"; continue; }
    python3 "$HERE/per_token.py" "$dump" "$D/bench.json" "$wl" "$bin" --top "${TOP:-0}"
    if [[ ${KEEP:-0} == 1 ]]; then echo "  kept $D"; else rm -rf "$D"; fi
  done
done
