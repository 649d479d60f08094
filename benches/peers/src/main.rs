//! devtensor next to candle, PyTorch and the machine's own limits, in one run.
//!
//! ```text
//! cd benches/peers && cargo run --release [FILTER]
//! ```
//!
//! First measures the f32 FMA peak (a register-blocked FMA loop, on one
//! thread and on all of them) and the memory bandwidth (a parallel triad over
//! 64 MiB arrays); then runs the same inputs through devtensor, candle and
//! PyTorch (a child process, `torch_peer.py`, with as many threads as
//! devtensor; see `torch.rs`) and prints, per operation or model step, the
//! three times, devtensor's rate and share of the measured peak, and the time
//! ratios devtensor / candle and devtensor / PyTorch (below 1: devtensor is
//! faster). Every time is the median of several runs after a warm-up, the
//! libraries taking turns. `FILTER` keeps the rows whose name contains it
//! (or one of its `|`-separated parts).
//! `cargo run --release -- loader` measures the data loader alone, and
//! `-- memory` the heap attention takes (`memory.rs`).

mod loader;
mod memory;
mod recurrent;
mod torch;
mod training;

use candle_core::{Device as CandleDevice, Tensor as CandleTensor};
use devtensor::backend::cpu::CpuIsa;
use devtensor::{Cpu, Tensor, bf16};
use rayon::prelude::*;
use serde_json::json;
use std::hint::black_box;
use std::time::{Duration, Instant};
use torch::Torch;

// ---------------------------------------------------------------------------
// Timing

/// Median wall time of `f`, after warming up (page faults, pools, caches,
/// thread start-up) and with enough runs to fill about `budget`.
fn median_time(budget: Duration, mut f: impl FnMut()) -> Duration {
    let warm = Instant::now();
    let mut warm_runs = 0;
    while warm_runs < 3 || (warm.elapsed() < budget / 4 && warm_runs < 1000) {
        f();
        warm_runs += 1;
    }
    let estimate = warm.elapsed() / warm_runs;
    let runs = (budget.as_secs_f64() / estimate.as_secs_f64().max(1e-9)).clamp(7.0, 5001.0) as usize;
    // Tiny operations are timed in batches, so `Instant`'s own cost and
    // resolution stay out of the figure.
    let inner = (Duration::from_micros(20).as_secs_f64() / estimate.as_secs_f64().max(1e-9)).ceil().max(1.0) as u32;
    let mut times: Vec<Duration> = (0..runs.div_ceil(inner as usize).max(7))
        .map(|_| {
            let start = Instant::now();
            for _ in 0..inner {
                f();
            }
            start.elapsed() / inner
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// Median times of `f` and `g`, run alternately so that both see the same
/// machine: on a shared machine the load changes from second to second, and
/// timing one library after the other would charge the change to one of them.
fn median_pair(budget: Duration, mut f: impl FnMut(), mut g: impl FnMut()) -> (Duration, Duration) {
    let (mut tf, mut tg) = (Vec::new(), Vec::new());
    let slice = budget / 8;
    for _ in 0..4 {
        tf.push(median_time(slice, &mut f));
        tg.push(median_time(slice, &mut g));
    }
    tf.sort();
    tg.sort();
    // Each entry is already a median of many runs; take the middle of those.
    (tf[tf.len() / 2], tg[tg.len() / 2])
}

// ---------------------------------------------------------------------------
// Machine limits

/// FMAs per call of the peak kernels: long enough that call overhead vanishes.
const FMA_ITERS: usize = 4_000_000;

/// One run of the widest FMA loop devtensor may use ([`Cpu::isa`]): `FMA_ITERS` iterations of
/// 12 independent FMA chains, enough to hide FMA latency on both FMA pipes
/// of every current x86 core. Returns a value to keep the work alive, and
/// the f32 lanes per FMA it used (0 when the CPU has neither loop).
fn fma_loop() -> (f32, usize) {
    #[cfg(target_arch = "x86_64")]
    {
        // At the level devtensor runs at: under `DEVTENSOR_CPU_ISA=avx2` the
        // peak is AVX2's, as PyTorch is then capped too.
        if is_x86_feature_detected!("avx512f") && Cpu::isa() >= CpuIsa::Avx512 {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return (unsafe { fma_avx512(FMA_ITERS) }, 16);
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            return (unsafe { fma_avx2(FMA_ITERS) }, 8);
        }
    }
    (0.0, 0)
}

/// Peak f32 FLOP/s of `threads` threads running the FMA loop at once: the
/// best of five rounds, by wall time, thread start-up included (it is
/// microseconds against tens of milliseconds of FMAs).
fn fma_peak(threads: usize) -> f64 {
    let mut best = 0.0f64;
    for _ in 0..5 {
        let start = Instant::now();
        let lanes: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|_| s.spawn(|| black_box(fma_loop()).1)).collect();
            handles.into_iter().map(|h| h.join().expect("FMA thread")).sum()
        });
        let flops = (lanes * FMA_ITERS * 12 * 2) as f64;
        best = best.max(flops / start.elapsed().as_secs_f64());
    }
    best
}

/// Peak bf16 FLOP/s of `threads` threads running `vdpbf16ps` (AVX512-BF16:
/// 16 lanes, each adding two bf16 products into an f32) in 12 independent
/// chains, as [`fma_peak`] runs FMAs; `None` where the CPU lacks the
/// instruction or devtensor is capped below AVX-512. The rate a bf16
/// product can approach, which differs from twice the f32 rate between
/// CPUs (issue 37).
pub fn bf16_peak(threads: usize) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512bf16") && Cpu::isa() >= CpuIsa::Avx512 {
        let mut best = 0.0f64;
        for _ in 0..5 {
            let start = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..threads {
                    // SAFETY: the CPU supports AVX-512F and AVX512-BF16, checked above.
                    s.spawn(|| black_box(unsafe { dot_bf16_avx512(FMA_ITERS) }));
                }
            });
            let flops = (threads * FMA_ITERS * 12 * 16 * 4) as f64;
            best = best.max(flops / start.elapsed().as_secs_f64());
        }
        return Some(best);
    }
    let _ = threads;
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
fn dot_bf16_avx512(iters: usize) -> f32 {
    use std::arch::x86_64::*;
    // Small products, so that the sums stay finite: bf16 1.0 and 2^-24 in
    // every 16-bit half of the vectors.
    let bf16s = |v: f32| _mm512_cvtne2ps_pbh(_mm512_set1_ps(black_box(v)), _mm512_set1_ps(black_box(v)));
    let (x, y) = (bf16s(1.0), bf16s(5.960_464_5e-8));
    let mut acc = [_mm512_setzero_ps(); 12];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm512_dpbf16_ps(*a, x, y);
        }
    }
    let sum = acc.iter().fold(_mm512_setzero_ps(), |s, &a| _mm512_add_ps(s, a));
    _mm512_reduce_add_ps(sum)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn fma_avx512(iters: usize) -> f32 {
    use std::arch::x86_64::*;
    let x = _mm512_set1_ps(black_box(0.999_999));
    let y = _mm512_set1_ps(black_box(1e-7));
    let mut acc = [_mm512_set1_ps(1.0); 12];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm512_fmadd_ps(*a, x, y);
        }
    }
    let sum = acc.iter().fold(_mm512_setzero_ps(), |s, &a| _mm512_add_ps(s, a));
    _mm512_reduce_add_ps(sum)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_avx2(iters: usize) -> f32 {
    use std::arch::x86_64::*;
    let x = _mm256_set1_ps(black_box(0.999_999));
    let y = _mm256_set1_ps(black_box(1e-7));
    let mut acc = [_mm256_set1_ps(1.0); 12];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm256_fmadd_ps(*a, x, y);
        }
    }
    let mut lanes = [0.0f32; 8];
    let sum = acc.iter().fold(_mm256_setzero_ps(), |s, &a| _mm256_add_ps(s, a));
    // SAFETY: `lanes` holds exactly the 8 floats of one 256-bit vector.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
    lanes.iter().sum()
}

/// Memory bandwidth in bytes/s: `a = b + s * c` over three 64 MiB arrays on
/// all threads, counting 2 reads and 1 write per element (the same count as
/// a tensor add).
fn triad_bandwidth() -> f64 {
    let len = 1 << 24;
    let b = vec![1.0f32; len];
    let c = vec![2.0f32; len];
    let mut a = vec![0.0f32; len];
    let chunk = len / rayon::current_num_threads().max(1) / 8;
    let t = median_time(Duration::from_secs(1), || {
        a.par_chunks_mut(chunk).zip(b.par_chunks(chunk).zip(c.par_chunks(chunk))).for_each(|(a, (b, c))| {
            for ((a, &b), &c) in a.iter_mut().zip(b).zip(c) {
                *a = b + 1.5 * c;
            }
        });
        black_box(&mut a);
    });
    (3 * 4 * len) as f64 / t.as_secs_f64()
}

// ---------------------------------------------------------------------------
// The comparison

/// Deterministic inputs in `-1..1`, shared by every library.
fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// One line of the table.
pub struct Row {
    op: String,
    devtensor: Duration,
    candle: Option<Duration>,
    torch: Option<Duration>,
    /// The work: FLOP for compute-bound rows, bytes for memory-bound ones.
    work: f64,
    /// The machine's limit in the same unit per second, if one applies.
    peak: Option<f64>,
    unit: &'static str,
}

/// The rows of one run, and PyTorch's child process.
pub struct Contest {
    budget: Duration,
    pub torch: Torch,
    rows: Vec<Row>,
    /// Times devtensor alone (`DEVTENSOR_PEERS_ONLY=devtensor`), for `perf`.
    alone: bool,
}

impl Contest {
    /// Times devtensor's `ours`, candle's `candle` (where candle has the
    /// operation) and PyTorch's row `op` (where `torch` says PyTorch set it
    /// up) in turn, four rounds each, so that all three see the same load
    /// on a shared machine, and adds the row to the table.
    #[allow(clippy::too_many_arguments)]
    pub fn row(
        &mut self,
        op: &str,
        work: f64,
        peak: Option<f64>,
        unit: &'static str,
        torch: bool,
        ours: &mut dyn FnMut(),
        mut candle: Option<&mut dyn FnMut()>,
    ) {
        let slice = self.budget / 8;
        let (mut dt, mut cd, mut pt) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..4 {
            dt.push(median_time(slice, &mut *ours));
            if self.alone {
                continue;
            }
            if let Some(candle) = candle.as_mut().filter(|_| !capped()) {
                cd.push(median_time(slice, &mut **candle));
            }
            if torch {
                pt.push(self.torch.time(op, slice));
            }
        }
        // Each entry is already a median of many runs; take the middle of those.
        let middle = |mut v: Vec<Duration>| {
            v.sort();
            v.get(v.len() / 2).copied()
        };
        let devtensor = middle(dt).expect("four rounds");
        self.rows.push(Row { op: op.into(), devtensor, candle: middle(cd), torch: middle(pt), work, peak, unit });
    }

    /// Adds a row timed elsewhere (two devtensor variants against each other).
    pub fn push(&mut self, row: Row) {
        self.rows.push(row);
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "| {:<50} | {:>10} | {:>10} | {:>10} | {:>15} | {:>13} | {:>7} | {:>9} | {:>10} |",
        "operation", "devtensor", "candle", "PyTorch", "devtensor rate", "peak", "dt % pk", "dt/candle", "dt/PyTorch"
    );
    println!(
        "|{:-<52}|{:->12}|{:->12}|{:->12}|{:->17}|{:->15}|{:->9}|{:->11}|{:->12}|",
        "", "", "", "", "", "", "", "", ""
    );
    let ratio = |ours: Duration, theirs: Option<Duration>| {
        theirs.map_or("-".to_string(), |t| format!("{:.2}", ours.as_secs_f64() / t.as_secs_f64()))
    };
    for r in rows {
        let rate = r.work / r.devtensor.as_secs_f64();
        // GFLOP/s and GB/s in billions; tokens/s as they are.
        let scale = if r.unit.starts_with('G') { 1e9 } else { 1.0 };
        println!(
            "| {:<50} | {:>10} | {:>10} | {:>10} | {:>15} | {:>13} | {:>7} | {:>9} | {:>10} |",
            r.op,
            format_duration(r.devtensor),
            r.candle.map_or("-".to_string(), format_duration),
            r.torch.map_or("-".to_string(), format_duration),
            format!("{:.1} {}", rate / scale, r.unit),
            r.peak.map_or("-".to_string(), |p| format!("{:.1} {}", p / scale, r.unit)),
            r.peak.map_or("-".to_string(), |p| format!("{:.0}%", 100.0 * rate / p)),
            ratio(r.devtensor, r.candle),
            ratio(r.devtensor, r.torch),
        );
    }
}

fn format_duration(t: Duration) -> String {
    let s = t.as_secs_f64();
    match s {
        s if s < 1e-6 => format!("{:.0} ns", s * 1e9),
        s if s < 1e-3 => format!("{:.2} µs", s * 1e6),
        _ => format!("{:.3} ms", s * 1e3),
    }
}

/// Largest absolute difference between two libraries' results.
fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "devtensor and candle results differ in length");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn main() -> candle_core::Result<()> {
    // Started first, before the probes below use rayon, so that the main
    // thread is one of the workers, as in a program of a devtensor user
    // (`backend/cpu/threads.rs`).
    let threads = Cpu::num_threads();
    // `cargo run --release -- loader`: the data loader's throughput alone.
    if std::env::args().nth(1).as_deref() == Some("loader") {
        loader::report();
        return Ok(());
    }
    // `cargo run --release -- memory`: attention's heap at growing contexts.
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("memory") => {
            memory::report();
            return Ok(());
        }
        Some("memory-one") => {
            let t = args[3].parse().expect("a context length");
            println!("{}", memory::measure(args[2] == "composed", t));
            return Ok(());
        }
        _ => {}
    }
    let cpu = CandleDevice::Cpu;
    // `DEVTENSOR_PEERS_ONLY=devtensor` leaves the peers out, so that a
    // profile (`perf record`) of a row shows devtensor's time alone.
    let alone = std::env::var("DEVTENSOR_PEERS_ONLY").as_deref() == Ok("devtensor");
    let (torch, torch_version) = if alone { (Torch::none(), "not run".into()) } else { Torch::start(threads) };
    println!("devtensor vs candle-core {} and PyTorch {torch_version}, each on {threads} threads", candle_version());
    println!("instruction set: {} (the CPU has {}){}", Cpu::isa(), Cpu::detected_isa(), capped_note());
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average at the start: {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    }

    let fma_one = fma_peak(1);
    let fma_all = fma_peak(threads);
    let bandwidth = triad_bandwidth();
    println!("f32 FMA peak, 1 thread:          {:>8.1} GFLOP/s", fma_one / 1e9);
    println!("f32 FMA peak, {threads} threads:         {:>8.1} GFLOP/s", fma_all / 1e9);
    println!("memory bandwidth (triad, 64 MiB): {:>7.1} GB/s", bandwidth / 1e9);
    match bf16_peak(threads) {
        Some(peak) => println!("bf16 dot-product peak, {threads} threads: {:>6.1} GFLOP/s (vdpbf16ps)", peak / 1e9),
        None => println!("bf16 dot-product peak: - (no AVX512-BF16 at this instruction set)"),
    }
    println!();

    let mut contest = Contest { budget: Duration::from_millis(1500), torch, rows: Vec::new(), alone };
    // `cargo run --release -- add` runs only the operations whose name
    // contains "add"; `-- 'sdpa|GPT'` those that contain either.
    let filter = std::env::args().nth(1).unwrap_or_default();
    let wanted = |op: &str| filter.split('|').any(|part| op.contains(part));

    for n in [64usize, 128, 256, 512, 1024, 2048] {
        let op = format!("matmul f32 {n}");
        if !wanted(&op) {
            continue;
        }
        let (a, b) = (data(n * n, 1), data(n * n, 2));
        let (da, db) = (Tensor::<Cpu>::from_slice(&a, [n, n]), Tensor::<Cpu>::from_slice(&b, [n, n]));
        let (ca, cb) = (CandleTensor::from_slice(&a, (n, n), &cpu)?, CandleTensor::from_slice(&b, (n, n), &cpu)?);
        let product = da.matmul(&db).to_vec();
        let diff = max_diff(&product, &ca.matmul(&cb)?.flatten_all()?.to_vec1()?);
        assert!(diff <= 1e-3 * n as f32, "matmul {n}: results differ by {diff}");
        contest.torch.tensor("a", &da);
        contest.torch.tensor("b", &db);
        let torch = contest.torch.setup(&op, "matmul", json!({}), &product, 1e-3 * n as f64);
        // The peak again, just before: the share of peak compares figures
        // taken under the same load.
        let peak = fma_peak(threads);
        contest.row(
            &op,
            2.0 * (n as f64).powi(3),
            Some(peak),
            "GFLOP/s",
            torch,
            &mut || drop(black_box(da.matmul(&db))),
            Some(&mut || drop(black_box(ca.matmul(&cb).unwrap()))),
        );
    }

    // bf16 products: devtensor's bf16 against PyTorch's bf16 `a @ b` on the
    // same (rounded) values, both rounded once from f32 sums; the share is
    // of the bf16 dot-product peak where the CPU has one.
    for n in [1024usize, 2048] {
        let op = format!("matmul bf16 {n}");
        if !wanted(&op) {
            continue;
        }
        let (a, b) = (data(n * n, 1), data(n * n, 2));
        let da = Tensor::<Cpu>::from_slice(&a, [n, n]).to_dtype::<bf16>();
        let db = Tensor::<Cpu>::from_slice(&b, [n, n]).to_dtype::<bf16>();
        let product = da.matmul(&db).to_dtype::<f32>().to_vec();
        // Capped at AVX2, PyTorch 2.15's bf16 product falls back to a
        // kernel of 1-3 GFLOP/s (2.4 s for one product at 1024), which the
        // timing rounds would take an hour to sample: not run.
        let torch = !capped() && {
            contest.torch.tensor("a", &da.to_dtype::<f32>());
            contest.torch.tensor("b", &db.to_dtype::<f32>());
            contest.torch.setup(&op, "matmul_bf16", json!({}), &product, 2f64.powi(-7))
        };
        let peak = bf16_peak(threads);
        contest.row(
            &op,
            2.0 * (n as f64).powi(3),
            peak,
            "GFLOP/s",
            torch,
            &mut || drop(black_box(da.matmul(&db))),
            None,
        );
    }

    for (label, len) in [("4096", 4096usize), ("16M", 1 << 24)] {
        if !wanted(&format!("add mul scalar sum f32 {label}")) {
            continue;
        }
        let (a, b) = (data(len, 3), data(len, 4));
        let (da, db) = (Tensor::<Cpu>::from_slice(&a, [len]), Tensor::<Cpu>::from_slice(&b, [len]));
        let (ca, cb) = (CandleTensor::from_slice(&a, len, &cpu)?, CandleTensor::from_slice(&b, len, &cpu)?);
        let sum = (&da + &db).to_vec();
        let diff = max_diff(&sum, &(&ca + &cb)?.to_vec1()?);
        assert!(diff == 0.0, "add {label}: results differ by {diff}");
        let peak = (len >= 1 << 20).then(triad_bandwidth);

        let op = format!("add f32 {label}");
        contest.torch.tensor("a", &da);
        contest.torch.tensor("b", &db);
        let torch = contest.torch.setup(&op, "add", json!({}), &sum, 0.0);
        let bytes = (3 * 4 * len) as f64;
        contest.row(
            &op,
            bytes,
            peak,
            "GB/s",
            torch,
            &mut || drop(black_box(&da + &db)),
            Some(&mut || drop(black_box((&ca + &cb).unwrap()))),
        );

        let op = format!("mul scalar f32 {label}");
        contest.torch.tensor("a", &da);
        let torch = contest.torch.setup(&op, "mul_scalar", json!({}), &(&da * 1.5f32).to_vec(), 0.0);
        let bytes = (2 * 4 * len) as f64;
        let (ours, theirs) =
            (&mut || drop(black_box(&da * 1.5f32)), &mut || drop(black_box(ca.affine(1.5, 0.0).unwrap())));
        contest.row(&op, bytes, peak, "GB/s", torch, ours, Some(theirs));

        let op = format!("sum f32 {label}");
        contest.torch.tensor("a", &da);
        // Summation orders differ: within a few ulp of the sum's size.
        let torch = contest.torch.setup(&op, "sum_all", json!({}), &da.sum().to_vec(), 1e-5 * (len as f64).sqrt());
        let bytes = (4 * len) as f64;
        contest.row(
            &op,
            bytes,
            peak,
            "GB/s",
            torch,
            &mut || drop(black_box(da.sum())),
            Some(&mut || drop(black_box(ca.sum_all().unwrap()))),
        );
    }

    // A peak is the best the machine does: measured again before the model
    // rows, whose share of it would otherwise rest on one measurement that
    // a moment of load (PyTorch's start-up, a neighbour) can halve.
    let fma_all = fma_all.max(fma_peak(threads));
    training::rows(&mut contest, |op| wanted(op), fma_all, bandwidth)?;
    recurrent::rows(&mut contest, &|op: &str| wanted(op), fma_all);

    let (rows_n, cols) = (4096usize, 1024usize);
    let op = format!("softmax f32 {rows_n}x{cols}");
    if wanted(&op) {
        let x = data(rows_n * cols, 5);
        let dx = Tensor::<Cpu>::from_slice(&x, [rows_n, cols]);
        let cx = CandleTensor::from_slice(&x, (rows_n, cols), &cpu)?;
        contest.torch.tensor("x", &dx);
        let torch = contest.torch.setup(&op, "softmax", json!({}), &dx.softmax(-1).to_vec(), 1e-5);
        let bytes = (2 * 4 * rows_n * cols) as f64;
        let ours = &mut || drop(black_box(dx.softmax(-1)));
        let theirs = &mut || drop(black_box(candle_nn::ops::softmax_last_dim(&cx).unwrap()));
        contest.row(&op, bytes, Some(bandwidth), "GB/s", torch, ours, Some(theirs));
    }

    reduction_rows(&mut contest, &|op: &str| wanted(op), bandwidth, &cpu)?;
    einsum_rows(&mut contest, &|op: &str| wanted(op), fma_all);
    conv3d_and_interpolate_rows(&mut contest, &|op: &str| wanted(op), fma_all, bandwidth);

    print_table(&contest.rows);
    println!();
    println!("rates: GFLOP/s = 2·n³ / time; GB/s counts each input read once and the output written once.");
    println!(
        "% pk: of the {threads}-thread FMA peak (products, convolutions, models), of the bf16 dot-product \
         peak (bf16 products) or of the triad bandwidth (element-wise operations), measured in this run \
         (the machine may be shared)."
    );
    println!("The three libraries are timed in turn, four rounds each, so all see the same load; '-': not run.");
    Ok(())
}

/// Reductions over several axes at once (issue 60): global average
/// pooling (`x.mean((2, 3))`), batch norm's statistics (`x.var((0, 2, 3))`),
/// a sum over axes apart (`x.sum((0, 2))`), `amax` and `logsumexp` over a
/// feature map's spatial axes; candle where it takes several axes (its
/// `var`, `max` and `log_sum_exp` take one, so they are left out).
fn reduction_rows(
    contest: &mut Contest,
    wanted: &dyn Fn(&str) -> bool,
    bandwidth: f64,
    cpu: &CandleDevice,
) -> candle_core::Result<()> {
    let dims = [32usize, 256, 28, 28];
    let len: usize = dims.iter().product();
    let shape = "32x256x28x28";
    type Ours = fn(&Tensor<Cpu>) -> Tensor<Cpu>;
    type Theirs = fn(&CandleTensor) -> candle_core::Result<CandleTensor>;
    let rows: [(&str, &str, &[isize], Ours, Option<Theirs>); 5] = [
        ("mean", "mean (2,3)", &[2, 3], |x| x.mean_axis([2, 3]), Some(|x| x.mean((2, 3)))),
        ("var", "var (0,2,3)", &[0, 2, 3], |x| x.var_axis([0, 2, 3], 1), None),
        ("sum", "sum (0,2)", &[0, 2], |x| x.sum_axis([0, 2]), Some(|x| x.sum((0, 2)))),
        ("amax", "amax (2,3)", &[2, 3], |x| x.amax([2, 3]), None),
        ("logsumexp", "logsumexp (2,3)", &[2, 3], |x| x.logsumexp([2, 3]), None),
    ];
    let x = data(len, 7);
    let dx = Tensor::<Cpu>::from_slice(&x, dims);
    let cx = CandleTensor::from_slice(&x, &dims, cpu)?;
    for (kind, what, axes, ours, theirs) in rows {
        let op = format!("{what} f32 {shape}");
        if !wanted(&op) {
            continue;
        }
        contest.torch.tensor("x", &dx);
        let want = ours(&dx);
        let torch = contest.torch.setup(&op, "reduce_axes", json!({"op": kind, "dims": axes}), &want.to_vec(), 1e-4);
        // The input read once (the output is far smaller).
        let bytes = (4 * len) as f64;
        let cx = &cx;
        let mut theirs_call = theirs.map(|f| move || drop(black_box(f(cx).unwrap())));
        contest.row(
            &op,
            bytes,
            Some(bandwidth),
            "GB/s",
            torch,
            &mut || drop(black_box(ours(&dx))),
            theirs_call.as_mut().map(|f| f as &mut dyn FnMut()),
        );
    }
    Ok(())
}

/// `einsum` (issue 60): Stable Diffusion's attention scores
/// (`b h q d, b h k d -> b h q k`), a plain product written as an equation,
/// and a channel mix that needs its operand permuted (`b c h w, c d -> b d h
/// w`, a 1x1 convolution); candle has no `einsum`.
fn einsum_rows(contest: &mut Contest, wanted: &dyn Fn(&str) -> bool, fma_peak: f64) {
    let rows: [(&str, &[usize], &[usize], f64); 3] = [
        ("bhqd,bhkd->bhqk", &[4, 8, 256, 64], &[4, 8, 256, 64], 2.0 * 4.0 * 8.0 * 256.0 * 256.0 * 64.0),
        ("ij,jk->ik", &[512, 512], &[512, 512], 2.0 * 512f64.powi(3)),
        ("bchw,cd->bdhw", &[16, 128, 28, 28], &[128, 128], 2.0 * 16.0 * 128.0 * 128.0 * 28.0 * 28.0),
    ];
    for (equation, a_dims, b_dims, flops) in rows {
        let op = format!("einsum {equation} f32");
        if !wanted(&op) {
            continue;
        }
        let a = Tensor::<Cpu>::from_slice(&data(a_dims.iter().product(), 11), a_dims);
        let b = Tensor::<Cpu>::from_slice(&data(b_dims.iter().product(), 12), b_dims);
        contest.torch.tensor("a", &a);
        contest.torch.tensor("b", &b);
        let want = Tensor::einsum(equation, &[&a, &b]);
        let torch = contest.torch.setup(&op, "einsum", json!({"equation": equation}), &want.to_vec(), 1e-3);
        contest.row(
            &op,
            flops,
            Some(fma_peak),
            "GFLOP/s",
            torch,
            &mut || drop(black_box(Tensor::einsum(equation, &[&a, &b]))),
            None,
        );
    }
}

/// `Conv3d` (a video or volume network's 3x3x3 layer, padding 1) and
/// `interpolate` (a UNet decoder's bilinear upsampling by 2 with
/// `align_corners=True`, and nearest), forward and with their gradients
/// (issue 59); candle has neither a 3-D convolution nor these modes.
fn conv3d_and_interpolate_rows(contest: &mut Contest, wanted: &dyn Fn(&str) -> bool, fma_peak: f64, bandwidth: f64) {
    use devtensor::nn::{InterpolateMode, Upsample};
    use devtensor::ops::conv::Window3d;
    let ([n, c, d, h, w], o) = ([2usize, 32, 16, 32, 32], 32usize);
    let conv_flops = 2.0 * (n * o * d * h * w * c * 27) as f64;
    let window = Window3d { padding: [1; 3], ..Default::default() };
    for backward in [false, true] {
        let op = format!("conv3d {} {n}x{c}x{d}x{h}x{w} k3", if backward { "fwd+bwd" } else { "fwd" });
        if !wanted(&op) {
            continue;
        }
        let x = Tensor::<Cpu>::from_slice(&data(n * c * d * h * w, 21), [n, c, d, h, w]);
        let wt = Tensor::<Cpu>::from_slice(&data(o * c * 27, 22), [o, c, 3, 3, 3]) * 0.05;
        let b = Tensor::<Cpu>::from_slice(&data(o, 23), [o]);
        for (name, t) in [("x", &x), ("w", &wt), ("b", &b)] {
            contest.torch.tensor(name, t);
        }
        let want = x.conv3d(&wt, Some(&b), window, 1);
        let torch = contest.torch.setup(&op, "conv3d", json!({"backward": backward}), &want.to_vec(), 1e-3);
        let (xg, wg, bg) = (x.clone().requires_grad(), wt.clone().requires_grad(), b.clone().requires_grad());
        let ours: &mut dyn FnMut() = if backward {
            &mut || drop(black_box(xg.conv3d(&wg, Some(&bg), window, 1).sum().backward()))
        } else {
            &mut || drop(black_box(x.conv3d(&wt, Some(&b), window, 1)))
        };
        let work = if backward { 3.0 * conv_flops } else { conv_flops };
        contest.row(&op, work, Some(fma_peak), "GFLOP/s", torch, ours, None);
    }
    let [n, c, h, w] = [16usize, 64, 64, 64];
    for (mode, name, align) in
        [(InterpolateMode::Bilinear, "bilinear", Some(true)), (InterpolateMode::Nearest, "nearest", None)]
    {
        for backward in [false, true] {
            let op = format!("interpolate {name} x2 {} {n}x{c}x{h}x{w}", if backward { "fwd+bwd" } else { "fwd" });
            if !wanted(&op) {
                continue;
            }
            let x = Tensor::<Cpu>::from_slice(&data(n * c * h * w, 24), [n, c, h, w]);
            contest.torch.tensor("x", &x);
            let layer = Upsample::new(2.0, mode).align_corners(align.unwrap_or(false));
            let want = layer.forward(&x);
            let args = json!({"mode": name, "align_corners": align, "backward": backward});
            let torch = contest.torch.setup(&op, "interpolate", args, &want.to_vec(), 1e-4);
            let xg = x.clone().requires_grad();
            let ours: &mut dyn FnMut() = if backward {
                &mut || drop(black_box(layer.forward(&xg).sum().backward()))
            } else {
                &mut || drop(black_box(layer.forward(&x)))
            };
            // The input read and the output (four times its size) written;
            // the backward reads the output's gradient and writes the input's.
            let bytes = 4.0 * (n * c * h * w) as f64 * if backward { 10.0 } else { 5.0 };
            contest.row(&op, bytes, Some(bandwidth), "GB/s", torch, ours, None);
        }
    }
}

/// Whether `DEVTENSOR_CPU_ISA` caps devtensor below the CPU's level; PyTorch
/// is then capped the same way (`torch.rs`), and candle, which cannot be,
/// is left out.
pub fn capped() -> bool {
    Cpu::isa() < Cpu::detected_isa()
}

fn capped_note() -> &'static str {
    if capped() { "; PyTorch capped likewise, candle left out (it has no such switch)" } else { "" }
}

/// The candle version this package was built against, for the report.
fn candle_version() -> &'static str {
    "0.11"
}
