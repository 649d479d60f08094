//! Datasets made of datasets: [`Subset`], [`ConcatDataset`] and
//! [`random_split`], PyTorch's `torch.utils.data` helpers of the same names.

use super::Dataset;
use super::sampler::permutation;
use crate::error::{Error, Result};
use std::sync::Arc;

/// A dataset shared by several views (the splits of [`random_split`]) is
/// still a dataset.
impl<S: Dataset + ?Sized> Dataset for Arc<S> {
    type Item = S::Item;

    fn len(&self) -> usize {
        (**self).len()
    }

    fn get(&self, index: usize) -> Result<S::Item> {
        (**self).get(index)
    }
}

/// A boxed dataset is a dataset, so that datasets of different types with
/// one item type can be concatenated ([`ConcatDataset`] of
/// `Box<dyn Dataset<Item = I>>`).
impl<S: Dataset + ?Sized> Dataset for Box<S> {
    type Item = S::Item;

    fn len(&self) -> usize {
        (**self).len()
    }

    fn get(&self, index: usize) -> Result<S::Item> {
        (**self).get(index)
    }
}

/// The samples of `dataset` at `indices`, in that order, PyTorch's
/// `Subset`: sample `i` is `dataset[indices[i]]`.
///
/// ```
/// use devtensor::data::{Dataset, Subset, TensorDataset};
/// use devtensor::{Cpu, Tensor};
/// let data = TensorDataset::try_new(Tensor::<Cpu>::zeros([5, 2]), Tensor::<Cpu, i64>::arange(0, 5))?;
/// let odd = Subset::try_new(data, vec![1, 3])?;
/// assert_eq!((odd.len(), odd.get(1)?.1.item()), (2, 3));
/// # Ok::<(), devtensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Subset<S: Dataset> {
    dataset: S,
    indices: Vec<usize>,
}

impl<S: Dataset> Subset<S> {
    /// The view of `dataset` at `indices`. Fails, naming the first one,
    /// when an index is not below the dataset's length.
    pub fn try_new(dataset: S, indices: Vec<usize>) -> Result<Self> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= dataset.len()) {
            return Err(Error::Argument {
                op: "Subset",
                device: "Cpu".into(),
                reason: format!("index {bad} is out of range for a dataset of {} samples", dataset.len()),
            });
        }
        Ok(Subset { dataset, indices })
    }

    /// The underlying dataset (PyTorch's `subset.dataset`).
    pub fn dataset(&self) -> &S {
        &self.dataset
    }

    /// The indices into it (PyTorch's `subset.indices`).
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }
}

impl<S: Dataset> Dataset for Subset<S> {
    type Item = S::Item;

    fn len(&self) -> usize {
        self.indices.len()
    }

    fn get(&self, index: usize) -> Result<S::Item> {
        match self.indices.get(index) {
            Some(&i) => self.dataset.get(i),
            None => Err(out_of_range("Subset", index, self.len())),
        }
    }
}

/// Several datasets one after the other, PyTorch's `ConcatDataset`: the
/// samples of the first, then those of the second, and so on.
///
/// ```
/// use devtensor::data::{ConcatDataset, Dataset, TensorDataset};
/// use devtensor::{Cpu, Tensor};
/// let part = |from: i64, n: usize| {
///     TensorDataset::try_new(Tensor::<Cpu>::zeros([n, 2]), Tensor::<Cpu, i64>::arange(from, from + n as i64))
/// };
/// let both = ConcatDataset::new(vec![part(0, 3)?, part(10, 2)?]);
/// assert_eq!(both.len(), 5);
/// assert_eq!(both.get(3)?.1.item(), 10);
/// # Ok::<(), devtensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ConcatDataset<S: Dataset> {
    datasets: Vec<S>,
    /// `ends[k]`: the number of samples in datasets `0..=k`.
    ends: Vec<usize>,
}

impl<S: Dataset> ConcatDataset<S> {
    /// The datasets `datasets`, concatenated in order.
    pub fn new(datasets: Vec<S>) -> Self {
        let ends = datasets
            .iter()
            .scan(0usize, |total, d| {
                *total += d.len();
                Some(*total)
            })
            .collect();
        ConcatDataset { datasets, ends }
    }

    /// The concatenated datasets (PyTorch's `datasets`).
    pub fn datasets(&self) -> &[S] {
        &self.datasets
    }

    /// Where each dataset ends (PyTorch's `cumulative_sizes`).
    pub fn cumulative_sizes(&self) -> &[usize] {
        &self.ends
    }
}

impl<S: Dataset> Dataset for ConcatDataset<S> {
    type Item = S::Item;

    fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    fn get(&self, index: usize) -> Result<S::Item> {
        // The first dataset that ends past `index` (empty ones are skipped).
        let k = self.ends.partition_point(|&end| end <= index);
        let Some(dataset) = self.datasets.get(k) else {
            return Err(out_of_range("ConcatDataset", index, self.len()));
        };
        let start = if k == 0 { 0 } else { self.ends[k - 1] };
        dataset.get(index - start)
    }
}

fn out_of_range(op: &'static str, index: usize, len: usize) -> Error {
    Error::Argument { op, device: "Cpu".into(), reason: format!("index {index} is out of range for {len} samples") }
}

/// How [`random_split`] divides a dataset: PyTorch's `lengths`, as counts
/// or as fractions.
#[derive(Clone, Debug, PartialEq)]
pub enum SplitLengths {
    /// Sample counts, which must add up to the dataset's length.
    Counts(Vec<usize>),
    /// Fractions of the dataset, which must add up to 1: each split gets
    /// `floor(len · fraction)` samples, and the remainder goes one by one
    /// to the splits in order, as in PyTorch.
    Fractions(Vec<f64>),
}

impl From<&[usize]> for SplitLengths {
    fn from(counts: &[usize]) -> Self {
        SplitLengths::Counts(counts.to_vec())
    }
}

impl<const N: usize> From<[usize; N]> for SplitLengths {
    fn from(counts: [usize; N]) -> Self {
        SplitLengths::Counts(counts.to_vec())
    }
}

impl From<&[f64]> for SplitLengths {
    fn from(fractions: &[f64]) -> Self {
        SplitLengths::Fractions(fractions.to_vec())
    }
}

impl<const N: usize> From<[f64; N]> for SplitLengths {
    fn from(fractions: [f64; N]) -> Self {
        SplitLengths::Fractions(fractions.to_vec())
    }
}

/// `dataset` split at random into non-overlapping [`Subset`]s of the given
/// lengths, PyTorch's `random_split(dataset, lengths, generator)`: one
/// permutation of the indices from `seed`, cut into consecutive pieces, so
/// that a seed gives the same split on every run (not PyTorch's split for
/// the same seed: the generators differ). The splits share the dataset.
///
/// ```
/// use devtensor::data::{Dataset, TensorDataset, random_split};
/// use devtensor::{Cpu, Tensor};
/// let data = TensorDataset::try_new(Tensor::<Cpu>::zeros([10, 2]), Tensor::<Cpu, i64>::arange(0, 10))?;
/// let [train, val]: [_; 2] = random_split(data, [0.8, 0.2], 42)?.try_into().unwrap();
/// assert_eq!((train.len(), val.len()), (8, 2));
/// let mut seen: Vec<usize> = train.indices().iter().chain(val.indices()).copied().collect();
/// seen.sort();
/// assert_eq!(seen, (0..10).collect::<Vec<_>>());
/// # Ok::<(), devtensor::Error>(())
/// ```
///
/// Fails when counts do not add up to the dataset's length, or fractions
/// are outside `[0, 1]` or do not add up to 1 (within 1e-9 of it, as
/// Python's `math.isclose`).
pub fn random_split<S: Dataset>(
    dataset: S,
    lengths: impl Into<SplitLengths>,
    seed: u64,
) -> Result<Vec<Subset<Arc<S>>>> {
    let len = dataset.len();
    let error = |reason: String| Error::Argument { op: "random_split", device: "Cpu".into(), reason };
    let counts = match lengths.into() {
        SplitLengths::Counts(counts) => counts,
        SplitLengths::Fractions(fractions) => {
            let sum: f64 = fractions.iter().sum();
            if fractions.iter().any(|f| !(0.0..=1.0).contains(f)) || (sum - 1.0).abs() > 1e-9 {
                return Err(error(format!("fractions {fractions:?} must each be in [0, 1] and add up to 1")));
            }
            let mut counts: Vec<usize> = fractions.iter().map(|f| (len as f64 * f).floor() as usize).collect();
            let remainder = len.saturating_sub(counts.iter().sum());
            for i in 0..remainder {
                let k = i % counts.len();
                counts[k] += 1;
            }
            counts
        }
    };
    if counts.iter().sum::<usize>() != len {
        return Err(error(format!("lengths {counts:?} do not add up to the dataset's {len} samples")));
    }
    let order = permutation(len, seed, 0);
    let dataset = Arc::new(dataset);
    let mut start = 0;
    let mut splits = Vec::with_capacity(counts.len());
    for count in counts {
        splits.push(Subset { dataset: dataset.clone(), indices: order[start..start + count].to_vec() });
        start += count;
    }
    Ok(splits)
}
