//! Your own operations, each with its CPU function, its CUDA kernel and
//! (where differentiable) its gradient, running like built-in ones:
//! device-typed, tracked by autograd, with a `try_` form that reports
//! errors instead of panicking.
//!
//! - `squareplus(x) = (x + sqrt(x² + 4)) / 2`, a function of one tensor: a
//!   smooth ReLU without exponentials (Barron, 2021), which PyTorch does
//!   not have;
//! - `hypot(a, b) = sqrt(a² + b²)`, a function of two tensors that
//!   broadcast, like `torch.hypot`;
//! - `is_close(a, b)`, a comparison giving a mask, like `torch.isclose` with
//!   its default tolerances.
//!
//! Each CUDA kernel is one line in `examples/kernels/`, compiled by NVRTC
//! the first time the op runs on a GPU.
//!
//! ```sh
//! cargo run --example custom_op                       # on the CPU, and on a GPU when there is one
//! bash scripts/with-emu.sh cargo run --example custom_op   # on the two emulated GPUs
//! ```

use devtensor::ops::KernelSource;
use devtensor::ops::binary::{BinaryOp, Grads, Needs};
use devtensor::ops::compare::CompareOp;
use devtensor::ops::unary::UnaryOp;
use devtensor::{Cpu, Cuda, Device, FloatElement, Result, Tensor};

/// `(x + sqrt(x² + 4)) / 2`. (The ops are public for `tests/ops/`, which
/// runs them on every device.)
#[derive(Clone, Copy, Debug)]
pub struct Squareplus;

impl<F: FloatElement> UnaryOp<F> for Squareplus {
    /// Names the op in errors and its kernels: `unary_squareplus_f32`,
    /// `unary_squareplus_f64`. A user's op may not reuse a built-in op's
    /// name (the emulated GPU links all kernels into one library).
    const NAME: &'static str = "squareplus";

    // SAFETY: the file defines `unary_squareplus_f32` and
    // `unary_squareplus_f64` with `DT_UNARY_FLOAT`, which takes no scalar
    // parameter, as `params` (not overridden) gives.
    const KERNELS: KernelSource = unsafe { KernelSource::cuda(include_str!("kernels/squareplus.cu")) };

    fn apply(self, x: F) -> F {
        (x + (x * x + F::from_f64(4.0)).sqrt()) / F::from_f64(2.0)
    }

    /// `d/dx = (1 + x / sqrt(x² + 4)) / 2`.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _y: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        let root = x.try_square()?.try_add_scalar(F::from_f64(4.0))?.try_sqrt()?;
        grad.try_mul(&x.try_div(&root)?.try_add_scalar(F::one())?.try_mul_scalar(F::from_f64(0.5))?)
    }
}

/// `sqrt(a² + b²)`.
#[derive(Clone, Copy, Debug)]
pub struct Hypot;

impl<F: FloatElement> BinaryOp<F> for Hypot {
    /// Names the op in errors and its kernels: `binary_hypot_f32`, `binary_hypot_rows_f32`, ...
    const NAME: &'static str = "hypot";

    // SAFETY: the file defines the broadcast, rows and scalar kernels of
    // `hypot` for f32 and f64 with `DT_BINARY_FLOAT`.
    const KERNELS: KernelSource = unsafe { KernelSource::cuda(include_str!("kernels/hypot.cu")) };

    fn apply(self, a: F, b: F) -> F {
        a.hypot(b)
    }

    /// `d/da = a / hypot(a, b)`, `d/db = b / hypot(a, b)`; devtensor sums
    /// each back over the axes it was broadcast along.
    fn backward<D: Device>(self, a: &Tensor<D, F>, b: &Tensor<D, F>, grad: &Tensor<D, F>, needs: Needs) -> Grads<D, F> {
        let scale = grad.try_div(&a.try_apply_binary(Hypot, b)?)?;
        needs.grads(|| scale.try_mul(a), || scale.try_mul(b))
    }
}

/// `|a - b| <= 1e-8 + 1e-5 * |b|`: PyTorch's `isclose` with its default
/// tolerances. NaN is close to nothing, and an infinity only to itself.
#[derive(Clone, Copy, Debug)]
pub struct IsClose;

impl<F: FloatElement> CompareOp<F> for IsClose {
    /// Names the op in errors and its kernels: `compare_is_close_f32`, `compare_is_close_scalar_f32`, ...
    const NAME: &'static str = "is_close";

    // SAFETY: the file defines the tensor and scalar kernels of `is_close`
    // for f32 and f64 with `DT_COMPARE_FLOAT`.
    const KERNELS: KernelSource = unsafe { KernelSource::cuda(include_str!("kernels/is_close.cu")) };

    fn apply(self, a: F, b: F) -> bool {
        a == b || (b.is_finite() && (a - b).abs() <= F::from_f64(1e-8) + F::from_f64(1e-5) * b.abs())
    }
}

/// A small fit on device `D`: `w` learns to make `squareplus(w * x)` match
/// targets made with `w = 2`, by gradient descent through the custom op.
fn fit<D: Device>() -> Result<f32> {
    let x = Tensor::<D>::try_from_vec((0..64).map(|i| (i as f32 - 32.0) / 8.0).collect(), [64])?;
    let target = x.try_mul_scalar(2.0)?.try_apply_unary(Squareplus)?;
    let mut w = Tensor::<D>::try_scalar(0.5)?.requires_grad();
    for _ in 0..200 {
        let loss = x.try_mul(&w)?.try_apply_unary(Squareplus)?.try_sub(&target)?.try_square()?.try_mean()?;
        let grads = loss.try_backward()?;
        let step = grads.get(&w).expect("w is a leaf of the loss").try_mul_scalar(0.2)?;
        w = w.detach().try_sub(&step)?.requires_grad();
    }
    w.try_item()
}

fn main() -> Result<()> {
    let x = Tensor::<Cpu>::from_vec(vec![-3.0, 0.0, 1.0], [3]);
    println!("squareplus({:?}) = {:?}", x.to_vec(), x.apply_unary(Squareplus).to_vec());
    let four = Tensor::<Cpu>::from_vec(vec![4.0], [1]); // broadcast
    println!("hypot({:?}, 4) = {:?}", x.to_vec(), x.apply_binary(Hypot, &four).to_vec());
    let near = x.try_mul_scalar(1.0 + 1e-6)?;
    println!("is_close({:?}, x * (1 + 1e-6)) = {:?}", x.to_vec(), x.apply_compare(IsClose, &near).to_vec());

    let w = fit::<Cpu>()?;
    println!("Cpu: w = {w:.4} (the targets were made with 2)");
    assert!((w - 2.0).abs() < 1e-2, "the fit through the custom op did not converge: w = {w}");

    for (name, w) in [("Cuda<0>", gpu_fit::<0>()), ("Cuda<1>", gpu_fit::<1>())] {
        match w {
            Some(w) => {
                let w = w?;
                println!("{name}: w = {w:.4}");
                assert!((w - 2.0).abs() < 1e-2, "{name}: the fit did not converge: w = {w}");
            }
            None => println!("{name}: no such GPU here, skipped"),
        }
    }
    Ok(())
}

/// [`fit`] on `Cuda<N>`, or `None` when there is no such GPU.
fn gpu_fit<const N: usize>() -> Option<Result<f32>> {
    Cuda::<N>::is_available().then(fit::<Cuda<N>>)
}
