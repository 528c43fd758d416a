#!/usr/bin/env bash
# The test command: formatting, lints, and the whole test suite (unit, 12-language fixtures,
# end-to-end MCP over stdio).
set -euo pipefail
cd "$(dirname "$0")/.."
# Builds stay incremental across clones when the target directory lives outside the checkout.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/git-code-intel/target}"
bash scripts/setup.sh
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
cargo test --locked
