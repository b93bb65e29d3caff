#!/bin/sh
# Runs every fuzz target (or those named) one after another for SECONDS each (default 600),
# at the lowest CPU priority, and prints per target: executions, exec/s, corpus size and
# crashes. See docs/fuzzing.md. Logs go to $CORDON_FUZZ_LOGS (default target/logs).
set -eu
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/root/.cache/cordon-fuzz/target}"
# The pinned stable toolchain (rust-toolchain.toml) with its unstable flags unlocked:
# cargo fuzz needs -Zsanitizer, and the workspace needs Rust 1.99.
export RUSTC_BOOTSTRAP=1
seconds="${SECONDS_PER_TARGET:-600}"
logs="${CORDON_FUZZ_LOGS:-$CARGO_TARGET_DIR/logs}"
mkdir -p "$logs"
targets="${*:-computer_actions bridge_frames tools_file event_seq origin_pattern conversation stream_accumulators bash_policy}"
nice -n 19 cargo fuzz build --fuzz-dir tests/fuzz
for target in $targets; do
    mkdir -p "tests/fuzz/corpus/$target"
    status=0
    nice -n 19 cargo fuzz run --fuzz-dir tests/fuzz "$target" \
        "tests/fuzz/corpus/$target" "tests/fuzz/seeds/$target" -- \
        -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 \
        > "$logs/$target.log" 2>&1 || status=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$logs/$target.log" | grep -o '[0-9]*$' || true)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$logs/$target.log" | grep -o '[0-9]*$' || true)
    corpus=$(find "tests/fuzz/corpus/$target" -type f | wc -l)
    crashes=$(find "tests/fuzz/artifacts/$target" -type f 2>/dev/null | wc -l)
    echo "$target: executions=${execs:-?} exec/s=${rate:-?} corpus=$corpus crashes=$crashes exit=$status"
done
