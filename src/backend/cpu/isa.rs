//! Which vector instructions the CPU kernels use: the widest this CPU has,
//! or less when `DEVTENSOR_CPU_ISA` or [`Cpu::set_max_isa`] asks for less.
//!
//! A cap serves two purposes. Speed comparisons at the instruction set most
//! users' CPUs have (AVX2) can be run on an AVX-512 machine, both sides
//! capped, as PyTorch's `ATEN_CPU_CAPABILITY`, `MKL_ENABLE_INSTRUCTIONS` and
//! `ONEDNN_MAX_CPU_ISA` cap PyTorch; and the test suites run the narrower
//! code paths on a machine that would otherwise never take them.
//!
//! Soundness never rests on the cap: every kernel that uses an instruction
//! set checks that the CPU has it, and the cap can only lower the level.

use super::Cpu;
use std::sync::atomic::{AtomicU8, Ordering};

/// An x86-64 vector instruction set level, as the CPU kernels (element-wise
/// loops, direct convolutions and the `gemm` crate's matrix products) use
/// them. Ordered from narrowest to widest.
///
/// ```
/// use devtensor::Cpu;
/// use devtensor::backend::cpu::CpuIsa;
/// // Never wider than what the CPU has.
/// assert!(Cpu::isa() <= Cpu::detected_isa());
/// assert!(CpuIsa::Scalar < CpuIsa::Avx2 && CpuIsa::Avx2 < CpuIsa::Avx512);
/// assert_eq!("avx2".parse::<CpuIsa>(), Ok(CpuIsa::Avx2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CpuIsa {
    /// The target's baseline only (SSE2 on x86-64; the only level on other
    /// architectures).
    Scalar,
    /// AVX2 with FMA and F16C (of x86-64-v3): most laptop and desktop CPUs.
    Avx2,
    /// AVX-512 F, BW, DQ and VL (x86-64-v4), beside `Avx2`'s.
    Avx512,
}

impl CpuIsa {
    /// The name `DEVTENSOR_CPU_ISA` takes: `scalar`, `avx2` or `avx512`.
    pub fn name(self) -> &'static str {
        match self {
            CpuIsa::Scalar => "scalar",
            CpuIsa::Avx2 => "avx2",
            CpuIsa::Avx512 => "avx512",
        }
    }

    fn from_u8(level: u8) -> CpuIsa {
        match level {
            0 => CpuIsa::Scalar,
            1 => CpuIsa::Avx2,
            _ => CpuIsa::Avx512,
        }
    }
}

impl std::fmt::Display for CpuIsa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CpuIsa {
    type Err = String;

    /// Parses `scalar`, `avx2` or `avx512` (any case).
    fn from_str(s: &str) -> Result<CpuIsa, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "scalar" => Ok(CpuIsa::Scalar),
            "avx2" => Ok(CpuIsa::Avx2),
            "avx512" => Ok(CpuIsa::Avx512),
            other => Err(format!("unknown CPU instruction set {other:?}: expected scalar, avx2 or avx512")),
        }
    }
}

/// The level in use, as a `CpuIsa` discriminant; `UNSET` until the first
/// kernel reads it (then from `DEVTENSOR_CPU_ISA`) or a program sets it.
static LEVEL: AtomicU8 = AtomicU8::new(UNSET);
const UNSET: u8 = u8::MAX;

impl Cpu {
    /// The widest instruction set this CPU has, of those the kernels use.
    ///
    /// ```
    /// use devtensor::Cpu;
    /// use devtensor::backend::cpu::CpuIsa;
    /// if std::arch::is_x86_feature_detected!("avx512f")
    ///     && std::arch::is_x86_feature_detected!("avx512bw")
    ///     && std::arch::is_x86_feature_detected!("avx512dq")
    ///     && std::arch::is_x86_feature_detected!("avx512vl")
    /// {
    ///     assert_eq!(Cpu::detected_isa(), CpuIsa::Avx512);
    /// }
    /// ```
    pub fn detected_isa() -> CpuIsa {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            // Every CPU with AVX2 and FMA has F16C (they are all in
            // x86-64-v3), and every one with AVX-512 has all three; checked
            // anyway, since a virtual machine may hide any of them.
            let v3 = has!("avx2") && has!("fma") && has!("f16c");
            if v3 && has!("avx512f") && has!("avx512bw") && has!("avx512dq") && has!("avx512vl") {
                return CpuIsa::Avx512;
            }
            if v3 {
                return CpuIsa::Avx2;
            }
        }
        CpuIsa::Scalar
    }

    /// The instruction set the CPU kernels use now: [`Cpu::detected_isa`],
    /// lowered to `DEVTENSOR_CPU_ISA` (`scalar`, `avx2` or `avx512`) when
    /// that is set, or to what [`Cpu::set_max_isa`] set last. PyTorch's
    /// `torch.backends.cpu.get_cpu_capability()`.
    ///
    /// An unknown `DEVTENSOR_CPU_ISA` is reported once on stderr and
    /// ignored.
    ///
    /// ```
    /// use devtensor::Cpu;
    /// assert!(Cpu::isa() <= Cpu::detected_isa());
    /// ```
    #[inline]
    pub fn isa() -> CpuIsa {
        match LEVEL.load(Ordering::Relaxed) {
            UNSET => init_from_env(),
            level => CpuIsa::from_u8(level),
        }
    }

    /// Caps the instruction set the CPU kernels use at `max` (never above
    /// [`Cpu::detected_isa`]) for the rest of the program, or until the
    /// next call; returns the level now in use. Results agree across levels
    /// to rounding: the narrower paths sum in other orders.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// use devtensor::backend::cpu::CpuIsa;
    /// let before = Cpu::isa();
    /// assert_eq!(Cpu::set_max_isa(CpuIsa::Scalar), CpuIsa::Scalar);
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.matmul(&x).to_vec(), vec![7.0, 10.0, 15.0, 22.0]);
    /// Cpu::set_max_isa(before);
    /// ```
    pub fn set_max_isa(max: CpuIsa) -> CpuIsa {
        let level = max.min(Cpu::detected_isa());
        LEVEL.store(level as u8, Ordering::Relaxed);
        level
    }
}

#[cold]
fn init_from_env() -> CpuIsa {
    let detected = Cpu::detected_isa();
    let level = match std::env::var("DEVTENSOR_CPU_ISA") {
        Ok(value) => match value.parse::<CpuIsa>() {
            Ok(max) => max.min(detected),
            Err(reason) => {
                eprintln!("devtensor: DEVTENSOR_CPU_ISA ignored: {reason}; using {detected}");
                detected
            }
        },
        Err(_) => detected,
    };
    // A concurrent `set_max_isa` wins over the environment.
    match LEVEL.compare_exchange(UNSET, level as u8, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => level,
        Err(set) => CpuIsa::from_u8(set),
    }
}
