//! Matrix products on CUDA, through cuBLAS's strided-batched GEMM (in TF32
//! where [`set_float32_matmul_precision`](super::set_float32_matmul_precision) allows it;
//! `bf16` and `f16` on the tensor cores with `f32` sums).

use super::MatmulKernel;
use super::float32_matmul_precision;
use crate::backend::Backend;
use crate::backend::cuda::AnyCuda;
use crate::backend::cuda::context::CudaDevice;
use crate::backend::cuda::{CudaStorage, copy_into, dense_ptr, narrowed};
use crate::element::{DType, FloatElement};
use crate::error::{Error, Result};
use crate::layout::{Dims, Layout, Shape, count_of};
use cudarc::cublas::result as blas;
use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use std::ffi::{c_int, c_longlong, c_void};
use std::sync::Arc;

/// Whether `layout` (shape `[batch.., r, c]`) is the transpose of a dense
/// `[batch.., c, r]` tensor: what `x.transpose(-2, -1)` of a contiguous `x`
/// gives. Size-1 axes may have any stride.
fn is_dense_transpose(layout: &Layout) -> bool {
    let (dims, strides) = (layout.dims(), layout.strides());
    let rank = dims.len();
    let mut expected: Vec<usize> = vec![0; rank];
    expected[rank - 2] = 1;
    expected[rank - 1] = dims[rank - 2];
    let mut size = dims[rank - 2] * dims[rank - 1];
    for axis in (0..rank - 2).rev() {
        expected[axis] = size;
        size *= dims[axis];
    }
    dims.iter().zip(strides).zip(&expected).all(|((&d, &s), &e)| d == 1 || s == e)
}

/// The device address of an operand as cuBLAS can read it, whether it is
/// read transposed, and the dense copy made when it had to be (kept alive
/// until the product is queued).
fn operand<E: FloatElement>(
    device: &Arc<CudaDevice>,
    x: &CudaStorage<E>,
    layout: &Layout,
) -> Result<(Option<CudaStorage<E>>, u64, bool)> {
    if layout.contiguous_range().is_none() && is_dense_transpose(layout) {
        return Ok((None, x.ptr_at(layout.offset()), true));
    }
    let (copy, ptr) = dense_ptr(device, "matmul", x, layout)?;
    Ok((copy, ptr, false))
}

impl MatmulKernel for AnyCuda {
    fn matmul<E: FloatElement>(
        lhs: &CudaStorage<E>,
        lhs_layout: &Layout,
        rhs: &CudaStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        product::<E, E>(lhs, lhs_layout, rhs, rhs_layout, None)
    }

    /// The output starts as the bias, broadcast down its rows, and cuBLAS
    /// adds the product to it (beta = 1), PyTorch's `addmm`. The half types
    /// do so in an `f32` output, rounded once at the end: cuBLAS rounds the
    /// product of a half output to the half type before it adds beta C
    /// (seen on an H100), which a bias that cancels the product makes a
    /// large relative error.
    fn matmul_bias<E: FloatElement>(
        lhs: &CudaStorage<E>,
        lhs_layout: &Layout,
        rhs: &CudaStorage<E>,
        rhs_layout: &Layout,
        bias: &CudaStorage<E>,
        bias_layout: &Layout,
    ) -> Result<Option<CudaStorage<E>>> {
        const OP: &str = "matmul";
        let device = Self::device()?;
        let dims = lhs_layout.dims();
        let (m, n) = (dims[dims.len() - 2], rhs_layout.dims()[1]);
        let rows = Layout::new(Shape::from([m, n]), Dims::from(&[0usize, 1][..]), bias_layout.offset());
        if E::DTYPE.is_half() {
            let start = copy_into::<E, f32>(&device, OP, bias, &rows)?;
            let sums = product::<E, f32>(lhs, lhs_layout, rhs, rhs_layout, Some(start))?;
            return narrowed(OP, &sums).map(Some);
        }
        let start = copy_into::<E, E>(&device, OP, bias, &rows)?;
        product::<E, E>(lhs, lhs_layout, rhs, rhs_layout, Some(start)).map(Some)
    }
}

/// `lhs · rhs` (batched) in elements `O` (`E`, or `f32` for the half
/// types), added to `start` where given (dense, of the output's shape),
/// else into a new output.
fn product<E: FloatElement, O: FloatElement>(
    lhs: &CudaStorage<E>,
    lhs_layout: &Layout,
    rhs: &CudaStorage<E>,
    rhs_layout: &Layout,
    start: Option<CudaStorage<O>>,
) -> Result<CudaStorage<O>> {
    const OP: &str = "matmul";
    let device = AnyCuda::device()?;
    let dims = lhs_layout.dims();
    let r = dims.len();
    let (m, k, n) = (dims[r - 2], dims[r - 1], rhs_layout.dims()[r - 1]);
    let batch = count_of(&dims[..r - 2]);
    // The API checked that the output's element count fits.
    let len = count_of(&[batch, m, n]);
    if len == 0 {
        return CudaStorage::alloc(&device, OP, 0);
    }
    if k == 0 {
        return match start {
            Some(start) => Ok(start),
            None => AnyCuda::storage_full(OP, len, O::ZERO),
        };
    }
    // Added to the starting output where there is one.
    let beta = if start.is_some() { 1.0 } else { 0.0 };
    let out = match start {
        Some(start) => start,
        None => CudaStorage::<O>::alloc(&device, OP, len)?,
    };
    // cuBLAS wants each matrix dense with one stride between batch
    // entries, row-major or transposed (it transposes on the fly); any
    // other operand (a broadcast batch, a narrowed view) is copied dense.
    let (_lhs_copy, a, a_t) = operand(&device, lhs, lhs_layout)?;
    let (_rhs_copy, b, b_t) = operand(&device, rhs, rhs_layout)?;
    let too_big = || Error::Argument {
        op: OP,
        device: device.name.clone(),
        reason: format!("cuBLAS takes sizes below 2^31, got m = {m}, k = {k}, n = {n}, batch = {batch}"),
    };
    let int = |v: usize| c_int::try_from(v).map_err(|_| too_big());
    let (mi, ki, ni, bi) = (int(m)?, int(k)?, int(n)?, int(batch)?);
    let (sa, sb, sc) = ((k * n) as c_longlong, (m * k) as c_longlong, (m * n) as c_longlong);
    let handle = *device.blas()?.handle();
    device.ctx.bind_to_thread().map_err(|e| device.error(OP, e))?;
    // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS reads the
    // row-major B (k×n) as the column-major n×k matrix Bᵀ, so passing B
    // first and A second, with no transposes, yields Cᵀ in column-major
    // order, which is C in row-major order.
    // A transposed operand is stored as its transpose, dense: read in
    // column-major order it is the matrix itself, so cuBLAS transposes
    // it, with the other dimension as its leading one.
    let op = |t: bool| if t { cublasOperation_t::CUBLAS_OP_T } else { cublasOperation_t::CUBLAS_OP_N };
    let (op_b, ldb) = (op(b_t), if b_t { ki } else { ni });
    let (op_a, lda) = (op(a_t), if a_t { mi } else { ki });
    // The products with the element type as an argument: f32 (in TF32 on
    // the tensor cores where the precision setting allows it), and the half
    // types on the tensor cores, summed in f32 and each output rounded once
    // (PyTorch's default, which allows no reduced-precision sums).
    let out_type = match O::DTYPE {
        DType::BF16 => cudaDataType::CUDA_R_16BF,
        DType::F16 => cudaDataType::CUDA_R_16F,
        _ => cudaDataType::CUDA_R_32F,
    };
    let gemm_ex = |data: cudaDataType, compute: cublasComputeType_t| {
        let (alpha, beta) = (1.0f32, beta as f32);
        // SAFETY: a, b and out are live device buffers of at least
        // batch·m·k, batch·k·n and batch·m·n elements of the types `data`
        // and `out_type` name (a combination cuBLAS takes with an f32
        // compute type: equal types, or half inputs into f32), each dense (row-major, or transposed where op_a/op_b say
        // so) as the leading dimensions and batch strides describe; alpha
        // and beta are f32 host values (the scalar type of both compute
        // types used here; the handle is in host pointer mode) read before
        // the call returns; the handle is bound to this device's stream.
        unsafe {
            blas::gemm_strided_batched_ex(
                handle,
                op_b,
                op_a,
                ni,
                mi,
                ki,
                (&alpha as *const f32).cast(),
                b as *const c_void,
                data,
                ldb,
                sa,
                a as *const c_void,
                data,
                lda,
                sb,
                (&beta as *const f32).cast(),
                out.ptr() as *mut c_void,
                out_type,
                ni,
                sc,
                bi,
                compute,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
    };
    let result = match E::DTYPE {
        DType::F32 if float32_matmul_precision().allows_tf32() => {
            gemm_ex(cudaDataType::CUDA_R_32F, cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32)
        }
        DType::F32 => gemm_ex(cudaDataType::CUDA_R_32F, cublasComputeType_t::CUBLAS_COMPUTE_32F),
        DType::BF16 => gemm_ex(cudaDataType::CUDA_R_16BF, cublasComputeType_t::CUBLAS_COMPUTE_32F),
        DType::F16 => gemm_ex(cudaDataType::CUDA_R_16F, cublasComputeType_t::CUBLAS_COMPUTE_32F),
        DType::F64 => {
            let alpha = 1.0f64;
            // SAFETY: as for `gemm_ex`, with f64 elements and f64 alpha and
            // beta.
            unsafe {
                blas::dgemm_strided_batched(
                    handle,
                    op_b,
                    op_a,
                    ni,
                    mi,
                    ki,
                    &alpha,
                    b as *const f64,
                    ldb,
                    sa,
                    a as *const f64,
                    lda,
                    sb,
                    &beta,
                    out.ptr() as *mut f64,
                    ni,
                    sc,
                    bi,
                )
            }
        }
        other @ (DType::I64 | DType::U8) => {
            return Err(device.error(OP, format_args!("no GEMM for {}", other.name())));
        }
    };
    result.map_err(|e| device.error(OP, format_args!("cuBLAS: {e:?}")))?;
    Ok(out)
}
