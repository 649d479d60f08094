#!/usr/bin/env bash
# Installs NVRTC, ptxas and the CUDA headers from their PyPI wheels into
# .cache/cuda-tools, only when that folder does not already hold this exact
# version, then prints the folder. No CUDA toolkit and no GPU are needed: the
# kernels test (tests/kernels_compile.rs) compiles every kernels/*.cu with
# these tools.
#
# The version is pinned so that every machine (CI included) compiles the
# kernels with the same compiler; cudarc's `cuda-13000` feature in Cargo.toml
# must name the same major/minor version.
#
# Usage: dir=$(bash scripts/install-cuda-tools.sh)   # progress goes to stderr
set -euo pipefail
cd "$(dirname "$0")/.."

CUDA_TOOLS_VERSION=13.0.88
dir="${DEVTENSOR_CUDA_TOOLS:-$PWD/.cache/cuda-tools}"
stamp="$dir/.installed-$CUDA_TOOLS_VERSION"

if [[ ! -f "$stamp" ]]; then
    echo "installing nvidia-cuda-{nvrtc,nvcc,runtime}==$CUDA_TOOLS_VERSION into $dir" >&2
    # A partial or older install is replaced whole, so the stamp always
    # describes everything in the folder. Only what pip put there is removed:
    # $DEVTENSOR_CUDA_TOOLS may point at a folder that holds other things.
    mkdir -p "$dir"
    rm -rf "$dir/nvidia" "$dir"/nvidia_cuda_*.dist-info "$dir"/.installed-*
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "$dir" \
        "nvidia-cuda-nvrtc==$CUDA_TOOLS_VERSION" \
        "nvidia-cuda-nvcc==$CUDA_TOOLS_VERSION" \
        "nvidia-cuda-runtime==$CUDA_TOOLS_VERSION" >&2
    # Wheels do not keep the executable bit on every platform's pip.
    chmod +x "$dir"/nvidia/cu13/bin/* 2>/dev/null || true
    touch "$stamp"
fi

for needed in nvidia/cu13/lib/libnvrtc.so.13 nvidia/cu13/bin/ptxas nvidia/cu13/include/cuda_runtime.h; do
    if [[ ! -e "$dir/$needed" ]]; then
        echo "install-cuda-tools: $dir/$needed is missing after install" >&2
        exit 1
    fi
done
echo "$dir"
