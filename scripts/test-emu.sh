#!/usr/bin/env bash
# Builds the emulated CUDA driver (emu/) and runs its own end-to-end tests
# through cudarc. `devtensor-emu: error ...` lines in the output come from the
# tests that provoke errors on purpose (bad launches, out-of-bounds writes).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
bash scripts/with-emu.sh cargo test --manifest-path emu/Cargo.toml -- --nocapture
