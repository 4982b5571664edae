#!/usr/bin/env bash
# tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Builds the cargo-fuzz targets in tests/fuzz and runs each for SECONDS_PER_TARGET (default 20)
# on one core, one after another. Every run first replays the committed seeds and the
# regression reproducers (tests/fuzz/seeds/<target>, tests/fuzz/regressions/<target>), so a
# fixed crash that comes back fails at once. Exits non-zero when any target crashes, with the
# reproducer's path; per-target numbers go to target/fuzz/logs/.
#
# Environment: FUZZ_SANITIZER (address | none; default address), FUZZ_CODEGEN_UNITS (default 16),
# FUZZ_EXTRA_ARGS (appended to every libFuzzer command line), CARGO_TARGET_DIR (the build goes
# to $CARGO_TARGET_DIR/fuzz).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

seconds="${1:-20}"
shift $(( $# > 0 ? 1 : 0 ))
all_targets=(http_request request_json vllm_output tokenspeed_output text_pipeline zmtp_peer constraint_check image_decode video_decode)
if (( $# > 0 )); then
    targets=("$@")
else
    targets=("${all_targets[@]}")
fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || (( seconds < 1 )); then
    echo "usage: tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]  (targets: ${all_targets[*]})" >&2
    exit 2
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

# cargo-fuzz passes -Z flags (sanitizers, coverage instrumentation) to a stable toolchain.
export RUSTC_BOOTSTRAP=1
fuzz_dir=tests/fuzz
target_dir="${CARGO_TARGET_DIR:-$root/target}/fuzz"
logs="$target_dir/logs"
mkdir -p "$logs"
sanitizer="${FUZZ_SANITIZER:-address}"
# The C that crates compile with cc (libjpeg-turbo's decoder behind shardgate-media's shim,
# among others) runs under the same sanitizer as the Rust around it.
if [[ "$sanitizer" == address ]]; then
    export CFLAGS="${CFLAGS:-} -fsanitize=address"
fi
# -a: debug assertions and overflow checks on, so the gateway's own invariants (debug_assert!)
# are oracles too.
# 16 codegen units (cargo-fuzz's default is 1): the gateway library then compiles on every core,
# minutes sooner on CI's two, for somewhat slower executions, which a smoke run of seconds per
# target does not notice. FUZZ_CODEGEN_UNITS=1 for long campaigns.
build_flags=(--fuzz-dir "$fuzz_dir" --target-dir "$target_dir" --sanitizer "$sanitizer" -a
    --codegen-units "${FUZZ_CODEGEN_UNITS:-16}")

echo "== building fuzz targets (${targets[*]})"
cargo fuzz build "${build_flags[@]}" 2>&1 | tail -n 3

# Per-target libFuzzer options: input size and a dictionary where one helps.
target_args() {
    case "$1" in
        # Long enough for a chunk-size line past the decoder's 4 KiB line limit.
        http_request) echo "-max_len=12288 -dict=$fuzz_dir/dicts/http_request.dict" ;;
        request_json) echo "-max_len=8192 -dict=$fuzz_dir/dicts/request_json.dict" ;;
        vllm_output | tokenspeed_output) echo "-max_len=4096" ;;
        text_pipeline) echo "-max_len=4096" ;;
        # Any allocation past 64 MiB is a header the limits (1 Mi pixels) should have refused.
        image_decode) echo "-max_len=65536 -malloc_limit_mb=64" ;;
        # 16 MiB of sampled frames, 64 Ki-pixel frames: anything past 128 MiB escaped a limit.
        video_decode) echo "-max_len=262144 -malloc_limit_mb=128" ;;
        *) echo "" ;;
    esac
}

failed=()
summary=()
for t in "${targets[@]}"; do
    corpus=("$fuzz_dir/corpus/$t")
    mkdir -p "$fuzz_dir/corpus/$t"
    for extra in "$fuzz_dir/seeds/$t" "$fuzz_dir/regressions/$t"; do
        if [[ -d "$extra" ]]; then
            corpus+=("$extra")
        fi
    done
    log="$logs/$t.log"
    echo "== fuzzing $t for ${seconds}s (log: $log)"
    # shellcheck disable=SC2046 # target_args is a list of flags
    if cargo fuzz run "${build_flags[@]}" "$t" "${corpus[@]}" -- \
        -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
        $(target_args "$t") ${FUZZ_EXTRA_ARGS:-} >"$log" 2>&1; then
        status=ok
    else
        status=CRASH
        failed+=("$t")
    fi
    execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1 || true)"
    rate="$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1 || true)"
    cov="$(grep -oE '^#[0-9]+.*cov: [0-9]+' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+' || true)"
    summary+=("$(printf '%-18s %-6s execs=%-10s exec/s=%-7s %s' "$t" "$status" "${execs:-?}" "${rate:-?}" "$cov")")
    if [[ "$status" == CRASH ]]; then
        grep -E 'panicked at|ERROR: (AddressSanitizer|libFuzzer)|Test unit written to' "$log" | head -n 5 || true
    fi
done

echo "== fuzz summary (${seconds}s per target)"
printf '%s\n' "${summary[@]}"
if (( ${#failed[@]} > 0 )); then
    echo "== FAILED: ${failed[*]} (reproducers under $fuzz_dir/artifacts/<target>/; logs in $logs)" >&2
    exit 1
fi
echo "== fuzz: no crashes"
