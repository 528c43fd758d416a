#!/usr/bin/env bash
# Lists the server's tools through the official MCP Inspector CLI with --strict, which fails on
# any schema error or portability warning, and checks that the Inspector's client kept every
# tool the server lists (a client drops a tool whose schema it cannot read, silently).
# Usage: scripts/inspector.sh <git-code-intel binary>
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:?usage: scripts/inspector.sh <git-code-intel binary>}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
if ! npx -y @modelcontextprotocol/inspector@2.12.0 --cli "$bin" serve --repo . --method tools/list --strict >"$out"; then
  echo "inspector: tools/list failed the --strict check (above)" >&2
  exit 1
fi
# What the server itself lists, over a plain stdio session.
served="$(python3 - "$bin" <<'PY'
import json, subprocess, sys
p = subprocess.Popen([sys.argv[1], "serve", "--repo", "."], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def send(m): p.stdin.write(json.dumps(m) + "\n"); p.stdin.flush()
def reply(i):
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == i: return m
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "count", "version": "1"}}})
reply(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
print(len(reply(2)["result"]["tools"]))
p.stdin.close(); p.wait(timeout=10)
PY
)"
kept="$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["tools"]))' "$out")"
if [ "$kept" != "$served" ]; then
  echo "inspector: the server lists $served tools but the Inspector's client kept $kept" >&2
  exit 1
fi
echo "inspector: tools/list passes --strict, all $served tools kept"
