#!/usr/bin/env bash
# Builds what a GPU machine without a Rust toolchain needs to check
# devtensor on a real GPU, into .gpu/bin (git-ignored): the device-generic
# test binaries, the CUDA criterion benches and the examples, stripped.
# Copy the repository with .gpu/ there and run `bash scripts/gpu-run.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=(ops training matmul_precision)
rm -rf .gpu/bin && mkdir -p .gpu/bin
executables() { # cargo's JSON messages -> "name path" per executable
    python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["target"]["name"], m["executable"])'
}
{
    cargo test --no-run --message-format=json "${TESTS[@]/#/--test=}"
    cargo bench --no-run --message-format=json --bench cuda
    cargo build --release --message-format=json --example quickstart --example prefetch \
        --example train_cnn --example static_cnn --example data_parallel --example train_gpt \
        --example ddp --bin devtensor-run
} 2>/dev/null | executables | while read -r name path; do strip -o ".gpu/bin/$name" "$path"; done
ls .gpu/bin
du -sh .gpu/bin
