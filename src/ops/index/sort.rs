//! `sort`, `argsort` and `topk`: a kernel finds each row's order
//! ([`IndexKernel::argsort_rows`](super::IndexKernel::argsort_rows)), and
//! the values are a `gather` by it, so their gradient is `gather`'s.

use super::Fns;
use crate::element::Element;
use crate::error::{Error, Result, resolve_axis};
use crate::layout::Shape;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device, E: Element> Tensor<D, E> {
    /// This tensor's values along `axis` in ascending order (descending
    /// with `descending`), and the positions they came from: PyTorch's
    /// `torch.sort(x, dim, descending, stable=True)`. Equal values keep
    /// their order (the sort is stable); NaN sorts after every number, and
    /// first when descending, as in PyTorch. The values' gradient flows
    /// back to the positions they came from. Fails on an out-of-range axis.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![3.0, 1.0, 2.0, 1.0], [4]);
    /// let (values, indices) = x.sort(0, false);
    /// assert_eq!(values.to_vec(), vec![1.0, 1.0, 2.0, 3.0]);
    /// assert_eq!(indices.to_vec(), vec![1, 3, 2, 0]);
    /// let (values, _) = x.sort(-1, true);
    /// assert_eq!(values.to_vec(), vec![3.0, 2.0, 1.0, 1.0]);
    /// ```
    #[fallible]
    pub fn sort(&self, axis: isize, descending: bool) -> (Self, Tensor<D, i64>) {
        core_call!(D, Fns<E>.sort(self.core(), axis, descending))
    }

    /// The positions that sort this tensor along `axis` (see
    /// [`sort`](Self::sort)): PyTorch's `torch.argsort(x, dim, descending,
    /// stable=True)`. Fails on an out-of-range axis.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![5, 9, 1, 4, 4, 0], [2, 3]);
    /// assert_eq!(x.argsort(1, false).to_vec2(), vec![vec![2, 0, 1], vec![2, 0, 1]]);
    /// assert_eq!(x.argsort(0, true).to_vec2(), vec![vec![0, 0, 0], vec![1, 1, 1]]);
    /// ```
    #[fallible]
    pub fn argsort(&self, axis: isize, descending: bool) -> Tensor<D, i64> {
        core_call!(D, Fns<E>.argsort(self.core(), axis, descending))
    }

    /// The `k` largest values along `axis` (the smallest, without
    /// `largest`), in order, and their positions: PyTorch's
    /// `torch.topk(x, k, dim, largest, sorted=True)`. Ties keep the earlier
    /// position first; NaN counts as the largest value. The values'
    /// gradient flows back to their positions. Fails when `k` is larger
    /// than the axis, and on an out-of-range axis.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let logits = Tensor::<Cpu>::from_vec(vec![0.1, 2.0, -1.0, 0.7, 2.0], [5]);
    /// let (values, indices) = logits.topk(3, -1, true);
    /// assert_eq!(values.to_vec(), vec![2.0, 2.0, 0.7]);
    /// assert_eq!(indices.to_vec(), vec![1, 4, 3]);
    /// let err = logits.try_topk(6, -1, true).unwrap_err();
    /// assert_eq!(err.to_string(), "topk on Cpu: shape [5]: k = 6 is larger than axis 0 (size 5)");
    /// ```
    #[fallible]
    pub fn topk(&self, k: usize, axis: isize, largest: bool) -> (Self, Tensor<D, i64>) {
        core_call!(D, Fns<E>.topk(self.core(), k, axis, largest))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    pub(super) fn core_sort(&self, axis: isize, descending: bool) -> Result<(Self, Tensor<D, i64>)> {
        let (ax, len) = self.sort_axis("sort", axis)?;
        let indices = self.first_in_order(ax, descending, len)?;
        Ok((self.gathered(ax, &indices)?, indices))
    }

    pub(super) fn core_argsort(&self, axis: isize, descending: bool) -> Result<Tensor<D, i64>> {
        let (ax, len) = self.sort_axis("argsort", axis)?;
        self.first_in_order(ax, descending, len)
    }

    pub(super) fn core_topk(&self, k: usize, axis: isize, largest: bool) -> Result<(Self, Tensor<D, i64>)> {
        const OP: &str = "topk";
        let (ax, n) = self.sort_axis(OP, axis)?;
        if k > n {
            return Err(Error::Shape {
                op: OP,
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: format!("k = {k} is larger than axis {ax} (size {n})"),
            });
        }
        let indices = self.first_in_order(ax, largest, k)?;
        Ok((self.gathered(ax, &indices)?, indices))
    }

    /// The values at `indices` along `ax`; a scalar is its own value.
    fn gathered(&self, ax: usize, indices: &Tensor<D, i64>) -> Result<Self> {
        if self.rank() == 0 { Ok(self.clone()) } else { self.try_gather(ax as isize, indices) }
    }

    /// `axis` resolved, and its length; a scalar takes 0 and -1, as in
    /// PyTorch, and counts as one element.
    fn sort_axis(&self, op: &'static str, axis: isize) -> Result<(usize, usize)> {
        let one = Shape::from(vec![1]);
        let ax = resolve_axis(op, D::name, if self.rank() == 0 { &one } else { self.shape() }, axis)?;
        Ok((ax, self.dims().get(ax).copied().unwrap_or(1)))
    }

    /// The first `k` positions of the stable order along `ax`, in a
    /// contiguous tensor of this shape with `k` on `ax`.
    fn first_in_order(&self, ax: usize, descending: bool, k: usize) -> Result<Tensor<D, i64>> {
        if self.rank() == 0 {
            // A scalar is its own order, as in PyTorch.
            return Tensor::try_zeros(Shape::from(Vec::new()));
        }
        let mut dims = self.dims().to_vec();
        dims[ax] = k;
        if self.elem_count() == 0 || k == 0 {
            return Tensor::try_zeros(dims);
        }
        // The axis last and dense: the kernel sorts rows.
        let rows = self.detach().try_transpose(ax as isize, -1)?.try_contiguous()?;
        dims.swap(ax, self.rank() - 1);
        let storage = D::argsort_rows(rows.storage(), rows.layout(), descending, k)?;
        Tensor::from_storage(storage, Shape::from(dims)).try_transpose(ax as isize, -1)?.try_contiguous()
    }
}
