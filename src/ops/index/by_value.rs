//! The ops whose result's size or positions depend on the values:
//! `masked_select`, `nonzero` (`argwhere`), `bincount`, `unique` and
//! `searchsorted`. The values that decide the positions are read back to
//! the host (as PyTorch's CUDA kernels synchronise to size their results),
//! the positions found there, and the values moved by `index_select`, so
//! that `masked_select`'s gradient comes from it. `unique` and
//! `bincount`, which PyTorch does not differentiate, record no gradient.

use super::Fns;
use crate::element::{Element, FloatElement};
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// What [`Tensor::unique`] returns: the sorted distinct values, and when
/// asked for, where each input element's value is among them and how many
/// times each occurs.
pub type Unique<D, E> = (Tensor<D, E>, Option<Tensor<D, i64>>, Option<Tensor<D, i64>>);

impl<D: Device, E: Element> Tensor<D, E> {
    /// The elements where `mask` is nonzero, in row-major order, as a 1-D
    /// tensor, like `x.masked_select(mask)` (`x[mask]`); the tensor and the
    /// mask broadcast against each other. The gradient flows back to the
    /// selected elements. Fails when the shapes do not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, -2.0, 3.0, -4.0], [2, 2]);
    /// assert_eq!(x.masked_select(&x.gt_scalar(0.0)).to_vec(), vec![1.0, 3.0]);
    /// ```
    #[fallible]
    pub fn masked_select<D2: Device>(&self, mask: &Tensor<D2, u8>) -> Self
    where
        D: SameDevice<D2>,
    {
        let mask: &Tensor<D, u8> = same_device(mask);
        core_call!(D, Fns<E>.masked_select(self.core(), mask.core()))
    }

    /// The positions of the nonzero elements (NaN counts as nonzero), one
    /// row of `rank` coordinates each in row-major order, `[count, rank]`,
    /// like `torch.nonzero(x)`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![0, 5, 7, 0], [2, 2]);
    /// assert_eq!(x.nonzero().to_vec2(), vec![vec![0, 1], vec![1, 0]]);
    /// ```
    #[fallible]
    pub fn nonzero(&self) -> Tensor<D, i64> {
        core_call!(D, Fns<E>.nonzero(self.core()))
    }

    /// [`nonzero`](Self::nonzero) by its other PyTorch name,
    /// `torch.argwhere(x)`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![0.0, 2.0, 0.0], [3]);
    /// assert_eq!(x.argwhere().to_vec(), vec![1]);
    /// ```
    #[fallible]
    pub fn argwhere(&self) -> Tensor<D, i64> {
        self.try_nonzero()
    }

    /// The distinct values in ascending order (the tensor flattened), like
    /// `torch.unique(x, sorted=True, return_inverse, return_counts)`:
    /// with `return_inverse`, each element's position among them (of the
    /// input's shape); with `return_counts`, how often each occurs. NaN
    /// values are each distinct, and last, as in PyTorch.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![3, 1, 3, 2, 1, 3], [2, 3]);
    /// let (values, inverse, counts) = x.unique(true, true);
    /// assert_eq!(values.to_vec(), vec![1, 2, 3]);
    /// assert_eq!(inverse.unwrap().to_vec2(), vec![vec![2, 0, 2], vec![1, 0, 2]]);
    /// assert_eq!(counts.unwrap().to_vec(), vec![2, 1, 3]);
    /// ```
    #[fallible]
    pub fn unique(&self, return_inverse: bool, return_counts: bool) -> Unique<D, E> {
        core_call!(D, Fns<E>.unique(self.core(), return_inverse, return_counts))
    }

    /// Where each of `values` would go in this sorted tensor to keep it
    /// sorted, like `torch.searchsorted(self, values, right=right)`: the
    /// count of elements below the value (at most it, with `right`), along
    /// the last axis. A 1-D `self` serves values of any shape; otherwise
    /// both have the same leading axes. The result has the values' shape.
    /// Fails when the leading axes differ.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let edges = Tensor::<Cpu>::from_vec(vec![1.0, 3.0, 5.0], [3]);
    /// let x = Tensor::<Cpu>::from_vec(vec![0.0, 3.0, 6.0], [3]);
    /// assert_eq!(edges.searchsorted(&x, false).to_vec(), vec![0, 1, 3]);
    /// assert_eq!(edges.searchsorted(&x, true).to_vec(), vec![0, 2, 3]);
    /// ```
    #[fallible]
    pub fn searchsorted<D2: Device>(&self, values: &Tensor<D2, E>, right: bool) -> Tensor<D, i64>
    where
        D: SameDevice<D2>,
    {
        let values: &Self = same_device(values);
        core_call!(D, Fns<E>.searchsorted(self.core(), values.core(), right))
    }
}

impl<D: Device> Tensor<D, i64> {
    /// How many times each of `0..len` occurs in this 1-D tensor of
    /// non-negative integers, like `torch.bincount(x, minlength=..)`: `len`
    /// is one more than the largest value, and at least `minlength`. Fails
    /// on a negative value or a tensor that is not 1-D.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 3, 1], [3]);
    /// assert_eq!(x.bincount(0).to_vec(), vec![0, 2, 0, 1]);
    /// assert_eq!(x.bincount(6).to_vec(), vec![0, 2, 0, 1, 0, 0]);
    /// ```
    #[fallible]
    pub fn bincount(&self, minlength: usize) -> Self {
        core_call!(D, Fns<i64>.bincount(self.core(), minlength))
    }

    /// The sums of `weights` over the elements equal to each of `0..len`,
    /// like `torch.bincount(x, weights, minlength)`: `weights` holds one
    /// value per element of this tensor. Fails as [`bincount`](Self::bincount)
    /// does, and when the weights' shape is not this tensor's.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 3, 1], [3]);
    /// let w = Tensor::<Cpu>::from_vec(vec![0.5, 2.0, 0.25], [3]);
    /// assert_eq!(x.bincount_weighted(&w, 0).to_vec(), vec![0.0, 0.75, 0.0, 2.0]);
    /// ```
    #[fallible]
    pub fn bincount_weighted<D2: Device, F: FloatElement>(
        &self,
        weights: &Tensor<D2, F>,
        minlength: usize,
    ) -> Tensor<D, F>
    where
        D: SameDevice<D2>,
    {
        let weights: &Tensor<D, F> = same_device(weights);
        core_call!(D, Fns<F>.bincount_weighted(self.core(), weights.core(), minlength))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    pub(super) fn core_masked_select(&self, mask: &Tensor<D, u8>) -> Result<Self> {
        let Some(shape) = self.shape().broadcast_with(mask.shape()) else {
            return Err(Error::Shape {
                op: "masked_select",
                device: D::name(),
                shapes: vec![self.shape().clone(), mask.shape().clone()],
                reason: "the tensor and the mask do not broadcast".into(),
            });
        };
        let kept = mask.try_broadcast_to(shape.clone())?.try_to_vec()?;
        let picks: Vec<i64> = kept.iter().enumerate().filter(|&(_, &m)| m != 0).map(|(i, _)| i as i64).collect();
        let len = picks.len();
        let flat = self.try_broadcast_to(shape.clone())?.try_reshape([shape.elem_count()])?;
        flat.try_index_select(0, &Tensor::<D, i64>::try_from_vec(picks, [len])?)
    }

    pub(super) fn core_nonzero(&self) -> Result<Tensor<D, i64>> {
        let (values, dims) = (self.try_to_vec()?, self.dims().to_vec());
        let mut positions = Vec::new();
        for (flat, _) in values.iter().enumerate().filter(|&(_, &v)| v != E::ZERO) {
            // The coordinates of `flat`, last axis fastest.
            let mut rest = flat;
            let at = positions.len();
            positions.resize(at + dims.len(), 0);
            for (axis, &d) in dims.iter().enumerate().rev() {
                positions[at + axis] = (rest % d) as i64;
                rest /= d;
            }
        }
        let count = values.iter().filter(|&&v| v != E::ZERO).count();
        Tensor::try_from_vec(positions, [count, dims.len()])
    }

    pub(super) fn core_unique(&self, return_inverse: bool, return_counts: bool) -> Result<Unique<D, E>> {
        // Sorted on the device (stable, NaN last), the runs found here.
        let (sorted, order) = crate::autograd::no_grad(|| self.try_reshape([self.elem_count()])?.try_sort(0, false))?;
        let (sorted, order) = (sorted.try_to_vec()?, order.try_to_vec()?);
        let mut values: Vec<E> = Vec::new();
        let mut counts: Vec<i64> = Vec::new();
        let mut inverse = vec![0i64; sorted.len()];
        for (&value, &from) in sorted.iter().zip(&order) {
            // NaN equals nothing, itself included: each is its own run.
            if values.last() != Some(&value) {
                values.push(value);
                counts.push(0);
            }
            *counts.last_mut().expect("a run was just started") += 1;
            inverse[from as usize] = values.len() as i64 - 1;
        }
        let len = values.len();
        let inverse = return_inverse.then(|| Tensor::try_from_vec(inverse, self.shape().clone())).transpose()?;
        let counts = return_counts.then(|| Tensor::try_from_vec(counts, [len])).transpose()?;
        Ok((Tensor::try_from_vec(values, [len])?, inverse, counts))
    }

    pub(super) fn core_searchsorted(&self, values: &Self, right: bool) -> Result<Tensor<D, i64>> {
        let fail = |reason: &str| Error::Shape {
            op: "searchsorted",
            device: D::name(),
            shapes: vec![self.shape().clone(), values.shape().clone()],
            reason: reason.into(),
        };
        let (rank, value_rank) = (self.rank(), values.rank());
        if rank == 0 {
            return Err(fail("the sorted sequence must have at least one axis"));
        }
        let shared = rank == 1;
        if !shared && (value_rank != rank || self.dims()[..rank - 1] != values.dims()[..rank - 1]) {
            return Err(fail("the sorted sequence and the values must have the same leading axes"));
        }
        let (sorted, wanted) = (self.try_to_vec()?, values.try_to_vec()?);
        let line = self.dims()[rank - 1];
        let per_line = if shared { wanted.len().max(1) } else { values.dims().last().copied().unwrap_or(1).max(1) };
        let found: Vec<i64> = wanted
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let start = if shared { 0 } else { i / per_line * line };
                let row = &sorted[start..start + line];
                (if right { row.partition_point(|x| x <= v) } else { row.partition_point(|x| x < v) }) as i64
            })
            .collect();
        Tensor::try_from_vec(found, values.shape().clone())
    }

    /// The length of `bincount`'s result for the values `counted` (checked
    /// 1-D and non-negative, as `E` is `i64`).
    fn bins(&self, op: &'static str, minlength: usize) -> Result<(Vec<E>, usize)> {
        let fail = |reason: String| Error::Shape { op, device: D::name(), shapes: vec![self.shape().clone()], reason };
        if self.rank() != 1 {
            return Err(fail("bincount takes a 1-D tensor".into()));
        }
        let counted = self.try_to_vec()?;
        let (low, high) = counted.iter().fold((0.0f64, -1.0f64), |(l, h), v| (l.min(v.to_f64()), h.max(v.to_f64())));
        if low < 0.0 {
            return Err(fail(format!("bincount counts non-negative values, found {low}")));
        }
        let len = (high + 1.0).max(minlength as f64) as usize;
        crate::error::check_elem_count(op, D::name, &[&Shape::from([len])])?;
        Ok((counted, len))
    }

    pub(super) fn core_bincount(&self, minlength: usize) -> Result<Self> {
        let (counted, len) = self.bins("bincount", minlength)?;
        let mut counts = vec![E::ZERO; len];
        for v in counted {
            let bin = &mut counts[v.to_f64() as usize];
            *bin = E::from_f64(bin.to_f64() + 1.0);
        }
        Tensor::try_from_vec(counts, [len])
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    pub(super) fn core_bincount_weighted(counted: &Tensor<D, i64>, weights: &Self, minlength: usize) -> Result<Self> {
        let (bins, len) = counted.bins("bincount", minlength)?;
        if weights.shape() != counted.shape() {
            return Err(Error::Shape {
                op: "bincount",
                device: D::name(),
                shapes: vec![counted.shape().clone(), weights.shape().clone()],
                reason: "the weights must have the input's shape".into(),
            });
        }
        let index = Tensor::<D, i64>::try_from_vec(bins, counted.shape().clone())?;
        Tensor::<D, E>::try_zeros([len])?.try_index_add(0, &index, &weights.detach())
    }
}
