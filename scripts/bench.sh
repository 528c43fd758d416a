#!/usr/bin/env bash
# The benchmark, in one command: fetches the corpus (the crate sources of this project's
# dependencies), copies it aside, builds in release mode and compares against rg and ctags (and
# codanna 0.16, when CODANNA=<path> is set or codanna is on PATH; docs/PERFORMANCE.md has the
# recipe that builds it).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/git-code-intel/target}"
bash scripts/setup.sh
# ONNX Runtime and the embedding model for the semantic part.
eval "$(bash scripts/model.sh)"
cargo fetch --locked
corpus=/tmp/code-intel-bench-corpus
rm -rf "$corpus" && mkdir -p "$corpus"
# The corpus is every crates.io package in Cargo.lock (whatever else the registry holds), so
# every machine measures the same sources.
awk '/^name = /{n=$3} /^version = /{v=$3} /^source = "registry/{gsub(/"/,"",n); gsub(/"/,"",v); print n"-"v}' Cargo.lock |
    while read -r crate; do
        tar -xzf "$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"$crate.crate" | head -n 1)" -C "$corpus"
    done
cargo build --release --locked --bin git-code-intel --bin git-code-intel-sandbox --bin code-intel-bench
"$CARGO_TARGET_DIR/release/code-intel-bench" "$CARGO_TARGET_DIR/release/git-code-intel" "$corpus"
# recall@5 of the int8 and fp32 models on the labelled queries and the small retrieval set,
# next to the throughput above.
cargo test --release --locked --test it retrieval_quality:: -- --nocapture 2>&1 | grep -E 'recall@|small set'
