//! PyTorch's `torch.set_float32_matmul_precision`: whether `f32` products
//! may run on a GPU's tensor cores in TF32 (inputs rounded to a 10-bit
//! mantissa, sums in `f32`), about 8 times the `f32` rate on an A100 or
//! H100, at about three decimal digits per input.
//!
//! One setting for the whole process, as in PyTorch, read at each product.
//! The default is full `f32` ("highest"), PyTorch's default for products.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};

/// How precisely `f32` matrix products are computed, with PyTorch's names
/// (`"highest"`, `"high"`, `"medium"`; [`FromStr`] takes them).
///
/// On CUDA, [`High`](Self::High) and [`Medium`](Self::Medium) let cuBLAS
/// run `f32` products and the convolutions built on them in TF32 on the
/// tensor cores, as PyTorch does for both on CUDA. On the CPU every setting
/// computes in full `f32`: PyTorch's settings there only permit a faster
/// path, and devtensor's CPU products have none yet. `f64` products are
/// never affected, nor attention, whose products are devtensor's own
/// kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatmulPrecision {
    /// Full `f32`: every input bit takes part (PyTorch's default).
    #[default]
    Highest,
    /// TF32 allowed on CUDA's tensor cores.
    High,
    /// Lower still in PyTorch where a bf16 path exists; TF32 on CUDA here,
    /// as in PyTorch on CUDA.
    Medium,
}

impl MatmulPrecision {
    /// PyTorch's name for the setting.
    ///
    /// ```
    /// use devtensor::MatmulPrecision;
    /// assert_eq!(MatmulPrecision::High.name(), "high");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            MatmulPrecision::Highest => "highest",
            MatmulPrecision::High => "high",
            MatmulPrecision::Medium => "medium",
        }
    }

    /// Whether a CUDA `f32` product may use TF32.
    pub(crate) fn allows_tf32(self) -> bool {
        self != MatmulPrecision::Highest
    }
}

impl fmt::Display for MatmulPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MatmulPrecision {
    type Err = Error;

    /// PyTorch's names, so that a ported `torch.set_float32_matmul_precision("high")`
    /// keeps its string.
    ///
    /// ```
    /// use devtensor::MatmulPrecision;
    /// assert_eq!("high".parse::<MatmulPrecision>()?, MatmulPrecision::High);
    /// assert!("fast".parse::<MatmulPrecision>().is_err());
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "highest" => Ok(MatmulPrecision::Highest),
            "high" => Ok(MatmulPrecision::High),
            "medium" => Ok(MatmulPrecision::Medium),
            other => Err(Error::Argument {
                op: "set_float32_matmul_precision",
                device: "any".into(),
                reason: format!("unknown precision {other:?}: expected \"highest\", \"high\" or \"medium\""),
            }),
        }
    }
}

/// The process's setting, as `MatmulPrecision as u8`.
static PRECISION: AtomicU8 = AtomicU8::new(MatmulPrecision::Highest as u8);

/// Sets how precisely `f32` matrix products are computed from now on, in
/// every thread: PyTorch's `torch.set_float32_matmul_precision`. See
/// [`MatmulPrecision`] for what each setting does on each device.
///
/// ```rust,standalone_crate
/// use devtensor::{MatmulPrecision, float32_matmul_precision, set_float32_matmul_precision};
/// assert_eq!(float32_matmul_precision(), MatmulPrecision::Highest);
/// set_float32_matmul_precision(MatmulPrecision::High);
/// assert_eq!(float32_matmul_precision(), MatmulPrecision::High);
/// set_float32_matmul_precision(MatmulPrecision::Highest);
/// ```
pub fn set_float32_matmul_precision(precision: MatmulPrecision) {
    PRECISION.store(precision as u8, Ordering::Relaxed);
}

/// The current setting: PyTorch's `torch.get_float32_matmul_precision`.
///
/// ```
/// use devtensor::float32_matmul_precision;
/// println!("f32 products: {}", float32_matmul_precision()); // "highest" unless set
/// ```
pub fn float32_matmul_precision() -> MatmulPrecision {
    match PRECISION.load(Ordering::Relaxed) {
        x if x == MatmulPrecision::High as u8 => MatmulPrecision::High,
        x if x == MatmulPrecision::Medium as u8 => MatmulPrecision::Medium,
        _ => MatmulPrecision::Highest,
    }
}
