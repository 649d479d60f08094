#!/usr/bin/env bash
# Sets up the Python environment the peers bench runs PyTorch in, and prints
# its interpreter's path on stdout (everything else goes to stderr).
#
# The environment lives in .cache/peers-torch at the repository root (or in
# $DEVTENSOR_PEERS_TORCH_ENV), is made once with `python3 -m venv`, and holds
# the pinned PyTorch wheel from PyPI. PyPI's Linux wheel is the CUDA build
# (about 3 GB with its CUDA libraries); its CPU kernels are the same as the
# CPU-only build's, and the bench never touches CUDA. A folder that already
# holds this exact version is reused as it is.
set -euo pipefail

TORCH_VERSION="2.15.0"
# The other runtimes the inference rows are timed against: ONNX Runtime, and
# the onnx package that PyTorch's exporter writes its files with.
ORT_VERSION="1.32.0"
ONNX_VERSION="1.23.2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
env_dir="${DEVTENSOR_PEERS_TORCH_ENV:-$root/.cache/peers-torch}"
python="$env_dir/bin/python"

if [ -x "$python" ] && "$python" -c "
import sys, torch, onnx, onnxruntime
sys.exit((torch.__version__.split('+')[0], onnxruntime.__version__, onnx.__version__) != ('$TORCH_VERSION', '$ORT_VERSION', '$ONNX_VERSION'))
" 2>/dev/null; then
    echo "$python"
    exit 0
fi

echo "peers: installing PyTorch $TORCH_VERSION and ONNX Runtime $ORT_VERSION into $env_dir (once; about 3 GB)" >&2
python3 -m venv "$env_dir" >&2
"$python" -m pip install --quiet --disable-pip-version-check "torch==$TORCH_VERSION" "numpy<3" \
    "onnxruntime==$ORT_VERSION" "onnx==$ONNX_VERSION" >&2
"$python" -c "import torch" >&2
echo "$python"
