//! Matrix products on CUDA, through cuBLAS's strided-batched GEMM.

use super::MatmulKernel;
use crate::device::cuda::{CudaStorage, dense_ptr};
use crate::device::{Backend, Cuda};
use crate::element::{DType, FloatElement};
use crate::error::{Error, Result};
use crate::shape::Layout;
use cudarc::cublas::{result as blas, sys::cublasOperation_t};
use std::ffi::{c_int, c_longlong};

impl<const N: usize> MatmulKernel for Cuda<N> {
    fn matmul<E: FloatElement>(
        lhs: &CudaStorage<E>,
        lhs_layout: &Layout,
        rhs: &CudaStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        const OP: &str = "matmul";
        let device = Self::device()?;
        let dims = lhs_layout.dims();
        let r = dims.len();
        let (m, k, n) = (dims[r - 2], dims[r - 1], rhs_layout.dims()[r - 1]);
        let batch: usize = dims[..r - 2].iter().product();
        let len = batch * m * n;
        if len == 0 {
            return CudaStorage::alloc(&device, OP, 0);
        }
        if k == 0 {
            return Self::storage_full(len, E::ZERO);
        }
        let out = CudaStorage::<E>::alloc(&device, OP, len)?;
        // cuBLAS wants each matrix dense with one stride between batch
        // entries; a transposed or broadcast operand is copied dense first.
        let (_lhs_copy, a) = dense_ptr(&device, OP, lhs, lhs_layout)?;
        let (_rhs_copy, b) = dense_ptr(&device, OP, rhs, rhs_layout)?;
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
        let nn = cublasOperation_t::CUBLAS_OP_N;
        let result = match E::DTYPE {
            DType::F32 => {
                let (alpha, beta) = (1.0f32, 0.0f32);
                // SAFETY: a, b and out are live device buffers of at least
                // batch·m·k, batch·k·n and batch·m·n f32 elements, dense in
                // row-major order, as the leading dimensions and batch
                // strides describe; alpha and beta are host values (the
                // handle is in host pointer mode) read before the call
                // returns; the handle is bound to this device's stream.
                unsafe {
                    blas::sgemm_strided_batched(
                        handle, nn, nn, ni, mi, ki, &alpha, b as *const f32, ni, sa, a as *const f32, ki, sb, &beta,
                        out.ptr() as *mut f32, ni, sc, bi,
                    )
                }
            }
            DType::F64 => {
                let (alpha, beta) = (1.0f64, 0.0f64);
                // SAFETY: as above, for f64.
                unsafe {
                    blas::dgemm_strided_batched(
                        handle, nn, nn, ni, mi, ki, &alpha, b as *const f64, ni, sa, a as *const f64, ki, sb, &beta,
                        out.ptr() as *mut f64, ni, sc, bi,
                    )
                }
            }
            // FloatElement is only f32 and f64.
            other => return Err(device.error(OP, format_args!("no GEMM for {}", other.name()))),
        };
        result.map_err(|e| device.error(OP, format_args!("cuBLAS: {e:?}")))?;
        Ok(out)
    }
}
