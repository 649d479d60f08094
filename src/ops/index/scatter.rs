//! Scattering: `scatter` (a value written at each index), `scatter_scalar`
//! and `scatter_reduce` (values combined at each index by a sum, product,
//! mean, maximum or minimum), with PyTorch's gradients. They share one
//! kernel ([`IndexKernel::scatter`](super::IndexKernel::scatter)) with
//! `scatter_add`, which walks each line along the scattered axis in order, so
//! a repeated index combines the same way on every device.

use super::grad::pad_with_zeros;
use super::{Fns, ScatterMode, check_fits, check_indices, check_same_rank};
use crate::autograd::{self, Backward, float_rule, rule};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result, resolve_axis};
use crate::layout::Shape;
use crate::ops::binary::Div;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// How [`Tensor::scatter_reduce`] combines the values sent to one place,
/// PyTorch's `reduce=` strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduce {
    /// `"sum"`.
    Sum,
    /// `"prod"`. (Not named `Prod`: rustc would then write the static
    /// shapes' `Prod` out in full in every diagnostic.)
    Product,
    /// `"mean"`: the sum divided by the number of values, rounded toward
    /// negative infinity for integers as in PyTorch.
    Mean,
    /// `"amax"`: the largest; NaN wins. The gradient is shared evenly by
    /// the values equal to the result.
    Amax,
    /// `"amin"`: the smallest; NaN wins. The gradient is shared evenly by
    /// the values equal to the result.
    Amin,
}

impl ScatterReduce {
    /// PyTorch's name of the reduction.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sum => "sum",
            Self::Product => "prod",
            Self::Mean => "mean",
            Self::Amax => "amax",
            Self::Amin => "amin",
        }
    }
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// A copy of this tensor with `src[p]` written at `p with p[axis] =
    /// index[p]` for every position `p` of `index`, like the out-of-place
    /// `torch.scatter(x, dim, index, src)` (Hugging Face's top-p sampling:
    /// `remove.scatter(1, sorted_indices, sorted_remove)`). Where an index
    /// repeats along `axis`, the last write wins (PyTorch leaves it
    /// unspecified). The shape rules and errors are
    /// [`scatter_add`](Self::scatter_add)'s. The gradient reaches `src`
    /// where it was written and this tensor where it was not overwritten.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::zeros([2, 3]);
    /// let index = Tensor::<Cpu, i64>::from_vec(vec![2, 0, 1, 1], [2, 2]);
    /// let src = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.scatter(1, &index, &src).to_vec2(), vec![vec![2.0, 0.0, 1.0], vec![0.0, 4.0, 0.0]]);
    /// ```
    #[fallible]
    pub fn scatter<D2: Device, D3: Device, E3: Element>(
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
        core_call!(D, Fns<E>.scatter(self.core(), axis, index.core(), src.core()))
    }

    /// A copy of this tensor with `value` written at `p with p[axis] =
    /// index[p]` for every position `p` of `index`, like
    /// `x.scatter(dim, index, value)` with a number: the one-hot rows of
    /// `zeros.scatter_(1, labels, 1.0)`. Fails as
    /// [`scatter`](Self::scatter) does.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let labels = Tensor::<Cpu, i64>::from_vec(vec![2, 0], [2, 1]);
    /// let one_hot = Tensor::<Cpu>::zeros([2, 3]).scatter_scalar(1, &labels, 1.0);
    /// assert_eq!(one_hot.to_vec2(), vec![vec![0.0, 0.0, 1.0], vec![1.0, 0.0, 0.0]]);
    /// ```
    #[fallible]
    pub fn scatter_scalar<D2: Device>(&self, axis: isize, index: &Tensor<D2, i64>, value: E) -> Self
    where
        D: SameDevice<D2>,
    {
        let index: &Tensor<D, i64> = same_device(index);
        core_call!(D, Fns<E>.scatter_scalar(self.core(), axis, index.core(), value))
    }

    /// A copy of this tensor into which each `src[p]` is combined at
    /// `p with p[axis] = index[p]` by `reduce`, like
    /// `x.scatter_reduce(dim, index, src, reduce, include_self=...)`: with
    /// `include_self`, the values already there take part (PyTorch's
    /// default); without it, a place that receives values holds their
    /// reduction alone, and the others keep this tensor's value. The
    /// gradients are PyTorch's: exact with zeros for `Prod` (whose second
    /// derivative, as PyTorch's, is refused where two zeros meet), shared
    /// evenly by ties for `Amax` and `Amin` (this tensor's tied value is
    /// counted but gets no share without `include_self`, as in PyTorch).
    /// Fails as [`scatter`](Self::scatter) does.
    ///
    /// Each segment's mean, maximum and product (a graph network's pooling):
    /// ```
    /// use devtensor::ops::index::ScatterReduce;
    /// use devtensor::{Cpu, Tensor};
    /// let segment = Tensor::<Cpu, i64>::from_vec(vec![0, 0, 1, 1, 1], [5]);
    /// let values = Tensor::<Cpu>::from_vec(vec![1.0, 3.0, 2.0, 6.0, 4.0], [5]);
    /// let out = Tensor::<Cpu>::zeros([3]);
    /// let mean = out.scatter_reduce(0, &segment, &values, ScatterReduce::Mean, false);
    /// assert_eq!(mean.to_vec(), vec![2.0, 4.0, 0.0]);
    /// let max = out.scatter_reduce(0, &segment, &values, ScatterReduce::Amax, false);
    /// assert_eq!(max.to_vec(), vec![3.0, 6.0, 0.0]);
    /// let with_self = out.scatter_reduce(0, &segment, &values, ScatterReduce::Product, true);
    /// assert_eq!(with_self.to_vec(), vec![0.0, 0.0, 0.0]);
    /// ```
    #[fallible]
    pub fn scatter_reduce<D2: Device, D3: Device, E3: Element>(
        &self,
        axis: isize,
        index: &Tensor<D2, i64>,
        src: &Tensor<D3, E3>,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Self
    where
        D: SameDevice<D2> + SameDevice<D3>,
        E: SameDtype<E3>,
    {
        let index: &Tensor<D, i64> = same_device(index);
        let src: &Tensor<D, E> = same_device(src);
        core_call!(D, Fns<E>.scatter_reduce(self.core(), axis, index.core(), src.core(), reduce, include_self))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// Checks `op`'s operands as `torch.scatter` does and resolves `axis`.
    pub(super) fn check_scatter(
        &self,
        op: &'static str,
        axis: isize,
        index: &Tensor<D, i64>,
        src: &Self,
    ) -> Result<usize> {
        let ax = resolve_axis(op, D::name, self.shape(), axis)?;
        let shapes = || vec![self.shape().clone(), index.shape().clone(), src.shape().clone()];
        check_same_rank::<D>(op, shapes, &[("the input", self.shape()), ("src", src.shape())], index.shape())?;
        check_fits::<D>(op, shapes, "src", src.shape(), index.shape(), None)?;
        check_fits::<D>(op, shapes, "the input", self.shape(), index.shape(), Some(ax))?;
        check_indices(op, self.shape(), ax, index)?;
        Ok(ax)
    }

    /// The scatter kernel on checked operands, recording nothing.
    pub(super) fn scatter_untracked(
        &self,
        ax: usize,
        index: &Tensor<D, i64>,
        src: &Self,
        mode: ScatterMode,
    ) -> Result<Self> {
        let storage = D::scatter(
            self.storage(),
            self.layout(),
            ax,
            index.storage(),
            index.layout(),
            src.storage(),
            src.layout(),
            mode,
        )?;
        Ok(Tensor::from_storage(storage, self.shape().clone()))
    }

    pub(super) fn core_scatter(&self, axis: isize, index: &Tensor<D, i64>, src: &Self) -> Result<Self> {
        const OP: &str = "scatter";
        let ax = self.check_scatter(OP, axis, index, src)?;
        autograd::track(
            OP,
            &[self.node(), src.node()],
            || self.scatter_untracked(ax, index, src, ScatterMode::Assign),
            |_| float_rule!(E, F => scatter_rule::<D, F>(ax, index.clone(), Some(src.shape().clone()))),
        )
    }

    pub(super) fn core_scatter_scalar(&self, axis: isize, index: &Tensor<D, i64>, value: E) -> Result<Self> {
        const OP: &str = "scatter_scalar";
        let src = Tensor::<D, E>::try_full(index.shape().clone(), value)?;
        let ax = self.check_scatter(OP, axis, index, &src)?;
        autograd::track(
            OP,
            &[self.node()],
            || self.scatter_untracked(ax, index, &src, ScatterMode::Assign),
            |_| float_rule!(E, F => scatter_rule::<D, F>(ax, index.clone(), None)),
        )
    }

    pub(super) fn core_scatter_reduce(
        &self,
        axis: isize,
        index: &Tensor<D, i64>,
        src: &Self,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Result<Self> {
        const OP: &str = "scatter_reduce";
        let ax = self.check_scatter(OP, axis, index, src)?;
        let forward = || scatter_reduce_forward(self, ax, index, src, reduce, include_self);
        autograd::track(OP, &[self.node(), src.node()], forward, |out| {
            float_rule!(E, F => scatter_reduce_rule::<D, F>(ScatterReduceGrad {
                axis: ax,
                index: index.clone(),
                input: autograd::as_float(self),
                src: autograd::as_float(src),
                out: autograd::as_float(out),
                reduce,
                include_self,
            }))
        })
    }
}

/// `x.scatter_reduce(..)` on checked operands, recording nothing.
fn scatter_reduce_forward<D: CoreDevice, E: Element>(
    x: &Tensor<D, E>,
    ax: usize,
    index: &Tensor<D, i64>,
    src: &Tensor<D, E>,
    reduce: ScatterReduce,
    include_self: bool,
) -> Result<Tensor<D, E>> {
    let (mode, identity) = match reduce {
        ScatterReduce::Sum | ScatterReduce::Mean => (ScatterMode::Add, E::ZERO),
        ScatterReduce::Product => (ScatterMode::Multiply, E::ONE),
        ScatterReduce::Amax => (ScatterMode::Max, E::MIN),
        ScatterReduce::Amin => (ScatterMode::Min, E::MAX),
    };
    // Without `self`, the places that receive values start from the
    // reduction's identity instead.
    let start = if include_self {
        x.clone()
    } else {
        x.scatter_untracked(ax, index, &Tensor::try_full(index.shape().clone(), identity)?, ScatterMode::Assign)?
    };
    let combined = start.scatter_untracked(ax, index, src, mode)?;
    if reduce != ScatterReduce::Mean {
        return Ok(combined);
    }
    let counts = receive_counts(x, ax, index, include_self)?;
    if E::IS_FLOAT { combined.try_apply_binary(Div, &counts) } else { combined.try_div_floor(&counts) }
}

/// How many values each place of `x` holds after a scatter of `index`
/// along `ax`: the values sent there, plus its own when `include_self` or
/// when it receives none (so never 0).
fn receive_counts<D: CoreDevice, E: Element>(
    x: &Tensor<D, E>,
    ax: usize,
    index: &Tensor<D, i64>,
    include_self: bool,
) -> Result<Tensor<D, E>> {
    let ones = Tensor::<D, E>::try_ones(index.shape().clone())?;
    let mut counts = x.try_ones_like()?;
    if !include_self {
        counts = counts.scatter_untracked(ax, index, &ones.try_zeros_like()?, ScatterMode::Assign)?;
    }
    let counts = counts.scatter_untracked(ax, index, &ones, ScatterMode::Add)?;
    // A `u8` count of 256 wraps to 0: divide by 1 there, as PyTorch does.
    counts.try_eq_scalar(E::ZERO)?.try_where_cond(&counts.try_ones_like()?, &counts)
}

/// `x.scatter(axis, index, src)` of a `src` of shape `src` (`None` for
/// `scatter_scalar`, whose value has no gradient): `x` keeps the gradient
/// where it was not overwritten, and `src` gets the gradient of the places
/// it was written to.
fn scatter_rule<D: CoreDevice, F: FloatElement>(
    axis: usize,
    index: Tensor<D, i64>,
    src: Option<Shape>,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, needs| {
        let ax = axis as isize;
        let mut grads = vec![needs.then(0, || g.try_scatter_scalar(ax, &index, F::ZERO))?];
        if let Some(src) = &src {
            grads.push(needs.then(1, || pad_with_zeros(&g.try_gather(ax, &index)?, src))?);
        }
        Ok(grads)
    })
}

/// What [`scatter_reduce_rule`] keeps of the forward.
struct ScatterReduceGrad<D: CoreDevice, F: FloatElement> {
    axis: usize,
    index: Tensor<D, i64>,
    input: Tensor<D, F>,
    src: Tensor<D, F>,
    out: Tensor<D, F>,
    reduce: ScatterReduce,
    include_self: bool,
}

/// The gradients of `scatter_reduce`, written with recorded ops so that
/// they can be differentiated again.
fn scatter_reduce_rule<D: CoreDevice, F: FloatElement>(saved: ScatterReduceGrad<D, F>) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, needs| {
        let ScatterReduceGrad { axis, ref index, ref input, ref src, ref out, reduce, include_self } = saved;
        let out = &autograd::saved_output(out);
        let ax = axis as isize;
        // Only the index's extent of `src` was read.
        let used: Vec<usize> = index.dims().to_vec();
        let src_used = narrowed_to(src, &used)?;
        // `x`'s own values take part where `include_self`, or where nothing
        // was sent (they pass through).
        let self_takes_part =
            |t: Tensor<D, F>| if include_self { Ok(t) } else { t.try_scatter_scalar(ax, index, F::ZERO) };
        let (g_x, g_src) = match reduce {
            ScatterReduce::Sum => (self_takes_part(g.clone())?, g.try_gather(ax, index)?),
            ScatterReduce::Mean => {
                let counts = receive_counts(&input.detach(), axis, index, include_self)?;
                let share = g.try_div(&counts)?;
                (self_takes_part(share.clone())?, share.try_gather(ax, index)?)
            }
            ScatterReduce::Amax | ScatterReduce::Amin => {
                // Every value equal to the result shares its gradient evenly.
                // (PyTorch counts the input's own value among the ties even
                // without `include_self`, and then gives it no share.)
                let is_result = |t: &Tensor<D, F>, result: &Tensor<D, F>| t.try_eq(result)?.try_to_dtype::<F>();
                let self_ties = is_result(input, out)?;
                let src_ties = is_result(&src_used, &out.try_gather(ax, index)?)?;
                let ties = self_ties.try_scatter_add(ax, index, &src_ties)?;
                let share = g.try_div(&ties)?;
                (self_takes_part(share.try_mul(&self_ties)?)?, share.try_gather(ax, index)?.try_mul(&src_ties)?)
            }
            ScatterReduce::Product => prod_gradients(g, ax, index, input, &src_used, out, include_self)?,
        };
        let g_x = needs.then(0, || Ok(g_x))?;
        let g_src = needs.then(1, || pad_with_zeros(&g_src, src.shape()))?;
        Ok(vec![g_x, g_src])
    })
}

/// The gradients of a scatter product, exact with zeros: each value's is
/// the product of the other values at its place, computed without dividing
/// by a zero (a value that is the only zero at its place gets the product of
/// the others; with two zeros there, every value's is 0).
fn prod_gradients<D: CoreDevice, F: FloatElement>(
    g: &Tensor<D, F>,
    ax: isize,
    index: &Tensor<D, i64>,
    input: &Tensor<D, F>,
    src: &Tensor<D, F>,
    out: &Tensor<D, F>,
    include_self: bool,
) -> Result<(Tensor<D, F>, Tensor<D, F>)> {
    let reduce =
        |x: &Tensor<D, F>, s: &Tensor<D, F>| x.try_scatter_reduce(ax, index, s, ScatterReduce::Product, include_self);
    let g_out = g.try_mul(out)?;
    // The input's: the product with its own value taken as 1, so a zero
    // there does not hide the others.
    let input_zero = input.try_eq_scalar(F::ZERO)?;
    let input_as_one = input.try_masked_fill(&input_zero, F::ONE)?;
    let others_of_input = reduce(&input_as_one, src)?.try_div(&input_as_one)?;
    let mut g_x = g.try_mul(&others_of_input)?;
    if !include_self {
        g_x = g_x.try_scatter_scalar(ax, index, F::ZERO)?;
    }
    // The source's: the product divided by the value, except for a value
    // that is its place's only zero among the sources.
    let src_zero = src.try_eq_scalar(F::ZERO)?;
    let zeros_there =
        input.try_zeros_like()?.try_scatter_add(ax, index, &src_zero.try_to_dtype::<F>()?)?.try_gather(ax, index)?;
    if autograd::is_grad_enabled()
        && zeros_there.try_amax(())?.try_to_vec()?.first().is_some_and(|&z| z >= F::from_f64(2.0))
    {
        // Recording this gradient for a second derivative: where two zeros
        // meet, the formula below is exact but its own derivative is not,
        // so refuse, as PyTorch does.
        return Err(Error::Argument {
            op: "scatter_reduce",
            device: D::name(),
            reason: "the second derivative of a product where two or more zeros meet is not supported \
                     (as in PyTorch); differentiate it once"
                .into(),
        });
    }
    let only_zero = src_zero.try_logical_and(&zeros_there.try_eq_scalar(F::ONE)?)?;
    let without_it = reduce(input, &src.try_masked_fill(&only_zero, F::ONE)?)?;
    let by_division = g_out.try_gather(ax, index)?.try_div(&src.try_masked_fill(&src_zero, F::ONE)?)?;
    let g_src = only_zero.try_where_cond(&g.try_mul(&without_it)?.try_gather(ax, index)?, &by_division)?;
    Ok((g_x, g_src))
}

/// `t` narrowed to its first `dims[d]` elements on each axis `d`.
fn narrowed_to<D: CoreDevice, F: FloatElement>(t: &Tensor<D, F>, dims: &[usize]) -> Result<Tensor<D, F>> {
    let mut t = t.clone();
    for (d, &n) in dims.iter().enumerate() {
        if t.dims()[d] != n {
            t = t.try_narrow(d as isize, 0, n)?;
        }
    }
    Ok(t)
}
