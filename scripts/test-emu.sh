#!/usr/bin/env bash
# Builds the emulated CUDA driver (emu/) and runs its end-to-end tests through
# cudarc, with the emulator first on the library search path.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# NVRTC from its pinned PyPI wheel (cudarc's `cuda-13000` feature wants 13.0).
TOOLS=.cache/cuda-tools
CUDA_WHEEL_VERSION=13.0.88
if [ ! -e "$TOOLS/nvidia/cu13/lib/libnvrtc.so.13" ]; then
    echo "== installing NVRTC $CUDA_WHEEL_VERSION into $TOOLS"
    python3 -m pip install --quiet --no-deps --target "$TOOLS" \
        "nvidia-cuda-nvrtc==$CUDA_WHEEL_VERSION" "nvidia-cuda-runtime==$CUDA_WHEEL_VERSION" \
        || echo "   (NVRTC unavailable: the tests load PTX skeletons instead of NVRTC output)"
fi

echo "== emulated CUDA driver: build"
cargo build --manifest-path emu/Cargo.toml

# cudarc opens `libcuda.so` and `libcublas.so` by name; both names are the
# same file, so the driver and cuBLAS share one state (memory, streams).
DRIVER_DIR="$PWD/emu/target/emu-driver"
mkdir -p "$DRIVER_DIR"
ln -sf ../debug/libcuda.so "$DRIVER_DIR/libcuda.so"
ln -sf ../debug/libcuda.so "$DRIVER_DIR/libcublas.so"
export LD_LIBRARY_PATH="$DRIVER_DIR:$PWD/$TOOLS/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== emulated CUDA driver: tests (driver: $DRIVER_DIR/libcuda.so, devtensor-emu)"
cargo test --manifest-path emu/Cargo.toml -- --nocapture
