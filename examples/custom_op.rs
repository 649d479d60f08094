//! Your own operation, with its CPU function, its CUDA kernel and its
//! gradient, running like a built-in one: device-typed, tracked by autograd,
//! with a `try_` form that reports errors instead of panicking.
//!
//! The op is `softsign(x) = x / (1 + |x|)`: a smooth squashing function
//! (like `tanh`, but with polynomial tails) that devtensor does not ship.
//! Its CUDA kernel is the one line in `examples/kernels/softsign.cu`,
//! compiled by NVRTC the first time it runs on a GPU.
//!
//! ```sh
//! cargo run --example custom_op                       # on the CPU, and on a GPU when there is one
//! bash scripts/with-emu.sh cargo run --example custom_op   # on the two emulated GPUs
//! ```

use devtensor::ops::unary::{KernelSource, UnaryOp};
use devtensor::{Cpu, Cuda, Device, FloatElement, Result, Tensor};

/// `x / (1 + |x|)`. (Public for `tests/unary.rs`, which runs this op on
/// every device.)
#[derive(Clone, Copy, Debug)]
pub struct Softsign;

impl<F: FloatElement> UnaryOp<F> for Softsign {
    /// Names the op in errors and its kernels: `unary_softsign_f32`, `unary_softsign_f64`.
    const NAME: &'static str = "softsign";

    // SAFETY: the file defines `unary_softsign_f32` and `unary_softsign_f64`
    // with `DT_UNARY_FLOAT`, which takes no scalar parameter, as `params`
    // (not overridden) gives.
    const KERNELS: KernelSource = unsafe { KernelSource::cuda(include_str!("kernels/softsign.cu")) };

    fn apply(self, x: F) -> F {
        x / (F::one() + x.abs())
    }

    /// `d/dx x / (1 + |x|) = 1 / (1 + |x|)²`.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _y: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_div(&x.try_abs()?.try_add_scalar(F::one())?.try_square()?)
    }
}

/// A small fit on device `D`: `w` learns to make `softsign(w * x)` match
/// targets made with `w = 2`, by gradient descent through the custom op.
fn fit<D: Device>() -> Result<f32> {
    let x = Tensor::<D>::try_from_vec((0..64).map(|i| (i as f32 - 32.0) / 8.0).collect(), [64])?;
    let target = x.try_mul_scalar(2.0)?.try_apply_unary(Softsign)?;
    let mut w = Tensor::<D>::try_scalar(0.5)?.requires_grad();
    for _ in 0..200 {
        let loss = x.try_mul(&w)?.try_apply_unary(Softsign)?.try_sub(&target)?.try_square()?.try_mean()?;
        let grads = loss.try_backward()?;
        let step = grads.get(&w).expect("w is a leaf of the loss").try_mul_scalar(5.0)?;
        w = w.detach().try_sub(&step)?.requires_grad();
    }
    w.try_item()
}

fn main() -> Result<()> {
    let x = Tensor::<Cpu>::from_vec(vec![-3.0, 0.0, 1.0], [3]);
    println!("softsign({:?}) = {:?}", x.to_vec(), x.apply_unary(Softsign).to_vec());

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
