#!/usr/bin/env bash
# Soak test: gateway + simulator at ~80% of measured saturation for --minutes (default 30),
# restarting the simulator with a rotating fault every few minutes, then checking that nothing
# hung or leaked. See perf/soak/README.md.
#
# Usage: perf/soak/run.sh [--minutes N] [--load 0.8] [--cycle-seconds S] [--no-build] [soak.py flags]
# Writes perf/soak/results/<UTC timestamp>.json; exits non-zero on any violation.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

build=1
args=()
for a in "$@"; do
    if [[ "$a" == "--no-build" ]]; then
        build=0
    else
        args+=("$a")
    fi
done

if (( build )); then
    # Shares target/ with everyone else: cargo waits for another build's lock by itself.
    echo "== cargo build --release"
    cargo build --release --bin shardgate --bin shardgate-sim
fi
exec python3 perf/soak/soak.py "${args[@]}"
