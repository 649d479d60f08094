#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and the CUDA 13 libraries but no Rust
# toolchain: runs what scripts/gpu-bundle.sh built into .gpu/bin, namely
# the device-generic suites against the system's driver (Cuda<1> is skipped
# on a one-GPU machine), the examples, the CUDA criterion benches and the
# PyTorch peers (benches/peers/torch_cuda.py) and PyTorch's side of
# examples/train_gpt.rs (scripts/train_gpt_torch.py). Logs go to $OUT (default
# .gpu/out), and examples/ddp.rs through devtensor-run over the real NCCL.
# TESTS, EXAMPLES, BENCH_FILTER (a regex, `cuda_matmul|cuda_attention`) and
# TORCH_FILTER (words, `cuda_matmul cuda_attention`) narrow the run; NO_BENCH=1,
# NO_TORCH=1, NO_DDP=1 and NO_MIXED=1 skip parts.
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/.gpu/out}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
# NVRTC and cuBLAS from the CUDA toolkit, if they are not on the search path.
for lib in libnvrtc.so.13 libcublas.so.13; do
    path=$(find /usr/local/cuda*/ -name "$lib" 2>/dev/null | head -1)
    echo "$lib -> ${path:-not found under /usr/local/cuda*}"
    [ -n "$path" ] && export LD_LIBRARY_PATH="$(dirname "$path")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
# NCCL, for data-parallel training: the toolkit's, or the wheel PyTorch
# brings (nvidia-nccl-cu13); without it `DataParallel` uses peer copies and
# the NCCL half of tests/training/parallel.rs fails.
nccl=$(find /usr/local/cuda*/ /usr/lib /usr/local/lib -name 'libnccl.so*' 2>/dev/null | head -1)
[ -z "$nccl" ] && nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
echo "libnccl -> ${nccl:-not found}"
if [ -n "$nccl" ]; then
    # cudarc asks for `libnccl.so` (not `.so.2`, the wheel's name).
    mkdir -p .gpu/lib && ln -sf "$nccl" .gpu/lib/libnccl.so
    export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# A real GPU is fast: more property cases than the emulator's default.
export DEVTENSOR_CUDA_CASES=${DEVTENSOR_CUDA_CASES:-64}
status=0
for t in ${TESTS:-ops training matmul_precision}; do
    [ -x ".gpu/bin/$t" ] || continue
    start=$(date +%s.%N)
    ".gpu/bin/$t" --test-threads=16 >"$OUT/$t.log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    summary=$(grep -E '^test result|RUN Cuda' "$OUT/$t.log" | sort -u | tr '\n' ' ')
    printf '%-16s rc=%d %6.1fs  %s\n' "$t" "$rc" "$(awk "BEGIN{print $end - $start}")" "$summary"
    if [ "$rc" -ne 0 ]; then
        status=1
        grep -E -A15 '^---- |panicked' "$OUT/$t.log" | head -60
    fi
done
for ex in ${EXAMPLES:-quickstart prefetch train_cnn static_cnn data_parallel train_gpt}; do
    [ -x ".gpu/bin/$ex" ] || continue
    echo "== example $ex"
    timeout 200 ".gpu/bin/$ex" 2>&1 | tee "$OUT/example-$ex.log" | tail -8
done
# Mixed precision (issue 37): bf16 products under autocast, beside PyTorch's
# autocast on the same batches.
if [ -z "${NO_MIXED:-}" ]; then
    for ex in train_cnn train_gpt; do
        [ -x ".gpu/bin/$ex" ] || continue
        echo "== example $ex --bf16"
        timeout 200 ".gpu/bin/$ex" --bf16 2>&1 | tee "$OUT/example-$ex-bf16.log" | tail -6
    done
    if [ -z "${NO_TORCH:-}" ]; then
        echo "== PyTorch's GPT under autocast bf16 (scripts/train_gpt_torch.py --device cuda --bf16)"
        timeout 200 python3 scripts/train_gpt_torch.py --device cuda --bf16 2>&1 | tee "$OUT/torch-gpt-bf16.log" | tail -4
    fi
fi
if [ -x .gpu/bin/devtensor-run ] && [ -x .gpu/bin/ddp ] && [ -z "${NO_DDP:-}" ]; then
    # One process per GPU present, over the real NCCL (one GPU: a job of one).
    gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
    echo "== examples/ddp.rs through devtensor-run, $gpus process(es)"
    timeout 300 .gpu/bin/devtensor-run --nproc-per-node "${gpus:-1}" .gpu/bin/ddp --compare 2>&1 \
        | tee "$OUT/example-ddp.log" | tail -8
    echo "devtensor-run rc=${PIPESTATUS[0]}"
    # Two ranks on one GPU: NCCL refuses them (duplicate GPU); both must end
    # with an error, not wait.
    echo "== two ranks on GPU 0: both must fail, naming the problem"
    for rank in 0 1; do
        WORLD_SIZE=2 RANK=$rank LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 DEVTENSOR_DIST_TIMEOUT_S=60 \
            timeout 120 .gpu/bin/ddp --epochs 1 >"$OUT/duplicate-$rank.log" 2>&1 &
    done
    wait
    tail -n 3 "$OUT/duplicate-0.log" "$OUT/duplicate-1.log"
fi
if [ -x .gpu/bin/cuda ] && [ -z "${NO_BENCH:-}" ]; then
    echo "== criterion benches (benches/cuda.rs)"
    timeout 330 .gpu/bin/cuda --bench ${BENCH_FILTER:-} >"$OUT/bench.log" 2>&1
    echo "bench rc=$?"
    grep -E '^[a-z_]+/|time:|thrpt:' "$OUT/bench.log" | tail -80
fi
if [ -z "${NO_TORCH:-}" ]; then
    echo "== PyTorch on the same operations (benches/peers/torch_cuda.py)"
    timeout 200 python3 benches/peers/torch_cuda.py ${TORCH_FILTER:-} 2>&1 | tee "$OUT/torch.log" | tail -40
    echo "== PyTorch's GPT on the example's batches (scripts/train_gpt_torch.py --device cuda)"
    timeout 200 python3 scripts/train_gpt_torch.py --device cuda 2>&1 | tee "$OUT/torch-gpt.log" | tail -12
fi
exit $status
