#!/usr/bin/env bash
# Everything CI runs, in one command: the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

echo "== unit, integration, property and compile-fail tests"
cargo test --all-targets

echo "== doc tests"
cargo test --doc

echo "== docs build without warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet

echo "== emulated CUDA driver (emu/): kernels on the CPU, driver and cuBLAS calls through cudarc"
bash scripts/test-emu.sh
