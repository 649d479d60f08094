//! The cuBLAS calls devtensor makes, computed on the CPU in stream order.
//!
//! cudarc loads cuBLAS as `libcublas.so`; the test script links that name to
//! this same library, so cuBLAS sees the driver's memory and streams.

use std::ffi::{c_int, c_longlong, c_void};

use crate::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use crate::memory;
use crate::state::*;

type Status = u32;
const STATUS_SUCCESS: Status = 0;
const STATUS_NOT_INITIALIZED: Status = 1;
const STATUS_INVALID_VALUE: Status = 7;
const STATUS_EXECUTION_FAILED: Status = 13;
const STATUS_NOT_SUPPORTED: Status = 15;

pub(crate) struct Handle {
    dev: usize,
    stream: u64,
}

/// The element type of A, B and C, and how the products read them.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum GemmType {
    F32,
    /// `f32` with the inputs rounded to TF32 before the products
    /// (`CUBLAS_COMPUTE_32F_FAST_TF32`).
    Tf32,
    F64,
    /// bfloat16 and IEEE half, summed in `f32` precision or better and
    /// each output rounded once (`CUBLAS_COMPUTE_32F`).
    Bf16,
    F16,
}

impl GemmType {
    fn size(self) -> usize {
        match self {
            GemmType::F32 | GemmType::Tf32 => 4,
            GemmType::F64 => 8,
            GemmType::Bf16 | GemmType::F16 => 2,
        }
    }

    /// Element `i` of the array at host address `p`, as stored.
    ///
    /// # Safety
    /// `p` points to at least `i + 1` elements of this type, aligned.
    unsafe fn read(self, p: *mut u8, i: isize) -> f64 {
        // SAFETY: the caller's promise.
        unsafe {
            match self {
                GemmType::F32 | GemmType::Tf32 => *(p as *const f32).offset(i) as f64,
                GemmType::F64 => *(p as *const f64).offset(i),
                GemmType::Bf16 => bf16_to_f32(*(p as *const u16).offset(i)) as f64,
                GemmType::F16 => f16_to_f32(*(p as *const u16).offset(i)) as f64,
            }
        }
    }

    fn is_half(self) -> bool {
        matches!(self, GemmType::Bf16 | GemmType::F16)
    }

    /// `v` rounded to this type.
    fn rounded(self, v: f64) -> f64 {
        match self {
            GemmType::F32 | GemmType::Tf32 => v as f32 as f64,
            GemmType::F64 => v,
            GemmType::Bf16 => bf16_to_f32(f32_to_bf16(v as f32)) as f64,
            GemmType::F16 => f16_to_f32(f32_to_f16(v as f32)) as f64,
        }
    }

    /// Stores `v` rounded to this type as element `i` at `p`.
    ///
    /// # Safety
    /// As [`read`](Self::read).
    unsafe fn write(self, p: *mut u8, i: isize, v: f64) {
        // SAFETY: the caller's promise.
        unsafe {
            match self {
                GemmType::F32 | GemmType::Tf32 => *(p as *mut f32).offset(i) = v as f32,
                GemmType::F64 => *(p as *mut f64).offset(i) = v,
                GemmType::Bf16 => *(p as *mut u16).offset(i) = f32_to_bf16(v as f32),
                GemmType::F16 => *(p as *mut u16).offset(i) = f32_to_f16(v as f32),
            }
        }
    }
}

/// One (batched) GEMM, queued on a stream: C = alpha op(A) op(B) + beta C, column-major.
pub(crate) struct GemmOp {
    /// The type of A and B.
    ty: GemmType,
    /// The type of C: A's, or `f32` for half A and B.
    c_ty: GemmType,
    ta: bool,
    tb: bool,
    m: usize,
    n: usize,
    k: usize,
    alpha: f64,
    beta: f64,
    a: u64,
    lda: usize,
    sa: i64,
    b: u64,
    ldb: usize,
    sb: i64,
    c: u64,
    ldc: usize,
    sc: i64,
    batch: usize,
}

impl GemmOp {
    /// (rows, cols) as stored of A, B, C.
    fn shapes(&self) -> [(usize, usize); 3] {
        let a = if self.ta { (self.k, self.m) } else { (self.m, self.k) };
        let b = if self.tb { (self.n, self.k) } else { (self.k, self.n) };
        [a, b, (self.m, self.n)]
    }
    /// Bytes each operand spans, over all batches.
    fn extents(&self) -> [usize; 3] {
        let lds = [self.lda, self.ldb, self.ldc];
        let strides = [self.sa, self.sb, self.sc];
        let mut out = [0; 3];
        for (i, &(r, c)) in self.shapes().iter().enumerate() {
            let one = if r == 0 || c == 0 { 0 } else { lds[i] * (c - 1) + r };
            let elem = if i == 2 { self.c_ty.size() } else { self.ty.size() };
            out[i] = if one == 0 { 0 } else { ((self.batch - 1) * strides[i] as usize + one) * elem };
        }
        out
    }
}

pub(crate) fn run_gemm(dev: usize, g: &GemmOp) -> Result<(), CUresult> {
    if g.m == 0 || g.n == 0 || g.batch == 0 {
        return Ok(());
    }
    let ext = g.extents();
    let (pa, pb, pc) = {
        let st = state();
        let t =
            |addr, n| memory::translate(&st, dev, addr, n).map_err(|m| report(ILLEGAL_ADDRESS, format!("gemm: {m}")));
        (t(g.a, ext[0])?, t(g.b, ext[1])?, t(g.c, ext[2])?)
    };
    for batch in 0..g.batch {
        for j in 0..g.n {
            for i in 0..g.m {
                let mut acc = 0.0f64;
                for l in 0..g.k {
                    let ai = if g.ta { l + i * g.lda } else { i + l * g.lda } as i64 + batch as i64 * g.sa;
                    let bi = if g.tb { j + l * g.ldb } else { l + j * g.ldb } as i64 + batch as i64 * g.sb;
                    // SAFETY: every index is below the extent translated above.
                    let (x, y) = unsafe { (g.ty.read(pa, ai as isize), g.ty.read(pb, bi as isize)) };
                    let (x, y) = match g.ty {
                        GemmType::Tf32 => (as_tf32(x as f32) as f64, as_tf32(y as f32) as f64),
                        _ => (x, y),
                    };
                    acc += x * y;
                }
                let ci = (i + j * g.ldc) as isize + (batch as i64 * g.sc) as isize;
                // SAFETY: as above. With beta == 0, C is not read (cuBLAS semantics: NaNs in C vanish).
                unsafe {
                    let product = g.alpha * acc;
                    if g.beta == 0.0 {
                        g.c_ty.write(pc, ci, product);
                    } else {
                        // cuBLAS rounds a half C's product to the half type
                        // before it adds beta C (seen on an H100, cuBLAS 13,
                        // 2026-11-28): two roundings, which cancellation
                        // between the two makes visible.
                        let product = if g.c_ty.is_half() { g.c_ty.rounded(product) } else { product };
                        g.c_ty.write(pc, ci, product + g.beta * g.c_ty.read(pc, ci));
                    }
                }
            }
        }
    }
    Ok(())
}

/// `x` as the tensor cores read it in TF32: the 10 leading mantissa bits,
/// rounded to nearest with ties away from zero (PTX's `cvt.rna.tf32.f32`),
/// still stored as an `f32`; infinities and NaN unchanged.
fn as_tf32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    // Adding half of the dropped part's unit to the magnitude's bits rounds
    // it half away from zero; a carry into the exponent is the right result.
    f32::from_bits((x.to_bits() + 0x1000) & !0x1fff)
}

/// Creates a handle bound to the current context's device and its default stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasCreate_v2(h: *mut *mut c_void) -> Status {
    let Ok(dev) = current() else {
        return STATUS_NOT_INITIALIZED;
    };
    let mut st = state();
    let stream = st.devices[dev].default_stream;
    let id = st.handle();
    st.blas.insert(id, Handle { dev, stream });
    // SAFETY: out pointer supplied by the caller.
    unsafe { *h = id as *mut c_void };
    STATUS_SUCCESS
}

/// Destroys a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasDestroy_v2(h: *mut c_void) -> Status {
    if state().blas.remove(&(h as u64)).is_some() { STATUS_SUCCESS } else { STATUS_NOT_INITIALIZED }
}

/// Sets the stream later GEMMs are queued on (null: the device's default stream).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasSetStream_v2(h: *mut c_void, s: *mut c_void) -> Status {
    let mut st = state();
    let Some(dev) = st.blas.get(&(h as u64)).map(|b| b.dev) else {
        return STATUS_NOT_INITIALIZED;
    };
    let id = if s.is_null() {
        st.devices[dev].default_stream
    } else {
        match st.stream(s) {
            Ok(id) => id,
            Err(_) => return STATUS_INVALID_VALUE,
        }
    };
    if st.streams[&id].dev != dev {
        report(INVALID_VALUE, "cublasSetStream: the stream belongs to another device");
        return STATUS_INVALID_VALUE;
    }
    st.blas.get_mut(&(h as u64)).unwrap().stream = id;
    STATUS_SUCCESS
}

/// The handle's stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasGetStream_v2(h: *mut c_void, s: *mut *mut c_void) -> Status {
    let st = state();
    let Some(b) = st.blas.get(&(h as u64)) else {
        return STATUS_NOT_INITIALIZED;
    };
    let is_default = st.devices[b.dev].default_stream == b.stream;
    // SAFETY: out pointer supplied by the caller.
    unsafe { *s = if is_default { std::ptr::null_mut() } else { b.stream as *mut c_void } };
    STATUS_SUCCESS
}

/// Only host pointer mode (0) is emulated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasSetPointerMode_v2(h: *mut c_void, mode: c_int) -> Status {
    if !state().blas.contains_key(&(h as u64)) {
        return STATUS_NOT_INITIALIZED;
    }
    if mode == 0 { STATUS_SUCCESS } else { STATUS_NOT_SUPPORTED }
}

/// Always host pointer mode.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasGetPointerMode_v2(h: *mut c_void, mode: *mut c_int) -> Status {
    if !state().blas.contains_key(&(h as u64)) {
        return STATUS_NOT_INITIALIZED;
    }
    // SAFETY: out pointer supplied by the caller.
    unsafe { *mode = 0 };
    STATUS_SUCCESS
}

/// Accepted and ignored: the CPU GEMM has one precision per type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasSetMathMode(h: *mut c_void, _mode: c_int) -> Status {
    if state().blas.contains_key(&(h as u64)) { STATUS_SUCCESS } else { STATUS_NOT_INITIALIZED }
}

fn op_flag(op: c_int) -> Option<bool> {
    match op {
        0 => Some(false),
        1 | 2 => Some(true), // N, T, C (C is T for real types)
        _ => None,
    }
}

#[allow(clippy::too_many_arguments)]
fn enqueue_gemm(
    h: *mut c_void,
    (ty, c_ty): (GemmType, GemmType),
    ta: c_int,
    tb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: f64,
    beta: f64,
    a: u64,
    lda: c_int,
    sa: c_longlong,
    b: u64,
    ldb: c_int,
    sb: c_longlong,
    c: u64,
    ldc: c_int,
    sc: c_longlong,
    batch: c_int,
) -> Status {
    let mut st = state();
    let Some(handle) = st.blas.get(&(h as u64)) else {
        return STATUS_NOT_INITIALIZED;
    };
    let (dev, stream) = (handle.dev, handle.stream);
    let (Some(ta), Some(tb)) = (op_flag(ta), op_flag(tb)) else {
        return STATUS_INVALID_VALUE;
    };
    if m < 0 || n < 0 || k < 0 || batch < 0 || sa < 0 || sb < 0 || sc < 0 {
        return STATUS_INVALID_VALUE;
    }
    let g = GemmOp {
        ty,
        c_ty,
        ta,
        tb,
        m: m as usize,
        n: n as usize,
        k: k as usize,
        alpha,
        beta,
        a,
        lda: lda.max(0) as usize,
        sa,
        b,
        ldb: ldb.max(0) as usize,
        sb,
        c,
        ldc: ldc.max(0) as usize,
        sc,
        batch: batch as usize,
    };
    let [(ar, _), (br, _), (cr, _)] = g.shapes();
    // cuBLAS's own argument checks: leading dimensions at least the stored rows.
    if g.lda < ar.max(1) || g.ldb < br.max(1) || g.ldc < cr.max(1) {
        report(INVALID_VALUE, format!("gemm: lda {} ldb {} ldc {} below rows {ar} {br} {cr}", g.lda, g.ldb, g.ldc));
        return STATUS_INVALID_VALUE;
    }
    if g.m > 0 && g.n > 0 && g.batch > 0 {
        let ext = g.extents();
        for (p, e, name) in [(g.a, ext[0], "A"), (g.b, ext[1], "B"), (g.c, ext[2], "C")] {
            if let Err(msg) = memory::translate(&st, dev, p, e) {
                report(ILLEGAL_ADDRESS, format!("gemm operand {name}: {msg}"));
                return STATUS_EXECUTION_FAILED;
            }
        }
    }
    st.enqueue(stream, Op::Gemm(Box::new(g)));
    STATUS_SUCCESS
}

/// Single-precision GEMM, column-major.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasSgemm_v2(
    h: *mut c_void,
    ta: c_int,
    tb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    a: u64,
    lda: c_int,
    b: u64,
    ldb: c_int,
    beta: *const f32,
    c: u64,
    ldc: c_int,
) -> Status {
    // SAFETY: host pointer mode: alpha and beta are host pointers supplied by the caller.
    let (al, be) = unsafe { (*alpha as f64, *beta as f64) };
    enqueue_gemm(h, (GemmType::F32, GemmType::F32), ta, tb, m, n, k, al, be, a, lda, 0, b, ldb, 0, c, ldc, 0, 1)
}

/// Double-precision GEMM, column-major.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasDgemm_v2(
    h: *mut c_void,
    ta: c_int,
    tb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f64,
    a: u64,
    lda: c_int,
    b: u64,
    ldb: c_int,
    beta: *const f64,
    c: u64,
    ldc: c_int,
) -> Status {
    // SAFETY: host pointer mode, as above.
    let (al, be) = unsafe { (*alpha, *beta) };
    enqueue_gemm(h, (GemmType::F64, GemmType::F64), ta, tb, m, n, k, al, be, a, lda, 0, b, ldb, 0, c, ldc, 0, 1)
}

/// Strided batched single-precision GEMM.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasSgemmStridedBatched(
    h: *mut c_void,
    ta: c_int,
    tb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    a: u64,
    lda: c_int,
    sa: c_longlong,
    b: u64,
    ldb: c_int,
    sb: c_longlong,
    beta: *const f32,
    c: u64,
    ldc: c_int,
    sc: c_longlong,
    batch: c_int,
) -> Status {
    // SAFETY: host pointer mode, as above.
    let (al, be) = unsafe { (*alpha as f64, *beta as f64) };
    enqueue_gemm(h, (GemmType::F32, GemmType::F32), ta, tb, m, n, k, al, be, a, lda, sa, b, ldb, sb, c, ldc, sc, batch)
}

/// Strided batched double-precision GEMM.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasDgemmStridedBatched(
    h: *mut c_void,
    ta: c_int,
    tb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f64,
    a: u64,
    lda: c_int,
    sa: c_longlong,
    b: u64,
    ldb: c_int,
    sb: c_longlong,
    beta: *const f64,
    c: u64,
    ldc: c_int,
    sc: c_longlong,
    batch: c_int,
) -> Status {
    // SAFETY: host pointer mode, as above.
    let (al, be) = unsafe { (*alpha, *beta) };
    enqueue_gemm(h, (GemmType::F64, GemmType::F64), ta, tb, m, n, k, al, be, a, lda, sa, b, ldb, sb, c, ldc, sc, batch)
}

/// `cudaDataType`s: `CUDA_R_32F`, `CUDA_R_16F` and `CUDA_R_16BF`.
const R_32F: c_int = 0;
const R_16F: c_int = 2;
const R_16BF: c_int = 14;
/// `cublasComputeType_t`: full `f32`, and `f32` with TF32 tensor-core products.
const COMPUTE_32F: c_int = 68;
/// See [`COMPUTE_32F`].
const COMPUTE_32F_FAST_TF32: c_int = 77;

/// Strided batched GEMM with the types as arguments, for the combinations
/// devtensor uses, all with `f32` scalars: A, B and C in `f32`, computed in
/// `f32` (`CUBLAS_COMPUTE_32F`) or with the inputs rounded to TF32 as the
/// tensor cores read them (`CUBLAS_COMPUTE_32F_FAST_TF32`), so that the
/// precision setting is seen in tests; and A, B and C in `bf16` or `f16`,
/// computed in `f32` (the tensor cores' products of half inputs are exact,
/// and the sums here are exact to f64), with C of their type or `f32`; a
/// half C with beta non-zero gets the product rounded before beta C is
/// added, as cuBLAS does. Other combinations are
/// `CUBLAS_STATUS_NOT_SUPPORTED`; the algorithm hint is ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasGemmStridedBatchedEx(
    h: *mut c_void,
    ta: c_int,
    tb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    a: u64,
    a_type: c_int,
    lda: c_int,
    sa: c_longlong,
    b: u64,
    b_type: c_int,
    ldb: c_int,
    sb: c_longlong,
    beta: *const c_void,
    c: u64,
    c_type: c_int,
    ldc: c_int,
    sc: c_longlong,
    batch: c_int,
    compute: c_int,
    _algo: c_int,
) -> Status {
    if a_type != b_type {
        return STATUS_NOT_SUPPORTED;
    }
    let ty = match (a_type, compute) {
        (R_32F, COMPUTE_32F) => GemmType::F32,
        (R_32F, COMPUTE_32F_FAST_TF32) => GemmType::Tf32,
        (R_16BF, COMPUTE_32F) => GemmType::Bf16,
        (R_16F, COMPUTE_32F) => GemmType::F16,
        _ => return STATUS_NOT_SUPPORTED,
    };
    let c_ty = match c_type {
        _ if c_type == a_type => ty,
        R_32F if ty.is_half() => GemmType::F32,
        _ => return STATUS_NOT_SUPPORTED,
    };
    // SAFETY: host pointer mode: alpha and beta point to f32 host values
    // (the scalar type of an f32 compute type), supplied by the caller.
    let (al, be) = unsafe { (*alpha.cast::<f32>() as f64, *beta.cast::<f32>() as f64) };
    enqueue_gemm(h, (ty, c_ty), ta, tb, m, n, k, al, be, a, lda, sa, b, ldb, sb, c, ldc, sc, batch)
}
