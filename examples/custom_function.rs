//! Operations with a backward pass of your own (`autograd::Function`,
//! PyTorch's `torch.autograd.Function`), where `examples/custom_op.rs`
//! declares element-wise ops whose gradient follows from their formula:
//!
//! - `QuantizeStraightThrough`: rounds to a grid of step `1/scale` in the
//!   forward pass and passes the gradient straight through in the backward
//!   pass, the estimator of quantisation-aware training, with the rounding
//!   error as a second, non-differentiable output;
//! - `ReverseGradient`: the identity forward, the gradient times `-lambda`
//!   backward, the gradient reversal layer of domain-adversarial training
//!   (Ganin & Lempitsky, 2015).
//!
//! A linear model whose weights are quantised in the forward pass is fitted
//! through the first; the second flips a gradient's sign.
//!
//! ```sh
//! cargo run --example custom_function   # on a GPU when there is one
//! ```

use devtensor::autograd::{Context, Function, apply};
use devtensor::{Cpu, Device, Result, Tensor};

/// `round(x · scale) / scale`, with the identity as its gradient.
pub struct QuantizeStraightThrough {
    /// Grid points per unit.
    pub scale: f32,
}

impl<D: Device> Function<D, f32> for QuantizeStraightThrough {
    fn name(&self) -> &'static str {
        "QuantizeStraightThrough"
    }

    fn forward(&self, ctx: &mut Context<D, f32>, inputs: &[&Tensor<D>]) -> Result<Vec<Tensor<D>>> {
        let quantized = inputs[0].try_mul_scalar(self.scale)?.try_round()?.try_div_scalar(self.scale)?;
        let error = inputs[0].try_sub(&quantized)?;
        ctx.mark_non_differentiable(1);
        Ok(vec![quantized, error])
    }

    fn backward(&self, _: &Context<D, f32>, grads: &[Tensor<D>]) -> Result<Vec<Option<Tensor<D>>>> {
        Ok(vec![Some(grads[0].clone())])
    }
}

/// The identity, whose gradient is reversed and scaled by `lambda`.
pub struct ReverseGradient {
    /// How strongly the reversed gradient pushes.
    pub lambda: f32,
}

impl<D: Device> Function<D, f32> for ReverseGradient {
    fn name(&self) -> &'static str {
        "ReverseGradient"
    }

    fn forward(&self, _: &mut Context<D, f32>, inputs: &[&Tensor<D>]) -> Result<Vec<Tensor<D>>> {
        Ok(vec![inputs[0].clone()])
    }

    fn backward(&self, _: &Context<D, f32>, grads: &[Tensor<D>]) -> Result<Vec<Option<Tensor<D>>>> {
        Ok(vec![Some(grads[0].try_mul_scalar(-self.lambda)?)])
    }

    /// Its backward is one recorded op on the incoming gradient.
    fn twice_differentiable(&self) -> bool {
        true
    }
}

/// Fits `y = x · w` with `w` quantised to quarters in the forward pass, by
/// gradient descent through the straight-through estimator, from targets
/// made with `w = [0.75, -1.5]`; returns the quantised weights.
pub fn fit_quantized<D: Device>() -> Result<Vec<f32>> {
    let x = Tensor::<Cpu>::from_vec((0..16).map(|i| (i as f32 * 0.37).sin()).collect(), [8, 2]).to::<D>();
    let target = x.try_matmul(&Tensor::<Cpu>::from_vec(vec![0.75, -1.5], [2, 1]).to::<D>())?;
    let mut w = Tensor::<D>::try_zeros([2, 1])?.requires_grad();
    for _ in 0..300 {
        let quantized = apply(QuantizeStraightThrough { scale: 4.0 }, &[&w]).remove(0);
        let loss = x.try_matmul(&quantized)?.try_sub(&target)?.try_square()?.try_mean()?;
        let step = loss.try_backward()?.get(&w).expect("w is a leaf of the loss").try_mul_scalar(0.5)?;
        w = w.detach().try_sub(&step)?.requires_grad();
    }
    Ok(apply(QuantizeStraightThrough { scale: 4.0 }, &[&w])[0].to_vec())
}

/// The gradient of `sum(3 · reverse(x))` with `lambda = 0.5`: `-1.5` each.
pub fn reversed_gradient<D: Device>() -> Result<Vec<f32>> {
    let x = Tensor::<D>::try_ones([3])?.requires_grad();
    let y = apply(ReverseGradient { lambda: 0.5 }, &[&x]).remove(0);
    let grads = y.try_mul_scalar(3.0)?.try_sum()?.try_backward()?;
    Ok(grads.get(&x).expect("x is a leaf").to_vec())
}

fn run<D: Device>() -> Result<()> {
    let w = fit_quantized::<D>()?;
    println!("{}: quantised weights after the fit {w:?} (the targets were made with [0.75, -1.5])", D::name());
    assert_eq!(w, [0.75, -1.5], "the straight-through fit did not find the weights");
    let g = reversed_gradient::<D>()?;
    println!("{}: gradient through the reversal layer {g:?}", D::name());
    assert_eq!(g, [-1.5; 3]);
    Ok(())
}

fn main() -> Result<()> {
    devtensor::on_best_device!(D => run::<D>())
}
