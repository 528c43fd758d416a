#!/usr/bin/env bash
# The test command: formatting, lints, and the whole test suite (unit, 12-language fixtures,
# end-to-end MCP over stdio, embeddings from the real model, the real Claude Code and Codex).
set -euo pipefail
cd "$(dirname "$0")/.."
# Builds stay incremental across clones when the target directory lives outside the checkout.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/git-code-intel/target}"
bash scripts/setup.sh
# ORT_DYLIB_PATH and CODE_INTEL_MODEL_CACHE for the embedding tests.
eval "$(bash scripts/model.sh)"
# The wheel model.sh would pick on each platform really holds the library it names (downloaded
# once into the cache).
bash scripts/model.sh --check-platforms "${CODE_INTEL_MODEL_CACHE:-$HOME/.cache/git-code-intel/model}/platforms" >/dev/null
# The sandbox tests run a project's own test runners under the kernel sandbox: pytest (with
# tmp_path) from PyPI, pinned; vitest comes with the client suite (scripts/clients.sh).
python3 -m pytest --version >/dev/null 2>&1 || python3 -m pip install -q --disable-pip-version-check pytest==8.3.4 2>&1 | grep -v "^WARNING: Running pip as" || true
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
# No crate declares a dependency it does not use (cargo-machete, from crates.io, pinned).
command -v cargo-machete >/dev/null 2>&1 || cargo install --locked cargo-machete@0.9.2
cargo machete
# What may import what (docs/ARCHITECTURE.md), and a workflow crate free of native builds.
bash scripts/layers.sh
# No import cycle between modules, no catch-all error conversion from text, no `use super::*`
# outside tests; and the house in numbers (docs/HOUSE.md).
python3 scripts/house.py --check
cargo test --locked
# The docs are part of the map: a broken intra-doc link (a renamed item, a crate that moved) fails.
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --document-private-items
# The official MCP Inspector as a second client: tools/list must pass its --strict schema
# portability check (0 errors, 0 warnings). The binary is the one cargo test built.
bash scripts/inspector.sh "$CARGO_TARGET_DIR/debug/git-code-intel"
# The real clients: Claude Code and Codex (pinned in tests/clients/versions.env, installed from
# npm into a cache) drive whole sessions through our MCP server and hooks, with a scripted model
# on 127.0.0.1; every schema is compiled by Ajv in strict mode first.
bash scripts/clients.sh "$CARGO_TARGET_DIR/debug/git-code-intel"
