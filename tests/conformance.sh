#!/usr/bin/env bash
# Runs the MCP conformance suite (@modelcontextprotocol/conformance, server scenarios)
# against `cordon mcp --http`. Not part of CI: it fetches npm packages, and most of its
# scenarios call the fixtures of the reference test server (tools named `test_*`, prompts,
# resources, logging) that Cordon does not have. docs/mcp.md lists the expected results.
#
#   tests/conformance.sh [--suite active|pending|all]     (default: active)
#
# Needs Node.js >= 22. With an older `node` on PATH, Node 22 is installed from the npm
# registry (package `node@22`, a prebuilt binary) into the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."

suite=active
if [[ ${1:-} == --suite ]]; then suite=${2:?--suite needs a value}; fi
version=0.1.16
work=${CONFORMANCE_DIR:-${TMPDIR:-/tmp}/cordon-conformance}
port=${CONFORMANCE_PORT:-7431}
mkdir -p "$work"

major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if ((major < 22)); then
    if [[ ! -x $work/node/node_modules/.bin/node ]]; then
        echo "conformance: installing Node 22 from npm into $work/node" >&2
        mkdir -p "$work/node"
        (cd "$work/node" && npm install --silent --no-audit --no-fund node@22 >&2)
    fi
    export PATH="$work/node/node_modules/.bin:$PATH"
fi
if [[ ! -x $work/suite/node_modules/.bin/conformance ]]; then
    mkdir -p "$work/suite"
    (cd "$work/suite" && npm install --silent --no-audit --no-fund "@modelcontextprotocol/conformance@$version" >&2)
fi

cargo build -q -p cordon
target/debug/cordon mcp --http "127.0.0.1:$port" 2>"$work/server.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 100); do
    grep -q "listening" "$work/server.log" 2>/dev/null && break
    sleep 0.1
done
rm -rf "$work/results"
"$work/suite/node_modules/.bin/conformance" server --url "http://127.0.0.1:$port/mcp" \
    --suite "$suite" -o "$work/results" | sed -n '/=== SUMMARY ===/,$p'
echo "conformance: details in $work/results" >&2
