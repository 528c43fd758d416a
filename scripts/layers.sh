#!/usr/bin/env bash
# The layering of docs/ARCHITECTURE.md ("What may import what"), checked: each crate's direct
# dependencies among our own crates must be exactly the allowed ones, and the pure workflow
# crate must not pull in native builds (faiss, ONNX Runtime, cmake) or git, even for its tests.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
ours() {
    local tree
    # A failing cargo tree must fail the check, not read as "no dependencies".
    tree=$(cargo tree --locked -p "$1" -e normal --depth 1 --prefix none)
    printf '%s\n' "$tree" | tail -n +2 | awk '{print $1}' | { grep -E '^(code-intel-|git-code-intel$)' || true; } |
        sort -u | tr '\n' ' ' | sed 's/ $//'
}
status=0
check() {
    local crate=$1 allowed=$2 found
    found=$(ours "$crate")
    if [ "$found" != "$allowed" ]; then
        echo "layers: $crate depends on [$found]; docs/ARCHITECTURE.md allows [$allowed]" >&2
        status=1
    fi
}
check code-intel-files ""
check code-intel-workflow ""
check code-intel-gitstate "code-intel-files"
check code-intel-codebase "code-intel-files code-intel-workflow"
check code-intel-semantic "code-intel-codebase code-intel-files code-intel-gitstate code-intel-workflow"
check code-intel-sandbox ""
check code-intel-session "code-intel-codebase code-intel-gitstate code-intel-sandbox code-intel-semantic code-intel-workflow"
check git-code-intel "code-intel-codebase code-intel-gitstate code-intel-sandbox code-intel-semantic code-intel-session code-intel-workflow"
# The session crate is what a session is, not how it is served: MCP and the async runtime are
# the binary's edge.
transport=$(cargo tree --locked -p code-intel-session -e normal --prefix none | awk '{print $1}' |
    { grep -E '^(rmcp|tokio)$' || true; } | sort -u | tr '\n' ' ')
if [ -n "$transport" ]; then
    echo "layers: the session crate pulls in $transport; serving it is the binary's job" >&2
    status=1
fi
tree=$(cargo tree --locked -p code-intel-workflow -e normal,build,dev --prefix none)
heavy=$(printf '%s\n' "$tree" | awk '{print $1}' |
    { grep -E '^(faiss|faiss-sys|ort|ort-sys|fastembed|cmake|gix|tree-sitter.*)$' || true; } | sort -u | tr '\n' ' ')
if [ -n "$heavy" ]; then
    echo "layers: the workflow crate pulls in $heavy; it must build without native code or git" >&2
    status=1
fi
# The engine does no I/O and is given the clock and the ids (docs/ARCHITECTURE.md): its source
# names no file system, process, network, environment or clock.
io=$(grep -rnE 'std::(fs|process|net|env)\b|Utc::now|Local::now|SystemTime|Instant::now|getrandom|rand::' \
    crates/workflow/src | grep -vE '^[^:]*:[0-9]+:\s*//' || true)
if [ -n "$io" ]; then
    printf 'layers: the workflow crate does I/O or reads a clock:\n%s\n' "$io" >&2
    status=1
fi
[ "$status" = 0 ] && echo "layers: every crate imports only what docs/ARCHITECTURE.md allows"
exit "$status"
