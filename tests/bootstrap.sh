#!/usr/bin/env bash
# Installs what Cordon's build and tests need on a fresh Debian machine, and nothing when
# it is all there. Safe to run repeatedly.
#   - the pinned Rust toolchain and its wasm32-wasip1 target (rust-toolchain.toml)
#   - clang, lld, wasi-libc, libclang-rt-dev-wasm32, llvm: compile QuickJS for wasm
#   - tzdata: the time-zone database packed into the Python image (`zoneinfo`)
#   - bubblewrap: contains the `bash` tool pack's commands (no network, read-only system)
#   - chromium: the computer-use browser backend and its tests
#   - chromium-headless-shell: the same Chromium's old headless mode (frames drawn on
#     demand for each capture), the default browser where installed; the browser tests
#     run under both binaries
#   - xvfb, xterm, x11-utils (xmessage, xev, xwininfo), x11-xkb-utils (setxkbmap), xdotool:
#     the desktop backend and its tests; libxkbcommon-dev: enigo links libxkbcommon
#   - nginx: the reverse proxy of docs/deploy, checked (nginx -t) and run in front of replicas
#   - the Python clients of the end-to-end tests (tests/requirements.txt: httpx, mcp, the
#     SDKs, and the frameworks the adapters plug into: openai-agents, smolagents, gymnasium)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'bootstrap: %s\n' "$*" >&2; }

toolchain=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
if ! command -v rustup >/dev/null; then
    say "rustup is missing. Install it: curl --proto '=https' -sSf https://sh.rustup.rs | sh"
    exit 1
fi
if ! rustup target list --installed --toolchain "$toolchain" 2>/dev/null | grep -qx wasm32-wasip1; then
    say "installing Rust $toolchain with wasm32-wasip1"
    rustup toolchain install "$toolchain" --profile minimal -c rustfmt -c clippy -t wasm32-wasip1 >&2
fi

packages=(clang lld wasi-libc libclang-rt-dev-wasm32 llvm tzdata bubblewrap chromium
    chromium-headless-shell xvfb xterm x11-utils x11-xkb-utils xdotool libxkbcommon-dev postgresql nginx)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    command=(apt-get install -y --no-install-recommends "${missing[@]}")
    if [[ $(id -u) -eq 0 ]]; then
        say "installing ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive "${command[@]}" >&2
    elif sudo -n true 2>/dev/null; then
        say "installing ${missing[*]}"
        sudo DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
        sudo DEBIAN_FRONTEND=noninteractive "${command[@]}" >&2
    else
        say "missing Debian packages: ${missing[*]}"
        say "install them with: sudo ${command[*]}"
        exit 1
    fi
fi
# The real clients the server tests drive (tests/e2e). Checked by import, so a machine that
# has them pays one python3 start, not a pip run.
if ! python3 -c 'import httpx, mcp, anthropic, openai, google.genai, agents, smolagents, gymnasium, PIL, numpy, moto.server, kubernetes_validate' 2>/dev/null; then
    say "installing the Python test clients (tests/requirements.txt)"
    # Debian's own python3 refuses system-wide installs (PEP 668): fall back to --user.
    python3 -m pip install -q -r tests/requirements.txt >&2 ||
        python3 -m pip install -q --user --break-system-packages -r tests/requirements.txt >&2
fi
say "ready"
