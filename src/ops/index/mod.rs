//! Indexing and joining: PyTorch's subscript (`i`, `index_put`),
//! `index_select`, `gather`, their backward passes `index_add` and
//! `scatter_add`, the other scatters (`scatter`, `scatter_reduce`), `cat` /
//! `stack`, the copies built from them (`repeat`, `pad`), the orders that
//! index them (`sort`, `argsort`, `topk`), and the ops whose results depend
//! on the values (`masked_select`, `nonzero`, `unique`, ...).
//!
//! ## PyTorch's subscript
//!
//! [`Tensor::i`] takes what `x[...]` takes, and [`Tensor::index_put`] (or
//! `index_put_`) what `x[...] = v` and `index_put_` take:
//!
//! | PyTorch            | devtensor                                 |
//! |--------------------|-------------------------------------------|
//! | `x[2]`, `x[-1]`    | `x.i(2)`, `x.i(-1)`                       |
//! | `x[:, -1, :]`      | `x.i((.., -1, ..))`                       |
//! | `x[1:3]`, `x[-2:]` | `x.i(1..3)`, `x.i(-2..)`                  |
//! | `x[:, ::2]`        | `x.i((.., (..).step(2)))`                 |
//! | `x[..., 0]`        | `x.i((Ellipsis, 0))`                      |
//! | `x[:, None]`       | `x.i((.., NewAxis))`                      |
//! | `x[idx]`           | `x.i(&idx)` (an `i64` tensor)             |
//! | `x[mask]`          | `x.i(&mask)` (a `u8` mask)                |
//! | `x[mask] = 0`      | `x.index_put_(&mask, &Tensor::scalar(0.0), false)` |
//! | `x.index_put_((i, j), v, accumulate=True)` | `x.index_put_((&i, &j), &v, true)` |
//!
//! A literal range that runs backwards, such as `1..-1` (Python's `1:-1`),
//! is what Clippy's `reversed_empty_ranges` rejects: write it
//! [`Slice::new(1, -1)`](Slice::new).
//!
//! Integers, ranges, `..`, [`Ellipsis`] and [`NewAxis`] give views, as in
//! PyTorch; index tensors and masks give copies. An index tensor or a mask
//! on another device than the tensor is a compile error:
//! ```compile_fail,E0277
//! use devtensor::{Cpu, Cuda, Tensor};
//! fn last(x: &Tensor<Cuda<0>>, rows: &Tensor<Cpu, i64>) -> Tensor<Cuda<0>> {
//!     x.i((rows, -1)) // error: expected all tensors to be on the same device
//! }
//! ```
//!
//! Indices are `Tensor<_, i64>` (PyTorch's `long`) on the same device as the
//! data. Every index value is checked against its axis before any kernel
//! runs, so a bad label is an [`Error::Index`] naming the operation, the
//! shape, the axis and the offending value, never an out-of-bounds panic.
//!
//! Indices on another device are a compile error, as for every operation
//! taking several tensors:
//! ```compile_fail
//! use devtensor::{Cpu, Cuda, Tensor};
//! fn pick(logits: &Tensor<Cuda<0>>, labels: &Tensor<Cpu, i64>) -> Tensor<Cuda<0>> {
//!     logits.gather(1, labels) // error: `labels` is on `Cpu`, not `Cuda<0>`
//! }
//! ```

mod by_value;
mod cpu;
mod cuda;
mod grad;
mod one_hot;
mod pad;
mod reorder;
mod repeat;
mod scatter;
mod sort;
mod subscript;

use crate::autograd::{self, float_rule};
use crate::backend::Backend;
use crate::element::{Element, SameDtype};
use crate::error::{Error, Result};
use crate::error::{check_elem_count, resolve_axis};
use crate::layout::{Layout, Shape};
use crate::tensor::shell::{core_call, core_table};
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

pub use by_value::Unique;
pub use pad::PadMode;
pub use scatter::ScatterReduce;
use subscript::Kind;
pub use subscript::{Ellipsis, IndexItem, Indexer, NewAxis, Slice, SliceStep, TensorIndex};

/// Device kernels for indexing and joining. Implemented by the core
/// devices ([`CoreDevice`]): `Cpu`, and one for every GPU.
///
/// Callers validate shapes and index values first (see
/// [`first_out_of_range`](Self::first_out_of_range)); kernels may assume
/// every index is in `0..size` of the axis it selects from.
pub trait IndexKernel: Backend {
    /// The first index (in row-major order of `layout`) outside `0..size`,
    /// or `None` when all are in range.
    fn first_out_of_range(indices: &Self::Storage<i64>, layout: &Layout, size: usize) -> Result<Option<i64>>;

    /// `out[.., j, ..] = src[.., indices[j], ..]` along `axis`, into a new
    /// contiguous storage; `indices_layout` is 1-D.
    fn index_select<E: Element>(
        src: &Self::Storage<E>,
        src_layout: &Layout,
        axis: usize,
        indices: &Self::Storage<i64>,
        indices_layout: &Layout,
    ) -> Result<Self::Storage<E>>;

    /// `out[p] = src[p with p[axis] = index[p]]` for every position `p` of
    /// `index`, into a new contiguous storage of `index`'s shape.
    fn gather<E: Element>(
        src: &Self::Storage<E>,
        src_layout: &Layout,
        axis: usize,
        index: &Self::Storage<i64>,
        index_layout: &Layout,
    ) -> Result<Self::Storage<E>>;

    /// A contiguous copy of `dst` into which, for every position `p` of
    /// `index`, `src[p]` is combined by `mode` at `p with p[axis] =
    /// index[p]`, the positions along `axis` in order (so a repeated index
    /// combines deterministically; the last write wins for
    /// [`ScatterMode::Assign`]). `src`'s layout may be larger than
    /// `index`'s; only `index`'s extent is read.
    #[allow(clippy::too_many_arguments)] // Three tensors, each a storage and a layout.
    fn scatter<E: Element>(
        dst: &Self::Storage<E>,
        dst_layout: &Layout,
        axis: usize,
        index: &Self::Storage<i64>,
        index_layout: &Layout,
        src: &Self::Storage<E>,
        src_layout: &Layout,
        mode: ScatterMode,
    ) -> Result<Self::Storage<E>>;

    /// A contiguous copy of `dst` to which `src[.., j, ..]` is added at
    /// `[.., indices[j], ..]` along `axis`; `indices_layout` is 1-D.
    #[allow(clippy::too_many_arguments)] // Three tensors, each a storage and a layout.
    fn index_add<E: Element>(
        dst: &Self::Storage<E>,
        dst_layout: &Layout,
        axis: usize,
        indices: &Self::Storage<i64>,
        indices_layout: &Layout,
        src: &Self::Storage<E>,
        src_layout: &Layout,
    ) -> Result<Self::Storage<E>>;

    /// The inputs joined along `axis` into a new contiguous storage of
    /// `out_shape`. `inputs` is non-empty and the shapes agree off `axis`.
    fn cat<E: Element>(
        inputs: &[(&Self::Storage<E>, &Layout)],
        axis: usize,
        out_shape: &Shape,
    ) -> Result<Self::Storage<E>>;

    /// The first `k` positions of each row's stable sorted order, into a new
    /// contiguous `[rows, k]` storage: `layout` is contiguous with its last
    /// axis (at least 1 long, and at least `k`) the rows to sort, ascending
    /// or descending, with NaN greater than every number.
    fn argsort_rows<E: Element>(
        src: &Self::Storage<E>,
        layout: &Layout,
        descending: bool,
        k: usize,
    ) -> Result<Self::Storage<i64>>;
}

/// How [`IndexKernel::scatter`] combines a source element with the one
/// already at its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterMode {
    /// The source element replaces it.
    Assign = 0,
    /// Added (wrapping for integers).
    Add = 1,
    /// Multiplied (wrapping for integers).
    Multiply = 2,
    /// The larger is kept; NaN wins.
    Max = 3,
    /// The smaller is kept; NaN wins.
    Min = 4,
}

/// An [`Error::Shape`] for `op` on `D`.
fn shape_error<D: Device>(op: &'static str, shapes: Vec<Shape>, reason: String) -> Error {
    Error::Shape { op, device: D::name(), shapes, reason }
}

/// Fails with [`Error::Index`] when an index is outside `0..shape[axis]`.
fn check_indices<D: CoreDevice>(op: &'static str, shape: &Shape, axis: usize, indices: &Tensor<D, i64>) -> Result<()> {
    // A broadcast index tensor repeats its distinct indices: check those
    // (in the same order, so the first bad one is the same).
    let distinct = indices.layout().without_broadcast_axes().map(|(layout, _)| layout);
    let layout = distinct.as_ref().unwrap_or(indices.layout());
    match D::first_out_of_range(indices.storage(), layout, shape.dims()[axis])? {
        None => Ok(()),
        Some(index) => Err(Error::Index { op, device: D::name(), shape: shape.clone(), axis, index }),
    }
}

/// Fails unless `indices` is 1-D.
fn check_one_dim<D: Device>(op: &'static str, shapes: &[&Shape], indices: &Shape) -> Result<()> {
    match indices.rank() {
        1 => Ok(()),
        r => Err(shape_error::<D>(
            op,
            shapes.iter().map(|&s| s.clone()).collect(),
            format!("the indices must be 1-D, got rank {r}"),
        )),
    }
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// The slices at `indices` along `axis`, in that order (repeats allowed),
    /// like `torch.index_select`: the output has `indices.len()` elements
    /// along `axis` and this tensor's sizes elsewhere.
    ///
    /// Fails when `axis` is out of range, `indices` is not 1-D, or an index
    /// is negative or not below the size of `axis`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::arange(0, 6).reshape([3, 2]);
    /// let err = x.try_index_select(0, &Tensor::<Cpu, i64>::from_vec(vec![0, 3], [2])).unwrap_err();
    /// assert_eq!(err.to_string(), "index_select on Cpu: index 3 is out of range for axis 0 of size 3 (shape [3, 2])");
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::arange(0, 6).reshape([3, 2]);
    /// let rows = x.index_select(0, &Tensor::<Cpu, i64>::from_vec(vec![2, 0, 2], [3]));
    /// assert_eq!(rows.to_vec2(), vec![vec![4, 5], vec![0, 1], vec![4, 5]]);
    /// let cols = x.index_select(-1, &Tensor::<Cpu, i64>::from_vec(vec![1], [1]));
    /// assert_eq!(cols.to_vec(), vec![1, 3, 5]);
    /// ```
    #[fallible]
    pub fn index_select<D2: Device>(&self, axis: isize, indices: &Tensor<D2, i64>) -> Self
    where
        D: SameDevice<D2>,
    {
        let indices: &Tensor<D, i64> = same_device(indices);
        core_call!(D, Fns<E>.index_select(self.core(), axis, indices.core()))
    }

    /// Values picked along `axis` by `index`, like `torch.gather`: the output
    /// has `index`'s shape, and for `axis = 1` of a rank-3 tensor
    /// `out[i][j][k] = self[i][index[i][j][k]][k]`.
    ///
    /// `index` must have this tensor's rank and be no larger than it on every
    /// axis but `axis`. Fails otherwise, on an out-of-range `axis`, and on
    /// an index that is negative or not below the size of `axis`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::zeros([2, 3]);
    /// let index = Tensor::<Cpu, i64>::from_vec(vec![0, -1], [2, 1]);
    /// let err = x.try_gather(1, &index).unwrap_err();
    /// assert_eq!(err.to_string(), "gather on Cpu: index -1 is out of range for axis 1 of size 3 (shape [2, 3])");
    /// ```
    ///
    /// Picking each row's label logit, as cross-entropy does:
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let logits = Tensor::<Cpu>::from_vec(vec![0.1, 0.7, 0.2, 0.5, 0.3, 0.2], [2, 3]);
    /// let labels = Tensor::<Cpu, i64>::from_vec(vec![1, 0], [2]);
    /// let picked = logits.gather(1, &labels.unsqueeze(1));
    /// assert_eq!(picked.to_vec2(), vec![vec![0.7], vec![0.5]]);
    /// ```
    #[fallible]
    pub fn gather<D2: Device>(&self, axis: isize, index: &Tensor<D2, i64>) -> Self
    where
        D: SameDevice<D2>,
    {
        let index: &Tensor<D, i64> = same_device(index);
        core_call!(D, Fns<E>.gather(self.core(), axis, index.core()))
    }

    /// The elements at `indices` along `axis`, like
    /// `torch.take_along_dim(x, indices, dim=axis)`: [`gather`](Self::gather)
    /// after broadcasting this tensor and `indices` against each other on
    /// every other axis (the values `argsort`, `topk` or `argmax` with
    /// `keepdim` return pick their elements back). PyTorch's form without
    /// `dim` is this on both flattened. Fails unless both have one rank and
    /// their other axes broadcast, and on an index out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![10.0, 30.0, 20.0, 5.0, 4.0, 6.0], [2, 3]);
    /// let order = x.argsort(1, false);
    /// assert_eq!(x.take_along_dim(&order, 1).to_vec2(), vec![vec![10.0, 20.0, 30.0], vec![4.0, 5.0, 6.0]]);
    /// // One index row for every row of x: broadcast.
    /// let first = Tensor::<Cpu, i64>::from_vec(vec![0], [1, 1]);
    /// assert_eq!(x.take_along_dim(&first, 1).to_vec(), vec![10.0, 5.0]);
    /// ```
    #[fallible]
    pub fn take_along_dim<D2: Device>(&self, indices: &Tensor<D2, i64>, axis: isize) -> Self
    where
        D: SameDevice<D2>,
    {
        let indices: &Tensor<D, i64> = same_device(indices);
        core_call!(D, Fns<E>.take_along_dim(self.core(), indices.core(), axis))
    }

    /// A copy of this tensor to which each `src[p]` is added at
    /// `p with p[axis] = index[p]`, for every position `p` of `index`: the
    /// out-of-place `torch.scatter_add`, and the backward of
    /// [`gather`](Self::gather). Repeated indices accumulate.
    ///
    /// `index`, `src` and this tensor must have one rank; `index` must be no
    /// larger than `src` on any axis, and no larger than this tensor on any
    /// axis but `axis`. Fails otherwise, on an out-of-range `axis`, and on an
    /// index that is negative or not below this tensor's size on `axis`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::zeros([2, 3]);
    /// let index = Tensor::<Cpu, i64>::zeros([3, 1]);
    /// let err = x.try_scatter_add(1, &index, &Tensor::<Cpu>::ones([3, 1])).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "scatter_add on Cpu: shapes [2, 3], [3, 1] and [3, 1]: \
    ///      the index is larger than the input on axis 0 (3 > 2)"
    /// );
    /// ```
    ///
    /// Sending gradients back to the logits cross-entropy picked:
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let grad_logits = Tensor::<Cpu>::zeros([2, 3]);
    /// let labels = Tensor::<Cpu, i64>::from_vec(vec![1, 0], [2, 1]);
    /// let grad_picked = Tensor::<Cpu>::from_vec(vec![-0.5, -0.5], [2, 1]);
    /// let g = grad_logits.scatter_add(1, &labels, &grad_picked);
    /// assert_eq!(g.to_vec2(), vec![vec![0.0, -0.5, 0.0], vec![-0.5, 0.0, 0.0]]);
    /// ```
    #[fallible]
    pub fn scatter_add<D2: Device, D3: Device, E3: Element>(
        &self,
        axis: isize,
        index: &Tensor<D2, i64>,
        src: &Tensor<D3, E3>,
    ) -> Self
    where
        D: SameDevice<D2> + SameDevice<D3>,
        E: SameDtype<E3>,
    {
        let index: &Tensor<D, i64> = same_device(index);
        let src: &Tensor<D, E> = same_device(src);
        core_call!(D, Fns<E>.scatter_add(self.core(), axis, index.core(), src.core()))
    }

    /// A copy of this tensor to which slice `j` of `src` along `axis` is
    /// added at slice `indices[j]`, like the out-of-place
    /// `torch.index_add`: the backward of [`index_select`](Self::index_select).
    /// Repeated indices accumulate.
    ///
    /// `indices` is 1-D; `src` has this tensor's shape except for
    /// `indices.len()` elements along `axis`. Fails otherwise, on an
    /// out-of-range `axis`, and on an index that is negative or not below
    /// this tensor's size on `axis`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::zeros([3, 2]);
    /// let src = Tensor::<Cpu>::ones([2, 3]);
    /// let err = x.try_index_add(0, &Tensor::<Cpu, i64>::from_vec(vec![0, 2], [2]), &src).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "index_add on Cpu: shapes [3, 2], [2] and [2, 3]: \
    ///      src must have shape [2, 2] (the input's shape with the indices' length on axis 0)"
    /// );
    /// ```
    ///
    /// Accumulating embedding gradients, where token 1 appears twice:
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let table = Tensor::<Cpu>::zeros([3, 2]);
    /// let tokens = Tensor::<Cpu, i64>::from_vec(vec![1, 0, 1], [3]);
    /// let grads = Tensor::<Cpu>::ones([3, 2]);
    /// let g = table.index_add(0, &tokens, &grads);
    /// assert_eq!(g.to_vec2(), vec![vec![1.0, 1.0], vec![2.0, 2.0], vec![0.0, 0.0]]);
    /// ```
    #[fallible]
    pub fn index_add<D2: Device, D3: Device, E3: Element>(
        &self,
        axis: isize,
        indices: &Tensor<D2, i64>,
        src: &Tensor<D3, E3>,
    ) -> Self
    where
        D: SameDevice<D2> + SameDevice<D3>,
        E: SameDtype<E3>,
    {
        let indices: &Tensor<D, i64> = same_device(indices);
        let src: &Tensor<D, E> = same_device(src);
        core_call!(D, Fns<E>.index_add(self.core(), axis, indices.core(), src.core()))
    }

    /// The tensors joined end to end along an existing `axis`, like
    /// `torch.cat`. All must have one rank and agree in size on every other
    /// axis; `axis` is resolved against that rank (`-1` is the last).
    ///
    /// Fails on an empty list, on differing ranks or sizes (naming every
    /// shape), and on an out-of-range `axis`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu>::zeros([2, 3]);
    /// let b = Tensor::<Cpu>::zeros([2, 4]);
    /// let err = Tensor::try_cat(&[&a, &b], 0).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "cat on Cpu: shapes [2, 3] and [2, 4]: sizes differ on axis 1 (3 vs 4); \
    ///      only the cat axis 0 may differ"
    /// );
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 3, 4], [2, 2]);
    /// let b = Tensor::<Cpu, i64>::from_vec(vec![5, 6], [2, 1]);
    /// let c = Tensor::cat(&[&a, &b], -1);
    /// assert_eq!(c.to_vec2(), vec![vec![1, 2, 5], vec![3, 4, 6]]);
    /// assert_eq!(Tensor::cat(&[&a, &a], 0).dims(), &[4, 2]);
    /// ```
    #[fallible]
    pub fn cat(tensors: &[&Self], axis: isize) -> Self {
        let tensors: Vec<&Tensor<D::Core, E>> = tensors.iter().map(|t| t.core()).collect();
        core_call!(D, Fns<E>.cat(&tensors, axis))
    }

    /// The tensors joined along a new axis inserted at `axis`, like
    /// `torch.stack`: all must have one shape, and `axis` ranges over
    /// `-(rank + 1)..=rank` (`rank` or `-1` makes the new axis the last).
    ///
    /// Fails on an empty list, on differing shapes (naming every shape), and
    /// on an out-of-range `axis`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu>::zeros([2, 3]);
    /// let err = Tensor::try_stack(&[&a, &a], 3).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "stack on Cpu: axis 3 is out of range for stacking tensors of shape [2, 3] \
    ///      (expected an axis in -3..3)"
    /// );
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, i64>::from_vec(vec![1, 2], [2]);
    /// let b = Tensor::<Cpu, i64>::from_vec(vec![3, 4], [2]);
    /// assert_eq!(Tensor::stack(&[&a, &b], 0).to_vec2(), vec![vec![1, 2], vec![3, 4]]);
    /// assert_eq!(Tensor::stack(&[&a, &b], -1).to_vec2(), vec![vec![1, 3], vec![2, 4]]);
    /// ```
    #[fallible]
    pub fn stack(tensors: &[&Self], axis: isize) -> Self {
        let tensors: Vec<&Tensor<D::Core, E>> = tensors.iter().map(|t| t.core()).collect();
        core_call!(D, Fns<E>.stack(&tensors, axis))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    fn core_index_select(&self, axis: isize, indices: &Tensor<D, i64>) -> Result<Self> {
        const OP: &str = "index_select";
        let ax = resolve_axis(OP, D::name, self.shape(), axis)?;
        check_one_dim::<D>(OP, &[self.shape(), indices.shape()], indices.shape())?;
        let mut dims = self.dims().to_vec();
        dims[ax] = indices.elem_count();
        let shape = Shape::from(dims);
        check_elem_count(OP, D::name, &[self.shape(), indices.shape(), &shape])?;
        check_indices(OP, self.shape(), ax, indices)?;
        let forward = || {
            let storage = D::index_select(self.storage(), self.layout(), ax, indices.storage(), indices.layout())?;
            Ok(Tensor::from_storage(storage, shape))
        };
        autograd::track(
            OP,
            &[self.node()],
            forward,
            |_| float_rule!(E, F => grad::index_select::<D, F>(self.shape().clone(), ax, indices.clone())),
        )
    }

    fn core_take_along_dim(&self, indices: &Tensor<D, i64>, axis: isize) -> Result<Self> {
        const OP: &str = "take_along_dim";
        let shapes = || vec![self.shape().clone(), indices.shape().clone()];
        if self.rank() != indices.rank() {
            let reason = format!("the indices must have the input's rank ({} vs {})", indices.rank(), self.rank());
            return Err(shape_error::<D>(OP, shapes(), reason));
        }
        let axis = resolve_axis(OP, D::name, self.shape(), axis)?;
        let (mut input, mut picks) = (self.dims().to_vec(), indices.dims().to_vec());
        for d in (0..input.len()).filter(|&d| d != axis) {
            let size = match (input[d], picks[d]) {
                (a, b) if a == b || b == 1 => a,
                (1, b) => b,
                (a, b) => {
                    let reason = format!("axis {d} does not broadcast ({a} in the input, {b} in the indices)");
                    return Err(shape_error::<D>(OP, shapes(), reason));
                }
            };
            (input[d], picks[d]) = (size, size);
        }
        self.try_broadcast_to(input)?.core_gather(axis as isize, &indices.try_broadcast_to(picks)?)
    }

    fn core_gather(&self, axis: isize, index: &Tensor<D, i64>) -> Result<Self> {
        const OP: &str = "gather";
        let ax = resolve_axis(OP, D::name, self.shape(), axis)?;
        let shapes = || vec![self.shape().clone(), index.shape().clone()];
        check_same_rank::<D>(OP, shapes, &[("the input", self.shape())], index.shape())?;
        check_fits::<D>(OP, shapes, "the input", self.shape(), index.shape(), Some(ax))?;
        check_indices(OP, self.shape(), ax, index)?;
        let forward = || {
            let storage = D::gather(self.storage(), self.layout(), ax, index.storage(), index.layout())?;
            Ok(Tensor::from_storage(storage, index.shape().clone()))
        };
        autograd::track(
            OP,
            &[self.node()],
            forward,
            |_| float_rule!(E, F => grad::gather::<D, F>(self.shape().clone(), ax, index.clone())),
        )
    }

    fn core_scatter_add(&self, axis: isize, index: &Tensor<D, i64>, src: &Self) -> Result<Self> {
        const OP: &str = "scatter_add";
        let ax = self.check_scatter(OP, axis, index, src)?;
        autograd::track(
            OP,
            &[self.node(), src.node()],
            || self.scatter_untracked(ax, index, src, ScatterMode::Add),
            |_| float_rule!(E, F => grad::scatter_add::<D, F>(ax, index.clone(), src.shape().clone())),
        )
    }

    fn core_index_add(&self, axis: isize, indices: &Tensor<D, i64>, src: &Self) -> Result<Self> {
        const OP: &str = "index_add";
        let ax = resolve_axis(OP, D::name, self.shape(), axis)?;
        let shapes = [self.shape(), indices.shape(), src.shape()];
        check_one_dim::<D>(OP, &shapes, indices.shape())?;
        let mut expected = self.dims().to_vec();
        expected[ax] = indices.elem_count();
        if src.dims() != expected.as_slice() {
            return Err(shape_error::<D>(
                OP,
                shapes.iter().map(|&s| s.clone()).collect(),
                format!(
                    "src must have shape {} (the input's shape with the indices' length on axis {ax})",
                    Shape::from(expected)
                ),
            ));
        }
        check_indices(OP, self.shape(), ax, indices)?;
        let forward = || {
            let storage = D::index_add(
                self.storage(),
                self.layout(),
                ax,
                indices.storage(),
                indices.layout(),
                src.storage(),
                src.layout(),
            )?;
            Ok(Tensor::from_storage(storage, self.shape().clone()))
        };
        autograd::track(
            OP,
            &[self.node(), src.node()],
            forward,
            |_| float_rule!(E, F => grad::index_add::<D, F>(ax, indices.clone())),
        )
    }

    fn core_cat(tensors: &[&Self], axis: isize) -> Result<Self> {
        const OP: &str = "cat";
        let all_shapes = || tensors.iter().map(|t| t.shape().clone()).collect::<Vec<_>>();
        let Some(first) = tensors.first() else {
            return Err(shape_error::<D>(OP, vec![], "expected at least one tensor, got an empty list".into()));
        };
        if let Some(t) = tensors.iter().find(|t| t.rank() != first.rank()) {
            return Err(shape_error::<D>(
                OP,
                all_shapes(),
                format!("every tensor must have the same rank (found {} and {})", first.rank(), t.rank()),
            ));
        }
        let ax = resolve_axis(OP, D::name, first.shape(), axis)?;
        let mut dims = first.dims().to_vec();
        for t in &tensors[1..] {
            for (d, (&want, &got)) in first.dims().iter().zip(t.dims()).enumerate() {
                if d != ax && want != got {
                    return Err(shape_error::<D>(
                        OP,
                        all_shapes(),
                        format!("sizes differ on axis {d} ({want} vs {got}); only the cat axis {ax} may differ"),
                    ));
                }
            }
            // Saturating: an overflow is reported by the count check below.
            dims[ax] = dims[ax].saturating_add(t.dims()[ax]);
        }
        if tensors.len() == 1 {
            return first.try_contiguous();
        }
        let shape = Shape::from(dims);
        if shape.checked_elem_count().is_none() || shape.dims()[ax] == usize::MAX {
            return Err(shape_error::<D>(
                OP,
                all_shapes(),
                format!("the result {shape} would have more than 2^63 - 1 elements"),
            ));
        }
        let forward = || {
            let inputs: Vec<(&D::Storage<E>, &Layout)> = tensors.iter().map(|t| (t.storage(), t.layout())).collect();
            let storage = D::cat(&inputs, ax, &shape)?;
            Ok(Tensor::from_storage(storage, shape))
        };
        let nodes: Vec<_> = tensors.iter().map(|t| t.node()).collect();
        autograd::track(
            OP,
            &nodes,
            forward,
            |_| float_rule!(E, F => grad::cat::<D, F>(ax, tensors.iter().map(|t| t.dims()[ax]).collect())),
        )
    }

    fn core_stack(tensors: &[&Self], axis: isize) -> Result<Self> {
        const OP: &str = "stack";
        let Some(first) = tensors.first() else {
            return Err(shape_error::<D>(OP, vec![], "expected at least one tensor, got an empty list".into()));
        };
        if tensors.iter().any(|t| t.shape() != first.shape()) {
            return Err(shape_error::<D>(
                OP,
                tensors.iter().map(|t| t.shape().clone()).collect(),
                "every tensor must have the same shape".into(),
            ));
        }
        let rank = first.rank() as isize;
        let at = if axis < 0 { axis + rank + 1 } else { axis };
        if !(0..=rank).contains(&at) {
            // Not `Error::Axis`: the valid range has one more axis than the inputs.
            return Err(Error::Argument {
                op: OP,
                device: D::name(),
                reason: format!(
                    "axis {axis} is out of range for stacking tensors of shape {} (expected an axis in {}..{})",
                    first.shape(),
                    -rank - 1,
                    rank + 1
                ),
            });
        }
        // Unsqueezing is a view, so `cat` still sees the inputs' own layouts.
        let views = tensors.iter().map(|t| t.try_unsqueeze(at)).collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Self> = views.iter().collect();
        Self::core_cat(&refs, at)
    }
}

core_table! {
    /// The core's indexing and joining.
    pub(crate) struct Fns<C, E: Element> {
        index_select: fn(&Tensor<C, E>, isize, &Tensor<C, i64>) -> Result<Tensor<C, E>> =
            |x, axis, indices| x.core_index_select(axis, indices),
        gather: fn(&Tensor<C, E>, isize, &Tensor<C, i64>) -> Result<Tensor<C, E>> = |x, axis, index| x.core_gather(axis, index),
        scatter_add: fn(&Tensor<C, E>, isize, &Tensor<C, i64>, &Tensor<C, E>) -> Result<Tensor<C, E>> =
            |x, axis, index, src| x.core_scatter_add(axis, index, src),
        scatter: fn(&Tensor<C, E>, isize, &Tensor<C, i64>, &Tensor<C, E>) -> Result<Tensor<C, E>> =
            |x, axis, index, src| x.core_scatter(axis, index, src),
        scatter_scalar: fn(&Tensor<C, E>, isize, &Tensor<C, i64>, E) -> Result<Tensor<C, E>> =
            |x, axis, index, value| x.core_scatter_scalar(axis, index, value),
        scatter_reduce: fn(&Tensor<C, E>, isize, &Tensor<C, i64>, &Tensor<C, E>, ScatterReduce, bool) -> Result<Tensor<C, E>> =
            |x, axis, index, src, reduce, include_self| x.core_scatter_reduce(axis, index, src, reduce, include_self),
        subscript: fn(&Tensor<C, E>, &[Kind<C>]) -> Result<Tensor<C, E>> = |x, index| x.core_subscript(index),
        index_put: fn(&Tensor<C, E>, &[Kind<C>], &Tensor<C, E>, bool) -> Result<Tensor<C, E>> =
            |x, index, values, accumulate| x.core_index_put(index, values, accumulate),
        index_add: fn(&Tensor<C, E>, isize, &Tensor<C, i64>, &Tensor<C, E>) -> Result<Tensor<C, E>> =
            |x, axis, indices, src| x.core_index_add(axis, indices, src),
        cat: fn(&[&Tensor<C, E>], isize) -> Result<Tensor<C, E>> = Tensor::core_cat,
        stack: fn(&[&Tensor<C, E>], isize) -> Result<Tensor<C, E>> = Tensor::core_stack,
        sort: fn(&Tensor<C, E>, isize, bool) -> Result<(Tensor<C, E>, Tensor<C, i64>)> =
            |x, axis, descending| x.core_sort(axis, descending),
        argsort: fn(&Tensor<C, E>, isize, bool) -> Result<Tensor<C, i64>> =
            |x, axis, descending| x.core_argsort(axis, descending),
        topk: fn(&Tensor<C, E>, usize, isize, bool) -> Result<(Tensor<C, E>, Tensor<C, i64>)> =
            |x, k, axis, largest| x.core_topk(k, axis, largest),
        pad: fn(&Tensor<C, E>, &[isize], PadMode<E>) -> Result<Tensor<C, E>> = |x, pad, mode| x.core_pad(pad, mode),
        repeat: fn(&Tensor<C, E>, &[usize]) -> Result<Tensor<C, E>> = |x, repeats| x.core_repeat(repeats),
        repeat_interleave: fn(&Tensor<C, E>, usize, isize) -> Result<Tensor<C, E>> =
            |x, repeats, axis| x.core_repeat_interleave(repeats, axis),
        repeat_interleave_tensor: fn(&Tensor<C, E>, &Tensor<C, i64>, isize) -> Result<Tensor<C, E>> =
            |x, repeats, axis| x.core_repeat_interleave_tensor(repeats, axis),
        take_along_dim: fn(&Tensor<C, E>, &Tensor<C, i64>, isize) -> Result<Tensor<C, E>> =
            |x, indices, axis| x.core_take_along_dim(indices, axis),
        one_hot: fn(&Tensor<C, E>, usize) -> Result<Tensor<C, E>> = |x, classes| x.core_one_hot(classes),
        masked_select: fn(&Tensor<C, E>, &Tensor<C, u8>) -> Result<Tensor<C, E>> = |x, mask| x.core_masked_select(mask),
        nonzero: fn(&Tensor<C, E>) -> Result<Tensor<C, i64>> = |x| x.core_nonzero(),
        unique: fn(&Tensor<C, E>, bool, bool) -> Result<Unique<C, E>> = |x, inverse, counts| x.core_unique(inverse, counts),
        searchsorted: fn(&Tensor<C, E>, &Tensor<C, E>, bool) -> Result<Tensor<C, i64>> =
            |x, values, right| x.core_searchsorted(values, right),
        bincount: fn(&Tensor<C, E>, usize) -> Result<Tensor<C, E>> = |x, minlength| x.core_bincount(minlength),
        bincount_weighted: fn(&Tensor<C, i64>, &Tensor<C, E>, usize) -> Result<Tensor<C, E>> = Tensor::core_bincount_weighted,
        flip: fn(&Tensor<C, E>, &[isize]) -> Result<Tensor<C, E>> = |x, dims| x.core_flip(dims),
        roll: fn(&Tensor<C, E>, &[isize], &[isize]) -> Result<Tensor<C, E>> = |x, shifts, dims| x.core_roll(shifts, dims),
    }
}

/// Fails unless `index` has the rank of each `(name, shape)` in `others`.
fn check_same_rank<D: Device>(
    op: &'static str,
    shapes: impl Fn() -> Vec<Shape>,
    others: &[(&str, &Shape)],
    index: &Shape,
) -> Result<()> {
    for &(name, other) in others {
        if other.rank() != index.rank() {
            return Err(shape_error::<D>(
                op,
                shapes(),
                format!("the index must have the rank of {name} ({} vs {})", index.rank(), other.rank()),
            ));
        }
    }
    Ok(())
}

/// Fails unless `index` is no larger than `other` on every axis but `skip`.
fn check_fits<D: Device>(
    op: &'static str,
    shapes: impl Fn() -> Vec<Shape>,
    name: &str,
    other: &Shape,
    index: &Shape,
    skip: Option<usize>,
) -> Result<()> {
    for (d, (&i, &o)) in index.dims().iter().zip(other.dims()).enumerate() {
        if Some(d) != skip && i > o {
            return Err(shape_error::<D>(
                op,
                shapes(),
                format!("the index is larger than {name} on axis {d} ({i} > {o})"),
            ));
        }
    }
    Ok(())
}
