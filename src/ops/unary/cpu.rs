//! Unary kernels on the CPU: one `match` per call picks a monomorphised
//! closure, which `map_strided` runs as a vectorisable (and, for large
//! inputs, parallel) loop.

use super::{FloatUnaryOp, UnaryKernel, UnaryOp};
use crate::device::Cpu;
use crate::device::cpu::{CpuStorage, map_strided};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::shape::Layout;

/// `-x`. Floats multiply by `-1`, which LLVM turns into a sign flip and
/// which maps `0.0` to `-0.0` (`0 - x` would give `+0.0`); integers
/// subtract from zero, which wraps.
#[inline(always)]
fn neg<E: Element>(x: E) -> E {
    if E::IS_FLOAT { x.mul(E::from_f64(-1.0)) } else { E::ZERO.sub(x) }
}

/// `|x|`: `0 - x` on non-positive inputs maps `-0.0` to `+0.0` and wraps
/// `i64::MIN` onto itself; NaN fails the comparison and passes through.
#[inline(always)]
fn abs<E: Element>(x: E) -> E {
    if x <= E::ZERO { E::ZERO.sub(x) } else { x }
}

/// `1 / (1 + e^-x)`, evaluated through `e^x` for negative `x` so that the
/// exponential never overflows.
#[inline(always)]
fn sigmoid<E: FloatElement>(x: E) -> E {
    if x >= E::ZERO {
        E::one() / (E::one() + (-x).exp())
    } else {
        let e = x.exp();
        e / (E::one() + e)
    }
}

/// The error function, from `libm` (Rust's standard library has none).
#[inline(always)]
fn erf<E: FloatElement>(x: E) -> E {
    match E::DTYPE {
        crate::element::DType::F64 => E::from_f64(libm::erf(Element::to_f64(x))),
        _ => E::from_f32(libm::erff(Element::to_f64(x) as f32)),
    }
}

impl UnaryKernel for Cpu {
    fn unary<E: Element>(op: UnaryOp<E>, x: &CpuStorage<E>, layout: &Layout) -> Result<CpuStorage<E>> {
        let (src, name) = (x.as_slice(), op.name());
        let out = match op {
            UnaryOp::Neg => map_strided(name, src, layout, neg::<E>),
            UnaryOp::Abs => map_strided(name, src, layout, abs::<E>),
            UnaryOp::Relu => map_strided(name, src, layout, |v: E| if v < E::ZERO { E::ZERO } else { v }),
            // `Element::max`/`min` let a NaN element (or bound) through, as torch.clamp does.
            UnaryOp::Clamp { min, max } => map_strided(name, src, layout, move |v: E| v.max(min).min(max)),
            UnaryOp::Square => map_strided(name, src, layout, |v: E| v.mul(v)),
        }?;
        Ok(CpuStorage::from_vec(out))
    }

    fn unary_float<E: FloatElement>(op: FloatUnaryOp<E>, x: &CpuStorage<E>, layout: &Layout) -> Result<CpuStorage<E>> {
        let (src, name) = (x.as_slice(), op.name());
        let out = match op {
            FloatUnaryOp::Exp => map_strided(name, src, layout, |v: E| v.exp()),
            FloatUnaryOp::Log => map_strided(name, src, layout, |v: E| v.ln()),
            FloatUnaryOp::Sqrt => map_strided(name, src, layout, |v: E| v.sqrt()),
            FloatUnaryOp::Tanh => map_strided(name, src, layout, |v: E| v.tanh()),
            FloatUnaryOp::Sigmoid => map_strided(name, src, layout, sigmoid::<E>),
            FloatUnaryOp::Powf(p) => map_strided(name, src, layout, move |v: E| v.powf(p)),
            FloatUnaryOp::Sin => map_strided(name, src, layout, |v: E| v.sin()),
            FloatUnaryOp::Cos => map_strided(name, src, layout, |v: E| v.cos()),
            FloatUnaryOp::Recip => map_strided(name, src, layout, |v: E| v.recip()),
            FloatUnaryOp::Erf => map_strided(name, src, layout, erf::<E>),
        }?;
        Ok(CpuStorage::from_vec(out))
    }
}
