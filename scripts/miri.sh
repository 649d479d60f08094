#!/usr/bin/env bash
# Runs the CPU core's unit tests and a few integration suites under Miri, to
# catch undefined behaviour. Slow (minutes), so not part of CI; run it after
# touching `unsafe` code, shape arithmetic or the CPU kernels.
#   rustup component add --toolchain nightly miri rust-src
set -euo pipefail
cd "$(dirname "$0")/.."
# Few property cases: Miri runs code ~100x slower. Isolation is off so that
# proptest can look for its regression files. Tree Borrows, because
# crossbeam-epoch (under rayon) trips a known false positive of the older
# Stacked Borrows model; our own code has no `unsafe` in these paths anyway.
# Leaks are ignored because rayon's global pool threads outlive `main`.
export PROPTEST_CASES="${PROPTEST_CASES:-4}"
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation -Zmiri-tree-borrows -Zmiri-ignore-leaks}"
# The whole CPU core: the library's unit tests and the CPU halves of the
# device-generic suites (their CUDA halves skip: under Miri every GPU is
# unavailable). Sizes shrink under cfg(miri) (tests/common/mod.rs `sized`).
cargo +nightly miri test --target-dir target/miri --lib \
    --test tensor --test binary --test unary --test compare --test reduce --test index --test matmul \
    --test bad_input --test async_transfer "$@"
