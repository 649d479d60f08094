//! Reductions and the normalisations built on them: `sum`, `mean`, `var`,
//! `std`, `amax`, `amin`, `logsumexp`, `vector_norm`, `all`, `any` and `count_nonzero`
//! over the whole tensor, one axis or several at once ([`Axes`]);
//! `max`, `min`, `argmax`, `argmin` and `prod` over the whole tensor or one
//! axis (each with or without keeping it, like PyTorch's `keepdim`); the
//! running sums of `cumsum`; and `softmax` / `log_softmax`.
//!
//! Semantics follow PyTorch: the sum of nothing is 0 and its mean NaN; `max`,
//! `min` and the arg-reductions have no identity, so an empty input is an
//! [`Error::Shape`]; NaN propagates through `max`/`min`
//! and `argmax`/`argmin` point at the first NaN, else at the first occurrence
//! of the extreme value. Integer and `u8` tensors sum into `i64`
//! ([`Element::Sum`]), as PyTorch's do, wrapping at `2^64`. A rank-0 tensor
//! accepts axis 0 and -1 (PyTorch treats it as one element), and reductions
//! of a broadcast view read only the memory that exists.

mod axes;
mod cpu;
mod cuda;
mod extremes;
mod grad;
mod logical;
mod norms;
mod order;
mod product;
mod sample;
mod scan;
mod standardize;
mod statistics;

use crate::autograd::{self, as_float, float_rule};
use crate::backend::Backend;
use crate::element::{Element, FloatElement};
use crate::error::resolve_axis_or_scalar;
use crate::error::{Error, Result};
use crate::layout::{Dims, Layout, Shape};
use crate::random::Generator;
use crate::tensor::shell::{core_call, core_table};
use crate::tensor::{CoreDevice, Device, Tensor};
use axes::count_over;
pub(crate) use axes::resolve_axes;
pub use axes::{Axes, AxisList};
use devtensor_macros::fallible;
use logical::Logical;
pub use order::{QuantileInterpolation, Quantiles};

/// A reduction folding the elements of an axis into one value, declared
/// once as a type: its name, where the fold starts and one fold step. The
/// CPU kernel is the fold itself, monomorphised per op; the CUDA kernels
/// are `reduce_<NAME>_{rows,cols,tiles,scan,all}_<dtype>`, one `REDUCE_OP` line
/// in `kernels/reduce.cu`. Every reduction takes every element type.
pub trait ReduceOp: Copy + Send + Sync + 'static {
    /// The op's name, which is its CUDA kernels' base name.
    const NAME: &'static str;

    /// Where each fold starts: the identity of [`fold`](Self::fold) where
    /// it has one (0 for a sum), else the far end of `E`'s range (an empty
    /// axis is rejected before such a fold runs).
    fn init<E: Element>() -> E;

    /// One step of the fold: the accumulator `acc` with the next element `x`.
    fn fold<E: Element>(acc: E, x: E) -> E;
}

/// A reduction to an extreme element, whose position the arg-reductions
/// (`argmax`, `argmin`) find: its CUDA kernels are
/// `reduce_<ARG_NAME>_{rows,cols,all}_<dtype>` (`ARG_OP` in `kernels/reduce.cu`).
pub trait ExtremeOp: ReduceOp {
    /// The arg-reduction's name, which is its CUDA kernels' base name.
    const ARG_NAME: &'static str;

    /// Whether `x` is strictly more extreme than `best`. NaN is handled
    /// around it: a NaN wins and, once picked, is never displaced, so
    /// ties and NaNs both keep their first occurrence.
    fn beats<E: Element>(x: E, best: E) -> bool;

    /// Whether `x`, met after `best`, takes its place in an arg-reduction.
    #[inline(always)]
    fn displaces<E: Element>(x: E, best: E) -> bool {
        !best.is_nan() && (x.is_nan() || Self::beats(x, best))
    }
}

/// The sum (0 for no elements; integers wrap).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sum;

impl ReduceOp for Sum {
    const NAME: &'static str = "sum";

    fn init<E: Element>() -> E {
        E::ZERO
    }

    #[inline(always)]
    fn fold<E: Element>(acc: E, x: E) -> E {
        acc.add(x)
    }
}

/// The product (1 for no elements; integers wrap).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Product;

impl ReduceOp for Product {
    const NAME: &'static str = "prod";

    fn init<E: Element>() -> E {
        E::ONE
    }

    #[inline(always)]
    fn fold<E: Element>(acc: E, x: E) -> E {
        acc.mul(x)
    }
}

/// The largest element; NaN wins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Max;

/// The smallest element; NaN wins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Min;

// `ReduceOp` for an extreme: the new element `x` is tested first, which
// compiles to a compare-and-blend per lane and folds about twice as fast
// on the CPU as `Element::max`. NaN still wins; of two equal zeros the
// first is kept.
macro_rules! extreme_op {
    ($Op:ident, $name:literal, $arg_name:literal, $init:ident, $beats:tt) => {
        impl ReduceOp for $Op {
            const NAME: &'static str = $name;

            fn init<E: Element>() -> E {
                E::$init
            }

            #[inline(always)]
            fn fold<E: Element>(acc: E, x: E) -> E {
                if Self::beats(x, acc) || x.is_nan() { x } else { acc }
            }
        }

        impl ExtremeOp for $Op {
            const ARG_NAME: &'static str = $arg_name;

            #[inline(always)]
            fn beats<E: Element>(x: E, best: E) -> bool {
                x $beats best
            }
        }
    };
}
extreme_op!(Max, "max", "argmax", MIN, >);
extreme_op!(Min, "min", "argmin", MAX, <);

/// Which axis of standardisation's `[outer, groups, inner]` view an affine
/// weight and bias run along (see [`ReduceKernel::standardize`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AffineAxis {
    /// One weight and bias per group: batch norm's per-channel affine step.
    Group,
    /// One weight and bias per position along `inner`, with `outer` 1:
    /// layer norm's elementwise affine step.
    Inner,
}

/// Device kernels for reductions and softmax. Implemented by the core
/// devices ([`CoreDevice`]): `Cpu`, and one for every GPU.
///
/// The API has validated the axis and rejected empty axes for the
/// reductions without identity before a kernel runs.
pub trait ReduceKernel: Backend {
    /// Folds axis `axis` of the elements `layout` selects with `Op`, into a
    /// new contiguous storage shaped like `layout` without that axis. An axis
    /// of size 0 gives [`Sum`]'s identity, 0; it is never passed with an
    /// [`ExtremeOp`].
    fn reduce<E: Element, Op: ReduceOp>(
        op: Op,
        x: &Self::Storage<E>,
        layout: &Layout,
        axis: usize,
    ) -> Result<Self::Storage<E>>;

    /// The index along `axis` of the element `Op` picks
    /// ([`ExtremeOp::displaces`]) for every other position, in a new
    /// contiguous storage shaped like `layout` without that axis.
    /// `layout.dims()[axis]` is not 0.
    fn arg_reduce<E: Element, Op: ExtremeOp>(
        op: Op,
        x: &Self::Storage<E>,
        layout: &Layout,
        axis: usize,
    ) -> Result<Self::Storage<i64>>;

    /// `softmax` (or `log_softmax` when `log`) along `axis`, into a new
    /// contiguous storage of `layout`'s shape.
    fn softmax<E: FloatElement>(
        x: &Self::Storage<E>,
        layout: &Layout,
        axis: usize,
        log: bool,
    ) -> Result<Self::Storage<E>>;

    /// The running fold of `Op` along `axis` (`cumsum` for [`Sum`]): element
    /// `k` of each line is the fold of elements `0..=k`, or of `k..len` when
    /// `reverse`. Into a new contiguous storage of `layout`'s shape; each
    /// line is folded in order, from `Op::init()`.
    fn scan<E: Element, Op: ReduceOp>(
        op: Op,
        x: &Self::Storage<E>,
        layout: &Layout,
        axis: usize,
        reverse: bool,
    ) -> Result<Self::Storage<E>>;

    /// The gradient of `softmax` (or `log_softmax` when `log`) along `axis`,
    /// in one pass: `y · (g − Σ g·y)` (or `g − exp(y) · Σ g`), from the
    /// forward result `y` and the incoming gradient `g`, two tensors of one
    /// shape in any layouts, into a new contiguous storage of that shape.
    fn softmax_backward<E: FloatElement>(
        y: (&Self::Storage<E>, &Layout),
        g: (&Self::Storage<E>, &Layout),
        axis: usize,
        log: bool,
    ) -> Result<Self::Storage<E>>;

    /// Standardises `x` (in any layout; its elements in row-major order
    /// viewed as `dims = [outer, groups, inner]`) per group over the
    /// group's `outer · inner` elements:
    /// `(x − mean) / sqrt(var + eps)` with the biased variance, as batch
    /// norm (groups are channels) and layer norm (groups are rows) do,
    /// then, with `affine` (`(weight, bias, axis)`, dense, `[groups]` or
    /// `[inner]` by `axis`), times the weight plus the bias.
    /// Returns the result (dense, `dims`) and each group's mean and
    /// variance (`[groups]`).
    fn standardize<E: FloatElement>(
        x: (&Self::Storage<E>, &Layout),
        dims: [usize; 3],
        eps: f64,
        affine: Option<(&Self::Storage<E>, &Self::Storage<E>, AffineAxis)>,
    ) -> Result<[Self::Storage<E>; 3]>;

    /// The gradients of [`standardize`](Self::standardize) from its input
    /// `x` (dense), the groups' means and variances, the affine weight
    /// (`None`: one) and the incoming gradient `g` (in any layout), viewed
    /// as `dims`. With `x̂` the standardised input, `ĝ` the gradient times
    /// the weight and `M` a group's size, returns the input's gradient
    /// `(ĝ − Σĝ / M − x̂ · Σ(ĝ · x̂) / M) / sqrt(var + eps)` (dense) and
    /// `Σ g` and `Σ g · x̂` per weight element (`[groups]` or `[inner]`):
    /// the gradients of the affine bias and weight.
    fn standardize_backward<E: FloatElement>(
        x: &Self::Storage<E>,
        stats: [&Self::Storage<E>; 2],
        weight: Option<(&Self::Storage<E>, AffineAxis)>,
        g: (&Self::Storage<E>, &Layout),
        dims: [usize; 3],
        eps: f64,
    ) -> Result<[Self::Storage<E>; 3]>;
}

/// `dims` around `axis`: the product of the sizes before it, its size, and
/// the product of the sizes after it (softmax's rows, and the
/// `[outer, groups, inner]` view of [`ReduceKernel::standardize`]).
pub(super) fn around_axis(dims: &[usize], axis: usize) -> [usize; 3] {
    [dims[..axis].iter().product(), dims[axis], dims[axis + 1..].iter().product()]
}

/// `shape` without `axis`, or with it set to 1 when `keepdim`.
fn reduced_shape(shape: &Shape, axis: usize, keepdim: bool) -> Shape {
    axes::without_axes(shape, &[axis], keepdim)
}

/// `layout` with its axes reordered by decreasing stride: the order the
/// elements sit in storage.
fn storage_order(layout: &Layout) -> Layout {
    let mut axes: Vec<usize> = (0..layout.dims().len()).collect();
    axes.sort_by_key(|&a| std::cmp::Reverse(layout.strides()[a]));
    let dims: Dims = axes.iter().map(|&a| layout.dims()[a]).collect();
    let strides: Dims = axes.iter().map(|&a| layout.strides()[a]).collect();
    Layout::new(Shape::from_dims(dims), strides, layout.offset())
}

/// `sum * repeat`: the sum of a broadcast view from the sum of its distinct
/// elements (integer sums wrap exactly as repeated addition would).
fn scale_by_repeat<D: CoreDevice, S: Element>(sum: Tensor<D, S>, repeat: usize) -> Result<Tensor<D, S>> {
    match repeat {
        1 => Ok(sum),
        // `repeat` counts elements of a tensor, so it fits `i64`.
        n => sum.binary_scalar("mul_scalar", crate::ops::binary::Mul, S::from_i64(n as i64), false),
    }
}

/// The error for a reduction without identity over no elements.
fn empty_error(op: &'static str, device: String, shape: &Shape, axis: Option<usize>) -> Error {
    let what = op.split('_').next().unwrap_or(op);
    let reason = match axis {
        None => format!("{what} of an empty tensor is undefined"),
        Some(axis) => format!("{what} over axis {axis} of size 0 is undefined"),
    };
    Error::Shape { op, device, shapes: vec![shape.clone()], reason }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// Runs `kernel` on the elements as one dense run `[n]` along axis 0:
    /// the tensor's own storage when it is contiguous, or when `any_order`
    /// and its elements fill a dense range in another order (a transposed
    /// or permuted tensor); a dense copy otherwise. `argmax_all` needs the
    /// row-major order for its flat index; sums, maxima and minima do not.
    fn with_flat<T>(&self, any_order: bool, kernel: impl FnOnce(&D::Storage<E>, &Layout) -> Result<T>) -> Result<T> {
        let n = self.elem_count();
        let range = match self.layout().contiguous_range() {
            Some(range) => Some(range),
            None if any_order => storage_order(self.layout()).contiguous_range(),
            None => None,
        };
        match range {
            Some(range) => kernel(self.storage(), &Layout::new(Shape::from(n), smallvec::smallvec![1], range.start)),
            None => {
                let dense = D::copy_strided(self.storage(), self.layout())?;
                kernel(&dense, &Layout::contiguous(Shape::from(n)))
            }
        }
    }

    /// This tensor without its broadcast axes, and how many times each
    /// remaining element repeats ([`Layout::without_broadcast_axes`]): a
    /// reduction over a broadcast view then touches only the memory that
    /// exists, so `ones([1]).broadcast_to([1 << 40]).sum()` adds one element.
    fn without_broadcast_axes(&self) -> Option<(Self, usize)> {
        let (layout, repeat) = self.layout().without_broadcast_axes()?;
        Some((self.with_layout(layout), repeat))
    }

    /// Runs `f` on this tensor as the input of a sum: itself when `E::Sum`
    /// is `E`, or converted to `E::Sum` (a `u8` mask to `i64`) so that the
    /// count cannot wrap.
    fn as_sum_input<T>(&self, f: impl FnOnce(&Tensor<D, E::Sum>) -> Result<T>) -> Result<T> {
        let any: &dyn std::any::Any = self;
        match any.downcast_ref::<Tensor<D, E::Sum>>() {
            Some(same) => f(same),
            None => f(&self.try_to_dtype::<E::Sum>()?),
        }
    }

    /// The whole-tensor reduction `op` of the elements as they are, as a
    /// rank-0 tensor.
    fn reduce_flat(&self, op: impl ReduceOp) -> Result<Self> {
        let storage = self.with_flat(true, |storage, layout| D::reduce(op, storage, layout, 0))?;
        Ok(Tensor::from_storage(storage, Shape::from(())))
    }

    /// A rank-0 tensor's reduction along axis 0 or -1 (PyTorch treats the
    /// scalar as one element): the reduction of its one-element view.
    fn as_one_element(&self) -> Result<Self> {
        self.try_reshape([1])
    }

    /// `axis` resolved, for a gradient rule: only recorded once the forward
    /// has resolved it, so it cannot fail, and untracked calls resolve once.
    fn resolved(&self, axis: isize) -> Option<usize> {
        resolve_axis_or_scalar("gradient", D::name, self.shape(), axis).expect("the forward resolved this axis")
    }

    /// The sum of every element, as a rank-0 tensor of `E::Sum`.
    fn sum_all(&self) -> Result<Tensor<D, E::Sum>> {
        autograd::track(
            "sum",
            &[self.node()],
            || self.sum_all_untracked(),
            |_| float_rule!(E, F => grad::sum::<D, F>(self.shape().clone(), (0..self.rank()).collect(), false)),
        )
    }

    fn sum_all_untracked(&self) -> Result<Tensor<D, E::Sum>> {
        if let Some((view, repeat)) = self.without_broadcast_axes() {
            return scale_by_repeat(view.sum_all_untracked()?, repeat);
        }
        self.as_sum_input(|x| x.reduce_flat(Sum))
    }

    /// The first slice along `axis` (removed, or kept as size 1): along a
    /// broadcast axis, every slice.
    fn broadcast_slice(&self, axis: usize, keepdim: bool) -> Result<Self> {
        let first = self.try_narrow(axis as isize, 0, 1)?;
        if keepdim { Ok(first) } else { first.try_squeeze(axis as isize) }
    }

    /// A whole-tensor `max` or `min`, as a rank-0 tensor.
    fn reduce_all(&self, op: impl ExtremeOp, name: &'static str) -> Result<Self> {
        autograd::track(
            name,
            &[self.node()],
            || self.reduce_all_untracked(op, name),
            |out| float_rule!(E, F => grad::extreme_over::<D, F>(as_float(self), as_float(out), (0..self.rank()).collect(), false)),
        )
    }

    fn reduce_all_untracked(&self, op: impl ExtremeOp, name: &'static str) -> Result<Self> {
        if self.elem_count() == 0 {
            return Err(empty_error(name, D::name(), self.shape(), None));
        }
        match self.without_broadcast_axes() {
            Some((view, _)) => view.reduce_flat(op),
            None => self.reduce_flat(op),
        }
    }

    /// A `max` or `min` along `axis`, removed or kept as size 1.
    fn reduce_axis<Op: ExtremeOp>(&self, op: Op, name: &'static str, axis: isize, keepdim: bool) -> Result<Self> {
        autograd::track(
            name,
            &[self.node()],
            || self.reduce_axis_untracked(op, name, axis, keepdim),
            |_| float_rule!(E, F => grad::extreme_axis::<D, F, Op>(op, as_float(self), self.resolved(axis), keepdim)),
        )
    }

    fn reduce_axis_untracked(
        &self,
        op: impl ExtremeOp,
        name: &'static str,
        axis: isize,
        keepdim: bool,
    ) -> Result<Self> {
        let Some(axis) = resolve_axis_or_scalar(name, D::name, self.shape(), axis)? else {
            return self.as_one_element()?.reduce_axis_untracked(op, name, 0, false);
        };
        let (len, stride) = (self.dims()[axis], self.layout().strides()[axis]);
        if len == 0 {
            return Err(empty_error(name, D::name(), self.shape(), Some(axis)));
        }
        if stride == 0 && len > 1 {
            return self.broadcast_slice(axis, keepdim)?.try_contiguous();
        }
        let storage = D::reduce(op, self.storage(), self.layout(), axis)?;
        Ok(Tensor::from_storage(storage, reduced_shape(self.shape(), axis, keepdim)))
    }

    /// A whole-tensor arg-reduction: the row-major flat index, as a rank-0 tensor.
    fn arg_reduce_all(&self, op: impl ExtremeOp, name: &'static str) -> Result<Tensor<D, i64>> {
        if self.elem_count() == 0 {
            return Err(empty_error(name, D::name(), self.shape(), None));
        }
        let Some((view, _)) = self.without_broadcast_axes() else {
            let storage = self.with_flat(false, |storage, layout| D::arg_reduce(op, storage, layout, 0))?;
            return Ok(Tensor::from_storage(storage, Shape::from(())));
        };
        let storage = view.with_flat(false, |storage, layout| D::arg_reduce(op, storage, layout, 0))?;
        let index = Tensor::<D, i64>::from_storage(storage, Shape::from(()));
        // The view keeps the row-major order of the distinct elements, and
        // each one first occurs with every broadcast index 0: the view's
        // pick, placed at those indices, is the first occurrence overall.
        let mut at = index.try_item()? as usize;
        let (dims, strides) = (self.dims(), self.layout().strides());
        let (mut flat, mut place) = (0usize, 1usize);
        for (&d, &s) in dims.iter().zip(strides).rev() {
            if !(s == 0 && d > 1) {
                flat += (at % d) * place;
                at /= d;
            }
            place *= d; // a suffix product of the element count, which fits
        }
        Tensor::try_scalar(flat as i64)
    }

    /// An arg-reduction along `axis`, removed or kept as size 1.
    fn arg_reduce_axis(
        &self,
        op: impl ExtremeOp,
        name: &'static str,
        axis: isize,
        keepdim: bool,
    ) -> Result<Tensor<D, i64>> {
        let Some(axis) = resolve_axis_or_scalar(name, D::name, self.shape(), axis)? else {
            return self.as_one_element()?.arg_reduce_axis(op, name, 0, false);
        };
        let (len, stride) = (self.dims()[axis], self.layout().strides()[axis]);
        if len == 0 {
            return Err(empty_error(name, D::name(), self.shape(), Some(axis)));
        }
        if stride == 0 && len > 1 {
            // All equal: the first occurrence (or the first NaN) is at 0.
            return Tensor::try_zeros(reduced_shape(self.shape(), axis, keepdim));
        }
        let storage = D::arg_reduce(op, self.storage(), self.layout(), axis)?;
        Ok(Tensor::from_storage(storage, reduced_shape(self.shape(), axis, keepdim)))
    }
}

/// Which extreme a `max`/`min`-family entry of the core computes.
#[derive(Clone, Copy)]
pub(crate) enum Extreme {
    Max,
    Min,
}

/// `$body` with `$o` bound to the [`ExtremeOp`] that `$op` names.
macro_rules! with_extreme {
    ($op:expr, $o:ident => $body:expr) => {
        match $op {
            Extreme::Max => {
                let $o = Max;
                $body
            }
            Extreme::Min => {
                let $o = Min;
                $body
            }
        }
    };
}

core_table! {
    /// The core's reductions of every element type.
    pub(crate) struct Fns<C, E: Element> {
        sum_all: fn(&Tensor<C, E>) -> Result<Tensor<C, E::Sum>> = |x| x.sum_all(),
        median: fn(&Tensor<C, E>, Option<isize>, bool, bool) -> Result<(Tensor<C, E>, Tensor<C, i64>)> =
            |x, axis, keepdim, ignore_nan| x.core_median(axis, keepdim, ignore_nan),
        sum_over: fn(&Tensor<C, E>, &'static str, &[isize], bool) -> Result<Tensor<C, E::Sum>> =
            |x, name, axes, keepdim| x.sum_over(name, axes, keepdim),
        extreme_all: fn(&Tensor<C, E>, Extreme, &'static str) -> Result<Tensor<C, E>> =
            |x, op, name| with_extreme!(op, op => x.reduce_all(op, name)),
        extreme_axis: fn(&Tensor<C, E>, Extreme, &'static str, isize, bool) -> Result<Tensor<C, E>> =
            |x, op, name, axis, keepdim| with_extreme!(op, op => x.reduce_axis(op, name, axis, keepdim)),
        arg_all: fn(&Tensor<C, E>, Extreme, &'static str) -> Result<Tensor<C, i64>> =
            |x, op, name| with_extreme!(op, op => x.arg_reduce_all(op, name)),
        arg_axis: fn(&Tensor<C, E>, Extreme, &'static str, isize, bool) -> Result<Tensor<C, i64>> =
            |x, op, name, axis, keepdim| with_extreme!(op, op => x.arg_reduce_axis(op, name, axis, keepdim)),
        cumsum: fn(&Tensor<C, E>, isize) -> Result<Tensor<C, E::Sum>> = |x, axis| x.core_cumsum(axis),
        cumprod: fn(&Tensor<C, E>, isize) -> Result<Tensor<C, E::Sum>> = |x, axis| x.core_cumprod(axis),
        prod: fn(&Tensor<C, E>, &'static str, Option<(isize, bool)>) -> Result<Tensor<C, E::Sum>> =
            |x, name, axis| x.core_prod(name, axis),
        extreme_over: fn(&Tensor<C, E>, Extreme, &'static str, &[isize], bool) -> Result<Tensor<C, E>> =
            |x, op, name, axes, keepdim| with_extreme!(op, op => x.extreme_over(op, name, axes, keepdim)),
        logical: fn(&Tensor<C, E>, Logical, &'static str, &[isize], bool) -> Result<Tensor<C, u8>> =
            |x, op, name, axes, keepdim| x.core_logical(op, name, axes, keepdim),
        count_nonzero: fn(&Tensor<C, E>, &[isize]) -> Result<Tensor<C, i64>> = |x, axes| x.core_count_nonzero(axes),
        sum_to_shape: fn(&Tensor<C, E>, &Shape) -> Result<Tensor<C, E>> = |x, shape| x.core_sum_to_shape(shape),
    }
}

core_table! {
    /// The core's reductions of the float types.
    pub(crate) struct FloatFns<C, F: FloatElement> {
        quantile: fn(&Tensor<C, F>, &[f64], bool, Option<isize>, bool, QuantileInterpolation, bool) -> Result<Tensor<C, F>> =
            |x, q, scalar, axis, keepdim, interpolation, ignore_nan| {
                x.core_quantile(q, scalar, axis, keepdim, interpolation, ignore_nan)
            },
        mean: fn(&Tensor<C, F>, &'static str, Option<(&[isize], bool)>) -> Result<Tensor<C, F>> =
            |x, name, axis| x.core_mean(name, axis),
        softmax: fn(&Tensor<C, F>, &'static str, isize, bool) -> Result<Tensor<C, F>> =
            |x, name, axis, log| x.softmax_tracked(name, axis, log),
        spread: fn(&Tensor<C, F>, &'static str, Option<&[isize]>, usize, bool, bool) -> Result<Tensor<C, F>> =
            |x, name, axis, correction, keepdim, root| x.spread(name, axis, correction, keepdim, root),
        standardize: fn(
            &Tensor<C, F>,
            &'static str,
            [usize; 3],
            f64,
            Option<(&Tensor<C, F>, &Tensor<C, F>, AffineAxis)>,
        ) -> Result<[Tensor<C, F>; 3]> = |x, op, dims, eps, affine| x.core_standardize(op, dims, eps, affine),
        logsumexp: fn(&Tensor<C, F>, &'static str, &[isize], bool) -> Result<Tensor<C, F>> =
            |x, name, axes, keepdim| x.core_logsumexp(name, axes, keepdim),
        vector_norm: fn(&Tensor<C, F>, &'static str, f64, Option<&[isize]>, bool) -> Result<Tensor<C, F>> =
            |x, name, ord, axes, keepdim| x.core_vector_norm(name, ord, axes, keepdim),
        multinomial: fn(&Tensor<C, F>, usize, bool, &mut Generator) -> Result<Tensor<C, i64>> = Tensor::core_multinomial,
    }
}

impl<D: Device, E: Element> Tensor<D, E> {
    // ---- Whole tensor ----

    /// The sum of all elements, as a rank-0 tensor (0 for an empty tensor).
    /// Fails only if the device fails.
    ///
    /// The result's type is [`E::Sum`](Element::Sum): integer and `u8`
    /// tensors sum into `i64`, as PyTorch sums them into `int64`, so that
    /// counting a mask does not wrap at 256; `i64` sums wrap at `2^64`.
    /// Floats accumulate in their own type, in independent lanes and blocks
    /// combined pairwise: on a million `f32` values the error stays within
    /// `1e-6 * sum(|x|)` (tested), where a plain running sum drifts with `n`.
    /// A broadcast view is summed without being materialised.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let mask = Tensor::<Cpu, u8>::ones([1000]);
    /// let count: Tensor<Cpu, i64> = mask.sum();
    /// assert_eq!(count.item(), 1000);
    /// let huge = Tensor::<Cpu>::ones([1]).broadcast_to([1 << 40]);
    /// assert_eq!(huge.sum().item(), (1u64 << 40) as f32);
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.sum().item(), 10.0);
    /// assert_eq!(Tensor::<Cpu>::zeros([0, 3]).sum().item(), 0.0);
    /// ```
    #[fallible]
    pub fn sum(&self) -> Tensor<D, E::Sum> {
        core_call!(D, Fns<E>.sum_all(self.core()))
    }

    /// The largest element, as a rank-0 tensor; NaN if any element is NaN.
    /// Fails on an empty tensor.
    ///
    /// ```
    /// use devtensor::{Cpu, Error, Tensor};
    /// let err = Tensor::<Cpu>::zeros([0, 3]).try_max().unwrap_err();
    /// assert!(matches!(err, Error::Shape { op: "max", .. }));
    /// assert_eq!(err.to_string(), "max on Cpu: shape [0, 3]: max of an empty tensor is undefined");
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![3, -1, 7, 2], [2, 2]);
    /// assert_eq!(x.max().item(), 7);
    /// ```
    #[fallible]
    pub fn max(&self) -> Self {
        core_call!(D, Fns<E>.extreme_all(self.core(), Extreme::Max, "max"))
    }

    /// The smallest element, as a rank-0 tensor; NaN if any element is NaN.
    /// Fails on an empty tensor.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![3.0, -1.0, 7.0], [3]);
    /// assert_eq!(x.min().item(), -1.0);
    /// ```
    #[fallible]
    pub fn min(&self) -> Self {
        core_call!(D, Fns<E>.extreme_all(self.core(), Extreme::Min, "min"))
    }

    /// The row-major flat index of the largest element (of the first NaN if
    /// any; of the first occurrence on ties), as a rank-0 `i64` tensor.
    /// Fails on an empty tensor.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 9.0, 3.0, 9.0], [2, 2]);
    /// assert_eq!(x.argmax_all().item(), 1);
    /// ```
    #[fallible]
    pub fn argmax_all(&self) -> Tensor<D, i64> {
        core_call!(D, Fns<E>.arg_all(self.core(), Extreme::Max, "argmax_all"))
    }

    /// The row-major flat index of the smallest element (of the first NaN if
    /// any; of the first occurrence on ties), as a rank-0 `i64` tensor.
    /// Fails on an empty tensor.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, u8>::from_vec(vec![4, 2, 8, 2], [4]);
    /// assert_eq!(x.argmin_all().item(), 1);
    /// ```
    #[fallible]
    pub fn argmin_all(&self) -> Tensor<D, i64> {
        core_call!(D, Fns<E>.arg_all(self.core(), Extreme::Min, "argmin_all"))
    }

    // ---- Along one axis, removing it ----

    /// The sums along `axis` (negative counts from the end), which is
    /// removed; an axis of size 0 sums to 0. Integers sum into `i64`, as in
    /// [`sum`](Self::sum). A rank-0 tensor accepts axis 0 and -1
    /// and is its own sum, as in PyTorch. Fails when `axis` is out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Error, Tensor};
    /// let err = Tensor::<Cpu>::zeros([2, 3]).try_sum_axis(2).unwrap_err();
    /// assert!(matches!(err, Error::Axis { axis: 2, .. }));
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    /// assert_eq!(x.sum_axis(0).to_vec(), vec![5.0, 7.0, 9.0]);
    /// assert_eq!(x.sum_axis(-1).to_vec(), vec![6.0, 15.0]);
    /// ```
    #[fallible]
    pub fn sum_axis(&self, axes: impl Axes) -> Tensor<D, E::Sum> {
        let axes = axes.to_axes();
        core_call!(D, Fns<E>.sum_over(self.core(), "sum_axis", &axes, false))
    }

    /// The largest elements along `axis`, which is removed; NaN wins. Fails
    /// when `axis` is out of range or has size 0.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 8.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    /// assert_eq!(x.max_axis(1).to_vec(), vec![8.0, 6.0]);
    /// ```
    #[fallible]
    pub fn max_axis(&self, axis: isize) -> Self {
        core_call!(D, Fns<E>.extreme_axis(self.core(), Extreme::Max, "max_axis", axis, false))
    }

    /// The smallest elements along `axis`, which is removed; NaN wins. Fails
    /// when `axis` is out of range or has size 0.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 8, 3, 4, 0, 6], [2, 3]);
    /// assert_eq!(x.min_axis(0).to_vec(), vec![1, 0, 3]);
    /// ```
    #[fallible]
    pub fn min_axis(&self, axis: isize) -> Self {
        core_call!(D, Fns<E>.extreme_axis(self.core(), Extreme::Min, "min_axis", axis, false))
    }

    /// The index along `axis` of the largest element (of the first NaN if
    /// any; of the first occurrence on ties), with `axis` removed. Fails when
    /// `axis` is out of range or has size 0.
    ///
    /// For example, the predicted classes of a `[batch, classes]` tensor of scores:
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let logits = Tensor::<Cpu>::from_vec(vec![0.1, 2.0, -1.0, 3.0, 0.0, 3.0], [2, 3]);
    /// assert_eq!(logits.argmax(-1).to_vec(), vec![1, 0]);
    /// ```
    #[fallible]
    pub fn argmax(&self, axis: isize) -> Tensor<D, i64> {
        core_call!(D, Fns<E>.arg_axis(self.core(), Extreme::Max, "argmax", axis, false))
    }

    /// The index along `axis` of the smallest element (of the first NaN if
    /// any; of the first occurrence on ties), with `axis` removed. Fails when
    /// `axis` is out of range or has size 0.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![5.0, 2.0, 7.0, 1.0], [2, 2]);
    /// assert_eq!(x.argmin(0).to_vec(), vec![0, 1]);
    /// ```
    #[fallible]
    pub fn argmin(&self, axis: isize) -> Tensor<D, i64> {
        core_call!(D, Fns<E>.arg_axis(self.core(), Extreme::Min, "argmin", axis, false))
    }

    // ---- Along one axis, keeping it as size 1 ----

    /// Like [`sum_axis`](Self::sum_axis), but `axis` stays, with
    /// size 1 (PyTorch's `keepdim=True`), so the result broadcasts back.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 3.0, 2.0, 2.0], [2, 2]);
    /// let s = x.sum_keepdim(1);
    /// assert_eq!(s.dims(), &[2, 1]);
    /// assert_eq!((&x / &s).to_vec(), vec![0.25, 0.75, 0.5, 0.5]);
    /// ```
    #[fallible]
    pub fn sum_keepdim(&self, axes: impl Axes) -> Tensor<D, E::Sum> {
        let axes = axes.to_axes();
        core_call!(D, Fns<E>.sum_over(self.core(), "sum_keepdim", &axes, true))
    }

    /// Like [`max_axis`](Self::max_axis), keeping `axis` as size 1.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 3.0, 2.0, 0.0], [2, 2]);
    /// assert_eq!(x.max_keepdim(0).to_vec2(), vec![vec![2.0, 3.0]]);
    /// ```
    #[fallible]
    pub fn max_keepdim(&self, axis: isize) -> Self {
        core_call!(D, Fns<E>.extreme_axis(self.core(), Extreme::Max, "max_keepdim", axis, true))
    }

    /// Like [`min_axis`](Self::min_axis), keeping `axis` as size 1.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 3.0, 2.0, 0.0], [2, 2]);
    /// assert_eq!(x.min_keepdim(-1).to_vec2(), vec![vec![1.0], vec![0.0]]);
    /// ```
    #[fallible]
    pub fn min_keepdim(&self, axis: isize) -> Self {
        core_call!(D, Fns<E>.extreme_axis(self.core(), Extreme::Min, "min_keepdim", axis, true))
    }

    /// Like [`argmax`](Self::argmax), keeping `axis` as size 1.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 3.0, 2.0, 0.0], [2, 2]);
    /// assert_eq!(x.argmax_keepdim(1).to_vec2(), vec![vec![1], vec![0]]);
    /// ```
    #[fallible]
    pub fn argmax_keepdim(&self, axis: isize) -> Tensor<D, i64> {
        core_call!(D, Fns<E>.arg_axis(self.core(), Extreme::Max, "argmax_keepdim", axis, true))
    }

    /// Like [`argmin`](Self::argmin), keeping `axis` as size 1.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 3.0, 2.0, 0.0], [2, 2]);
    /// assert_eq!(x.argmin_keepdim(0).to_vec2(), vec![vec![0, 1]]);
    /// ```
    #[fallible]
    pub fn argmin_keepdim(&self, axis: isize) -> Tensor<D, i64> {
        core_call!(D, Fns<E>.arg_axis(self.core(), Extreme::Min, "argmin_keepdim", axis, true))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    /// `sum / count`, NaN for no elements (0 / 0), as in PyTorch.
    fn divide_by_count(sum: Self, count: usize) -> Result<Self> {
        sum.try_div_scalar(E::from_f64(count as f64))
    }

    /// The mean of all elements (`axes` `None`), or over `axes`, removed
    /// or kept: the core of the `mean` family, recorded as `name`.
    fn core_mean(&self, name: &'static str, axes: Option<(&[isize], bool)>) -> Result<Self> {
        if E::DTYPE.is_half() {
            return self.try_to_dtype::<f32>()?.core_mean(name, axes)?.try_to_dtype::<E>();
        }
        match axes {
            None => Self::divide_by_count(self.sum_all()?, self.elem_count()),
            Some((axes, keepdim)) => {
                let sum = self.sum_over(name, axes, keepdim)?;
                let resolved = resolve_axes(name, D::name, self.shape(), axes)?;
                Self::divide_by_count(sum, count_over(self.shape(), &resolved))
            }
        }
    }

    /// `softmax` or `log_softmax` along `axis`, recorded for autograd.
    fn softmax_tracked(&self, name: &'static str, axis: isize, log: bool) -> Result<Self> {
        let resolved = resolve_axis_or_scalar(name, D::name, self.shape(), axis)?;
        let forward = || match resolved {
            None => self.as_one_element()?.softmax_tracked(name, 0, log)?.try_reshape(()),
            Some(axis) => {
                Ok(Tensor::from_storage(D::softmax(self.storage(), self.layout(), axis, log)?, self.shape().clone()))
            }
        };
        autograd::track(name, &[self.node()], forward, |out| grad::softmax::<D, E>(out.clone(), resolved, log))
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// The mean of all elements, as a rank-0 tensor; NaN for an empty tensor.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 6.0], [2, 2]);
    /// assert_eq!(x.mean().item(), 3.0);
    /// assert!(Tensor::<Cpu>::zeros([0]).mean().item().is_nan());
    /// ```
    #[fallible]
    pub fn mean(&self) -> Self {
        core_call!(D, FloatFns<E>.mean(self.core(), "mean", None))
    }

    /// The means along `axis`, which is removed; NaN over an axis of size 0.
    /// Fails when `axis` is out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    /// assert_eq!(x.mean_axis(0).to_vec(), vec![2.5, 3.5, 4.5]);
    /// ```
    #[fallible]
    pub fn mean_axis(&self, axes: impl Axes) -> Self {
        let axes = axes.to_axes();
        core_call!(D, FloatFns<E>.mean(self.core(), "mean_axis", Some((&axes, false))))
    }

    /// Like [`mean_axis`](Self::mean_axis), keeping `axis` as size 1.
    ///
    /// For example, centring the rows of a matrix:
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 3.0, 10.0, 20.0], [2, 2]);
    /// assert_eq!((&x - &x.mean_keepdim(1)).to_vec(), vec![-1.0, 1.0, -5.0, 5.0]);
    /// ```
    #[fallible]
    pub fn mean_keepdim(&self, axes: impl Axes) -> Self {
        let axes = axes.to_axes();
        core_call!(D, FloatFns<E>.mean(self.core(), "mean_keepdim", Some((&axes, true))))
    }

    /// `exp(x) / sum(exp(x))` along `axis`, computed as
    /// `exp(x - max) / sum(exp(x - max))` so that large inputs do not
    /// overflow. Entries of `-inf` get 0; a row that is all `-inf`, or holds
    /// NaN or `+inf`, gives NaN, as in PyTorch. Use
    /// [`log_softmax`](Self::log_softmax) where probabilities underflow.
    /// Fails when `axis` is out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let logits = Tensor::<Cpu>::from_vec(vec![1000.0, 1000.0, 0.0, f32::NEG_INFINITY], [2, 2]);
    /// assert_eq!(logits.softmax(-1).to_vec(), vec![0.5, 0.5, 1.0, 0.0]);
    /// ```
    #[fallible]
    pub fn softmax(&self, axis: isize) -> Self {
        core_call!(D, FloatFns<E>.softmax(self.core(), "softmax", axis, false))
    }

    /// `log(softmax(x))` along `axis`, computed as
    /// `x - max - log(sum(exp(x - max)))`: accurate where the probabilities
    /// underflow, and the input of a cross-entropy loss. Same special values
    /// as [`softmax`](Self::softmax). Fails when `axis` is out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let logits = Tensor::<Cpu, f64>::from_vec(vec![0.0, 0.0, -200.0, 0.0], [2, 2]);
    /// let ln2 = std::f64::consts::LN_2;
    /// assert_eq!(logits.log_softmax(1).to_vec(), vec![-ln2, -ln2, -200.0, 0.0]);
    /// ```
    #[fallible]
    pub fn log_softmax(&self, axis: isize) -> Self {
        core_call!(D, FloatFns<E>.softmax(self.core(), "log_softmax", axis, true))
    }
}
