//! The order in which a loader visits a dataset: the built-in [`Sampler`]s,
//! [`WeightedRandomSampler`], and the [`SampleOrder`] trait for samplers
//! of your own.

use crate::error::{Error, Result};
use crate::random::Generator;

/// Which sample indices an epoch visits, in which order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampler {
    /// `0, 1, 2, ...` every epoch (PyTorch's `SequentialSampler`).
    Sequential,
    /// A fresh permutation each epoch, from `seed` and the epoch number, so
    /// that runs are reproducible (PyTorch's `RandomSampler` with a seeded
    /// generator).
    Random {
        /// The seed of epoch 0's permutation.
        seed: u64,
    },
    /// Replica `rank`'s shard out of `replicas` (PyTorch's
    /// `DistributedSampler`): the indices (shuffled from `seed` and the
    /// epoch when `shuffle`) are padded by repeating the first ones to a
    /// multiple of `replicas`, and replica `r` takes positions
    /// `r, r + replicas, ...`. Shards are disjoint apart from the padding,
    /// and together cover every sample.
    Distributed {
        /// Number of replicas.
        replicas: usize,
        /// This replica, in `0..replicas`.
        rank: usize,
        /// Whether to shuffle before sharding.
        shuffle: bool,
        /// The shuffle's seed (the same on every replica).
        seed: u64,
    },
}

impl Sampler {
    /// The indices of `epoch` over a dataset of `len` samples.
    ///
    /// ```
    /// use devtensor::data::Sampler;
    /// let shard = |rank| Sampler::Distributed { replicas: 2, rank, shuffle: false, seed: 0 }.indices(0, 5);
    /// assert_eq!(shard(0), vec![0, 2, 4]);
    /// assert_eq!(shard(1), vec![1, 3, 0]); // padded with index 0
    /// ```
    pub fn indices(&self, epoch: usize, len: usize) -> Vec<usize> {
        match *self {
            Sampler::Sequential => (0..len).collect(),
            Sampler::Random { seed } => permutation(len, seed, epoch),
            Sampler::Distributed { replicas, rank, shuffle, seed } => {
                let replicas = replicas.max(1);
                let all = if shuffle { permutation(len, seed, epoch) } else { (0..len).collect() };
                if all.is_empty() {
                    return all;
                }
                let total = len.div_ceil(replicas) * replicas;
                (rank..total).step_by(replicas).map(|i| all[i % len]).collect()
            }
        }
    }
}

/// The indices a loader visits in each epoch, PyTorch's `Sampler` base
/// class: implement it for an order of your own and hand it to
/// [`DataLoader::sampler`](super::DataLoader::sampler). Called once per
/// epoch, with the epoch's number (so that a random order can change each
/// epoch and stay reproducible) and the dataset's length; the indices
/// must be below `len`, and may repeat or leave samples out.
///
/// ```
/// use devtensor::data::{DataLoader, SampleOrder, TensorDataset};
/// use devtensor::{Cpu, Tensor};
/// /// Every sample twice, backwards.
/// struct TwiceBackwards;
/// impl SampleOrder for TwiceBackwards {
///     fn indices(&self, _epoch: usize, len: usize) -> Vec<usize> {
///         (0..len).rev().chain((0..len).rev()).collect()
///     }
/// }
/// let data = TensorDataset::try_new(Tensor::<Cpu>::zeros([3, 1]), Tensor::<Cpu, i64>::arange(0, 3))?;
/// let mut loader = DataLoader::new(data, 6).sampler(TwiceBackwards);
/// let labels = loader.iter().next().unwrap()?.1.to_vec();
/// assert_eq!(labels, [2, 1, 0, 2, 1, 0]);
/// # Ok::<(), devtensor::Error>(())
/// ```
pub trait SampleOrder: Send + Sync {
    /// The indices of `epoch` over a dataset of `len` samples.
    fn indices(&self, epoch: usize, len: usize) -> Vec<usize>;
}

impl SampleOrder for Sampler {
    fn indices(&self, epoch: usize, len: usize) -> Vec<usize> {
        Sampler::indices(self, epoch, len)
    }
}

/// Indices drawn with probabilities proportional to `weights`, PyTorch's
/// `WeightedRandomSampler(weights, num_samples, replacement)`: the usual
/// way to oversample rare classes. With replacement, each of the
/// `num_samples` draws is independent; without, no index is drawn twice
/// (each draw proportional to the weights of those left, as
/// `torch.multinomial` draws). New draws every epoch, reproducible from
/// `seed` (not PyTorch's draws for the same seed: the generators differ).
///
/// ```
/// use devtensor::data::{SampleOrder, WeightedRandomSampler};
/// // Index 1 never (weight 0), index 2 three times as often as index 0.
/// let sampler = WeightedRandomSampler::try_new(vec![1.0, 0.0, 3.0], 400, true, 7)?;
/// let drawn = sampler.indices(0, 3);
/// let count = |i| drawn.iter().filter(|&&d| d == i).count();
/// assert_eq!(count(1), 0);
/// assert!(count(2) > 2 * count(0));
/// # Ok::<(), devtensor::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct WeightedRandomSampler {
    weights: Vec<f64>,
    num_samples: usize,
    replacement: bool,
    seed: u64,
}

impl WeightedRandomSampler {
    /// The sampler of `num_samples` indices into `0..weights.len()`. Fails
    /// when a weight is negative or not finite, when every weight is 0
    /// (and samples are asked for), or when more samples are asked for
    /// without replacement than there are non-zero weights, as
    /// `torch.multinomial` does.
    pub fn try_new(weights: Vec<f64>, num_samples: usize, replacement: bool, seed: u64) -> Result<Self> {
        let error = |reason: String| Error::Argument { op: "WeightedRandomSampler", device: "Cpu".into(), reason };
        if let Some(bad) = weights.iter().find(|w| !(w.is_finite() && **w >= 0.0)) {
            return Err(error(format!("weights must be finite and non-negative, got {bad}")));
        }
        let positive = weights.iter().filter(|&&w| w > 0.0).count();
        if num_samples > 0 && positive == 0 {
            return Err(error("the weights add up to 0: there is nothing to draw".into()));
        }
        if !replacement && num_samples > positive {
            return Err(error(format!(
                "cannot draw {num_samples} samples without replacement from {positive} non-zero weights"
            )));
        }
        Ok(WeightedRandomSampler { weights, num_samples, replacement, seed })
    }
}

/// The dataset's length is not used: the indices are those of the weights,
/// one weight per sample, as in PyTorch.
impl SampleOrder for WeightedRandomSampler {
    fn indices(&self, epoch: usize, _len: usize) -> Vec<usize> {
        let mut generator = epoch_generator(self.seed, epoch);
        if self.replacement {
            // Inverse transform sampling on the running sums.
            let cumulative: Vec<f64> = self
                .weights
                .iter()
                .scan(0.0, |sum, w| {
                    *sum += w;
                    Some(*sum)
                })
                .collect();
            let total = cumulative.last().copied().unwrap_or(0.0);
            generator
                .uniform()
                .take(self.num_samples)
                .map(|u| {
                    let i = cumulative.partition_point(|&c| c <= u * total);
                    // Never an index of weight 0 (a rounding at the top end).
                    i.min(self.weights.iter().rposition(|&w| w > 0.0).unwrap_or(0))
                })
                .collect()
        } else {
            // Efraimidis and Spirakis: the largest keys u^(1/w) are a draw
            // without replacement with probabilities proportional to w.
            let mut keyed: Vec<(f64, usize)> = self
                .weights
                .iter()
                .zip(generator.uniform())
                .enumerate()
                .filter(|(_, (w, _))| **w > 0.0)
                .map(|(i, (w, u))| (u.ln() / w, i))
                .collect();
            keyed.sort_by(|a, b| b.0.total_cmp(&a.0));
            keyed.into_iter().take(self.num_samples).map(|(_, i)| i).collect()
        }
    }
}

/// The generator of `epoch`'s draws, from `seed`.
fn epoch_generator(seed: u64, epoch: usize) -> Generator {
    Generator::new(seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A permutation of `0..len` for `epoch`, from `seed` (Fisher-Yates).
pub(super) fn permutation(len: usize, seed: u64, epoch: usize) -> Vec<usize> {
    let mut generator = epoch_generator(seed, epoch);
    let mut order: Vec<usize> = (0..len).collect();
    for (i, u) in (1..len).rev().zip(generator.uniform()) {
        let j = ((u * (i + 1) as f64) as usize).min(i);
        order.swap(i, j);
    }
    order
}
