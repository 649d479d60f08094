//! devtensor next to candle and next to the machine's own limits, in one run.
//!
//! ```text
//! cd benches/peers && cargo run --release
//! ```
//!
//! First measures the f32 FMA peak (a register-blocked FMA loop, on one
//! thread and on all of them) and the memory bandwidth (a parallel triad over
//! 64 MiB arrays); then runs the same inputs through devtensor and candle and
//! prints, per operation, both times, the rate, the share of the measured
//! peak, and the time ratio devtensor / candle (below 1: devtensor is faster).
//! Every time is the median of several runs after a warm-up.

mod loader;
mod training;

use candle_core::{Device as CandleDevice, Tensor as CandleTensor};
use devtensor::{Cpu, Tensor};
use rayon::prelude::*;
use std::hint::black_box;
use std::time::{Duration, Instant};

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

/// One run of the widest FMA loop this CPU has: `FMA_ITERS` iterations of
/// 12 independent FMA chains, enough to hide FMA latency on both FMA pipes
/// of every current x86 core. Returns a value to keep the work alive, and
/// the f32 lanes per FMA it used (0 when the CPU has neither loop).
fn fma_loop() -> (f32, usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
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
// Reductions and softmax

/// devtensor's sum of every element (a rank-0 tensor).
fn devtensor_sum(x: &Tensor<Cpu>) -> Option<Tensor<Cpu>> {
    Some(x.sum())
}

/// devtensor's softmax over the last axis.
fn devtensor_softmax(x: &Tensor<Cpu>) -> Option<Tensor<Cpu>> {
    Some(x.softmax(-1))
}

/// candle's fused softmax over the last axis, from candle-nn.
fn candle_softmax(x: &CandleTensor) -> CandleTensor {
    candle_nn::ops::softmax_last_dim(x).unwrap()
}

// ---------------------------------------------------------------------------
// The comparison

/// Deterministic inputs in `-1..1`, shared by both libraries.
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
struct Row {
    op: String,
    devtensor: Option<Duration>,
    candle: Duration,
    /// The work: FLOP for compute-bound rows, bytes for memory-bound ones.
    work: f64,
    /// The machine's limit in the same unit per second, if one applies.
    peak: Option<f64>,
    unit: &'static str,
}

fn print_table(rows: &[Row]) {
    println!(
        "| {:<22} | {:>12} | {:>12} | {:>14} | {:>14} | {:>15} | {:>8} | {:>8} | {:>9} |",
        "operation", "devtensor", "candle", "devtensor rate", "candle rate", "peak (same load)", "dt % pk", "cd % pk", "dt/candle"
    );
    println!("|{:-<24}|{:->14}|{:->14}|{:->16}|{:->16}|{:->17}|{:->10}|{:->10}|{:->11}|", "", "", "", "", "", "", "", "", "");
    for r in rows {
        let rate = |t: Duration| r.work / t.as_secs_f64() / 1e9;
        let pct = |t: Duration| r.peak.map_or("-".to_string(), |p| format!("{:.0}%", 100.0 * r.work / t.as_secs_f64() / p));
        let (dt, dt_rate, dt_pct, ratio) = match r.devtensor {
            Some(t) => (
                format_duration(t),
                format!("{:.1} {}", rate(t), r.unit),
                pct(t),
                format!("{:.2}", t.as_secs_f64() / r.candle.as_secs_f64()),
            ),
            None => ("n/a".into(), "-".into(), "-".into(), "-".into()),
        };
        println!(
            "| {:<22} | {:>12} | {:>12} | {:>14} | {:>14} | {:>15} | {:>8} | {:>8} | {:>9} |",
            r.op,
            dt,
            format_duration(r.candle),
            dt_rate,
            format!("{:.1} {}", rate(r.candle), r.unit),
            r.peak.map_or("-".to_string(), |p| format!("{:.1} {}", p / 1e9, r.unit)),
            dt_pct,
            pct(r.candle),
            ratio
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

/// Largest absolute difference between the two libraries' results.
fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "devtensor and candle results differ in length");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn main() -> candle_core::Result<()> {
    // `cargo run --release -- loader`: the data loader's throughput alone.
    if std::env::args().nth(1).as_deref() == Some("loader") {
        loader::report();
        return Ok(());
    }
    let threads = rayon::current_num_threads();
    let cpu = CandleDevice::Cpu;
    println!("devtensor vs candle-core {} on {} threads", candle_version(), threads);

    let fma_one = fma_peak(1);
    let fma_all = fma_peak(threads);
    let bandwidth = triad_bandwidth();
    println!("f32 FMA peak, 1 thread:          {:>8.1} GFLOP/s", fma_one / 1e9);
    println!("f32 FMA peak, {threads} threads:         {:>8.1} GFLOP/s", fma_all / 1e9);
    println!("memory bandwidth (triad, 64 MiB): {:>7.1} GB/s", bandwidth / 1e9);
    println!();

    let mut rows = Vec::new();
    let budget = Duration::from_millis(1500);
    // `cargo run --release -- add` runs only the operations whose name contains "add".
    let filter = std::env::args().nth(1).unwrap_or_default();
    let wanted = |op: &str| op.contains(filter.as_str());

    for n in [64usize, 128, 256, 512, 1024, 2048].into_iter().filter(|n| wanted(&format!("matmul f32 {n}"))) {
        let (a, b) = (data(n * n, 1), data(n * n, 2));
        let (da, db) = (Tensor::<Cpu>::from_slice(&a, [n, n]), Tensor::<Cpu>::from_slice(&b, [n, n]));
        let (ca, cb) = (CandleTensor::from_slice(&a, (n, n), &cpu)?, CandleTensor::from_slice(&b, (n, n), &cpu)?);
        let diff = max_diff(&da.matmul(&db).to_vec(), &ca.matmul(&cb)?.flatten_all()?.to_vec1()?);
        assert!(diff <= 1e-3 * n as f32, "matmul {n}: results differ by {diff}");
        // The peak again, just before: the share of peak compares figures
        // taken under the same load.
        let peak = fma_peak(threads);
        let (dt, cd) = median_pair(budget, || drop(black_box(da.matmul(&db))), || drop(black_box(ca.matmul(&cb).unwrap())));
        let flops = 2.0 * (n as f64).powi(3);
        rows.push(Row { op: format!("matmul f32 {n}"), devtensor: Some(dt), candle: cd, work: flops, peak: Some(peak), unit: "GFLOP/s" });
    }

    for (label, len) in [("4096", 4096usize), ("16M", 1 << 24)].into_iter().filter(|(l, _)| wanted(&format!("add mul scalar sum f32 {l}"))) {
        let (a, b) = (data(len, 3), data(len, 4));
        let (da, db) = (Tensor::<Cpu>::from_slice(&a, [len]), Tensor::<Cpu>::from_slice(&b, [len]));
        let (ca, cb) = (CandleTensor::from_slice(&a, len, &cpu)?, CandleTensor::from_slice(&b, len, &cpu)?);
        let diff = max_diff(&(&da + &db).to_vec(), &(&ca + &cb)?.to_vec1()?);
        assert!(diff == 0.0, "add {label}: results differ by {diff}");
        let bytes = (3 * 4 * len) as f64;
        let peak = (len >= 1 << 20).then(triad_bandwidth);
        let (dt, cd) = median_pair(budget, || drop(black_box(&da + &db)), || drop(black_box((&ca + &cb).unwrap())));
        rows.push(Row { op: format!("add f32 {label}"), devtensor: Some(dt), candle: cd, work: bytes, peak, unit: "GB/s" });
        let bytes = (2 * 4 * len) as f64;
        let (dt, cd) =
            median_pair(budget, || drop(black_box(&da * 1.5f32)), || drop(black_box(ca.affine(1.5, 0.0).unwrap())));
        rows.push(Row { op: format!("mul scalar f32 {label}"), devtensor: Some(dt), candle: cd, work: bytes, peak, unit: "GB/s" });

        let dt = devtensor_sum(&da).map(|_| median_time(budget, || drop(black_box(devtensor_sum(&da)))));
        let cd = median_time(budget, || drop(black_box(ca.sum_all().unwrap())));
        rows.push(Row { op: format!("sum f32 {label}"), devtensor: dt, candle: cd, work: (4 * len) as f64, peak, unit: "GB/s" });
    }

    rows.extend(training::rows(budget, |op| wanted(op), fma_all)?);

    let (rows_n, cols) = (4096usize, 1024usize);
    if !wanted(&format!("softmax f32 {rows_n}x{cols}")) {
        print_table(&rows);
        return Ok(());
    }
    let x = data(rows_n * cols, 5);
    let dx = Tensor::<Cpu>::from_slice(&x, [rows_n, cols]);
    let cx = CandleTensor::from_slice(&x, (rows_n, cols), &cpu)?;
    let dt = devtensor_softmax(&dx).map(|_| median_time(budget, || drop(black_box(devtensor_softmax(&dx)))));
    let cd = median_time(budget, || drop(black_box(candle_softmax(&cx))));
    rows.push(Row {
        op: format!("softmax f32 {rows_n}x{cols}"),
        devtensor: dt,
        candle: cd,
        work: (2 * 4 * rows_n * cols) as f64,
        peak: Some(bandwidth),
        unit: "GB/s",
    });

    print_table(&rows);
    println!();
    println!("rates: GFLOP/s = 2·n³ / time; GB/s counts each input read once and the output written once.");
    println!(
        "% pk: of the {threads}-thread FMA peak (matmul) or of the triad bandwidth (large elementwise ops), \
         measured again just before each row's timings (the machine may be shared)."
    );
    println!("devtensor and candle are timed alternately, four rounds each, so both see the same load.");
    Ok(())
}

/// The candle version this package was built against, for the report.
fn candle_version() -> &'static str {
    "0.11"
}
