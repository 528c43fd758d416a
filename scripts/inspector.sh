#!/usr/bin/env bash
# Lists the server's tools through the official MCP Inspector CLI with --strict, which fails on
# any schema error or portability warning. Usage: scripts/inspector.sh <git-code-intel binary>
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:?usage: scripts/inspector.sh <git-code-intel binary>}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
if ! npx -y @modelcontextprotocol/inspector@2.12.0 --cli "$bin" serve --repo . --method tools/list --strict >"$out"; then
  echo "inspector: tools/list failed the --strict check (above)" >&2
  exit 1
fi
echo "inspector: tools/list passes --strict ($(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["tools"]))' "$out") tools)"
