#!/usr/bin/env bash
# Installs BrowserGym's MiniWoB++ environment (PyPI `browsergym-miniwob`, unmodified) in a
# venv of its own and makes its Playwright start Debian's Chromium, for the side-by-side
# MiniWoB++ benchmark (benches/peers/browsergym/run.py, docs/benchmarks.md "MiniWoB++").
#
#   benches/peers/browsergym/setup.sh [PREFIX]
#
# PREFIX (default $BROWSERGYM_HOME, else $HOME/.cache/cordon-peers/browsergym) gets:
#   venv/                      Python venv with the versions pinned in requirements.txt
#                              (browsergym-miniwob 0.14.3 -> browsergym-core 0.14.3 ->
#                              playwright==1.44.0), plus `miniwob` 1.1.0 for its pages
#   browsers/chromium/         a Playwright browsers folder (PLAYWRIGHT_BROWSERS_PATH) whose
#   browsers/headless-shell/   chromium-<revision>/chrome-linux/chrome is a wrapper script
#                              exec'ing /usr/lib/chromium/chromium or
#                              /usr/lib/chromium/chromium-headless-shell
#
# Why the wrapper: BrowserGym launches Playwright's own Chromium build by its registry path
# twice per reset (the task's browser, and the chat's browser, which takes no launch
# options), and `playwright install` downloads browsers, which this machine cannot. So
# `executable_path` in `pw_chromium_kwargs` is not enough; the registry path itself must
# hold a browser. Playwright 1.44 finds Chromium at
# $PLAYWRIGHT_BROWSERS_PATH/chromium-<revision>/chrome-linux/chrome for headed and headless
# runs alike (the revision comes from its driver's browsers.json; the separate
# chromium_headless_shell entry only exists from Playwright 1.49 on).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PREFIX="${1:-${BROWSERGYM_HOME:-$HOME/.cache/cordon-peers/browsergym}}"
PYTHON="${PYTHON:-python3}"
CHROMIUM="${CHROMIUM:-/usr/lib/chromium/chromium}"
HEADLESS_SHELL="${HEADLESS_SHELL:-/usr/lib/chromium/chromium-headless-shell}"

mkdir -p "$PREFIX"
if [ ! -x "$PREFIX/venv/bin/python" ]; then
  "$PYTHON" -m venv "$PREFIX/venv"
fi
"$PREFIX/venv/bin/python" -m pip install --quiet --upgrade pip
"$PREFIX/venv/bin/python" -m pip install --quiet -r "$HERE/requirements.txt"
# The MiniWoB++ pages only (the same release Cordon's bench serves); its Python
# dependencies are not needed to serve them.
"$PREFIX/venv/bin/python" -m pip install --quiet --no-deps miniwob==1.1.0

# Playwright's Chromium revision, from the installed driver's browsers.json.
REVISION="$("$PREFIX/venv/bin/python" - <<'EOF'
import json, pathlib, playwright
browsers = pathlib.Path(playwright.__file__).parent / "driver/package/browsers.json"
print(next(b["revision"] for b in json.loads(browsers.read_text())["browsers"] if b["name"] == "chromium"))
EOF
)"

# Flags Debian's Chromium needs on this machine (no sandbox as root, no GPU, no background
# traffic). Playwright adds its own --user-data-dir (a fresh temporary profile),
# --remote-debugging-pipe and --headless; "$@" keeps them.
FLAGS='--no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking --disable-component-update --disable-sync'

write_shim() { # NAME BINARY
  local dir="$PREFIX/browsers/$1/chromium-$REVISION/chrome-linux"
  if [ ! -x "$2" ]; then
    echo "skipping $1: $2 is not installed" >&2
    rm -rf "$PREFIX/browsers/$1"
    return
  fi
  mkdir -p "$dir"
  cat >"$dir/chrome" <<EOF
#!/bin/sh
# Written by benches/peers/browsergym/setup.sh: Playwright $REVISION's Chromium path -> $2
exec "$2" $FLAGS "\$@"
EOF
  chmod +x "$dir/chrome"
  # What \`playwright install\` leaves behind; Playwright's launch skips its ldd check of the
  # folder when DEPENDENCIES_VALIDATED is there (the wrapper is a script, not an ELF file).
  touch "$PREFIX/browsers/$1/chromium-$REVISION/INSTALLATION_COMPLETE" \
        "$PREFIX/browsers/$1/chromium-$REVISION/DEPENDENCIES_VALIDATED"
  echo "PLAYWRIGHT_BROWSERS_PATH=$PREFIX/browsers/$1 -> $2"
}
write_shim chromium "$CHROMIUM"
write_shim headless-shell "$HEADLESS_SHELL"
echo "venv: $PREFIX/venv (run: $PREFIX/venv/bin/python $HERE/run.py --prefix $PREFIX)"
