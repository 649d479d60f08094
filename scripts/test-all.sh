#!/usr/bin/env bash
# Everything CI runs, in one command: the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# Line tables only, not full debug info: backtraces still name file and
# line, and the test binaries, and every trybuild case (a cargo build of its
# own, which reads these variables but not our Cargo.toml's profiles),
# compile and link much faster on two cores. Set either to `true` for a
# debugger.
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}"
export CARGO_PROFILE_TEST_DEBUG="${CARGO_PROFILE_TEST_DEBUG:-line-tables-only}"

# Each section's header says when it started, so that a slow CI run shows
# which step grew (CI has 90 minutes; a quiet run should take under 25).
section() { echo "== [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }

section "property-test seed"
# Every property test draws its cases from this seed (proptest reads
# PROPTEST_RNG_SEED itself), so a failure here is reproduced by running the
# failing test with the same value, e.g.
#   PROPTEST_RNG_SEED=<seed> cargo test --test ops index::pad_matches_a_loop::cpu
# (with `bash scripts/with-emu.sh` in front for a ::cuda0 or ::cuda1 test).
# A new seed each run, so that CI keeps drawing new cases, unless one is given.
# proptest ignores a seed it cannot parse (with only a warning), hence the check.
PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}"
if [[ ! "$PROPTEST_RNG_SEED" =~ ^[0-9]{1,20}$ ]] \
    || { ((${#PROPTEST_RNG_SEED} == 20)) && [[ "$PROPTEST_RNG_SEED" > 18446744073709551615 ]]; }; then
    echo "PROPTEST_RNG_SEED=$PROPTEST_RNG_SEED is not a whole number below 2^64" >&2
    exit 1
fi
export PROPTEST_RNG_SEED
echo "PROPTEST_RNG_SEED=$PROPTEST_RNG_SEED"
trap 'status=$?; section "end, status $status"; ((status == 0)) || echo "FAILED; this run drew its property tests from PROPTEST_RNG_SEED=$PROPTEST_RNG_SEED" >&2' EXIT

section "CUDA tools (NVRTC, ptxas, headers; pinned PyPI wheels, installed once into .cache/)"
# The kernels test compiles every kernels/*.cu with these; it skips without
# them, unless REQUIRE_NVRTC=1 (set by CI in .ci/run).
if DEVTENSOR_CUDA_TOOLS="$(bash scripts/install-cuda-tools.sh)"; then
    export DEVTENSOR_CUDA_TOOLS
    # cudarc dlopens libnvrtc.so.13 by name, and NVRTC in turn dlopens its
    # builtins library, so the folder has to be on the search path.
    export LD_LIBRARY_PATH="$DEVTENSOR_CUDA_TOOLS/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "$DEVTENSOR_CUDA_TOOLS"
elif [[ "${REQUIRE_NVRTC:-0}" == 1 ]]; then
    echo "installing the CUDA tools failed and REQUIRE_NVRTC=1" >&2
    exit 1
else
    echo "installing the CUDA tools failed; the kernels test will skip" >&2
fi

# The PTX NVRTC compiles is kept here (src/backend/cuda/kernel_cache.rs),
# inside the clone: each process of the emulated multi-process tests would
# otherwise compile every kernel file again (most of their time).
export DEVTENSOR_KERNEL_CACHE="${DEVTENSOR_KERNEL_CACHE:-$PWD/.cache/kernels}"

section "layers: no new import cycle between the top-level modules of src/"
python3 scripts/check-layers.py

section "every gradient check goes through the shared helper (tests/common/gradcheck.rs)"
python3 scripts/check-tests.py

section "formatting (rustfmt.toml) and lints (clippy, warnings are errors)"
cargo fmt --all --check
(cd emu && cargo fmt --all --check)
cargo clippy --all-targets --quiet -- -D warnings

section "no fallible body calls a panicking form (scripts/check-fallible.py)"
python3 scripts/check-fallible.py

section "unit, integration, property and compile-fail tests"
cargo test --all-targets

section "build-time ratchet: how much of devtensor a user's program compiles (scripts/check-buildtime.py)"
# Counts of LLVM IR lines in three fixed programs (tests/buildtime/), not
# times: each builds against the library the tests just built, in seconds.
python3 scripts/check-buildtime.py

section "the CPU suites again below this CPU's instruction set (DEVTENSOR_CPU_ISA)"
# The element-wise loops, convolutions and gemm's products have AVX-512,
# AVX2 and scalar paths, picked at run time; a machine with AVX-512 would
# otherwise never run the other two, and AVX2 is what most users' CPUs have.
# The multi-process, data-parallel and loader tests are left out: they
# check coordination, not arithmetic (about 15 s each).
for isa in avx2 scalar; do
    DEVTENSOR_CPU_ISA=$isa cargo test --quiet --test ops --test training -- \
        --skip ::cuda0 --skip ::cuda1 --skip distributed:: --skip store_attacks:: --skip parallel:: --skip data::
done

section "doc tests"
cargo test --doc

section "docs build without warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet

section "emulated CUDA driver (emu/): kernels on the CPU, driver and cuBLAS calls through cudarc"
bash scripts/test-emu.sh

section "the device-generic suites and the CUDA backend suite on Cpu, Cuda<0> and Cuda<1>, under the emulated driver"
# Every check in these suites runs on all three devices (tests/common/mod.rs);
# tests/ops/cuda_backend.rs compares every op on the GPUs with the CPU, and
# tests/ops/async_transfer.rs provokes the races of asynchronous transfers.
# DEVTENSOR_REQUIRE_CUDA=1 turns a missing GPU from a SKIP line into a
# failure, so this section cannot pass by skipping. with-emu.sh prints the
# driver it installs; each test binary then prints `RUN Cuda<N>: ...`.
# The multi-process tests (tests/training/distributed.rs) bound each job
# themselves; the timeout is the step's own backstop against a hang, far
# above the three minutes it takes on a quiet machine.
DEVTENSOR_REQUIRE_CUDA=1 timeout 2700 bash scripts/with-emu.sh cargo test --test ops --test training --test matmul_precision
# The fixed programs of ui-tests/pass (tests/ui.rs) pick Cuda<0> when there
# is one.
bash scripts/with-emu.sh cargo test --quiet --test ui builds_and_runs

section "a custom op (examples/custom_op.rs) on Cpu, Cuda<0> and Cuda<1>, under the emulated driver"
DEVTENSOR_REQUIRE_CUDA=1 bash scripts/with-emu.sh cargo run --quiet --example custom_op

section "distributed data parallel (examples/ddp.rs): two processes through devtensor-run, under the emulated driver"
# What a new user runs, on the emulated GPUs: the launcher starts two
# processes, each trains on its shard on its own GPU; --compare makes rank 0
# fail unless one device with the same batches gets the same test accuracy,
# within one image. The launcher exits non-zero if any rank fails; the
# timeout is a backstop against a hang, far above the minute it takes.
cargo build --quiet --example ddp --bin devtensor-run
DEVTENSOR_REQUIRE_CUDA=1 timeout 900 bash scripts/with-emu.sh \
    target/debug/devtensor-run --nproc-per-node 2 target/debug/examples/ddp --compare

section "nanoGPT's DDP loop (examples/ddp_gpt.rs): gradient accumulation and collectives, two processes, emulated"
# Each rank accumulates micro-batches without synchronising and sums them
# with the other's on the last; --compare makes rank 0 fail unless one
# device stepping on every rank's micro-batches together ends with the
# same parameters. The timeout is a backstop far above its half minute.
cargo build --quiet --example ddp_gpt
DEVTENSOR_REQUIRE_CUDA=1 timeout 600 bash scripts/with-emu.sh \
    target/debug/devtensor-run --nproc-per-node 2 target/debug/examples/ddp_gpt --tiny --iters 8 --accum 2 --compare
