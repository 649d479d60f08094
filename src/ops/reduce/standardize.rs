//! Standardisation per group, the core of batch norm and layer norm, as one
//! operation with its own gradient: two passes over memory forward and two
//! backward, where the same computation composed of primitive ops took
//! about a dozen each way.

use crate::autograd::{self, rule};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::tensor::{Device, Tensor};
use std::cell::RefCell;

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// `(x − mean) / sqrt(var + eps)` per group of this tensor viewed as
    /// `[outer, groups, inner]` (`dims`, whose product is the element
    /// count), the mean and biased variance over each group's
    /// `outer · inner` elements. Returns the result in this tensor's shape,
    /// differentiable, and the groups' means and variances (`[groups]`, not
    /// tracked: batch norm's running statistics).
    pub(crate) fn try_standardize(&self, op: &'static str, dims: [usize; 3], eps: f64) -> Result<[Self; 3]> {
        let [outer, groups, inner] = dims;
        if outer.checked_mul(groups).and_then(|n| n.checked_mul(inner)) != Some(self.elem_count()) {
            return Err(Error::Shape {
                op,
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: format!("cannot be viewed as [{outer}, {groups}, {inner}] for standardisation"),
            });
        }
        // The forward pass leaves the statistics here: the means for the
        // caller, the variances for the gradient too.
        let stats: RefCell<Option<[Self; 2]>> = RefCell::new(None);
        let forward = || {
            let [xhat, mean, var] = D::standardize((self.storage(), self.layout()), dims, eps)?;
            let group_shape = Shape::from([groups]);
            *stats.borrow_mut() =
                Some([Tensor::from_storage(mean, group_shape.clone()), Tensor::from_storage(var, group_shape)]);
            Ok(Tensor::from_storage(xhat, self.shape().clone()))
        };
        let xhat = autograd::track(op, &[self.node()], forward, |xhat| {
            let xhat = xhat.detach();
            let var = stats.borrow().as_ref().map(|[_, var]| var.clone()).expect("the forward pass ran");
            rule(move |g: &Tensor<D, E>, _| {
                let storage =
                    D::standardize_backward(xhat.storage(), var.storage(), (g.storage(), g.layout()), dims, eps)?;
                Ok(vec![Some(Tensor::from_storage(storage, xhat.shape().clone()))])
            })
        })?;
        let [mean, var] = stats.into_inner().expect("the forward pass ran");
        Ok([xhat, mean, var])
    }
}
