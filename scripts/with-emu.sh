#!/usr/bin/env bash
# Runs a command with the emulated CUDA driver (emu/) in place of the real one:
#   bash scripts/with-emu.sh cargo test
# Builds the emulator, makes `libcuda.so`, `libcublas.so` and `libnccl.so`
# name it, puts it first on LD_LIBRARY_PATH (with NVRTC from the pinned wheel
# after it), and says so. Without this wrapper, cudarc finds the real driver,
# as in production.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="$PWD/.cache/cuda-tools"
CUDA_WHEEL_VERSION=13.0.88 # cudarc's `cuda-13000` feature wants 13.0
if [ ! -e "$TOOLS/nvidia/cu13/lib/libnvrtc.so.13" ]; then
    if [ -f scripts/install-cuda-tools.sh ]; then
        bash scripts/install-cuda-tools.sh
    else
        echo "== installing NVRTC $CUDA_WHEEL_VERSION into $TOOLS" >&2
        python3 -m pip install --quiet --no-deps --target "$TOOLS" \
            "nvidia-cuda-nvrtc==$CUDA_WHEEL_VERSION" "nvidia-cuda-runtime==$CUDA_WHEEL_VERSION" >&2 \
            || echo "   (NVRTC unavailable: kernels cannot be compiled to PTX)" >&2
    fi
fi

# EMU_TARGET_DIR keeps a differently built emulator (scripts/emu-mutation.sh) apart.
EMU_TARGET_DIR="${EMU_TARGET_DIR:-$PWD/emu/target}"
CARGO_TARGET_DIR="$EMU_TARGET_DIR" cargo build --quiet --manifest-path emu/Cargo.toml

# cudarc opens `libcuda.so`, `libcublas.so` and `libnccl.so` by name; all the
# names are the same file, so the driver, cuBLAS and NCCL share one state
# (memory, streams). `libnccl.so.2` is the soname other NCCL users load.
DRIVER_DIR="$EMU_TARGET_DIR/emu-driver"
mkdir -p "$DRIVER_DIR"
ln -sf ../debug/libcuda.so "$DRIVER_DIR/libcuda.so"
ln -sf ../debug/libcuda.so "$DRIVER_DIR/libcublas.so"
ln -sf ../debug/libcuda.so "$DRIVER_DIR/libnccl.so"
ln -sf ../debug/libcuda.so "$DRIVER_DIR/libnccl.so.2"
export LD_LIBRARY_PATH="$DRIVER_DIR:$TOOLS/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEVTENSOR_EMU_DRIVER="$DRIVER_DIR/libcuda.so"
echo "== CUDA driver: devtensor-emu, the emulated GPU ($DEVTENSOR_EMU_DRIVER), 2 devices" >&2
exec "$@"
