//! Gradient clipping, as PyTorch's `torch.nn.utils.clip_grad_norm_` and
//! `clip_grad_value_`: applied to the [`Gradients`] of a model between
//! `backward` and the optimizer's step.

use super::no_gradient_reaches;
use crate::autograd::Gradients;
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::nn::Module;
use crate::tensor::Device;
use crate::tensor::Tensor;
use devtensor_macros::fallible;

/// Scales the gradients of `model`'s parameters in `grads` so that their
/// total `norm_type`-norm is at most `max_norm`, and returns the total norm
/// they had, as a rank-0 tensor on the model's device.
///
/// As in PyTorch, the total norm is that of all the gradients seen as one
/// vector (`f64::INFINITY` for the largest absolute value), and every
/// gradient is multiplied by `min(1, max_norm / (total + 1e-6))`: gradients
/// already inside the bound are left as they are. The norm stays on the
/// device, so clipping does not wait for the GPU; a non-finite norm makes
/// the gradients non-finite, as in PyTorch (check the returned norm to skip
/// such a step). Parameters without a gradient are skipped, and a tied
/// parameter (one tensor under two names) counts once, as in PyTorch.
///
/// Fails with [`Error::Argument`] when `max_norm` is negative or NaN or
/// `norm_type` is not positive (PyTorch also takes 0 and negative orders,
/// which no one clips with), when `grads` holds a gradient for none of the
/// model's parameters (they came from another model or another copy of
/// this one: clipping them would silently do nothing), and when a device
/// operation fails.
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::optim::{Optimizer, Sgd, SgdConfig, clip_grad_norm};
/// use devtensor::{Cpu, Tensor};
/// let mut model = Linear::<Cpu>::new(3, 1);
/// let mut opt = Sgd::new(&model, SgdConfig { lr: 0.1, ..Default::default() });
/// let x = Tensor::<Cpu>::full([4, 3], 100.0); // a huge gradient
/// let mut grads = model.forward(&x).sum().backward();
/// let norm = clip_grad_norm(&model, &mut grads, 1.0, 2.0);
/// assert!(norm.item() > 100.0);
/// let clipped: f32 = [grads.get(&model.weight).unwrap(), grads.get(model.bias.as_ref().unwrap()).unwrap()]
///     .iter()
///     .flat_map(|g| g.to_vec())
///     .map(|g| g * g)
///     .sum();
/// assert!((clipped.sqrt() - 1.0).abs() < 1e-4);
/// opt.step(&mut model, &grads);
/// ```
#[fallible(free)]
pub fn clip_grad_norm<D: Device, E: FloatElement, M: Module<D, E>>(
    model: &M,
    grads: &mut Gradients,
    max_norm: f64,
    norm_type: f64,
) -> Tensor<D, E> {
    const OP: &str = "clip_grad_norm";
    check_max_norm(OP, D::name, max_norm)?;
    if norm_type.is_nan() || norm_type <= 0.0 {
        return Err(Error::Argument {
            op: OP,
            device: D::name(),
            reason: format!("norm_type must be positive (2.0 for the Euclidean norm), got {norm_type}"),
        });
    }
    let with_grads = parameters_with_gradients(OP, model, grads)?;
    // Each gradient's share of the total, combined on the device: the sum of
    // |g|^p, or the largest |g| for the infinity norm.
    let mut total: Option<Tensor<D, E>> = None;
    for (_, grad) in &with_grads {
        if grad.elem_count() == 0 {
            continue;
        }
        let part = if norm_type == f64::INFINITY {
            grad.try_abs()?.try_max()?
        } else if norm_type == 2.0 {
            grad.try_square()?.try_sum()?
        } else {
            grad.try_abs()?.try_powf(E::from_f64(norm_type))?.try_sum()?
        };
        total = Some(match total {
            None => part,
            Some(t) if norm_type == f64::INFINITY => t.try_maximum(&part)?,
            Some(t) => t.try_add(&part)?,
        });
    }
    let Some(total) = total else {
        return Tensor::try_scalar(E::zero());
    };
    let norm = if norm_type == f64::INFINITY {
        total
    } else if norm_type == 2.0 {
        total.try_sqrt()?
    } else {
        total.try_powf(E::from_f64(1.0 / norm_type))?
    };
    let scale = norm
        .try_add_scalar(E::from_f64(1e-6))?
        .try_rdiv_scalar(E::from_f64(max_norm))?
        .try_clamp(E::neg_infinity(), E::one())?;
    for (param, grad) in with_grads {
        grads.insert(&param, grad.try_mul(&scale)?)?;
    }
    Ok(norm)
}

/// Clamps every gradient of `model`'s parameters in `grads` to
/// `[-clip_value, clip_value]`, as PyTorch's `clip_grad_value_`.
///
/// Fails with [`Error::Argument`] when `clip_value` is negative or NaN, and
/// when a device operation fails.
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::optim::clip_grad_value;
/// use devtensor::{Cpu, Tensor};
/// let model = Linear::<Cpu>::new(2, 1);
/// let mut grads = model.forward(&Tensor::<Cpu>::from_vec(vec![5.0, -0.25], [1, 2])).sum().backward();
/// clip_grad_value(&model, &mut grads, 1.0);
/// assert_eq!(grads.get(&model.weight).unwrap().to_vec(), vec![1.0, -0.25]);
/// assert_eq!(grads.get(model.bias.as_ref().unwrap()).unwrap().to_vec(), vec![1.0]);
/// ```
#[fallible(free)]
pub fn clip_grad_value<D: Device, E: FloatElement, M: Module<D, E>>(model: &M, grads: &mut Gradients, clip_value: f64) {
    if clip_value.is_nan() || clip_value < 0.0 {
        return Err(Error::Argument {
            op: "clip_grad_value",
            device: D::name(),
            reason: format!("clip_value must be a non-negative number, got {clip_value}"),
        });
    }
    let limit = E::from_f64(clip_value);
    for (param, grad) in parameters_with_gradients("clip_grad_value", model, grads)? {
        grads.insert(&param, grad.try_clamp(-limit, limit)?)?;
    }
    Ok(())
}

/// Checks a bound on a gradient norm.
pub(crate) fn check_max_norm(op: &'static str, device: impl FnOnce() -> String, max_norm: f64) -> Result<()> {
    if max_norm.is_nan() || max_norm < 0.0 {
        return Err(Error::Argument {
            op,
            device: device(),
            reason: format!("max_norm must be a non-negative number, got {max_norm}"),
        });
    }
    Ok(())
}

/// The parameters of `model` that have a gradient in `grads`, each with it
/// (a tied parameter once). Fails when none has one, as an optimizer's step
/// does ([`no_gradient_reaches`]).
pub(crate) fn parameters_with_gradients<D: Device, E: FloatElement, M: Module<D, E>>(
    op: &'static str,
    model: &M,
    grads: &Gradients,
) -> Result<Vec<(Tensor<D, E>, Tensor<D, E>)>> {
    let parameters = model.parameters();
    let count = parameters.len();
    let with_grads: Vec<_> = parameters
        .into_iter()
        .filter_map(|(_, p)| {
            let g = grads.get(&p)?.clone();
            Some((p, g))
        })
        .collect();
    if count > 0 && with_grads.is_empty() {
        return Err(no_gradient_reaches::<D, M>(op, count, grads));
    }
    Ok(with_grads)
}
