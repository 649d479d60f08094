//! Products: `prod` over every element or along one axis, with the
//! reduce family's kernels of [`Product`].

use super::{Fns, Product, grad, reduced_shape};
use crate::autograd::{self, as_float, float_rule};
use crate::element::Element;
use crate::error::{Result, check_elem_count, resolve_axis_or_scalar};
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device, E: Element> Tensor<D, E> {
    /// The product of all elements, as a rank-0 tensor (1 for an empty
    /// tensor), like `torch.prod(x)`. Integer and `u8` tensors multiply in
    /// `i64`, as PyTorch's do ([`E::Sum`](Element::Sum)), wrapping at
    /// `2^64`. The gradient is the product of the other elements, exact
    /// where elements are 0 (not `prod / x`). Fails only if the device fails.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.prod().item(), 24.0);
    /// let bytes = Tensor::<Cpu, u8>::from_vec(vec![200, 100], [2]);
    /// assert_eq!(bytes.prod().item(), 20_000i64);
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 2.0, 3.0], [3]).requires_grad();
    /// assert_eq!(x.prod().backward().get(&x).unwrap().to_vec(), vec![6.0, 0.0, 0.0]);
    /// ```
    #[fallible]
    pub fn prod(&self) -> Tensor<D, E::Sum> {
        core_call!(D, Fns<E>.prod(self.core(), "prod", None))
    }

    /// The products along `axis`, which is removed, like
    /// `torch.prod(x, dim)` (PyTorch's `prod` takes one axis); 1 over an
    /// axis of size 0. Fails when `axis` is out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 3, 4, 5, 6], [2, 3]);
    /// assert_eq!(x.prod_axis(1).to_vec(), vec![6, 120]);
    /// assert_eq!(x.prod_axis(-2).to_vec(), vec![4, 10, 18]);
    /// ```
    #[fallible]
    pub fn prod_axis(&self, axis: isize) -> Tensor<D, E::Sum> {
        core_call!(D, Fns<E>.prod(self.core(), "prod_axis", Some((axis, false))))
    }

    /// Like [`prod_axis`](Self::prod_axis), keeping `axis` as size 1
    /// (`keepdim=True`).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.prod_keepdim(1).to_vec2(), vec![vec![2.0], vec![12.0]]);
    /// ```
    #[fallible]
    pub fn prod_keepdim(&self, axis: isize) -> Tensor<D, E::Sum> {
        core_call!(D, Fns<E>.prod(self.core(), "prod_keepdim", Some((axis, true))))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// The core of the `prod` family: every element (`axis` `None`), or
    /// along an axis, removed or kept.
    pub(super) fn core_prod(&self, name: &'static str, axis: Option<(isize, bool)>) -> Result<Tensor<D, E::Sum>> {
        match axis {
            None => self.try_reshape([self.elem_count()])?.prod_along(name, 0, false),
            Some((axis, keepdim)) => self.prod_along(name, axis, keepdim),
        }
    }

    fn prod_along(&self, name: &'static str, axis: isize, keepdim: bool) -> Result<Tensor<D, E::Sum>> {
        let Some(axis) = resolve_axis_or_scalar(name, D::name, self.shape(), axis)? else {
            // A rank-0 tensor is one element: the product is itself.
            return self.try_reshape([1])?.prod_along(name, 0, false)?.try_reshape(());
        };
        let shape = reduced_shape(self.shape(), axis, keepdim);
        // Multiplying away an empty axis leaves the others, whose product may not fit.
        check_elem_count(name, D::name, &[self.shape(), &shape])?;
        autograd::track(
            name,
            &[self.node()],
            || {
                self.as_sum_input(|x| {
                    let storage = D::reduce(Product, x.storage(), x.layout(), axis)?;
                    Ok(Tensor::from_storage(storage, shape.clone()))
                })
            },
            |_| float_rule!(E, F => grad::prod::<D, F>(as_float(self), axis, keepdim)),
        )
    }
}
