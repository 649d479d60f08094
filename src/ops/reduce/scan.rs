//! Running folds along an axis: `cumsum` and `cumprod`, whose kernels are
//! the reduce family's `scan` of [`Sum`] and [`Product`].

use super::{Fns, Product, ReduceOp, Sum, grad};
use crate::autograd::{self, as_float, float_rule};
use crate::element::Element;
use crate::error::{Result, resolve_axis_or_scalar};
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device, E: Element> Tensor<D, E> {
    /// The running sums along `axis`, like `torch.cumsum(x, dim)`: element
    /// `k` is the sum of elements `0..=k` of its line. Integer and `u8`
    /// tensors sum into `i64`, as in PyTorch (and as [`sum`](Self::sum)
    /// does); integers wrap. Each line is summed in order, so the CPU and
    /// CUDA results agree bit for bit. Fails when `axis` is out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 3, 4, 5, 6], [2, 3]);
    /// assert_eq!(x.cumsum(1).to_vec2(), vec![vec![1, 3, 6], vec![4, 9, 15]]);
    /// assert_eq!(x.cumsum(0).to_vec2(), vec![vec![1, 2, 3], vec![5, 7, 9]]);
    /// let bytes = Tensor::<Cpu, u8>::from_vec(vec![200, 100], [2]);
    /// assert_eq!(bytes.cumsum(0).to_vec(), vec![200i64, 300]);
    /// ```
    #[fallible]
    pub fn cumsum(&self, axis: isize) -> Tensor<D, E::Sum> {
        core_call!(D, Fns<E>.cumsum(self.core(), axis))
    }

    /// The running products along `axis`, like `torch.cumprod(x, dim)`:
    /// element `k` is the product of elements `0..=k` of its line. Integer
    /// and `u8` tensors multiply in `i64`, as in PyTorch, and wrap. The
    /// gradient is exact where elements are 0 (no division by them), and
    /// can be differentiated again. Fails when `axis` is out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![2.0, 0.0, 3.0], [3]).requires_grad();
    /// let y = x.cumprod(0);
    /// assert_eq!(y.to_vec(), vec![2.0, 0.0, 0.0]);
    /// // The gradient of x0 + x0 x1 + x0 x1 x2 at (2, 0, 3).
    /// assert_eq!(y.sum().backward().get(&x).unwrap().to_vec(), vec![1.0, 8.0, 0.0]);
    /// ```
    #[fallible]
    pub fn cumprod(&self, axis: isize) -> Tensor<D, E::Sum> {
        core_call!(D, Fns<E>.cumprod(self.core(), axis))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// The core of [`cumsum`](Self::cumsum).
    pub(super) fn core_cumsum(&self, axis: isize) -> Result<Tensor<D, E::Sum>> {
        let axis = resolve_axis_or_scalar("cumsum", D::name, self.shape(), axis)?;
        autograd::track(
            "cumsum",
            &[self.node()],
            || self.as_sum_input(|x| x.running(Sum, axis, false)),
            |_| float_rule!(E, F => grad::cumsum::<D, F>(axis)),
        )
    }

    /// The core of [`cumprod`](Self::cumprod).
    pub(super) fn core_cumprod(&self, axis: isize) -> Result<Tensor<D, E::Sum>> {
        let axis = resolve_axis_or_scalar("cumprod", D::name, self.shape(), axis)?;
        autograd::track(
            "cumprod",
            &[self.node()],
            || self.as_sum_input(|x| x.running(Product, axis, false)),
            |_| float_rule!(E, F => grad::cumprod::<D, F>(as_float(self), axis)),
        )
    }

    /// The running fold of `op` along `axis` (a rank-0 tensor's one element
    /// when `None`), from the end of each line when `reverse`; untracked.
    pub(super) fn running(&self, op: impl ReduceOp, axis: Option<usize>, reverse: bool) -> Result<Self> {
        match axis {
            Some(axis) => {
                let storage = D::scan(op, self.storage(), self.layout(), axis, reverse)?;
                Ok(Tensor::from_storage(storage, self.shape().clone()))
            }
            None => self.try_reshape([1])?.running(op, Some(0), reverse)?.try_reshape(()),
        }
    }
}
