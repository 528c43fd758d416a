#!/usr/bin/env bash
# Kills git-code-intel at random points of its git operations, many times, and checks after each
# that a new server finishes the session with nothing lost (tests/it/crash.rs). CI runs 50 kills;
# this runs 1,000 (or $1), with a seed ($2) to reproduce a run.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/git-code-intel/target}"
CODE_INTEL_CRASH_KILLS="${1:-1000}" CODE_INTEL_CRASH_SEED="${2:-$(date +%s)}" \
  cargo test --test it crash:: -- --nocapture
