#!/usr/bin/env bash
# The real clients end to end: installs the pinned Claude Code and Codex releases from npm
# (tests/clients/versions.env) into a cache outside the checkout, checks every schema we serve
# with Ajv in strict mode, then runs tests/clients/suite.py with the clients against the given
# git-code-intel binary. Offline apart from npm: the model is scripted on 127.0.0.1.
# Usage: scripts/clients.sh <git-code-intel binary> [claude|codex ...]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:?usage: scripts/clients.sh <git-code-intel binary> [claude|codex ...]}")"
shift
# shellcheck source=/dev/null
source tests/clients/versions.env
cache="${CODE_INTEL_CLIENTS_CACHE:-$HOME/.cache/git-code-intel/clients}"
# <cache dir> <package> <version>: installed once per version, kept across clones.
install() {
  local dir="$cache/$1"
  if ! grep -q "\"version\": \"$3\"" "$dir/node_modules/$2/package.json" 2>/dev/null; then
    rm -rf "$dir"
    mkdir -p "$dir"
    npm install --silent --no-audit --no-fund --prefix "$dir" "$2@$3" >/dev/null
  fi
}
install claude-code @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION"
install codex @openai/codex "$CODEX_VERSION"
install ajv ajv 8.17.1
# A project's own test runner, run by the clients under the kernel sandbox (the suite's runners).
install vitest vitest 3.2.4
export CODE_INTEL_CLAUDE="$cache/claude-code/node_modules/.bin/claude"
export CODE_INTEL_CODEX="$cache/codex/node_modules/.bin/codex"
echo "clients: $("$CODE_INTEL_CLAUDE" --version), $("$CODE_INTEL_CODEX" --version)"
# Ajv, the strict JSON Schema validator Claude Code uses, on every schema a client reads.
python3 tests/clients/strict_schemas.py "$bin" "$cache/ajv"
# The binary the hooks and MCP entries run by name.
bindir="$(mktemp -d)"
trap 'rm -rf "$bindir"' EXIT
ln -s "$bin" "$bindir/git-code-intel"
python3 tests/clients/suite.py "$bindir" "$@"
