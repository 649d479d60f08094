//! `set_float32_matmul_precision`, PyTorch's switch for TF32 products.
//!
//! The setting is one for the whole process, so it has a test binary of its
//! own with one test: in the larger suites it would change the products of
//! tests running beside it. On a GPU the TF32 products must be within
//! TF32's error of the exact ones and measurably off them; on the emulated
//! GPUs of CI, whose cuBLAS rounds the inputs as PTX's `cvt.rna.tf32.f32`
//! does, they must match a reference with inputs rounded that way. On the
//! CPU every setting must give the same bits.

use devtensor::{Cpu, Cuda, Device, MatmulPrecision, Tensor, float32_matmul_precision, set_float32_matmul_precision};

const M: usize = 24;
const K: usize = 40;
const N: usize = 16;

/// Deterministic values in `[-1, 1)` with all 23 mantissa bits in use.
fn values(len: usize, seed: u64) -> Vec<f32> {
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

/// `x` rounded to a 10-bit mantissa, half away from zero, in `f64`: TF32.
fn tf32(x: f32) -> f64 {
    let x = f64::from(x);
    if x == 0.0 {
        return 0.0;
    }
    let unit = 2f64.powi(x.abs().log2().floor() as i32 - 10);
    (x / unit).round() * unit
}

/// The product of row-major `a` (M x K) and `b` (K x N) in `f64`, each
/// input passed through `round` first.
fn reference(a: &[f32], b: &[f32], round: fn(f32) -> f64) -> Vec<f64> {
    let mut out = vec![0.0; M * N];
    for i in 0..M {
        for j in 0..N {
            out[i * N + j] = (0..K).map(|l| round(a[i * K + l]) * round(b[l * N + j])).sum();
        }
    }
    out
}

/// The largest difference between `got` and `want`.
fn worst(got: &[f32], want: &[f64]) -> f64 {
    got.iter().zip(want).map(|(&g, &w)| (f64::from(g) - w).abs()).fold(0.0, f64::max)
}

/// The f32 product and the f64 product of the same values on device `D`.
fn products<D: Device>(a: &[f32], b: &[f32]) -> (Vec<f32>, Vec<f64>) {
    let (ta, tb) = (Tensor::<Cpu>::from_slice(a, [M, K]).to::<D>(), Tensor::<Cpu>::from_slice(b, [K, N]).to::<D>());
    let f32_product = ta.matmul(&tb).to_vec();
    let f64_product = ta.to_dtype::<f64>().matmul(&tb.to_dtype::<f64>()).to_vec();
    (f32_product, f64_product)
}

#[test]
fn tf32_only_where_allowed_and_only_on_the_gpu() {
    assert_eq!(float32_matmul_precision(), MatmulPrecision::Highest, "PyTorch's default");
    for name in ["highest", "high", "medium"] {
        assert_eq!(name.parse::<MatmulPrecision>().unwrap().name(), name);
    }
    assert!("fast".parse::<MatmulPrecision>().unwrap_err().to_string().contains("\"high\""));

    let (a, b) = (values(M * K, 1), values(K * N, 2));
    let exact = reference(&a, &b, f64::from);
    let rounded = reference(&a, &b, tf32);
    let magnitudes = reference(&a, &b, |v| f64::from(v.abs()));
    let gpu = match Cuda::<0>::try_init() {
        Ok(()) => true,
        Err(e) if std::env::var("DEVTENSOR_REQUIRE_CUDA").is_ok_and(|v| v == "1") => {
            panic!("DEVTENSOR_REQUIRE_CUDA=1 but Cuda<0> is unavailable: {e}")
        }
        Err(e) => {
            eprintln!("SKIP Cuda<0>: {e}");
            false
        }
    };

    let (cpu_highest, _) = products::<Cpu>(&a, &b);
    assert!(worst(&cpu_highest, &exact) < 1e-5);
    let gpu_highest = gpu.then(|| products::<Cuda<0>>(&a, &b).0);
    if let Some(p) = &gpu_highest {
        assert!(worst(p, &exact) < 1e-5, "full f32 on the GPU: {}", worst(p, &exact));
    }

    for precision in [MatmulPrecision::High, MatmulPrecision::Medium] {
        set_float32_matmul_precision(precision);
        assert_eq!(float32_matmul_precision(), precision);
        // The CPU has no TF32: the same bits as before.
        let (cpu, cpu_f64) = products::<Cpu>(&a, &b);
        assert_eq!(cpu, cpu_highest, "{precision} on the CPU");
        assert!(worst(&cpu_f64.iter().map(|&v| v as f32).collect::<Vec<_>>(), &exact) < 1e-5);
        if gpu {
            let (p, p64) = products::<Cuda<0>>(&a, &b);
            // Within TF32's error whichever way a GPU rounds to it (each
            // input off by less than 2^-10 of itself), ...
            for (i, (&got, &want)) in p.iter().zip(&exact).enumerate() {
                let bound = magnitudes[i] * 2f64.powi(-9) + 1e-5;
                assert!((f64::from(got) - want).abs() <= bound, "{precision}, element {i}: {got} vs {want}");
            }
            // ... and the emulated GPUs round as PTX's `cvt.rna.tf32.f32`.
            if std::env::var_os("DEVTENSOR_EMU_DRIVER").is_some() {
                assert!(worst(&p, &rounded) < 1e-5, "{precision}: {} from the TF32 reference", worst(&p, &rounded));
            }
            // TF32 keeps about three decimal digits, and the difference shows.
            let off = worst(&p, &exact);
            assert!(off > 1e-4 && off < 1e-2, "{precision}: {off} from full f32");
            // f64 products are never rounded.
            let off64 = p64.iter().zip(&exact).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
            assert!(off64 < 1e-12, "{precision}: f64 product off by {off64}");
        }
    }

    set_float32_matmul_precision(MatmulPrecision::Highest);
    if let Some(before) = gpu_highest {
        assert_eq!(products::<Cuda<0>>(&a, &b).0, before, "back to full f32");
    }
}
