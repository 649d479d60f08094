//! PyTorch's subscript, `x[...]` and `x[...] = v`: [`Tensor::i`] takes what
//! `x[...]` takes, and [`Tensor::index_put`] what `x[...] = v` and
//! `index_put_` take.
//!
//! The table of PyTorch's forms and theirs is in the module docs of
//! [`ops::index`](crate::ops::index).

use super::Fns;
use crate::element::{Element, SameDtype};
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::ops::view::AxisIndex;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;
use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// PyTorch's `...` in a subscript: as many full axes (`:`) as the other
/// items leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ellipsis;

/// PyTorch's `None` in a subscript: a new axis of size 1 at that place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewAxis;

/// A slice `start:end:step` of one axis, as Python writes it: bounds may be
/// negative (counting from the end) and are clipped to the axis, a missing
/// bound is the axis's start or end, and `step` is at least 1 (PyTorch
/// rejects negative steps; [`Tensor::flip`] reverses). Made from a range by
/// [`SliceStep::step`], or from any range by `From`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// The first position, or the axis's start.
    pub start: Option<i64>,
    /// The position after the last, or the axis's end.
    pub end: Option<i64>,
    /// The distance between positions.
    pub step: i64,
}

impl Slice {
    /// Python's `start:end`: Clippy rejects a literal range that runs
    /// backwards, such as `1..-1` (`reversed_empty_ranges`), which Python
    /// reads as "from 1 to the last but one"; `Slice::new(1, -1)` says it
    /// without the lint (and `.step(n)` adds a step).
    ///
    /// ```
    /// use devtensor::ops::index::{Slice, SliceStep};
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::arange(0, 6);
    /// assert_eq!(x.i(Slice::new(1, -1)).to_vec(), vec![1, 2, 3, 4]); // x[1:-1]
    /// assert_eq!(x.i(Slice::new(1, -1).step(2)).to_vec(), vec![1, 3]); // x[1:-1:2]
    /// ```
    pub fn new(start: i64, end: i64) -> Self {
        Slice { start: Some(start), end: Some(end), step: 1 }
    }
}

/// `range.step(n)`: a range of a subscript with a step, Python's
/// `start:end:n` (`(..).step(2)` is `::2`, `(1..).step(2)` is `1::2`).
///
/// ```
/// use devtensor::ops::index::SliceStep;
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu, i64>::arange(0, 10);
/// assert_eq!(x.i((..).step(3)).to_vec(), vec![0, 3, 6, 9]);
/// assert_eq!(x.i((1..9).step(4)).to_vec(), vec![1, 5]);
/// ```
pub trait SliceStep: Sized {
    /// This range, every `step`-th position.
    fn step(self, step: i64) -> Slice;
}

impl<T: Into<Slice>> SliceStep for T {
    fn step(self, step: i64) -> Slice {
        Slice { step, ..self.into() }
    }
}

impl From<RangeFull> for Slice {
    fn from(_: RangeFull) -> Self {
        Slice { start: None, end: None, step: 1 }
    }
}

/// The end bound after an inclusive `last`: `..=-1` runs to the end.
fn after(last: i64) -> Option<i64> {
    if last == -1 { None } else { Some(last.saturating_add(1)) }
}

macro_rules! slice_from_ranges {
    ($($t:ty),*) => {$(
        impl From<Range<$t>> for Slice {
            fn from(r: Range<$t>) -> Self {
                Slice { start: Some(r.start.to_i64()), end: Some(r.end.to_i64()), step: 1 }
            }
        }
        impl From<RangeFrom<$t>> for Slice {
            fn from(r: RangeFrom<$t>) -> Self {
                Slice { start: Some(r.start.to_i64()), end: None, step: 1 }
            }
        }
        impl From<RangeTo<$t>> for Slice {
            fn from(r: RangeTo<$t>) -> Self {
                Slice { start: None, end: Some(r.end.to_i64()), step: 1 }
            }
        }
        impl From<RangeInclusive<$t>> for Slice {
            fn from(r: RangeInclusive<$t>) -> Self {
                Slice { start: Some(r.start().to_i64()), end: after(r.end().to_i64()), step: 1 }
            }
        }
        impl From<RangeToInclusive<$t>> for Slice {
            fn from(r: RangeToInclusive<$t>) -> Self {
                Slice { start: None, end: after(r.end.to_i64()), step: 1 }
            }
        }
    )*};
}
slice_from_ranges!(i32, i64, isize, usize);

/// One item of a subscript on a tensor of device `D`: what
/// [`IndexItem::into_indexer`] makes of an integer, a range, a [`Slice`],
/// `..`, [`Ellipsis`], [`NewAxis`], an index tensor or a mask. Build a
/// subscript at run time as a `Vec<Indexer<D>>`.
///
/// ```
/// use devtensor::ops::index::{Indexer, IndexItem};
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu, i64>::arange(0, 24).reshape([2, 3, 4]);
/// let index: Vec<Indexer<Cpu>> = vec![(..).into_indexer(), 1.into_indexer(), (-2..).into_indexer()];
/// assert_eq!(x.i(index).to_vec2(), vec![vec![6, 7], vec![18, 19]]);
/// ```
pub struct Indexer<D: Device> {
    kind: Kind<D::Core>,
}

/// What an [`Indexer`] holds, as the core takes it.
#[derive(Clone)]
pub(crate) enum Kind<C: CoreDevice> {
    Int(i64),
    Slice(Slice),
    Ellipsis,
    NewAxis,
    Indices(Tensor<C, i64>),
    Mask(Tensor<C, u8>),
}

/// What can be one item of a subscript on a tensor of device `D`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot index a tensor on `{D}`",
    label = "not an index of a `{D}` tensor",
    note = "an index is an integer, a range (`1..3`, `..`, `(..).step(2)`), `Ellipsis`, `NewAxis`, \
            an `i64` index tensor or a `u8` mask on the same device",
    note = "from a float tensor: `t.to_dtype::<i64>()` for indices, `t.ne_scalar(0.0)` for a mask"
)]
pub trait IndexItem<D: Device> {
    /// This item as an [`Indexer`].
    fn into_indexer(self) -> Indexer<D>;
}

/// A whole subscript on a tensor of device `D`: one [`IndexItem`], a tuple
/// of up to eight, or a `Vec` of [`Indexer`]s.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a subscript of a tensor on `{D}`",
    label = "not an index of a `{D}` tensor",
    note = "a subscript is one index or a tuple of them: `x.i((.., -1, ..))` for `x[:, -1, :]`",
    note = "an index is an integer, a range (`1..3`, `..`, `(..).step(2)`), `Ellipsis`, `NewAxis`, \
            an `i64` index tensor or a `u8` mask on the same device",
    note = "from a float tensor: `t.to_dtype::<i64>()` for indices, `t.ne_scalar(0.0)` for a mask"
)]
pub trait TensorIndex<D: Device> {
    /// The subscript's items, in order.
    fn into_indexers(self) -> Vec<Indexer<D>>;
}

impl<D: Device> IndexItem<D> for Indexer<D> {
    fn into_indexer(self) -> Indexer<D> {
        self
    }
}

impl<D: Device> IndexItem<D> for Slice {
    fn into_indexer(self) -> Indexer<D> {
        Indexer { kind: Kind::Slice(self) }
    }
}

impl<D: Device> IndexItem<D> for Ellipsis {
    fn into_indexer(self) -> Indexer<D> {
        Indexer { kind: Kind::Ellipsis }
    }
}

impl<D: Device> IndexItem<D> for NewAxis {
    fn into_indexer(self) -> Indexer<D> {
        Indexer { kind: Kind::NewAxis }
    }
}

impl<D: Device> IndexItem<D> for RangeFull {
    fn into_indexer(self) -> Indexer<D> {
        Slice::from(self).into_indexer()
    }
}

impl<D: Device, D2: Device> IndexItem<D> for &Tensor<D2, i64>
where
    D: SameDevice<D2>,
{
    fn into_indexer(self) -> Indexer<D> {
        let indices: &Tensor<D, i64> = same_device(self);
        Indexer { kind: Kind::Indices(indices.core().clone()) }
    }
}

impl<D: Device, D2: Device> IndexItem<D> for &Tensor<D2, u8>
where
    D: SameDevice<D2>,
{
    fn into_indexer(self) -> Indexer<D> {
        let mask: &Tensor<D, u8> = same_device(self);
        Indexer { kind: Kind::Mask(mask.core().clone()) }
    }
}

macro_rules! integer_items {
    ($($t:ty),*) => {$(
        impl<D: Device> IndexItem<D> for $t {
            fn into_indexer(self) -> Indexer<D> {
                Indexer { kind: Kind::Int(self.to_i64()) }
            }
        }
        impl<D: Device> IndexItem<D> for Range<$t> {
            fn into_indexer(self) -> Indexer<D> {
                Slice::from(self).into_indexer()
            }
        }
        impl<D: Device> IndexItem<D> for RangeFrom<$t> {
            fn into_indexer(self) -> Indexer<D> {
                Slice::from(self).into_indexer()
            }
        }
        impl<D: Device> IndexItem<D> for RangeTo<$t> {
            fn into_indexer(self) -> Indexer<D> {
                Slice::from(self).into_indexer()
            }
        }
        impl<D: Device> IndexItem<D> for RangeInclusive<$t> {
            fn into_indexer(self) -> Indexer<D> {
                Slice::from(self).into_indexer()
            }
        }
        impl<D: Device> IndexItem<D> for RangeToInclusive<$t> {
            fn into_indexer(self) -> Indexer<D> {
                Slice::from(self).into_indexer()
            }
        }
    )*};
}
integer_items!(i32, i64, isize, usize);

/// A lone item is a subscript of one item.
macro_rules! single_item_subscripts {
    ($($t:ty;)*) => {$(
        impl<D: Device> TensorIndex<D> for $t {
            fn into_indexers(self) -> Vec<Indexer<D>> {
                vec![self.into_indexer()]
            }
        }
    )*};
}
single_item_subscripts! {
    Indexer<D>;
    Slice;
    Ellipsis;
    NewAxis;
    RangeFull;
}

// Written out rather than by the macro above: a compiler note that lists
// them then quotes these lines, not the macro's.
impl<D: Device, D2: Device> TensorIndex<D> for &Tensor<D2, i64>
where
    D: SameDevice<D2>,
{
    fn into_indexers(self) -> Vec<Indexer<D>> {
        vec![self.into_indexer()]
    }
}

impl<D: Device, D2: Device> TensorIndex<D> for &Tensor<D2, u8>
where
    D: SameDevice<D2>,
{
    fn into_indexers(self) -> Vec<Indexer<D>> {
        vec![self.into_indexer()]
    }
}

macro_rules! integer_subscripts {
    ($($t:ty),*) => {$(
        single_item_subscripts! {
            $t; Range<$t>; RangeFrom<$t>; RangeTo<$t>; RangeInclusive<$t>; RangeToInclusive<$t>;
        }
    )*};
}
integer_subscripts!(i32, i64, isize, usize);

impl<D: Device> TensorIndex<D> for Vec<Indexer<D>> {
    fn into_indexers(self) -> Vec<Indexer<D>> {
        self
    }
}

macro_rules! tuple_subscripts {
    ($(($($item:ident),+);)*) => {$(
        impl<D: Device, $($item: IndexItem<D>),+> TensorIndex<D> for ($($item,)+) {
            #[allow(non_snake_case)] // The items are named by their types.
            fn into_indexers(self) -> Vec<Indexer<D>> {
                let ($($item,)+) = self;
                vec![$($item.into_indexer()),+]
            }
        }
    )*};
}
tuple_subscripts! {
    (A);
    (A, B);
    (A, B, C);
    (A, B, C, E);
    (A, B, C, E, F);
    (A, B, C, E, F, G);
    (A, B, C, E, F, G, H);
    (A, B, C, E, F, G, H, I);
}

/// The subscript as the core takes it.
fn kinds<D: Device>(index: impl TensorIndex<D>) -> Vec<Kind<D::Core>> {
    index.into_indexers().into_iter().map(|i| i.kind).collect()
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// The elements `x[index]` selects in PyTorch: `index` is one item or a
    /// tuple of them (the table of [`ops::index`](crate::ops::index)), each an integer (negative
    /// counts from the end; the axis is removed), a range with an optional
    /// [step](SliceStep) (clipped to the axis, as Python slices are), `..`
    /// (a whole axis), [`Ellipsis`], [`NewAxis`], an `i64` index tensor or a
    /// `u8` mask (covering as many axes as it has).
    ///
    /// Without index tensors and masks the result is a view of this tensor;
    /// with them it is a copy, arranged by PyTorch's rules (integers, a
    /// rank-0 index tensor among them, select first; then NumPy's): the
    /// index tensors (a mask is its [`nonzero`](Self::nonzero) positions)
    /// broadcast together, and their shape replaces the axes they index where those
    /// are adjacent, or comes first where they are not. Gradients flow back
    /// to the selected elements (repeated ones accumulate).
    ///
    /// Fails when an integer or index is out of range, on a step below 1, on
    /// more items than axes, on two `Ellipsis`, when index tensors do not
    /// broadcast together, and when a mask's shape is not the shape of the
    /// axes it covers.
    ///
    /// ```
    /// use devtensor::ops::index::{Ellipsis, NewAxis, SliceStep};
    /// use devtensor::{Cpu, Tensor};
    /// let logits = Tensor::<Cpu>::randn([2, 5, 7]); // batch, time, vocabulary
    /// assert_eq!(logits.i((.., -1, ..)).dims(), &[2, 7]); // logits[:, -1, :]
    /// assert_eq!(logits.i((.., (..).step(2))).dims(), &[2, 3, 7]); // logits[:, ::2]
    /// assert_eq!(logits.i((Ellipsis, 0)).dims(), &[2, 5]); // logits[..., 0]
    /// assert_eq!(logits.i((.., NewAxis, 1..3)).dims(), &[2, 1, 2, 7]); // logits[:, None, 1:3]
    ///
    /// let x = Tensor::<Cpu, i64>::arange(0, 6).reshape([2, 3]);
    /// let cols = Tensor::<Cpu, i64>::from_vec(vec![2, -3], [2]);
    /// assert_eq!(x.i((.., &cols)).to_vec2(), vec![vec![2, 0], vec![5, 3]]); // x[:, [2, -3]]
    /// assert_eq!(x.i(&x.gt_scalar(2)).to_vec(), vec![3, 4, 5]); // x[x > 2]
    /// assert_eq!(
    ///     x.try_i((.., 3)).unwrap_err().to_string(),
    ///     "index on Cpu: index 3 is out of range for axis 1 of size 3 (shape [2, 3])"
    /// );
    /// ```
    #[fallible]
    pub fn i(&self, index: impl TensorIndex<D>) -> Self {
        let index = kinds(index);
        core_call!(D, Fns<E>.subscript(self.core(), &index))
    }

    /// A copy of this tensor with `values` written at the elements
    /// [`i(index)`](Self::i) selects, PyTorch's `x[index] = values`, or added
    /// there when `accumulate` (repeated indices then add up, as
    /// `index_put_(indices, values, accumulate=True)`; without it, the last
    /// of repeated indices wins). `values` broadcasts to the shape of
    /// `self.i(index)`. Gradients reach `values` where they were written and
    /// this tensor where it was not overwritten. Fails as
    /// [`i`](Self::i) does, and when `values` does not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, -2.0, 3.0, -4.0], [2, 2]);
    /// let relu = x.index_put(&x.lt_scalar(0.0), &Tensor::<Cpu>::scalar(0.0), false); // x[x < 0] = 0
    /// assert_eq!(relu.to_vec(), vec![1.0, 0.0, 3.0, 0.0]);
    /// let rows = Tensor::<Cpu, i64>::from_vec(vec![1, 1, 0], [3]);
    /// let counts = Tensor::<Cpu>::zeros([2]).index_put(&rows, &Tensor::<Cpu>::scalar(1.0), true);
    /// assert_eq!(counts.to_vec(), vec![1.0, 2.0]);
    /// let x = x.index_put((.., -1), &Tensor::<Cpu>::from_vec(vec![7.0, 8.0], [2]), false); // x[:, -1] = [7, 8]
    /// assert_eq!(x.to_vec2(), vec![vec![1.0, 7.0], vec![3.0, 8.0]]);
    /// ```
    #[fallible]
    pub fn index_put<D2: Device, E2: Element>(
        &self,
        index: impl TensorIndex<D>,
        values: &Tensor<D2, E2>,
        accumulate: bool,
    ) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let values: &Self = same_device(values);
        let index = kinds(index);
        core_call!(D, Fns<E>.index_put(self.core(), &index, values.core(), accumulate))
    }

    /// [`index_put`](Self::index_put) in place, PyTorch's `x[index] =
    /// values` and `x.index_put_(indices, values, accumulate)`. Tensors are
    /// values in devtensor: other tensors that share this one's storage
    /// (views taken before) keep their elements. Fails as `index_put` does,
    /// and on a leaf that requires grad while gradients are enabled.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let mut x = Tensor::<Cpu, i64>::zeros([3]);
    /// x.index_put_(1.., &Tensor::<Cpu, i64>::from_vec(vec![5, 6], [2]), false); // x[1:] = [5, 6]
    /// assert_eq!(x.to_vec(), vec![0, 5, 6]);
    /// ```
    #[fallible]
    pub fn index_put_<D2: Device, E2: Element>(
        &mut self,
        index: impl TensorIndex<D>,
        values: &Tensor<D2, E2>,
        accumulate: bool,
    ) -> ()
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        if self.tracks_grad() && self.is_leaf() && crate::autograd::is_grad_enabled() {
            return Err(Error::Argument {
                op: "index_put_",
                device: D::name(),
                reason: "a leaf tensor that requires grad cannot be modified in place while gradients are \
                         enabled; update it inside `no_grad`"
                    .into(),
            });
        }
        *self = self.try_index_put(index, values, accumulate)?;
        Ok(())
    }
}

/// One axis picked by an index tensor: where it is among the axes of the
/// basic-indexed view, and, for error messages, of the input.
struct Pick<D: CoreDevice> {
    at: usize,
    input_axis: usize,
    indices: Tensor<D, i64>,
    /// Whether the indices are known to be in `0..size` (a mask's).
    in_range: bool,
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    fn index_error(&self, reason: String) -> Error {
        Error::Shape { op: "index", device: D::name(), shapes: vec![self.shape().clone()], reason }
    }

    pub(super) fn core_subscript(&self, index: &[Kind<D>]) -> Result<Self> {
        let (view, picks) = self.basic_index(index)?;
        self.advanced_index(view, picks)
    }

    /// The view of every item but the index tensors and masks, and the axes
    /// of that view the index tensors pick (masks as their nonzero
    /// positions).
    fn basic_index(&self, index: &[Kind<D>]) -> Result<(Self, Vec<Pick<D>>)> {
        let consumed: usize = index
            .iter()
            .map(|k| match k {
                Kind::Int(_) | Kind::Slice(_) | Kind::Indices(_) => 1,
                Kind::Mask(m) => m.rank(),
                Kind::Ellipsis | Kind::NewAxis => 0,
            })
            .sum();
        if index.iter().filter(|k| matches!(k, Kind::Ellipsis)).count() > 1 {
            return Err(self.index_error("an index can only have a single ellipsis".into()));
        }
        if consumed > self.rank() {
            return Err(self
                .index_error(format!("too many indices for a tensor of rank {}: {consumed} were given", self.rank())));
        }
        let (mut view, mut at, mut input_axis) = (self.clone(), 0, 0);
        let mut picks = Vec::new();
        for kind in index {
            match kind {
                Kind::Int(i) => {
                    let size = view.dims()[at] as i64;
                    if !(-size..size).contains(i) {
                        return Err(Error::Index {
                            op: "index",
                            device: D::name(),
                            shape: self.shape().clone(),
                            axis: input_axis,
                            index: *i,
                        });
                    }
                    view = view.try_select(at as isize, *i)?;
                    input_axis += 1;
                }
                Kind::Slice(s) => {
                    if s.step < 1 {
                        return Err(self.index_error(format!("slice step must be at least 1, got {}", s.step)));
                    }
                    let size = view.dims()[at] as i64;
                    let clip = |bound: Option<i64>, default: i64| match bound {
                        None => default,
                        Some(b) if b < 0 => Ord::max(b + size, 0),
                        Some(b) => Ord::min(b, size),
                    };
                    let (start, end) = (clip(s.start, 0), clip(s.end, size));
                    let len = if end > start { (end - start - 1) / s.step + 1 } else { 0 };
                    // A step past the last kept element is a step of 1 (the
                    // view's gradient would otherwise spread over it).
                    let step = if len <= 1 { 1 } else { s.step as usize };
                    view = view.strided_slice(at, start as usize, len as usize, step)?;
                    (at, input_axis) = (at + 1, input_axis + 1);
                }
                Kind::Ellipsis => {
                    let skipped = self.rank() - consumed;
                    (at, input_axis) = (at + skipped, input_axis + skipped);
                }
                Kind::NewAxis => {
                    view = view.try_unsqueeze(at as isize)?;
                    at += 1;
                }
                Kind::Indices(index) if index.rank() == 0 => {
                    // A rank-0 index tensor is an integer, as in PyTorch, read
                    // where it is rather than brought to the host.
                    let size = view.dims()[at];
                    let one = self.wrapped_indices(index, size, input_axis)?.try_reshape([1])?;
                    view = view.try_index_select(at as isize, &one)?.try_squeeze(at as isize)?;
                    input_axis += 1;
                }
                Kind::Indices(indices) => {
                    picks.push(Pick { at, input_axis, indices: indices.clone(), in_range: false });
                    (at, input_axis) = (at + 1, input_axis + 1);
                }
                Kind::Mask(mask) if mask.rank() == 0 => {
                    // `x[True]` is a new axis of size 1, `x[False]` one of size 0.
                    let count = mask.try_nonzero()?.dims()[0];
                    view = view.try_unsqueeze(at as isize)?;
                    picks.push(Pick { at, input_axis, indices: Tensor::try_zeros([count])?, in_range: true });
                    at += 1;
                }
                Kind::Mask(mask) => {
                    let covered = &view.dims()[at..at + mask.rank()];
                    if mask.dims() != covered {
                        return Err(Error::Shape {
                            op: "index",
                            device: D::name(),
                            shapes: vec![self.shape().clone(), mask.shape().clone()],
                            reason: format!(
                                "the mask must have the shape of the axes it indexes, {} from axis {input_axis}",
                                Shape::from(covered)
                            ),
                        });
                    }
                    let positions = mask.try_nonzero()?;
                    for j in 0..mask.rank() {
                        let indices = positions.try_select(1, j)?;
                        picks.push(Pick { at: at + j, input_axis: input_axis + j, indices, in_range: true });
                    }
                    (at, input_axis) = (at + mask.rank(), input_axis + mask.rank());
                }
            }
        }
        Ok((view, picks))
    }

    /// `indices` into an axis of `size` (axis `input_axis` of this tensor,
    /// for the error) with the negative ones counted from the end. Fails on
    /// an index outside `-size..size`.
    fn wrapped_indices(&self, indices: &Tensor<D, i64>, size: usize, input_axis: usize) -> Result<Tensor<D, i64>> {
        let size = size as i64;
        let shifted = indices.try_add_scalar(size)?;
        if let Some(bad) = D::first_out_of_range(shifted.storage(), shifted.layout(), 2 * size as usize)? {
            return Err(Error::Index {
                op: "index",
                device: D::name(),
                shape: self.shape().clone(),
                axis: input_axis,
                index: bad.wrapping_sub(size),
            });
        }
        indices.try_lt_scalar(0)?.try_where_cond(&shifted, indices)
    }

    /// `view` indexed by the index tensors of `picks`, by NumPy's placement
    /// rules (integers have been applied already, as PyTorch does).
    fn advanced_index<T: Element>(&self, view: Tensor<D, T>, picks: Vec<Pick<D>>) -> Result<Tensor<D, T>> {
        if picks.is_empty() {
            return Ok(view);
        }
        let broadcast = picks.iter().try_fold(Shape::from(Vec::<usize>::new()), |shape, p| {
            shape.broadcast_with(p.indices.shape()).ok_or_else(|| Error::Shape {
                op: "index",
                device: D::name(),
                shapes: picks.iter().map(|p| p.indices.shape().clone()).collect(),
                reason: "the index tensors do not broadcast together".into(),
            })
        })?;
        // One index into the picked axes merged, each axis's indices
        // wrapped from the end and weighted by the sizes after it.
        let (mut flat, mut weight) = (Tensor::<D, i64>::try_zeros(broadcast.clone())?, 1i64);
        for p in picks.iter().rev() {
            let size = view.dims()[p.at];
            let wrapped =
                if p.in_range { p.indices.clone() } else { self.wrapped_indices(&p.indices, size, p.input_axis)? };
            flat = flat.try_add(&wrapped.try_mul_scalar(weight)?)?;
            weight *= size as i64;
        }
        let flat = flat.try_flatten_all()?;
        let first = picks[0].at;
        let adjacent = picks.iter().enumerate().all(|(j, p)| p.at == first + j);
        // The picked axes side by side: where they are, or moved to the front.
        let (view, first) = if adjacent {
            (view, first)
        } else {
            let mut order: Vec<usize> = picks.iter().map(|p| p.at).collect();
            order.extend((0..view.rank()).filter(|a| !picks.iter().any(|p| p.at == *a)));
            (view.try_permute(order)?, 0)
        };
        let last = first + picks.len() - 1;
        let merged = if picks.len() == 1 { view } else { view.try_flatten(first as isize, last as isize)? };
        let picked = merged.try_index_select(first as isize, &flat)?;
        let dims = merged.dims();
        let shape: Vec<usize> =
            dims[..first].iter().chain(broadcast.dims()).chain(&dims[first + 1..]).copied().collect();
        picked.try_reshape(shape)
    }

    pub(super) fn core_index_put(&self, index: &[Kind<D>], values: &Self, accumulate: bool) -> Result<Self> {
        // A mask of this tensor's whole shape with one value: a `where`.
        if let [Kind::Mask(mask)] = index
            && mask.shape() == self.shape()
            && values.elem_count() == 1
            && !accumulate
        {
            return mask.try_where_cond(&values.try_reshape(Vec::<usize>::new())?, self);
        }
        // The flat position of every selected element: the basic items'
        // view's positions, written out from its layout (as many as it has
        // elements), then indexed by the index tensors and masks, so that
        // the elements put are the ones `i` selects.
        let dense = self.try_contiguous()?;
        let (view, picks) = dense.basic_index(index)?;
        let layout = view.layout();
        let mut positions = Tensor::<D, i64>::try_scalar((layout.offset() - dense.layout().offset()) as i64)?;
        for (axis, (&n, &stride)) in layout.dims().iter().zip(layout.strides()).enumerate() {
            let mut along = vec![1; layout.dims().len()];
            along[axis] = n;
            let steps = Tensor::<D, i64>::try_arange(0, n as i64)?.try_mul_scalar(stride as i64)?.try_reshape(along)?;
            positions = positions.try_add(&steps)?;
        }
        let targets = self.advanced_index(positions, picks)?;
        // PyTorch drops the values' leading axes of size 1 first
        // (`x[0] = torch.ones(1, 3)` on a `[2, 3]` tensor).
        let mut values = values.clone();
        while values.rank() > 0 && values.dims()[0] == 1 {
            values = values.try_squeeze(0)?;
        }
        let spread = values.try_broadcast_to(targets.shape().clone()).map_err(|_| Error::Shape {
            op: "index_put",
            device: D::name(),
            shapes: vec![self.shape().clone(), values.shape().clone(), targets.shape().clone()],
            reason: format!("the values do not broadcast to the shape they are put at, {}", targets.shape()),
        })?;
        let (targets, spread) = (targets.try_flatten_all()?, spread.try_flatten_all()?);
        let flat = dense.try_flatten_all()?;
        let put = if accumulate {
            flat.try_index_add(0, &targets, &spread)?
        } else {
            flat.try_scatter(0, &targets, &spread)?
        };
        put.try_reshape(self.shape().clone())
    }
}
