//! The order in which a loader visits a dataset.

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

/// A permutation of `0..len` for `epoch`, from `seed` (Fisher-Yates).
fn permutation(len: usize, seed: u64, epoch: usize) -> Vec<usize> {
    let mut generator = Generator::new(seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut order: Vec<usize> = (0..len).collect();
    for (i, u) in (1..len).rev().zip(generator.uniform()) {
        let j = ((u * (i + 1) as f64) as usize).min(i);
        order.swap(i, j);
    }
    order
}
