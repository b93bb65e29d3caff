#!/usr/bin/env bash
# Runs the README's five-minute tour as written, top to bottom, from an empty directory, with
# the `cordon` the tests just built first on PATH: every ```sh block between "## A
# five-minute tour" and the next "## " heading, each in the same directory, in order.
#   - As root, `--no-browser-sandbox` is added to browser `cordon computer` lines, as the README
#     tells a root user to (Chromium's sandbox cannot run as root).
#   - A block that shows a `[y/N]` prompt runs on a pseudo-terminal (`script`) that answers
#     `y`, as the user in the README does.
#   - Each block runs in a process group of its own, stopped afterwards: the servers a block
#     starts in the background do not outlive it.
# Usage: tests/readme_tour.sh [CORDON_BIN_DIR]   (default: $CARGO_TARGET_DIR/debug or target/debug)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin_dir="${1:-${CARGO_TARGET_DIR:-$repo/target}/debug}"
if [[ ! -x $bin_dir/cordon ]]; then
    echo "readme tour: no cordon binary in $bin_dir (build it: cargo build -p cordon)" >&2
    exit 2
fi
work=$(mktemp -d /tmp/cordon-readme-tour.XXXXXX)
[[ -n ${CORDON_TOUR_KEEP:-} ]] || trap 'rm -rf "$work"' EXIT
export PATH="$bin_dir:$PATH"

# The tour's blocks, one file each.
python3 - "$repo/README.md" "$work" <<'PY'
import pathlib, sys
readme, work = pathlib.Path(sys.argv[1]).read_text(), pathlib.Path(sys.argv[2])
tour = readme.split("\n## A five-minute tour", 1)[1].split("\n## ", 1)[0]
blocks = [part.split("\n```", 1)[0] for part in tour.split("```sh\n")[1:]]
if not blocks:
    sys.exit("readme tour: no ```sh blocks in the tour")
for number, block in enumerate(blocks, 1):
    (work / f"block-{number:02}.sh").write_text(block + "\n")
PY
mkdir "$work/dir"
cd "$work/dir"
failed=0
for block in "$work"/block-*.sh; do
    name=$(basename "$block" .sh)
    if [[ $(id -u) -eq 0 ]]; then
        sed -i '/--desktop/!s/^cordon computer /cordon computer --no-browser-sandbox /' "$block"
    fi
    pidfile="$work/$name.pid"
    run=(setsid --wait bash -c 'echo $$ > "$0"; exec bash -eo pipefail "$1"' "$pidfile" "$block")
    started=$(date +%s)
    status=0
    if grep -q '\[y/N\]' "$block"; then
        # `script` gives the block a terminal (and a session of its own); the `y` answers
        # its prompt.
        printf 'y\n' | timeout 600 script -qec "bash -eo pipefail $(printf '%q' "$block")" /dev/null \
            > "$work/$name.log" 2>&1 || status=$?
    else
        timeout 600 "${run[@]}" < /dev/null > "$work/$name.log" 2>&1 || status=$?
    fi
    if [[ -s $pidfile ]]; then
        kill -- "-$(cat "$pidfile")" 2>/dev/null || true
    fi
    took=$(($(date +%s) - started))
    if ((status == 0)); then
        echo "readme tour: $name ok (${took} s)"
    else
        failed=1
        echo "readme tour: $name FAILED (exit $status, ${took} s); the block:" >&2
        sed 's/^/    | /' "$block" >&2
        echo "  its output:" >&2
        tail -n 40 "$work/$name.log" | sed 's/^/    > /' >&2
    fi
done
exit "$failed"
