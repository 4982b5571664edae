#!/usr/bin/env bash
# Instructions and mispredicted branches of prompt encoding, from callgrind (deterministic, so
# a change of a few percent is visible where wall time on these machines is not). Counts only
# inside `measured` of benches/encode_callgrind.rs: 20 distinct 1,000-token chat prompts, random
# vocabulary tokens and prose. Needs valgrind (Debian: apt-get install valgrind).
#
# Usage: perf/callgrind/run.sh [PROMPTS] [TOKENS]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(cargo bench --bench encode_callgrind --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "encode_callgrind" and m.get("executable"):
        print(m["executable"])')
for kind in random prose; do
  out=$(mktemp)
  valgrind --tool=callgrind --branch-sim=yes --toggle-collect='encode_callgrind::measured' \
    --callgrind-out-file="$out" "$BIN" "$kind" "${1:-20}" "${2:-1000}" 2>&1 |
    awk -v k="$kind" '/Collected/ {ir=$4} /Mispredicts:/ {gsub(",","",$3); mp=$3}
      END {printf "%-6s instructions %d, mispredicted branches %d\n", k, ir, mp}'
  rm -f "$out"
done
