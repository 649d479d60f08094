//! Order statistics: `median`, `nanmedian`, `quantile` and `nanquantile`,
//! as PyTorch computes them: from the stable ascending order of each line
//! (NaN after every number), the chosen positions picked from the input by
//! `gather`, so that the gradient reaches the elements chosen (and, for an
//! interpolated quantile, the two it lies between, by their weights).
//! Without the `nan` prefix a line with a NaN gives NaN; with it, NaN is
//! left out, and a line of NaN alone gives NaN.

use super::{FloatFns, Fns};
use crate::element::{Element, FloatElement};
use crate::error::{Error, Result, resolve_axis};
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

/// How [`Tensor::quantile`] picks a value that falls between two elements
/// `lo <= hi` of the sorted line, at fraction `w` of the way: PyTorch's
/// `interpolation=` strings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QuantileInterpolation {
    /// `"linear"` (PyTorch's default): `lo + w · (hi - lo)`, as `torch.lerp`.
    /// (Not named `Linear`: rustc would then write the layer `nn::Linear`
    /// out in full in every diagnostic.)
    #[default]
    Lerp,
    /// `"lower"`: `lo`.
    Lower,
    /// `"higher"`: `hi`.
    Higher,
    /// `"midpoint"`: halfway between `lo` and `hi`.
    Midpoint,
    /// `"nearest"`: the nearer of the two, the even position on a tie.
    Nearest,
}

/// The probabilities [`Tensor::quantile`] takes: one `f64` (the result has
/// no axis for it), or a list of them (the result's first axis), as
/// PyTorch's `q` is a number or a 1-D tensor.
pub trait Quantiles {
    /// The probabilities, and whether they were one number.
    fn probabilities(&self) -> (Vec<f64>, bool);
}

impl Quantiles for f64 {
    fn probabilities(&self) -> (Vec<f64>, bool) {
        (vec![*self], true)
    }
}

impl Quantiles for &[f64] {
    fn probabilities(&self) -> (Vec<f64>, bool) {
        (self.to_vec(), false)
    }
}

impl<const N: usize> Quantiles for [f64; N] {
    fn probabilities(&self) -> (Vec<f64>, bool) {
        (self.to_vec(), false)
    }
}

impl Quantiles for Vec<f64> {
    fn probabilities(&self) -> (Vec<f64>, bool) {
        (self.clone(), false)
    }
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// The median of all elements, as a rank-0 tensor, like
    /// `torch.median(x)`: the lower of the two middle values of an even
    /// count (not their mean), NaN when there is a NaN. Fails on an empty
    /// tensor.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![4.0, 1.0, 3.0, 2.0], [2, 2]);
    /// assert_eq!(x.median().item(), 2.0);
    /// assert!(Tensor::<Cpu>::from_vec(vec![1.0, f32::NAN], [2]).median().item().is_nan());
    /// ```
    #[fallible]
    pub fn median(&self) -> Self {
        let pair: Result<(Self, Tensor<D, i64>)> = core_call!(D, Fns<E>.median(self.core(), None, false, false));
        pair.map(|(values, _)| values)
    }

    /// The median along `axis`, which is removed, and its position there,
    /// like `x.median(dim)` (a `(values, indices)` pair): the lower middle
    /// value, NaN (at the first NaN's position) in a line with a NaN. Of equal
    /// middle values, the index is one of theirs. The gradient reaches the
    /// element chosen. Fails on an empty axis.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![5, 1, 3, 9, 7, 8], [2, 3]);
    /// let (values, indices) = x.median_axis(1);
    /// assert_eq!(values.to_vec(), vec![3, 8]);
    /// assert_eq!(indices.to_vec(), vec![2, 2]);
    /// ```
    #[fallible]
    pub fn median_axis(&self, axis: isize) -> (Self, Tensor<D, i64>) {
        core_call!(D, Fns<E>.median(self.core(), Some(axis), false, false))
    }

    /// Like [`median_axis`](Self::median_axis), keeping `axis` as size 1
    /// (PyTorch's `keepdim=True`).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![5.0, 1.0, 3.0, 9.0], [2, 2]);
    /// assert_eq!(x.median_keepdim(0).0.dims(), &[1, 2]);
    /// ```
    #[fallible]
    pub fn median_keepdim(&self, axis: isize) -> (Self, Tensor<D, i64>) {
        core_call!(D, Fns<E>.median(self.core(), Some(axis), true, false))
    }

    /// The median of the elements that are not NaN, like
    /// `torch.nanmedian(x)`; NaN when all are. Fails on an empty tensor.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![f32::NAN, 1.0, 3.0], [3]);
    /// assert_eq!(x.nanmedian().item(), 1.0);
    /// ```
    #[fallible]
    pub fn nanmedian(&self) -> Self {
        let pair: Result<(Self, Tensor<D, i64>)> = core_call!(D, Fns<E>.median(self.core(), None, false, true));
        pair.map(|(values, _)| values)
    }

    /// [`median_axis`](Self::median_axis) leaving NaN out, like
    /// `x.nanmedian(dim, keepdim)`; a line of NaN alone gives NaN, at its
    /// middle position (PyTorch's position there depends on its selection
    /// algorithm).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![f32::NAN, 1.0, 3.0, f32::NAN, f32::NAN, f32::NAN], [2, 3]);
    /// let (values, indices) = x.nanmedian_axis(1, false);
    /// assert_eq!((values.to_vec()[0], indices.to_vec()[0]), (1.0, 1));
    /// assert!(values.to_vec()[1].is_nan());
    /// ```
    #[fallible]
    pub fn nanmedian_axis(&self, axis: isize, keepdim: bool) -> (Self, Tensor<D, i64>) {
        core_call!(D, Fns<E>.median(self.core(), Some(axis), keepdim, true))
    }
}

impl<D: Device, F: FloatElement> Tensor<D, F> {
    /// The `q`-quantiles along `axis` (or of all elements, for `None`), like
    /// `torch.quantile(x, q, dim, keepdim, interpolation=...)`: `q` is one
    /// probability in `[0, 1]`, or a list of them, which become the result's
    /// first axis. The position `q · (n - 1)` of each line's sorted values
    /// falls between two of them, which `interpolation` combines. A line
    /// with a NaN gives NaN. The gradient reaches the elements used, by
    /// their weights. Fails on a `q` outside `[0, 1]` and on an empty line.
    ///
    /// ```
    /// use devtensor::ops::reduce::QuantileInterpolation;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0], [2, 4]);
    /// let linear = QuantileInterpolation::Lerp;
    /// assert_eq!(x.quantile(0.5, Some(1), false, linear).to_vec(), vec![2.5, 25.0]);
    /// let quartiles = x.quantile([0.25, 0.75], Some(1), false, linear);
    /// assert_eq!(quartiles.to_vec2(), vec![vec![1.75, 17.5], vec![3.25, 32.5]]);
    /// assert_eq!(x.quantile(0.5, None, false, QuantileInterpolation::Lower).item(), 4.0);
    /// assert!(x.try_quantile(1.5, None, false, linear).is_err());
    /// ```
    #[fallible]
    pub fn quantile(
        &self,
        q: impl Quantiles,
        axis: Option<isize>,
        keepdim: bool,
        interpolation: QuantileInterpolation,
    ) -> Self {
        let (q, scalar) = q.probabilities();
        core_call!(D, FloatFns<F>.quantile(self.core(), &q, scalar, axis, keepdim, interpolation, false))
    }

    /// [`quantile`](Self::quantile) of the elements that are not NaN, like
    /// `torch.nanquantile`; a line of NaN alone gives NaN.
    ///
    /// ```
    /// use devtensor::ops::reduce::QuantileInterpolation;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![f32::NAN, 1.0, 2.0], [3]);
    /// assert_eq!(x.nanquantile(0.5, None, false, QuantileInterpolation::Lerp).item(), 1.5);
    /// ```
    #[fallible]
    pub fn nanquantile(
        &self,
        q: impl Quantiles,
        axis: Option<isize>,
        keepdim: bool,
        interpolation: QuantileInterpolation,
    ) -> Self {
        let (q, scalar) = q.probabilities();
        core_call!(D, FloatFns<F>.quantile(self.core(), &q, scalar, axis, keepdim, interpolation, true))
    }
}

/// The lines an order statistic runs along: the tensor (flattened for
/// `None`) and the axis.
struct Lines<D: CoreDevice, E: Element> {
    x: Tensor<D, E>,
    axis: usize,
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    fn lines(&self, op: &'static str, axis: Option<isize>) -> Result<Lines<D, E>> {
        let (x, axis) = match axis {
            None => (self.try_reshape([self.elem_count()])?, 0),
            Some(a) => (self.clone(), resolve_axis(op, D::name, self.shape(), a)?),
        };
        if x.dims()[axis] == 0 {
            return Err(Error::Shape {
                op,
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: format!("axis {axis} is empty: an order statistic needs at least one element"),
            });
        }
        Ok(Lines { x, axis })
    }

    /// How many elements of each line are NaN, keeping the axis as 1.
    fn nan_counts(&self, axis: usize) -> Result<Tensor<D, i64>> {
        // `x != x` only at NaN (never, for the integer types).
        self.try_ne(self)?.try_sum_keepdim(axis as isize)
    }

    /// The result of a statistic over `lines`, `picked` with the line axis
    /// as 1, shaped as the caller asked: that axis removed unless
    /// `keepdim`, and for a statistic of all elements (`axis` `None`) every
    /// axis of `self` as 1, or none.
    fn shaped<T: Element>(
        &self,
        picked: Tensor<D, T>,
        axis: Option<isize>,
        line_axis: usize,
        keepdim: bool,
    ) -> Result<Tensor<D, T>> {
        match (axis, keepdim) {
            (None, true) => picked.try_reshape(vec![1; self.rank()]),
            (None, false) => picked.try_reshape(Vec::<usize>::new()),
            (Some(_), true) => Ok(picked),
            (Some(_), false) => picked.try_squeeze(line_axis as isize),
        }
    }

    pub(super) fn core_median(
        &self,
        axis: Option<isize>,
        keepdim: bool,
        ignore_nan: bool,
    ) -> Result<(Self, Tensor<D, i64>)> {
        let op = if ignore_nan { "nanmedian" } else { "median" };
        let Lines { x, axis: ax } = self.lines(op, axis)?;
        let n = x.dims()[ax] as i64;
        let nan = x.nan_counts(ax)?;
        // The lower middle of the numbers. Where the line has a NaN, its
        // first NaN, as PyTorch's (the first after the numbers: the order is
        // stable). Leaving NaN out, a line of NaN alone gives its middle
        // one (PyTorch's choice there falls out of its selection algorithm).
        let valid = nan.try_rsub_scalar(n)?;
        let middle = Tensor::<D, i64>::try_full(nan.shape().clone(), (n - 1) / 2)?;
        let at = if ignore_nan {
            valid.try_eq_scalar(0)?.try_where_cond(&middle, &valid.try_sub_scalar(1)?.try_div_floor_scalar(2)?)?
        } else {
            nan.try_gt_scalar(0)?.try_where_cond(&valid, &middle)?
        };
        let order = x.try_argsort(ax as isize, false)?;
        let indices = order.try_gather(ax as isize, &at)?;
        let values = x.try_gather(ax as isize, &indices)?;
        Ok((self.shaped(values, axis, ax, keepdim)?, self.shaped(indices, axis, ax, keepdim)?))
    }
}

impl<D: CoreDevice, F: FloatElement> Tensor<D, F> {
    #[allow(clippy::too_many_arguments)] // PyTorch's arguments, and whether NaN is left out.
    pub(super) fn core_quantile(
        &self,
        q: &[f64],
        scalar: bool,
        axis: Option<isize>,
        keepdim: bool,
        interpolation: QuantileInterpolation,
        ignore_nan: bool,
    ) -> Result<Self> {
        let op = if ignore_nan { "nanquantile" } else { "quantile" };
        if let Some(bad) = q.iter().find(|p| !(0.0..=1.0).contains(*p)) {
            return Err(Error::Argument { op, device: D::name(), reason: format!("q must be in [0, 1], got {bad}") });
        }
        if F::DTYPE.is_half() {
            // PyTorch takes f32 and f64 only; the half types widen to f32.
            let wide = self.try_to_dtype::<f32>()?;
            return wide.core_quantile(q, scalar, axis, keepdim, interpolation, ignore_nan)?.try_to_dtype::<F>();
        }
        let Lines { x, axis: ax } = self.lines(op, axis)?;
        let a = ax as isize;
        let n = x.dims()[ax];
        let sorted = x.try_gather(a, &x.try_argsort(a, false)?)?;
        let nan = x.nan_counts(ax)?;
        // The ranks in the input's type, as PyTorch's, so that the weights
        // between two elements round as its do.
        let valid = nan.try_rsub_scalar(n as i64)?.try_to_dtype::<F>()?;
        // Lines whose rank is the last position: one with a NaN, or, leaving
        // NaN out, one with nothing else.
        let to_last = if ignore_nan { valid.try_eq_scalar(F::ZERO)? } else { nan.try_gt_scalar(0)? };
        let last = Tensor::<D, F>::try_full(valid.shape().clone(), F::from_f64((n - 1) as f64))?;
        let mut results = Vec::with_capacity(q.len());
        for &p in q {
            let spread = valid.try_sub_scalar(F::ONE)?.try_mul_scalar(F::from_f64(p))?;
            let rank = to_last.try_where_cond(&last, &spread)?;
            let pick = |r: &Tensor<D, F>| sorted.try_gather(a, &r.try_to_dtype::<i64>()?);
            let (below, above) = (rank.try_floor()?, rank.try_ceil()?);
            let value = match interpolation {
                QuantileInterpolation::Lower => pick(&below)?,
                QuantileInterpolation::Higher => pick(&above)?,
                QuantileInterpolation::Nearest => pick(&rank.try_round()?)?,
                QuantileInterpolation::Lerp | QuantileInterpolation::Midpoint => {
                    let weight = match interpolation {
                        QuantileInterpolation::Midpoint => below.try_full_like(F::from_f64(0.5))?,
                        _ => rank.try_sub(&below)?,
                    };
                    lerp(&pick(&below)?, &pick(&above)?, &weight)?
                }
            };
            results.push(self.shaped(value, axis, ax, keepdim)?);
        }
        if scalar {
            return Ok(results.pop().expect("one probability"));
        }
        let refs: Vec<&Self> = results.iter().collect();
        Self::try_stack(&refs, 0)
    }
}

/// `start + weight · (end - start)`, as `torch.lerp` computes it: from
/// `end` backwards for weights of 0.5 and more, so that a weight of 1 gives
/// `end` exactly.
fn lerp<D: CoreDevice, F: FloatElement>(
    start: &Tensor<D, F>,
    end: &Tensor<D, F>,
    weight: &Tensor<D, F>,
) -> Result<Tensor<D, F>> {
    let diff = end.try_sub(start)?;
    let forwards = start.try_add(&weight.try_mul(&diff)?)?;
    let backwards = end.try_sub(&diff.try_mul(&weight.try_rsub_scalar(F::ONE)?)?)?;
    weight.try_lt_scalar(F::from_f64(0.5))?.try_where_cond(&forwards, &backwards)
}
