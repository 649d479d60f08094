//! End-to-end tests of the emulated driver, through cudarc's safe API exactly
//! as a library uses it. Run by `scripts/test-emu.sh`, which puts the
//! emulator first on `LD_LIBRARY_PATH` (as `libcuda.so` and `libcublas.so`).
//!
//! Every test works on its own stream, because tests run in parallel and a
//! kernel error is reported to the stream it ran on.

use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, StridedBatchedConfig, sys::cublasOperation_t};
use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaContext, CudaFunction, DriverError, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, Ptx};

const KERNEL_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kernels");

/// PTX of the test kernels: compiled by NVRTC when it is installed (the path
/// the library takes); otherwise a PTX skeleton holding just the `.entry`
/// declarations, which is all the emulator reads from PTX.
fn ptx_text() -> &'static str {
    static PTX: OnceLock<String> = OnceLock::new();
    PTX.get_or_init(|| {
        let src = std::fs::read_to_string(format!("{KERNEL_DIR}/emutest.cu")).unwrap();
        // SAFETY: only probes whether the library can be opened.
        if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            let opts = CompileOptions {
                include_paths: vec![KERNEL_DIR.to_string()],
                arch: Some("compute_80"),
                ..Default::default()
            };
            let ptx = cudarc::nvrtc::compile_ptx_with_opts(&src, opts).expect("NVRTC compiles the test kernels");
            eprintln!("test kernels: PTX from NVRTC");
            ptx.to_src()
        } else {
            eprintln!("test kernels: NVRTC not found, using a PTX skeleton of the .entry lines");
            ptx_skeleton(&src)
        }
    })
}

fn ptx_skeleton(src: &str) -> String {
    let mut out = String::from(".version 8.0\n.target sm_80\n.address_size 64\n");
    for (pos, _) in src.match_indices("extern \"C\" __global__ void ") {
        let rest = &src[pos + "extern \"C\" __global__ void ".len()..];
        let open = rest.find('(').unwrap();
        let close = rest.find(')').unwrap();
        let name = rest[..open].trim();
        let params: Vec<&str> = rest[open + 1..close].split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
        out.push_str(&format!(".visible .entry {name}(\n"));
        for (i, p) in params.iter().enumerate() {
            // The PTX type NVRTC would give each C parameter type.
            let ty = if p.contains('*') || p.starts_with("size_t") || p.contains("long long") {
                ".u64"
            } else if p.starts_with("double") {
                ".f64"
            } else if p.starts_with("float") {
                ".f32"
            } else if p.starts_with("unsigned char") {
                ".u8"
            } else {
                ".u32"
            };
            let sep = if i + 1 < params.len() { "," } else { "" };
            out.push_str(&format!("\t.param {ty} {name}_param_{i}{sep}\n"));
        }
        out.push_str(")\n{\n\tret;\n}\n");
    }
    out
}

/// An error in queued work is reported to whoever synchronises next, and
/// cudarc synchronises the whole context when a context object gets its
/// first stream. So tests that provoke asynchronous device errors run alone
/// (`exclusive`), and every other test holds `shared` while it runs.
static DEVICE_ERRORS: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    DEVICE_ERRORS.read().unwrap_or_else(|e| e.into_inner())
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    DEVICE_ERRORS.write().unwrap_or_else(|e| e.into_inner())
}

fn ctx(ordinal: usize) -> Arc<CudaContext> {
    let ctx = CudaContext::new(ordinal).expect("context on the emulated device");
    let name = ctx.name().unwrap();
    assert!(name.contains("devtensor-emu"), "expected the emulated driver, found `{name}`; run scripts/test-emu.sh");
    ctx
}

fn kernel(ctx: &Arc<CudaContext>, name: &str) -> CudaFunction {
    let module = ctx.load_module(Ptx::from_src(ptx_text())).unwrap();
    module.load_function(name).unwrap()
}

fn code(e: DriverError) -> CUresult {
    e.0
}

fn inputs(n: usize, seed: u32) -> Vec<f32> {
    // A small LCG: deterministic, no dependency, values in [-1, 1).
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

#[test]
fn reports_two_devices_and_names_the_driver() {
    let _errors = shared();
    let c0 = ctx(0);
    let c1 = ctx(1);
    assert_eq!(CudaContext::device_count().unwrap(), 2);
    eprintln!("driver: {} / {}", c0.name().unwrap(), c1.name().unwrap());
    let (free, total) = cudarc::driver::result::mem_get_info().unwrap();
    assert!(free <= total && total > 0);
    assert!(CudaContext::new(2).is_err(), "ordinal 2 does not exist");
}

#[test]
fn host_device_host_round_trip_on_both_devices() {
    let _errors = shared();
    for ordinal in 0..2 {
        let stream = ctx(ordinal).new_stream().unwrap();
        let host: Vec<f64> = (0..10_000).map(|i| i as f64 * 0.5 - 7.0).collect();
        let dev = stream.clone_htod(&host).unwrap();
        let copy = stream.clone_dtod(&dev).unwrap();
        assert_eq!(stream.clone_dtoh(&copy).unwrap(), host);
        let zeros = stream.alloc_zeros::<u8>(1000).unwrap();
        assert!(stream.clone_dtoh(&zeros).unwrap().iter().all(|&b| b == 0));
    }
}

/// Runs an axpy kernel on `n` elements over several blocks and compares with
/// a CPU loop; returns the first mismatch.
fn check_axpy(kernel_name: &str, n: usize) -> Result<(), String> {
    let c = ctx(0);
    let stream = c.new_stream().unwrap();
    let f = kernel(&c, kernel_name);
    let x = inputs(n, 1);
    let y0 = inputs(n, 2);
    let dx = stream.clone_htod(&x).unwrap();
    let mut dy = stream.clone_htod(&y0).unwrap();
    let a = 2.5f32;
    let cfg = LaunchConfig { grid_dim: (7, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
    let n64 = n as u64;
    // SAFETY: argument types match the kernel's signature.
    unsafe { stream.launch_builder(&f).arg(&dx).arg(&mut dy).arg(&a).arg(&n64).launch(cfg) }.unwrap();
    let y = stream.clone_dtoh(&dy).unwrap();
    for i in 0..n {
        let want = a * x[i] + y0[i];
        if y[i] != want {
            return Err(format!("element {i}: got {}, expected {want}", y[i]));
        }
    }
    Ok(())
}

#[test]
fn grid_stride_elementwise_matches_cpu() {
    let _errors = shared();
    check_axpy("emutest_axpy_f32", 100_003).unwrap();
}

#[test]
fn mutation_broken_indexing_is_detected() {
    let _errors = shared();
    let err =
        check_axpy("emutest_axpybroken_f32", 100_003).expect_err("a kernel with broken indexing must fail the check");
    eprintln!("mutation detected as expected: {err}");
}

#[test]
fn block_reduction_over_1m_floats_matches_cpu_sum() {
    let _errors = shared();
    let c = ctx(1);
    let stream = c.new_stream().unwrap();
    let f = kernel(&c, "emutest_blocksum_f32");
    let n = 1 << 20;
    let x = inputs(n, 3);
    let dx = stream.clone_htod(&x).unwrap();
    let blocks = 1024u32;
    let mut partial = stream.alloc_zeros::<f32>(blocks as usize).unwrap();
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let n64 = n as u64;
    let t = Instant::now();
    // SAFETY: argument types match the kernel's signature.
    unsafe { stream.launch_builder(&f).arg(&dx).arg(&mut partial).arg(&n64).launch(cfg) }.unwrap();
    stream.synchronize().unwrap();
    let elapsed = t.elapsed();
    let partial = stream.clone_dtoh(&partial).unwrap();
    let got: f64 = partial.iter().map(|&p| p as f64).sum();
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    // Each block sums 1024 values in f32: error well under 1e-3 of the sum of magnitudes.
    let scale: f64 = x.iter().map(|&v| v.abs() as f64).sum();
    assert!((got - want).abs() <= 1e-5 * scale, "sum {got} vs CPU {want}");
    // Each block's partial must match too, so a lost warp cannot hide in the total.
    for (b, &p) in partial.iter().enumerate() {
        let w: f64 = (0..4).map(|r| x[(b * 256 + r * 262_144)..][..256].iter().map(|&v| v as f64).sum::<f64>()).sum();
        assert!((p as f64 - w).abs() < 1e-3, "block {b}: {p} vs {w}");
    }
    eprintln!("block reduction: 1M floats, 1024 blocks x 256 threads, {:.3} s", elapsed.as_secs_f64());
}

#[test]
fn xor_shuffle_butterfly_gives_each_warp_its_max() {
    let _errors = shared();
    let c = ctx(0);
    let stream = c.new_stream().unwrap();
    let f = kernel(&c, "emutest_warpmax_f64");
    let n = 1000; // not a multiple of the block size: a partial last warp
    let x: Vec<f64> = inputs(n, 4).into_iter().map(|v| v as f64).collect();
    let dx = stream.clone_htod(&x).unwrap();
    let mut dy = stream.alloc_zeros::<f64>(n).unwrap();
    let n64 = n as u64;
    // SAFETY: argument types match the kernel's signature.
    unsafe { stream.launch_builder(&f).arg(&dx).arg(&mut dy).arg(&n64).launch(LaunchConfig::for_num_elems(n as u32)) }
        .unwrap();
    let y = stream.clone_dtoh(&dy).unwrap();
    for (i, &got) in y.iter().enumerate() {
        let w = i / 32 * 32;
        let want = x[w..(w + 32).min(n)].iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(got, want, "element {i}");
    }
}

#[test]
fn atomic_add_across_blocks() {
    let _errors = shared();
    let c = ctx(0);
    let stream = c.new_stream().unwrap();
    let f = kernel(&c, "emutest_atomicsum_f64");
    let n = 50_000;
    // Small integers: every partial sum is exact, whatever the order of the atomics.
    let x: Vec<f64> = (0..n).map(|i| ((i * 7919) % 201) as f64 - 100.0).collect();
    let dx = stream.clone_htod(&x).unwrap();
    let mut total = stream.alloc_zeros::<f64>(1).unwrap();
    let mut positives = stream.alloc_zeros::<u64>(1).unwrap();
    let cfg = LaunchConfig { grid_dim: (40, 1, 1), block_dim: (96, 1, 1), shared_mem_bytes: 0 };
    let n64 = n as u64;
    // SAFETY: argument types match the kernel's signature.
    unsafe { stream.launch_builder(&f).arg(&dx).arg(&mut total).arg(&mut positives).arg(&n64).launch(cfg) }.unwrap();
    assert_eq!(stream.clone_dtoh(&total).unwrap()[0], x.iter().sum::<f64>());
    assert_eq!(stream.clone_dtoh(&positives).unwrap()[0], x.iter().filter(|&&v| v > 0.0).count() as u64);
}

#[test]
fn two_dimensional_grid_and_block() {
    let _errors = shared();
    let c = ctx(1);
    let stream = c.new_stream().unwrap();
    let f = kernel(&c, "emutest_iota2d_i64");
    let (rows, cols) = (37usize, 70usize);
    let mut y = stream.alloc_zeros::<i64>(rows * cols).unwrap();
    let cfg = LaunchConfig { grid_dim: (3, 5, 1), block_dim: (32, 8, 1), shared_mem_bytes: 0 };
    let (r, cl) = (rows as u64, cols as u64);
    // SAFETY: argument types match the kernel's signature.
    unsafe { stream.launch_builder(&f).arg(&mut y).arg(&r).arg(&cl).launch(cfg) }.unwrap();
    let y = stream.clone_dtoh(&y).unwrap();
    for row in 0..rows {
        for col in 0..cols {
            assert_eq!(y[row * cols + col], (row * 1000 + col) as i64);
        }
    }
}

#[test]
fn out_of_memory_is_an_error_not_an_abort() {
    let _errors = shared();
    let c = ctx(1);
    let stream = c.new_stream().unwrap();
    // SAFETY: uninitialised memory that is never read.
    let too_big = unsafe { stream.alloc::<u8>(2 << 30) };
    assert_eq!(code(too_big.unwrap_err()), CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    // SAFETY: as above.
    let first = unsafe { stream.alloc::<u8>(600 << 20) }.unwrap();
    // SAFETY: as above.
    let second = unsafe { stream.alloc::<u8>(600 << 20) };
    assert_eq!(code(second.unwrap_err()), CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    drop(first);
    stream.synchronize().unwrap();
    // SAFETY: as above.
    let again = unsafe { stream.alloc::<u8>(600 << 20) };
    assert!(again.is_ok(), "memory returns to the device after a free");
}

#[test]
fn invalid_launch_configurations_are_rejected() {
    let _errors = shared();
    let c = ctx(0);
    let stream = c.new_stream().unwrap();
    let f = kernel(&c, "emutest_axpy_f32");
    let dx = stream.clone_htod(&[1.0f32; 8]).unwrap();
    let mut dy = stream.clone_htod(&[1.0f32; 8]).unwrap();
    let (a, n) = (1.0f32, 8u64);
    for (grid, block, shared) in [
        ((1, 1, 1), (0, 1, 1), 0),
        ((1, 1, 1), (1025, 1, 1), 0),
        ((0, 1, 1), (32, 1, 1), 0),
        ((1, 1, 1), (32, 1, 1), 64),
    ] {
        let cfg = LaunchConfig { grid_dim: grid, block_dim: block, shared_mem_bytes: shared };
        // SAFETY: argument types match the kernel's signature.
        let r = unsafe { stream.launch_builder(&f).arg(&dx).arg(&mut dy).arg(&a).arg(&n).launch(cfg) };
        assert_eq!(code(r.unwrap_err()), CUresult::CUDA_ERROR_INVALID_VALUE, "grid {grid:?} block {block:?}");
    }
    // A pointer argument that is no live allocation.
    let bogus = 0x1234_5678u64;
    let cfg = LaunchConfig::for_num_elems(8);
    // SAFETY: deliberately wrong; the emulator must refuse before running anything.
    let r = unsafe { stream.launch_builder(&f).arg(&bogus).arg(&mut dy).arg(&a).arg(&n).launch(cfg) };
    assert_eq!(code(r.unwrap_err()), CUresult::CUDA_ERROR_INVALID_VALUE);
    // An entry the module does not have.
    let module = c.load_module(Ptx::from_src(ptx_text())).unwrap();
    assert_eq!(code(module.load_function("emutest_nosuch_f32").unwrap_err()), CUresult::CUDA_ERROR_NOT_FOUND);
    stream.synchronize().unwrap();
}

#[test]
fn out_of_bounds_kernel_writes_are_reported() {
    let _errors = exclusive();
    // 1000 floats end inside a 256-byte granule (caught by the redzone check);
    // 1024 floats end on a page boundary (caught by the guard page).
    for n in [1000usize, 1024] {
        let c = ctx(1);
        let stream = c.new_stream().unwrap();
        let f = kernel(&c, "emutest_oobwrite_f32");
        let mut y = stream.alloc_zeros::<f32>(n).unwrap();
        let n64 = n as u64;
        // SAFETY: argument types match; the kernel's overrun is what is tested.
        unsafe { stream.launch_builder(&f).arg(&mut y).arg(&n64).launch(LaunchConfig::for_num_elems(n as u32)) }
            .unwrap();
        let err = stream.synchronize().expect_err("the overrun must be reported");
        assert_eq!(code(err), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS, "n = {n}");
        // The error is reported once; the stream works afterwards.
        stream.synchronize().unwrap();
        assert_eq!(stream.clone_dtoh(&y).unwrap().len(), n);
    }
}

#[test]
fn barriers_in_divergent_code_are_reported() {
    let _errors = exclusive();
    let c = ctx(0);
    let stream = c.new_stream().unwrap();
    let f = kernel(&c, "emutest_divergentsync_f32");
    let mut y = stream.alloc_zeros::<f32>(64).unwrap();
    let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: argument types match the kernel's signature.
    unsafe { stream.launch_builder(&f).arg(&mut y).launch(cfg) }.unwrap();
    assert_eq!(code(stream.synchronize().unwrap_err()), CUresult::CUDA_ERROR_LAUNCH_FAILED);
}

#[test]
fn fiber_stack_overflow_is_reported() {
    let _errors = exclusive();
    let c = ctx(1);
    let stream = c.new_stream().unwrap();
    let f = kernel(&c, "emutest_bigstack_f32");
    let mut y = stream.alloc_zeros::<f32>(32).unwrap();
    let n = 32u64;
    let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: argument types match the kernel's signature.
    unsafe { stream.launch_builder(&f).arg(&mut y).arg(&n).launch(cfg) }.unwrap();
    assert_eq!(code(stream.synchronize().unwrap_err()), CUresult::CUDA_ERROR_LAUNCH_FAILED);
}

fn reverse_blocks(sync: i32) -> bool {
    let c = ctx(0);
    let stream = c.new_stream().unwrap();
    let f = kernel(&c, "emutest_reverse_f32");
    let n = 256 * 4;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let dx = stream.clone_htod(&x).unwrap();
    let mut dy = stream.alloc_zeros::<f32>(n).unwrap();
    let n64 = n as u64;
    let cfg = LaunchConfig { grid_dim: (4, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: argument types match the kernel's signature.
    unsafe { stream.launch_builder(&f).arg(&dx).arg(&mut dy).arg(&n64).arg(&sync).launch(cfg) }.unwrap();
    let y = stream.clone_dtoh(&dy).unwrap();
    (0..n).all(|i| y[i] == x[i / 256 * 256 + 255 - i % 256])
}

#[test]
fn missing_syncthreads_gives_wrong_results() {
    let _errors = shared();
    assert!(reverse_blocks(1), "with the barrier the reversal is exact");
    assert!(!reverse_blocks(0), "without the barrier the race must show");
}

#[test]
fn reading_before_an_async_copy_completes_sees_old_data() {
    let _errors = shared();
    let c = ctx(0);
    let stream = c.new_stream().unwrap();
    let src = stream.clone_htod(&[7u32; 64]).unwrap();
    stream.synchronize().unwrap();
    // Page-locked host memory: the only kind a real GPU copies into asynchronously.
    let bytes = 64 * std::mem::size_of::<u32>();
    // SAFETY: a fresh page-locked buffer of `bytes` bytes, freed at the end.
    let raw = unsafe { cudarc::driver::result::malloc_host(bytes, 0) }.unwrap() as *mut u32;
    // SAFETY: `raw` holds 64 u32s; zeroing makes every element initialised.
    let host = unsafe {
        std::ptr::write_bytes(raw, 0, 64);
        std::slice::from_raw_parts_mut(raw, 64)
    };
    let (ptr, _guard) = cudarc::driver::DevicePtr::device_ptr(&src, &stream);
    // SAFETY: `host` outlives the copy: the stream is synchronised below before it is freed.
    unsafe { cudarc::driver::result::memcpy_dtoh_async(host, ptr, stream.cu_stream()) }.unwrap();
    // SAFETY: a racy read on a real GPU; in the emulator the copy has not happened yet.
    let before = unsafe { std::ptr::read_volatile(raw) };
    assert_eq!(before, 0, "an async copy must not complete before the stream is synchronised");
    stream.synchronize().unwrap();
    // SAFETY: the copy has completed.
    assert_eq!(unsafe { std::slice::from_raw_parts(raw, 64) }, &[7u32; 64][..]);
    // SAFETY: allocated by malloc_host above, no longer used.
    unsafe { cudarc::driver::result::free_host(raw as *mut std::ffi::c_void) }.unwrap();
}

#[test]
fn two_contexts_have_separate_memory() {
    let _errors = shared();
    let (c0, c1) = (ctx(0), ctx(1));
    let (s0, s1) = (c0.new_stream().unwrap(), c1.new_stream().unwrap());
    let a = s0.clone_htod(&[1.0f32, 2.0, 3.0]).unwrap();
    let b = s1.clone_htod(&[10.0f32, 20.0, 30.0]).unwrap();
    assert_eq!(s0.clone_dtoh(&a).unwrap(), [1.0, 2.0, 3.0]);
    assert_eq!(s1.clone_dtoh(&b).unwrap(), [10.0, 20.0, 30.0]);
    // Peer copy device 0 -> device 1.
    let mut on1 = s1.alloc_zeros::<f32>(3).unwrap();
    s1.memcpy_dtod(&a, &mut on1).unwrap();
    assert_eq!(s1.clone_dtoh(&on1).unwrap(), [1.0, 2.0, 3.0]);
    // A device-1 pointer in a device-0 launch is refused.
    let f = kernel(&c0, "emutest_axpy_f32");
    let mut y = s0.alloc_zeros::<f32>(3).unwrap();
    let (alpha, n) = (1.0f32, 3u64);
    // SAFETY: deliberately wrong device; the emulator must refuse it.
    let r =
        unsafe { s0.launch_builder(&f).arg(&b).arg(&mut y).arg(&alpha).arg(&n).launch(LaunchConfig::for_num_elems(3)) };
    assert_eq!(code(r.unwrap_err()), CUresult::CUDA_ERROR_INVALID_VALUE);
    // A kernel loaded on device 0 cannot run on a device-1 stream.
    let mut z = s1.alloc_zeros::<f32>(3).unwrap();
    // SAFETY: deliberately wrong device, as above.
    let r =
        unsafe { s1.launch_builder(&f).arg(&b).arg(&mut z).arg(&alpha).arg(&n).launch(LaunchConfig::for_num_elems(3)) };
    assert!(r.is_err());
}

fn gemm_reference(ta: bool, tb: bool, m: usize, n: usize, k: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
    // Column-major, op(A) m x k, op(B) k x n; lda/ldb are the stored row counts.
    let lda = if ta { k } else { m };
    let ldb = if tb { n } else { k };
    let mut c = vec![0.0; m * n];
    for j in 0..n {
        for i in 0..m {
            let mut s = 0.0;
            for l in 0..k {
                let av = if ta { a[l + i * lda] } else { a[i + l * lda] };
                let bv = if tb { b[j + l * ldb] } else { b[l + j * ldb] };
                s += av * bv;
            }
            c[i + j * m] = s;
        }
    }
    c
}

fn op(t: bool) -> cublasOperation_t {
    if t { cublasOperation_t::CUBLAS_OP_T } else { cublasOperation_t::CUBLAS_OP_N }
}

#[test]
fn cublas_sgemm_matches_triple_loop_with_transposes() {
    let _errors = shared();
    let c = ctx(0);
    let stream = c.new_stream().unwrap();
    let blas = CudaBlas::new(stream.clone()).unwrap();
    let (m, n, k) = (17usize, 9usize, 13usize);
    let a: Vec<f32> = inputs(m * k, 5);
    let b: Vec<f32> = inputs(k * n, 6);
    let (a64, b64): (Vec<f64>, Vec<f64>) =
        (a.iter().map(|&v| v as f64).collect(), b.iter().map(|&v| v as f64).collect());
    let da = stream.clone_htod(&a).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut dc = stream.alloc_zeros::<f32>(m * n).unwrap();
        let cfg = GemmConfig {
            transa: op(ta),
            transb: op(tb),
            m: m as i32,
            n: n as i32,
            k: k as i32,
            alpha: 1.0f32,
            lda: if ta { k } else { m } as i32,
            ldb: if tb { n } else { k } as i32,
            beta: 0.0f32,
            ldc: m as i32,
        };
        // SAFETY: the buffers hold the sizes the configuration names.
        unsafe { blas.gemm(cfg, &da, &db, &mut dc) }.unwrap();
        let got = stream.clone_dtoh(&dc).unwrap();
        let want = gemm_reference(ta, tb, m, n, k, &a64, &b64);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!((g as f64 - w).abs() < 1e-4, "ta {ta} tb {tb} element {i}: {g} vs {w}");
        }
    }
}

#[test]
fn cublas_dgemm_strided_batched_matches_triple_loop() {
    let _errors = shared();
    let c = ctx(1);
    let stream = c.new_stream().unwrap();
    let blas = CudaBlas::new(stream.clone()).unwrap();
    let (m, n, k, batch) = (5usize, 4usize, 3usize, 3usize);
    let a: Vec<f64> = inputs(m * k * batch, 7).into_iter().map(|v| v as f64).collect();
    let b: Vec<f64> = inputs(k * n * batch, 8).into_iter().map(|v| v as f64).collect();
    let da = stream.clone_htod(&a).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    let mut dc = stream.clone_htod(&vec![1.0f64; m * n * batch]).unwrap();
    let cfg = StridedBatchedConfig {
        gemm: GemmConfig {
            transa: op(true),
            transb: op(false),
            m: m as i32,
            n: n as i32,
            k: k as i32,
            alpha: 2.0f64,
            lda: k as i32,
            ldb: k as i32,
            beta: 0.5f64,
            ldc: m as i32,
        },
        batch_size: batch as i32,
        stride_a: (m * k) as i64,
        stride_b: (k * n) as i64,
        stride_c: (m * n) as i64,
    };
    // SAFETY: the buffers hold the sizes the configuration names.
    unsafe { blas.gemm_strided_batched(cfg, &da, &db, &mut dc) }.unwrap();
    let got = stream.clone_dtoh(&dc).unwrap();
    for p in 0..batch {
        let want = gemm_reference(true, false, m, n, k, &a[p * m * k..][..m * k], &b[p * k * n..][..k * n]);
        for i in 0..m * n {
            let w = 2.0 * want[i] + 0.5;
            assert!((got[p * m * n + i] - w).abs() < 1e-12, "batch {p} element {i}");
        }
    }
}

/// `x` with its mantissa rounded to 10 bits, half away from zero, in `f64`
/// arithmetic: TF32 as the tensor cores read it.
fn tf32_reference(x: f32) -> f64 {
    let x = x as f64;
    if x == 0.0 {
        return 0.0;
    }
    let unit = 2f64.powi(x.abs().log2().floor() as i32 - 10);
    (x / unit).round() * unit
}

#[test]
fn cublas_gemm_ex_computes_f32_exactly_or_from_tf32_inputs() {
    use cudarc::cublas::result::gemm_strided_batched_ex;
    use cudarc::cublas::sys::{cublasComputeType_t as Compute, cublasGemmAlgo_t, cudaDataType as Type};
    use cudarc::driver::{DevicePtr, DevicePtrMut};
    let _errors = shared();
    let c = ctx(0);
    let stream = c.new_stream().unwrap();
    let blas = CudaBlas::new(stream.clone()).unwrap();
    let (m, n, k, batch) = (6usize, 5usize, 7usize, 2usize);
    let a: Vec<f32> = inputs(m * k * batch, 9);
    let b: Vec<f32> = inputs(k * n * batch, 10);
    let da = stream.clone_htod(&a).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    let run = |compute: Compute, a_type: Type| {
        let mut dc = stream.alloc_zeros::<f32>(m * n * batch).unwrap();
        let (alpha, beta) = (1.0f32, 0.0f32);
        let status = {
            let (pa, _ra) = da.device_ptr(&stream);
            let (pb, _rb) = db.device_ptr(&stream);
            let (pc, _rc) = dc.device_ptr_mut(&stream);
            // SAFETY: the buffers hold the sizes named, column-major with no transposes.
            unsafe {
                gemm_strided_batched_ex(
                    *blas.handle(),
                    op(false),
                    op(false),
                    m as i32,
                    n as i32,
                    k as i32,
                    (&alpha as *const f32).cast(),
                    pa as *const _,
                    a_type,
                    m as i32,
                    (m * k) as i64,
                    pb as *const _,
                    Type::CUDA_R_32F,
                    k as i32,
                    (k * n) as i64,
                    (&beta as *const f32).cast(),
                    pc as *mut _,
                    Type::CUDA_R_32F,
                    m as i32,
                    (m * n) as i64,
                    batch as i32,
                    compute,
                    cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
        };
        status.map(|()| stream.clone_dtoh(&dc).unwrap())
    };
    let reference = |round: &dyn Fn(f32) -> f64| -> Vec<f64> {
        (0..batch)
            .flat_map(|p| {
                let a: Vec<f64> = a[p * m * k..][..m * k].iter().map(|&v| round(v)).collect();
                let b: Vec<f64> = b[p * k * n..][..k * n].iter().map(|&v| round(v)).collect();
                gemm_reference(false, false, m, n, k, &a, &b)
            })
            .collect()
    };
    let (exact, tf32) = (reference(&|v| v as f64), reference(&tf32_reference));
    let full = run(Compute::CUBLAS_COMPUTE_32F, Type::CUDA_R_32F).unwrap();
    let fast = run(Compute::CUBLAS_COMPUTE_32F_FAST_TF32, Type::CUDA_R_32F).unwrap();
    for i in 0..m * n * batch {
        assert!((full[i] as f64 - exact[i]).abs() < 1e-5, "f32 element {i}: {} vs {}", full[i], exact[i]);
        assert!((fast[i] as f64 - tf32[i]).abs() < 1e-5, "tf32 element {i}: {} vs {}", fast[i], tf32[i]);
    }
    // The rounding is visible: TF32 keeps about three decimal digits.
    let worst = (0..m * n * batch).map(|i| (fast[i] as f64 - exact[i]).abs()).fold(0.0, f64::max);
    assert!(worst > 1e-4 && worst < 1e-2, "TF32 differs from f32 by {worst}");
    // Types it does not emulate are refused, as cuBLAS refuses unsupported combinations.
    assert!(run(Compute::CUBLAS_COMPUTE_64F, Type::CUDA_R_32F).is_err());
    assert!(run(Compute::CUBLAS_COMPUTE_32F, Type::CUDA_R_16BF).is_err());
}

#[test]
fn events_order_work_between_streams() {
    let _errors = shared();
    let c = ctx(0);
    let s1 = c.new_stream().unwrap();
    let s2 = c.new_stream().unwrap();
    let src = s1.clone_htod(&[3i64; 1000]).unwrap();
    // s2 must see s1's copy: cudarc makes it wait on an event recorded on s1.
    s2.join(&s1).unwrap();
    let copy = s2.clone_dtod(&src).unwrap();
    assert_eq!(s2.clone_dtoh(&copy).unwrap(), vec![3i64; 1000]);
    let start = s1.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
    let end = s1.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
    assert!(start.elapsed_ms(&end).unwrap() >= 0.0);
}
