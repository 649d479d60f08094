//! `EmbeddingBag`: the sum, mean or max of bags of embedding vectors,
//! without making the `[indices, embedding_dim]` tensor of each bag's rows
//! a user-visible step.
//!
//! Composite: the bags' layout (which index belongs to which bag, which
//! indices are padding) is worked out on the host from the indices and
//! offsets, one read of each, and the reduction is one `index_select` of
//! the table and one `index_add` (sum, mean) or a padded argmax and a
//! `gather` (max), whose gradients reach exactly the rows PyTorch's do.

use super::parameter::{check, parameter};
use crate::backend::cpu::try_collect;
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::tensor::{Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// How [`EmbeddingBag`] reduces a bag, PyTorch's `mode=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EmbeddingBagMode {
    /// `"sum"`: the sum of the bag's rows (weighted by
    /// `per_sample_weights` when given).
    Sum,
    /// `"mean"`, PyTorch's default: their mean; padding does not count.
    #[default]
    Mean,
    /// `"max"`: the largest value of each feature over the bag's rows (the
    /// gradient goes to the first row that holds it, as PyTorch's).
    Max,
}

impl EmbeddingBagMode {
    fn name(self) -> &'static str {
        match self {
            EmbeddingBagMode::Sum => "sum",
            EmbeddingBagMode::Mean => "mean",
            EmbeddingBagMode::Max => "max",
        }
    }
}

/// PyTorch's `nn.EmbeddingBag`: for each bag of indices, the sum, mean
/// (the default) or max of their rows of `weight` (`[num_embeddings,
/// embedding_dim]`, initialised from `N(0, 1)`), as `[bags,
/// embedding_dim]`. An empty bag gives zeros. With a
/// [`padding_idx`](Self::padding_idx), that index is left out of every bag
/// (and of a mean's count), its row starts at zeros and gets no gradient.
///
/// The bags are either the rows of a 2-D input `[bags, length]`, or, as
/// in PyTorch's text classification tutorial, a 1-D input cut at
/// `offsets` ([`EmbeddingBagInput::offsets`]):
///
/// ```
/// use devtensor::nn::{EmbeddingBag, EmbeddingBagInput, EmbeddingBagMode};
/// use devtensor::{Cpu, Tensor};
/// // nn.EmbeddingBag(10, 3, mode="sum")
/// let bag = EmbeddingBag::<Cpu>::new(10, 3).mode(EmbeddingBagMode::Sum);
/// // Two bags: tokens [1, 2, 4] and [5].
/// let text = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 4, 5], [4]);
/// let offsets = Tensor::<Cpu, i64>::from_vec(vec![0, 3], [2]);
/// let out = bag.forward(EmbeddingBagInput::new(&text).offsets(&offsets));
/// assert_eq!(out.dims(), &[2, 3]);
/// let rows = bag.weight.index_select(0, &text).to_vec2();
/// assert!((out.to_vec2()[0][0] - (rows[0][0] + rows[1][0] + rows[2][0])).abs() < 1e-6);
/// // A 2-D input is one bag per row.
/// let bags = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 4, 5], [2, 2]);
/// assert_eq!(bag.forward(&bags).dims(), &[2, 3]);
/// ```
///
/// Not supported: `max_norm`, `scale_grad_by_freq` and `sparse` (the
/// gradient of `weight` is dense). Built from your own table with
/// [`from_weights`](Self::from_weights) or
/// [`from_pretrained`](Self::from_pretrained); the fields are public to
/// read and assign, and the struct is `#[non_exhaustive]`, as
/// [`Linear`](super::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EmbeddingBag<D: Device, E: FloatElement = f32> {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Tensor<D, E>,
    /// How a bag is reduced.
    pub mode: EmbeddingBagMode,
    /// The index left out of every bag.
    pub padding_idx: Option<usize>,
    /// Whether `offsets` has one more element than there are bags, the
    /// end of the last bag, as in the CSR format (PyTorch's
    /// `include_last_offset`, `false` by default).
    pub include_last_offset: bool,
}

/// What an [`EmbeddingBag`] reads: the indices, and PyTorch's optional
/// `offsets` and `per_sample_weights`, by name.
///
/// ```
/// use devtensor::nn::{EmbeddingBag, EmbeddingBagInput, EmbeddingBagMode};
/// use devtensor::{Cpu, Tensor};
/// let bag = EmbeddingBag::<Cpu>::new(5, 2).mode(EmbeddingBagMode::Sum);
/// let indices = Tensor::<Cpu, i64>::from_vec(vec![0, 1, 1], [3]);
/// let offsets = Tensor::<Cpu, i64>::from_vec(vec![0, 1], [2]);
/// let weights = Tensor::<Cpu>::from_vec(vec![1.0, 0.5, 0.5], [3]);
/// let out = bag.forward(EmbeddingBagInput::new(&indices).offsets(&offsets).per_sample_weights(&weights));
/// // Bag 1 is row 1 at weights 0.5 and 0.5: row 1 itself.
/// let row = bag.weight.select(0, 1).to_vec();
/// assert!(out.select(0, 1).to_vec().iter().zip(&row).all(|(a, b)| (a - b).abs() < 1e-6));
/// ```
#[derive(Debug)]
pub struct EmbeddingBagInput<'a, D: Device, E: FloatElement = f32> {
    input: &'a Tensor<D, i64>,
    offsets: Option<&'a Tensor<D, i64>>,
    per_sample_weights: Option<&'a Tensor<D, E>>,
}

impl<'a, D: Device, E: FloatElement> EmbeddingBagInput<'a, D, E> {
    /// The indices: `[bags, length]`, a bag per row, or 1-D with
    /// [`offsets`](Self::offsets).
    pub fn new(input: &'a Tensor<D, i64>) -> Self {
        EmbeddingBagInput { input, offsets: None, per_sample_weights: None }
    }

    /// PyTorch's `offsets` of a 1-D input: where each bag starts, from 0
    /// and never decreasing (with `include_last_offset`, one more: where
    /// the last one ends, the input's length).
    pub fn offsets<DO: Device>(mut self, offsets: &'a Tensor<DO, i64>) -> Self
    where
        D: SameDevice<DO>,
    {
        self.offsets = Some(same_device(offsets));
        self
    }

    /// PyTorch's `per_sample_weights`, the input's shape: each index's row
    /// is scaled by its weight (mode `Sum` only, as in PyTorch).
    pub fn per_sample_weights<DW: Device>(mut self, weights: &'a Tensor<DW, E>) -> Self
    where
        D: SameDevice<DW>,
    {
        self.per_sample_weights = Some(same_device(weights));
        self
    }
}

mod sealed {
    pub trait Sealed {}
}

/// What an [`EmbeddingBag`]'s `forward` takes: indices (`&Tensor<D, i64>`)
/// or an [`EmbeddingBagInput`] with offsets and weights.
#[diagnostic::on_unimplemented(
    message = "an `EmbeddingBag` of `{E}` reads `i64` indices, or an `EmbeddingBagInput` whose \
               per_sample_weights are `{E}`, not `{Self}`",
    note = "convert the indices with `.to_dtype::<i64>()` and the weights with `.to_dtype::<{E}>()`"
)]
pub trait ToEmbeddingBagInput<'a, E: FloatElement>: sealed::Sealed {
    /// The input's device.
    type Device: Device;
    /// The input with its offsets and weights.
    fn to_embedding_bag_input(self) -> EmbeddingBagInput<'a, Self::Device, E>;
}

impl<D: Device> sealed::Sealed for &Tensor<D, i64> {}
impl<D: Device, E: FloatElement> sealed::Sealed for EmbeddingBagInput<'_, D, E> {}

impl<'a, D: Device, E: FloatElement> ToEmbeddingBagInput<'a, E> for &'a Tensor<D, i64> {
    type Device = D;
    fn to_embedding_bag_input(self) -> EmbeddingBagInput<'a, D, E> {
        EmbeddingBagInput::new(self)
    }
}

impl<'a, D: Device, E: FloatElement> ToEmbeddingBagInput<'a, E> for EmbeddingBagInput<'a, D, E> {
    type Device = D;
    fn to_embedding_bag_input(self) -> EmbeddingBagInput<'a, D, E> {
        self
    }
}

const OP: &str = "EmbeddingBag";

/// The bags as the host sees them: for each index kept (not padding),
/// its position in the input and its bag.
struct Layout {
    bags: usize,
    kept: Vec<i64>,
    bag_of: Vec<i64>,
    /// The number of indices kept in each bag.
    counts: Vec<i64>,
}

impl<D: Device, E: FloatElement> EmbeddingBag<D, E> {
    /// A table of `num_embeddings` vectors of `embedding_dim` elements,
    /// reduced by mean (PyTorch's defaults). Fails when `D` is unavailable.
    #[fallible]
    pub fn new(num_embeddings: usize, embedding_dim: usize) -> Self {
        let weight = Tensor::try_randn([num_embeddings, embedding_dim])?.requires_grad();
        Ok(EmbeddingBag { weight, mode: EmbeddingBagMode::Mean, padding_idx: None, include_last_offset: false })
    }

    /// A layer over the rows of `weight` (`[num_embeddings,
    /// embedding_dim]`), its trainable parameter, with row `padding_idx`
    /// left out of the bags and kept as given (PyTorch's
    /// `from_pretrained(weight, freeze=False, padding_idx=..)`). Fails,
    /// naming the shape, unless `weight` is a matrix with row `padding_idx`.
    ///
    /// ```
    /// use devtensor::nn::EmbeddingBag;
    /// use devtensor::{Cpu, Tensor};
    /// let weight = Tensor::<Cpu>::from_vec(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [3, 2]);
    /// let bag = EmbeddingBag::from_weights(weight, None);
    /// let bags = Tensor::<Cpu, i64>::from_vec(vec![0, 2], [1, 2]);
    /// assert_eq!(bag.forward(&bags).to_vec(), vec![2.0, 3.0]); // the mean of rows 0 and 2
    /// ```
    #[fallible]
    pub fn from_weights(weight: Tensor<D, E>, padding_idx: Option<usize>) -> Self {
        let fits = weight.rank() == 2 && padding_idx.is_none_or(|i| i < weight.dims()[0]);
        check(fits, "EmbeddingBag::from_weights", &[&weight], || match padding_idx {
            Some(i) => format!("expected a weight [num_embeddings, embedding_dim] with a row {i} for padding_idx"),
            None => "expected a weight [num_embeddings, embedding_dim]".into(),
        })?;
        Ok(EmbeddingBag {
            weight: parameter(weight),
            mode: EmbeddingBagMode::Mean,
            padding_idx,
            include_last_offset: false,
        })
    }

    /// PyTorch's `nn.EmbeddingBag.from_pretrained(weight, padding_idx=..)`:
    /// the layer of [`from_weights`](Self::from_weights), frozen as
    /// PyTorch's default `freeze=True` freezes it.
    ///
    /// ```
    /// use devtensor::nn::EmbeddingBag;
    /// use devtensor::{Cpu, Tensor};
    /// let bag = EmbeddingBag::from_pretrained(Tensor::<Cpu>::ones([4, 3]), None);
    /// assert!(!bag.weight.tracks_grad());
    /// ```
    #[fallible]
    pub fn from_pretrained(weight: Tensor<D, E>, padding_idx: Option<usize>) -> Self {
        let mut bag = Self::try_from_weights(weight, padding_idx)?;
        bag.weight = bag.weight.detach();
        Ok(bag)
    }

    /// The layer reducing by `mode` (PyTorch's `mode=`).
    pub fn mode(mut self, mode: EmbeddingBagMode) -> Self {
        self.mode = mode;
        self
    }

    /// The layer with PyTorch's `include_last_offset`.
    pub fn include_last_offset(mut self, include: bool) -> Self {
        self.include_last_offset = include;
        self
    }

    /// The layer with index `index` for padding (PyTorch's `padding_idx`):
    /// it is left out of every bag, and its row is set to zeros. Fails
    /// when `index` is not a row.
    ///
    /// ```
    /// use devtensor::nn::EmbeddingBag;
    /// use devtensor::{Cpu, Tensor};
    /// let bag = EmbeddingBag::<Cpu>::new(5, 3).padding_idx(0);
    /// let bags = Tensor::<Cpu, i64>::from_vec(vec![2, 0, 0], [1, 3]);
    /// // The mean of one row: row 2 itself.
    /// assert_eq!(bag.forward(&bags).to_vec(), bag.weight.select(0, 2).to_vec());
    /// ```
    #[fallible]
    pub fn padding_idx(self, index: usize) -> Self {
        let [rows, dim] = [self.weight.dims()[0], self.weight.dims()[1]];
        if index >= rows {
            let reason = format!("padding_idx {index} is out of range for EmbeddingBag({rows}, {dim})");
            return Err(Error::Argument { op: OP, device: D::name(), reason });
        }
        let is_padding = Tensor::<D, i64>::try_arange(0, rows as i64)?.try_eq_scalar(index as i64)?.try_unsqueeze(1)?;
        let mut weight = self.weight.detach().try_masked_fill(&is_padding, E::ZERO)?;
        weight.set_requires_grad(self.weight.tracks_grad());
        Ok(EmbeddingBag { weight, padding_idx: Some(index), ..self })
    }

    /// The bags' reductions, `[bags, embedding_dim]`, PyTorch's
    /// `bag(input, offsets=.., per_sample_weights=..)`: of a 2-D input
    /// (`&indices`, a bag per row) or of an [`EmbeddingBagInput`]. The
    /// input must be on the layer's device (checked at compile time).
    /// Fails, naming the shapes, on offsets that do not start at 0,
    /// decrease or pass the input's end, on an index outside
    /// `0..num_embeddings`, and on `per_sample_weights` of another shape
    /// or in a mode other than `Sum`.
    #[fallible]
    pub fn forward<'a, X: ToEmbeddingBagInput<'a, E>>(&self, input: X) -> Tensor<D, E>
    where
        D: SameDevice<X::Device>,
    {
        let EmbeddingBagInput { input, offsets, per_sample_weights } = input.to_embedding_bag_input();
        self.bags(same_device(input), offsets.map(same_device), per_sample_weights.map(same_device))
    }

    fn bags(
        &self,
        input: &Tensor<D, i64>,
        offsets: Option<&Tensor<D, i64>>,
        per_sample_weights: Option<&Tensor<D, E>>,
    ) -> Result<Tensor<D, E>> {
        if let Some(weights) = per_sample_weights {
            if self.mode != EmbeddingBagMode::Sum {
                let reason = format!("per_sample_weights is only supported for mode Sum (got {})", self.mode.name());
                return Err(Error::Argument { op: OP, device: D::name(), reason });
            }
            if weights.dims() != input.dims() {
                return Err(Error::Shape {
                    op: OP,
                    device: D::name(),
                    shapes: vec![input.shape().clone(), weights.shape().clone()],
                    reason: "per_sample_weights must have the input's shape".into(),
                });
            }
        }
        let layout = self.layout(input, offsets)?;
        let dim = self.weight.dims()[1];
        let kept = Tensor::<D, i64>::try_from_vec(layout.kept.clone(), [layout.kept.len()])?;
        let flat = input.try_reshape([input.elem_count()])?.try_index_select::<D>(0, &kept)?;
        let rows = self.weight.try_index_select::<D>(0, &flat)?;
        let rows = match per_sample_weights {
            Some(weights) => {
                let weights = weights.try_reshape([weights.elem_count()])?.try_index_select::<D>(0, &kept)?;
                rows.try_mul(&weights.try_unsqueeze(1)?)?
            }
            None => rows,
        };
        if self.mode == EmbeddingBagMode::Max {
            return max_of_bags(&rows, &layout, dim);
        }
        let bag_of = Tensor::<D, i64>::try_from_vec(layout.bag_of, [layout.kept.len()])?;
        let sums = Tensor::<D, E>::try_zeros([layout.bags, dim])?.try_index_add::<D, D, E>(0, &bag_of, &rows)?;
        if self.mode == EmbeddingBagMode::Sum {
            return Ok(sums);
        }
        // An empty bag's sum is 0, and so is its mean.
        let counts = try_collect(OP, layout.bags, layout.counts.iter().map(|&c| E::from_f64(c.max(1) as f64)))?;
        sums.try_div(&Tensor::<D, E>::try_from_vec(counts, [layout.bags, 1])?)
    }

    /// Which bag each index belongs to, read from the indices and offsets
    /// on the host, checked as PyTorch checks them.
    fn layout(&self, input: &Tensor<D, i64>, offsets: Option<&Tensor<D, i64>>) -> Result<Layout> {
        let shape_error = |reason: String| {
            let mut shapes = vec![input.shape().clone()];
            shapes.extend(offsets.map(|o| o.shape().clone()));
            Err(Error::Shape { op: OP, device: D::name(), shapes, reason })
        };
        let n = input.elem_count();
        // Bag b is positions starts[b]..starts[b + 1]; reserved fallibly, as
        // an input [huge, 0] has no elements but many bags.
        let starts: Vec<i64> = match (input.rank(), offsets) {
            (2, None) => {
                let [bags, length] = [input.dims()[0], input.dims()[1]];
                try_collect(OP, bags + 1, (0..=bags).map(|b| (b * length) as i64))?
            }
            (1, Some(offsets)) if offsets.rank() == 1 => {
                let mut starts = Vec::new();
                for (i, &o) in offsets.try_to_vec()?.iter().enumerate() {
                    if i == 0 && o != 0 {
                        return shape_error(format!("offsets[0] must be 0, the first bag's start, got {o}"));
                    }
                    if o < starts.last().copied().unwrap_or(0) || o > n as i64 {
                        return shape_error(format!(
                            "offsets must not decrease nor pass the input's length {n}, got offsets[{i}] = {o}"
                        ));
                    }
                    starts.push(o);
                }
                if !self.include_last_offset {
                    starts.push(n as i64);
                } else if starts.last() != Some(&(n as i64)) {
                    return shape_error(format!(
                        "with include_last_offset, the last offset must be the input's length {n}"
                    ));
                }
                starts
            }
            (2, Some(_)) => return shape_error("a 2-D input is a bag per row: it takes no offsets".into()),
            _ => return shape_error("expected a 2-D input [bags, length], or a 1-D input with 1-D offsets".into()),
        };
        let bags = starts.len().saturating_sub(1);
        let indices = input.try_to_vec()?;
        let rows = self.weight.dims()[0];
        if let Some(&bad) = indices.iter().find(|&&i| i < 0 || i as usize >= rows) {
            let reason = format!(
                "index {bad} is out of range for EmbeddingBag({rows}, {}): indices must be in 0..{rows}",
                self.weight.dims()[1]
            );
            return Err(Error::Argument { op: OP, device: D::name(), reason });
        }
        let (mut kept, mut bag_of) = (Vec::new(), Vec::new());
        let mut counts = try_collect(OP, bags, std::iter::repeat(0))?;
        for (bag, window) in starts.windows(2).enumerate() {
            let (start, end) = (window[0] as usize, window[1] as usize);
            for (position, &index) in indices.iter().enumerate().take(end).skip(start) {
                if self.padding_idx != Some(index as usize) {
                    kept.push(position as i64);
                    bag_of.push(bag as i64);
                    counts[bag] += 1;
                }
            }
        }
        Ok(Layout { bags, kept, bag_of, counts })
    }
}

/// Mode `Max`: the bags' kept rows laid out `[bags, longest, dim]`, short
/// bags padded with -inf, give each feature's first argmax; the result is
/// a `gather` of `rows`, so each feature's gradient reaches that one row.
fn max_of_bags<D: Device, E: FloatElement>(rows: &Tensor<D, E>, layout: &Layout, dim: usize) -> Result<Tensor<D, E>> {
    let longest = layout.counts.iter().copied().max().unwrap_or(0) as usize;
    if longest == 0 {
        return Tensor::try_zeros([layout.bags, dim]);
    }
    // Bag b's j-th kept row is row `first[b] + j` of `rows`.
    let mut first = try_collect(OP, layout.bags, std::iter::repeat(0))?;
    for b in 1..layout.bags {
        first[b] = first[b - 1] + layout.counts[b - 1];
    }
    let count = |b: usize| layout.counts[b] as usize;
    let cells = layout.bags.checked_mul(longest).ok_or_else(|| Error::OutOfMemory {
        op: OP,
        device: D::name(),
        requested: usize::MAX,
        free: None,
    })?;
    let cell = |c: usize| (c / longest, c % longest);
    let at = try_collect(
        OP,
        cells,
        (0..cells).map(|c| {
            let (b, j) = cell(c);
            if j < count(b) { first[b] + j as i64 } else { 0 }
        }),
    )?;
    let filler = try_collect(OP, cells, (0..cells).map(|c| u8::from(cell(c).1 >= count(cell(c).0))))?;
    let at = Tensor::<D, i64>::try_from_vec(at, [layout.bags, longest])?;
    let filler = Tensor::<D, u8>::try_from_vec(filler, [layout.bags, longest, 1])?;
    let laid_out =
        rows.detach().try_index_select::<D>(0, &at.try_reshape([cells])?)?.try_reshape([layout.bags, longest, dim])?;
    let laid_out = laid_out.try_masked_fill(&filler, E::from_f64(f64::NEG_INFINITY))?;
    // The row of `rows` holding each bag's and feature's first maximum.
    let argmax = laid_out.try_argmax(1)?;
    let source = at.try_gather::<D>(1, &argmax)?;
    let max = rows.try_gather::<D>(0, &source)?;
    let empty = try_collect(OP, layout.bags, layout.counts.iter().map(|&c| u8::from(c == 0)))?;
    max.try_masked_fill(&Tensor::<D, u8>::try_from_vec(empty, [layout.bags, 1])?, E::ZERO)
}

crate::module!(EmbeddingBag<E> { weight; mode, padding_idx, include_last_offset });
