#!/usr/bin/env bash
# Runs the CPU core under Miri, to catch undefined behaviour: the library's
# unit tests and the CPU halves of the device-generic integration suites.
# Slow (about an hour on two cores; the largest reduce test alone takes
# half of it), so not part of CI; run it after touching `unsafe`
# code, shape arithmetic or the CPU kernels.
#   rustup component add --toolchain nightly miri rust-src
#
# Under `cfg(miri)` the tests use smaller sizes (`sized` and `LARGE_SIZES` in
# tests/common/mod.rs) and the library lower parallel and pooling thresholds
# (src/backend/cpu/), so the same code paths run at sizes Miri finishes.
# Miri cannot load the CUDA driver: every `Cuda<N>` is unavailable and the
# CUDA instances print SKIP lines. Not run: the ops suite's cuda_backend
# module (CUDA only, and it starts child processes: `cfg(not(miri))`),
# kernels_compile (NVRTC and ptxas through FFI and processes) and ui
# (trybuild runs cargo).
set -euo pipefail
cd "$(dirname "$0")/.."
# Few property cases: Miri runs this code some 10^4 times slower than native.
# Isolation is off so that proptest can read its regression files.
# Tree Borrows, because crossbeam-epoch (under rayon) trips a known false
# positive of the older Stacked Borrows model; crossbeam-epoch also casts
# integers to pointers, which permissive provenance accepts without a
# warning. Deterministic floats: Miri otherwise adds random error of a few
# ulp to `exp`, `sin` and the like, and the `Cpu` checks compare the kernels
# with the same functions bit for bit. Two CPUs, so that rayon's pool has two
# threads and the multi-threaded paths really split. Leaks are ignored
# because rayon's global pool threads outlive `main`.
export PROPTEST_CASES="${PROPTEST_CASES:-4}"
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation -Zmiri-tree-borrows -Zmiri-permissive-provenance -Zmiri-deterministic-floats -Zmiri-num-cpus=2 -Zmiri-ignore-leaks}"
# No GPU can be found under Miri, so the CUDA instances must skip, not fail.
unset DEVTENSOR_REQUIRE_CUDA
cargo +nightly miri test --target-dir target/miri --no-fail-fast --lib --test ops "$@"
