//! Standardisation per group, the core of batch norm and layer norm, as one
//! operation with its own gradient, the layers' affine steps included:
//! two passes over memory forward and two backward, where the same
//! computation composed of primitive ops took about a dozen each way.

use super::{AffineAxis, FloatFns};
use crate::autograd::{self, rule};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use std::cell::RefCell;

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// Standardises each group of the `[outer, groups, inner]` view, with an
    /// optional affine step, returning the result and each group's mean
    /// and variance: the shell of the core's `standardize`.
    pub(crate) fn try_standardize(
        &self,
        op: &'static str,
        dims: [usize; 3],
        eps: f64,
        affine: Option<(&Self, &Self, AffineAxis)>,
    ) -> Result<[Self; 3]> {
        let affine = affine.map(|(w, b, axis)| (w.core(), b.core(), axis));
        core_call!(D, FloatFns<E>.standardize(self.core(), op, dims, eps, affine))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    /// `(x − mean) / sqrt(var + eps)` per group of this tensor viewed as
    /// `[outer, groups, inner]` (`dims`, whose product is the element
    /// count), the mean and biased variance over each group's
    /// `outer · inner` elements, then with `affine` (`(weight, bias, axis)`,
    /// each with `groups` elements, or `inner` with `outer` 1, by `axis`)
    /// times the weight plus the bias. Returns the result in this tensor's
    /// shape, differentiable in this tensor and the affine pair, and the
    /// groups' means and variances (`[groups]`, not tracked: batch norm's
    /// running statistics).
    pub(super) fn core_standardize(
        &self,
        op: &'static str,
        dims: [usize; 3],
        eps: f64,
        affine: Option<(&Self, &Self, AffineAxis)>,
    ) -> Result<[Self; 3]> {
        let [outer, groups, inner] = dims;
        let error = |reason: String| {
            let mut shapes = vec![self.shape().clone()];
            shapes.extend(affine.iter().flat_map(|(w, b, _)| [w.shape().clone(), b.shape().clone()]));
            Error::Shape { op, device: D::name(), shapes, reason }
        };
        if outer.checked_mul(groups).and_then(|n| n.checked_mul(inner)) != Some(self.elem_count()) {
            return Err(error(format!("cannot be viewed as [{outer}, {groups}, {inner}] for standardisation")));
        }
        if let Some((w, b, axis)) = affine {
            let (len, outer_ok) = match axis {
                AffineAxis::Group => (groups, true),
                AffineAxis::Inner => (inner, outer == 1),
            };
            if w.elem_count() != len || b.elem_count() != len || !outer_ok {
                return Err(error(format!("the affine weight and bias must have {len} elements ({axis:?} axis)")));
            }
        }
        let affine = match affine {
            Some((w, b, axis)) => Some((w.try_contiguous()?, b.try_contiguous()?, axis)),
            None => None,
        };
        // The backward pass reads the input, densely, and the statistics.
        let x = self.try_contiguous()?.detach();
        let stats: RefCell<Option<[Self; 2]>> = RefCell::new(None);
        let forward = || {
            let storages = affine.as_ref().map(|(w, b, axis)| (w.storage(), b.storage(), *axis));
            let [y, mean, var] = D::standardize((x.storage(), x.layout()), dims, eps, storages)?;
            let group_shape = Shape::from([groups]);
            *stats.borrow_mut() =
                Some([Tensor::from_storage(mean, group_shape.clone()), Tensor::from_storage(var, group_shape)]);
            Ok(Tensor::from_storage(y, self.shape().clone()))
        };
        let mut inputs = vec![self.node()];
        inputs.extend(affine.iter().flat_map(|(w, b, _)| [w.node(), b.node()]));
        let y = autograd::track(op, &inputs, forward, |_| {
            let [mean, var] = stats.borrow().clone().expect("the forward pass ran");
            let weight = affine.as_ref().map(|(w, _, axis)| (w.detach(), *axis));
            let x = x.clone();
            // The operands with their nodes, for a recorded backward.
            let operands = (self.clone(), affine.clone());
            rule(move |g: &Tensor<D, E>, _| {
                if autograd::is_grad_enabled() {
                    // Recorded (`create_graph`): the fused kernel has no
                    // derivative, so the gradients come from the same
                    // standardisation composed of recorded ops.
                    let (x, affine) = &operands;
                    let mut read = vec![x];
                    read.extend(affine.iter().flat_map(|(w, b, _)| [w, b]));
                    let affine = affine.as_ref().map(|(w, b, axis)| (w, b, *axis));
                    return autograd::composed_gradients(&read, g, || composed(x, dims, eps, affine));
                }
                let weight_storage = weight.as_ref().map(|(w, axis)| (w.storage(), *axis));
                let [dx, sum_g, sum_gx] = D::standardize_backward(
                    x.storage(),
                    [mean.storage(), var.storage()],
                    weight_storage,
                    (g.storage(), g.layout()),
                    dims,
                    eps,
                )?;
                let mut grads = vec![Some(Tensor::from_storage(dx, x.shape().clone()))];
                if let Some((weight, _)) = &weight {
                    grads.push(Some(Tensor::from_storage(sum_gx, weight.shape().clone())));
                    grads.push(Some(Tensor::from_storage(sum_g, weight.shape().clone())));
                }
                Ok(grads)
            })
        })?;
        let [mean, var] = stats.into_inner().expect("the forward pass ran");
        Ok([y, mean, var])
    }
}

/// [`core_standardize`](Tensor::core_standardize)'s result composed of
/// recorded ops, for its second derivative.
fn composed<D: CoreDevice, E: FloatElement>(
    x: &Tensor<D, E>,
    [outer, groups, inner]: [usize; 3],
    eps: f64,
    affine: Option<(&Tensor<D, E>, &Tensor<D, E>, AffineAxis)>,
) -> Result<Tensor<D, E>> {
    let v = x.try_reshape([outer, groups, inner])?;
    let centred = v.try_sub(&v.try_mean_keepdim([0isize, 2])?)?;
    let var = centred.try_square()?.try_mean_keepdim([0isize, 2])?;
    let mut y = centred.try_mul(&var.try_add_scalar(E::from_f64(eps))?.try_rsqrt()?)?;
    if let Some((w, b, axis)) = affine {
        let shape = match axis {
            AffineAxis::Group => [1, groups, 1],
            AffineAxis::Inner => [1, 1, inner],
        };
        y = y.try_mul(&w.try_reshape(shape)?)?.try_add(&b.try_reshape(shape)?)?;
    }
    y.try_reshape(x.shape().clone())
}
