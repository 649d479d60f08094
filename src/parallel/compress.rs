//! Gradient compression: gradient buckets that cross between replicas in a
//! half type, as PyTorch DDP's `bf16_compress_hook` and
//! `fp16_compress_hook` send them. Each bucket of `f32` gradients is
//! rounded to the half type, summed in it, and widened back to `f32`
//! before the optimizer step: half the bytes cross the links, and every
//! summed gradient is off by a rounding or two of the half type (the
//! optimizer state and the master weights stay `f32`).

use crate::element::{DType, FloatElement};
use crate::error::Result;
use crate::ops::autocast::LowerPrecision;
use crate::tensor::{Device, Tensor};
use half::{bf16, f16};
use std::any::Any;

/// The element type gradient buckets travel in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum WireType {
    /// As they are (no compression).
    #[default]
    F32,
    Bf16,
    F16,
}

impl WireType {
    /// Buckets sent in `H`.
    pub(crate) fn of<H: LowerPrecision>() -> Self {
        match H::DTYPE {
            DType::BF16 => WireType::Bf16,
            DType::F16 => WireType::F16,
            other => unreachable!("{other:?} is not a half type, and LowerPrecision is sealed"),
        }
    }

    /// The half type buckets are sent in, `None` without compression.
    pub(crate) fn compression(self) -> Option<DType> {
        match self {
            WireType::F32 => None,
            WireType::Bf16 => Some(DType::BF16),
            WireType::F16 => Some(DType::F16),
        }
    }
}

/// A bucket in its wire type.
pub(crate) enum Wire<D: Device> {
    F32(Tensor<D>),
    Bf16(Tensor<D, bf16>),
    F16(Tensor<D, f16>),
}

impl<D: Device> Wire<D> {
    /// `flat` (dense, `f32`) in the wire type `wire`: itself without
    /// compression, a rounded copy otherwise.
    pub(crate) fn new(flat: Tensor<D>, wire: WireType) -> Result<Self> {
        Ok(match wire {
            WireType::F32 => Wire::F32(flat),
            WireType::Bf16 => Wire::Bf16(flat.try_to_dtype()?),
            WireType::F16 => Wire::F16(flat.try_to_dtype()?),
        })
    }

    /// The bucket widened back to `f32` (itself if it travelled as `f32`).
    pub(crate) fn into_f32(self) -> Result<Tensor<D>> {
        match self {
            Wire::F32(t) => Ok(t),
            Wire::Bf16(t) => t.try_to_dtype(),
            Wire::F16(t) => t.try_to_dtype(),
        }
    }

    /// The bucket copied to `R`, in the same wire type.
    pub(crate) fn try_to<R: Device>(&self) -> Result<Wire<R>> {
        Ok(match self {
            Wire::F32(t) => Wire::F32(t.try_to()?),
            Wire::Bf16(t) => Wire::Bf16(t.try_to()?),
            Wire::F16(t) => Wire::F16(t.try_to()?),
        })
    }

    /// The bucket's storage, for a collective that sums it in place.
    pub(crate) fn storage(&self) -> &dyn Any {
        fn any<D: Device, E: FloatElement>(t: &Tensor<D, E>) -> &dyn Any {
            t.storage()
        }
        match self {
            Wire::F32(t) => any(t),
            Wire::Bf16(t) => any(t),
            Wire::F16(t) => any(t),
        }
    }
}
