#!/usr/bin/env bash
# Counts the gateway's write-side system calls per engine step, over HTTP/1.1 and over HTTP/2
# (`shardgate bench --http2`), with strace -c on the gateway of `shardgate demo` (one shard,
# the simulator stepping every ITL_MS). One wave of STREAMS streams of TOKENS tokens each, all
# in flight together, so each engine step touches every stream: syscalls per step = count /
# TOKENS, per chunk = count / (STREAMS x TOKENS).
# Chunk size matters (h2 writes a DATA payload of 256 bytes or more on its own unless the
# transport says it is not vectored): USAGE=1 asks for per-chunk usage (~330-byte chunks;
# default: without, ~240 bytes). GATEWAY=path runs another build's gateway (e.g. the commit
# before a change) under this build's bench.
#   perf/step-writes/run.sh [STREAMS] [TOKENS]       (needs strace; PORT picks the API port)
set -euo pipefail
cd "$(dirname "$0")/../.."
STREAMS=${1:-64}
TOKENS=${2:-100}
PORT=${PORT:-26100}
ITL_MS=${ITL_MS:-20}
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/shardgate}
GATEWAY=${GATEWAY:-$BIN}
USAGE_FLAG=--no-per-chunk-usage
[ "${USAGE:-0}" = 1 ] && USAGE_FLAG=
OUT=$(mktemp -d)
"$GATEWAY" demo --port "$PORT" --shards 1 --itl-ms "$ITL_MS" --log-level warn >"$OUT/demo.log" 2>&1 &
DEMO=$!
trap 'kill $DEMO 2>/dev/null || true; wait $DEMO 2>/dev/null || true' EXIT
for _ in $(seq 1 360); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1 && break
  sleep 0.5
done
MODEL_DIR=$("$BIN" demo --prepare 2>/dev/null | tail -1)
for transport in http1 http2; do
  flags=()
  [ "$transport" = http2 ] && flags=(--http2 --connections 8)
  # A warm-up run outside the trace: connections, tokenizer caches, allocator.
  "$BIN" bench --base-url "http://127.0.0.1:$PORT" --tokenizer "$MODEL_DIR" --random-input-len 32 \
    --random-output-len 8 --num-prompts "$STREAMS" --max-concurrency "$STREAMS" --no-save \
    --disable-progress "${flags[@]}" >/dev/null 2>&1
  strace -f -e trace=write,writev,sendmsg,sendto,io_uring_enter -o "$OUT/$transport.strace" -p "$DEMO" &
  TRACE=$!
  sleep 1
  "$BIN" bench --base-url "http://127.0.0.1:$PORT" --tokenizer "$MODEL_DIR" --random-input-len 32 \
    --random-output-len "$TOKENS" --num-prompts "$STREAMS" --max-concurrency "$STREAMS" --no-save \
    --disable-progress $USAGE_FLAG "${flags[@]}" >"$OUT/$transport.bench" 2>&1
  kill -INT $TRACE
  wait $TRACE || true
  failed=$(awk -F: '/^Failed requests/ {gsub(/ /, "", $2); print $2; exit}' "$OUT/$transport.bench")
  echo "== $transport: $STREAMS streams x $TOKENS tokens, failed requests: $failed"
  python3 - "$OUT/$transport.strace" "$TOKENS" "$((STREAMS * TOKENS))" <<'PY'
import collections, re, sys
path, steps, chunks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
calls, submitting, submitted = collections.Counter(), 0, 0
for line in open(path):
    m = re.match(r"\d+ +([a-z_]+)\((.*)", line)
    if not m:
        continue
    calls[m[1]] += 1
    if m[1] == "io_uring_enter":
        # The second argument: the submissions handed to the kernel (writes, reads, timeouts).
        n = int(m[2].split(", ")[1])
        submitting += n > 0
        submitted += n
for call, n in sorted(calls.items()):
    print(f"  {call:15} {n:8} calls  {n / steps:7.2f} per step  {n / chunks:6.3f} per chunk")
if submitting:
    print(f"  io_uring_enter submitting: {submitting} ({submitting / steps:.2f} per step), {submitted / submitting:.1f} submissions each")
PY
done
echo "(raw files in $OUT)"
