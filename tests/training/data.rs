//! Data loading: every sample once per epoch in the sampler's order, with
//! and without workers; bounded prefetching; errors that name the batch;
//! distributed shards; datasets of any number of tensors; streaming
//! datasets; and batches delivered on every device.

use devtensor::data::{
    Collate, ConcatDataset, DataLoader, Dataset, IterableDataset, SampleOrder, Sampler, StreamLoader, Subset,
    TensorDataset, TupleDataset, WeightedRandomSampler, WorkerInfo, random_split,
};
use devtensor::{Cpu, Device, Error, Result, Tensor};
use proptest::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Sample `i` is the row `[i, 10 i]` with label `i`.
fn numbered(n: usize) -> TensorDataset<f32, i64> {
    let x = Tensor::<Cpu>::from_vec((0..n).flat_map(|i| [i as f32, 10.0 * i as f32]).collect(), [n, 2]);
    TensorDataset::try_new(x, Tensor::<Cpu, i64>::arange(0, n as i64)).unwrap()
}

fn labels_of(loader: &mut DataLoader<TensorDataset<f32, i64>>) -> Vec<Vec<i64>> {
    loader.iter().map(|b| b.unwrap().1.to_vec()).collect()
}

#[test]
fn sequential_batches_in_order_with_a_short_last_one() {
    let mut loader = DataLoader::new(numbered(10), 4);
    assert_eq!(loader.len(), 3);
    assert_eq!(labels_of(&mut loader), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
    let (x, _) = loader.iter().next().unwrap().unwrap();
    assert_eq!(x.to_vec2()[3], vec![3.0, 30.0]);
    let mut dropped = DataLoader::new(numbered(10), 4).drop_last(true);
    assert_eq!(dropped.len(), 2);
    assert_eq!(labels_of(&mut dropped).len(), 2);
    // A dataset shorter than a batch: one short batch, or none with drop_last.
    assert_eq!(labels_of(&mut DataLoader::new(numbered(3), 8)), vec![vec![0, 1, 2]]);
    assert!(labels_of(&mut DataLoader::new(numbered(3), 8).drop_last(true)).is_empty());
    assert!(DataLoader::try_new(numbered(3), 0).is_err());
}

#[test]
fn shuffling_is_seeded_new_each_epoch_and_the_same_with_workers() {
    let epoch = |loader: &mut DataLoader<TensorDataset<f32, i64>>| labels_of(loader).concat();
    let mut a = DataLoader::new(numbered(50), 7).shuffle(3);
    let (first, second) = (epoch(&mut a), epoch(&mut a));
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(sorted, (0..50).collect::<Vec<_>>(), "every sample once");
    assert_ne!(first, second, "a new order each epoch");
    assert_ne!(first, (0..50).collect::<Vec<_>>());
    // Another loader with the same seed, now with workers: the same batches.
    for workers in [1, 3] {
        let mut b = DataLoader::new(numbered(50), 7).shuffle(3).workers(workers).prefetch(1);
        assert_eq!(epoch(&mut b), first, "{workers} workers");
        assert_eq!(epoch(&mut b), second, "{workers} workers");
    }
    let mut c = DataLoader::new(numbered(50), 7).shuffle(3);
    c.set_epoch(1);
    assert_eq!(epoch(&mut c), second);
}

#[test]
fn distributed_shards_are_disjoint_and_cover_the_data() {
    let (n, replicas) = (23, 4);
    let mut all = Vec::new();
    for rank in 0..replicas {
        let sampler = Sampler::Distributed { replicas, rank, shuffle: true, seed: 9 };
        let shard = sampler.indices(2, n);
        assert_eq!(shard.len(), n.div_ceil(replicas));
        all.extend(shard);
    }
    // 24 slots for 23 samples: one repeat (the padding), every sample present.
    let mut unique = all.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique, (0..n).collect::<Vec<_>>());
    assert_eq!(all.len(), 24);
    let mut loader =
        DataLoader::new(numbered(n), 4).sampler(Sampler::Distributed { replicas, rank: 1, shuffle: false, seed: 0 });
    assert_eq!(labels_of(&mut loader).concat(), vec![1, 5, 9, 13, 17, 21]);
}

/// Lengths that PyTorch 2.15's `random_split(range(n), fractions)` gives,
/// printed by it (floors, then the remainder one by one from the first).
const PYTORCH_FRACTION_SPLITS: &[(usize, &[f64], &[usize])] = &[
    (10, &[0.8, 0.2], &[8, 2]),
    (7, &[0.5, 0.5], &[4, 3]),
    (10, &[0.3, 0.3, 0.4], &[3, 3, 4]),
    (5, &[0.1, 0.1, 0.8], &[1, 0, 4]),
    (11, &[1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0], &[4, 4, 3]),
    (3, &[0.5, 0.25, 0.25], &[2, 1, 0]),
    (100, &[0.7, 0.15, 0.15], &[70, 15, 15]),
    (9, &[0.05, 0.95], &[1, 8]),
];

#[test]
fn random_split_follows_pytorchs_lengths_and_refuses_what_it_refuses() {
    for &(n, fractions, want) in PYTORCH_FRACTION_SPLITS {
        let splits = random_split(numbered(n), fractions, 1).unwrap();
        let got: Vec<usize> = splits.iter().map(|s| s.len()).collect();
        assert_eq!(got, want, "{n} samples as {fractions:?}");
    }
    // PyTorch: "Sum of input lengths does not equal the length of the input dataset!"
    let err = random_split(numbered(10), [5usize, 4], 0).unwrap_err().to_string();
    assert!(err.contains("random_split") && err.contains("do not add up to the dataset's 10"), "{err}");
    let err = random_split(numbered(10), [0.5, 0.4], 0).unwrap_err().to_string();
    assert!(err.contains("add up to 1"), "{err}");
    assert!(random_split(numbered(10), [1.5, -0.5], 0).is_err());
    let err = Subset::try_new(numbered(3), vec![0, 3]).unwrap_err().to_string();
    assert!(err.contains("index 3 is out of range for a dataset of 3 samples"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// The splits partition the indices, in the sizes asked, the same for
    /// a seed; each split reads its own samples of the one shared dataset;
    /// a loader over a split batches exactly its samples.
    #[test]
    fn random_split_partitions_the_samples(sizes in proptest::collection::vec(0..6usize, 1..5), seed in any::<u64>()) {
        let n: usize = sizes.iter().sum();
        let splits = random_split(numbered(n), sizes.as_slice(), seed).unwrap();
        let again = random_split(numbered(n), sizes.as_slice(), seed).unwrap();
        let mut seen = Vec::new();
        for (k, split) in splits.iter().enumerate() {
            prop_assert_eq!(split.len(), sizes[k]);
            prop_assert_eq!(split.indices(), again[k].indices());
            for (i, &index) in split.indices().iter().enumerate() {
                prop_assert_eq!(split.get(i).unwrap().1.item(), index as i64);
            }
            prop_assert!(split.get(split.len()).is_err());
            seen.extend_from_slice(split.indices());
        }
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..n).collect::<Vec<_>>());
        if let Some(split) = splits.iter().find(|s| !s.is_empty()) {
            let mut loader = DataLoader::new(split.clone(), 2);
            let labels: Vec<i64> = loader.iter().flat_map(|b| b.unwrap().1.to_vec()).collect();
            prop_assert_eq!(labels, split.indices().iter().map(|&i| i as i64).collect::<Vec<_>>());
        }
    }

    /// Concatenation reads sample `i` from the dataset it falls in, empty
    /// datasets included, as a flat list of the parts would.
    #[test]
    fn concatenation_reads_each_part_in_order(sizes in proptest::collection::vec(0..5usize, 0..5)) {
        let parts: Vec<Subset<TensorDataset<f32, i64>>> = sizes
            .iter()
            .enumerate()
            .map(|(k, &len)| Subset::try_new(numbered(30), (0..len).map(|i| 6 * k + i).collect()).unwrap())
            .collect();
        let flat: Vec<usize> = parts.iter().flat_map(|p| p.indices().to_vec()).collect();
        let all = ConcatDataset::new(parts);
        prop_assert_eq!(all.len(), flat.len());
        for (i, &want) in flat.iter().enumerate() {
            prop_assert_eq!(all.get(i).unwrap().1.item(), want as i64);
        }
        prop_assert!(all.get(flat.len()).is_err());
        let mut ends = Vec::new();
        let mut total = 0;
        for &len in &sizes {
            total += len;
            ends.push(total);
        }
        prop_assert_eq!(all.cumulative_sizes(), ends.as_slice());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// With replacement, each index is drawn in proportion to its weight
    /// (20,000 draws: 6 standard deviations of slack), never one of weight 0.
    #[test]
    fn weighted_draws_follow_the_weights(weights in proptest::collection::vec(prop_oneof![Just(0.0), 0.5..4.0f64], 1..6), seed in any::<u64>()) {
        prop_assume!(weights.iter().any(|&w| w > 0.0));
        let draws = 20_000;
        let sampler = WeightedRandomSampler::try_new(weights.clone(), draws, true, seed).unwrap();
        let drawn = sampler.indices(0, weights.len());
        prop_assert_eq!(drawn.len(), draws);
        let total: f64 = weights.iter().sum();
        for (i, &w) in weights.iter().enumerate() {
            let share = drawn.iter().filter(|&&d| d == i).count() as f64 / draws as f64;
            let p = w / total;
            let slack = 6.0 * (p * (1.0 - p) / draws as f64).sqrt() + 1e-12;
            prop_assert!((share - p).abs() <= slack, "index {}: drawn {} of the time, weight share {}", i, share, p);
        }
        if weights.iter().filter(|&&w| w > 0.0).count() > 1 {
            prop_assert_ne!(sampler.indices(1, weights.len()), drawn.clone(), "a new draw each epoch");
        }
        prop_assert_eq!(sampler.indices(0, weights.len()), drawn, "the same draw for the same epoch");
    }

    /// Without replacement: distinct indices, none of weight 0, and the
    /// first draw in proportion to the weights (over 4,000 epochs).
    #[test]
    fn weighted_draws_without_replacement_are_distinct(weights in proptest::collection::vec(prop_oneof![Just(0.0), 0.5..4.0f64], 1..6), seed in any::<u64>()) {
        let positive = weights.iter().filter(|&&w| w > 0.0).count();
        prop_assume!(positive > 0);
        let sampler = WeightedRandomSampler::try_new(weights.clone(), positive, false, seed).unwrap();
        let epochs = 4_000;
        let mut first = vec![0usize; weights.len()];
        for epoch in 0..epochs {
            let drawn = sampler.indices(epoch, weights.len());
            let mut sorted = drawn.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), positive);
            prop_assert!(drawn.iter().all(|&i| weights[i] > 0.0));
            first[drawn[0]] += 1;
        }
        let total: f64 = weights.iter().sum();
        for (i, &w) in weights.iter().enumerate() {
            let (share, p) = (first[i] as f64 / epochs as f64, w / total);
            let slack = 6.0 * (p * (1.0 - p) / epochs as f64).sqrt() + 1e-12;
            prop_assert!((share - p).abs() <= slack, "index {}: first {} of the time, weight share {}", i, share, p);
        }
    }
}

#[test]
fn samplers_of_every_kind_drive_the_loader() {
    // PyTorch refuses these in WeightedRandomSampler or torch.multinomial.
    assert!(WeightedRandomSampler::try_new(vec![1.0, -1.0], 2, true, 0).is_err());
    assert!(WeightedRandomSampler::try_new(vec![0.0, 0.0], 2, true, 0).is_err());
    let err = WeightedRandomSampler::try_new(vec![1.0, 0.0, 2.0], 3, false, 0).unwrap_err().to_string();
    assert!(err.contains("cannot draw 3 samples without replacement from 2 non-zero weights"), "{err}");
    // The loader takes the sampler's count, not the dataset's length.
    let sampler = WeightedRandomSampler::try_new(vec![0.0, 1.0, 0.0, 1.0], 7, true, 3).unwrap();
    let mut loader = DataLoader::new(numbered(4), 3).sampler(sampler).workers(2);
    assert_eq!(loader.len(), 3);
    let labels: Vec<i64> = labels_of(&mut loader).concat();
    assert_eq!(labels.len(), 7);
    assert!(labels.iter().all(|&l| l == 1 || l == 3), "{labels:?}");
    // An order of one's own.
    struct Evens;
    impl SampleOrder for Evens {
        fn indices(&self, epoch: usize, len: usize) -> Vec<usize> {
            (0..len).filter(|i| i % 2 == epoch % 2).collect()
        }
    }
    let mut loader = DataLoader::new(numbered(7), 10).sampler(Evens);
    assert_eq!(labels_of(&mut loader), vec![vec![0, 2, 4, 6]]);
    assert_eq!(labels_of(&mut loader), vec![vec![1, 3, 5]]);
}

/// Datasets of different types with one item type, boxed, concatenate.
#[test]
fn boxed_datasets_of_different_types_concatenate() {
    type Boxed = Box<dyn Dataset<Item = (Tensor<Cpu>, Tensor<Cpu, i64>)>>;
    let parts: Vec<Boxed> = vec![Box::new(numbered(2)), Box::new(Subset::try_new(numbered(9), vec![8, 7]).unwrap())];
    let all = ConcatDataset::new(parts);
    let labels: Vec<i64> = (0..all.len()).map(|i| all.get(i).unwrap().1.item()).collect();
    assert_eq!(labels, [0, 1, 8, 7]);
}

/// A dataset that counts the samples being read at once, and fails (or
/// panics) on request.
struct Probe {
    produced: Arc<AtomicUsize>,
    reading: AtomicUsize,
    most: Arc<AtomicUsize>,
    fail_at: Option<usize>,
    panic_at: Option<usize>,
}

impl Dataset for Probe {
    type Item = Tensor<Cpu>;

    fn len(&self) -> usize {
        64
    }

    fn get(&self, index: usize) -> Result<Tensor<Cpu>> {
        self.produced.fetch_add(1, Ordering::SeqCst);
        let now = self.reading.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_micros(200));
        self.reading.fetch_sub(1, Ordering::SeqCst);
        if Some(index) == self.panic_at {
            panic!("sample {index} is corrupt");
        }
        if Some(index) == self.fail_at {
            return Err(Error::Argument {
                op: "read",
                device: "Cpu".into(),
                reason: format!("cannot decode sample {index}"),
            });
        }
        Tensor::try_from_vec(vec![index as f32], [1])
    }
}

fn probe(fail_at: Option<usize>, panic_at: Option<usize>) -> (Probe, Arc<AtomicUsize>) {
    let most = Arc::new(AtomicUsize::new(0));
    let produced = Arc::new(AtomicUsize::new(0));
    (Probe { produced, reading: AtomicUsize::new(0), most: Arc::clone(&most), fail_at, panic_at }, most)
}

#[test]
fn workers_prepare_ahead_within_the_bound_and_report_failures() {
    // 3 workers in parallel, each on one batch at a time.
    let (data, most) = probe(None, None);
    let mut loader = DataLoader::new(data, 4).workers(3).prefetch(2);
    let batches: Vec<Tensor<Cpu>> = loader.iter().map(|b| b.unwrap()).collect();
    assert_eq!(batches.len(), 16);
    assert_eq!(batches[15].to_vec(), vec![60.0, 61.0, 62.0, 63.0]);
    let most = most.load(Ordering::SeqCst);
    assert!((1..=3).contains(&most), "{most} samples read at once");

    // A slow consumer: the workers stay at most workers * prefetch batches ahead.
    let (data, _) = probe(None, None);
    let produced = Arc::clone(&data.produced);
    let mut loader = DataLoader::new(data, 4).workers(2).prefetch(2);
    for (k, batch) in loader.iter().enumerate() {
        batch.unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let ahead = produced.load(Ordering::SeqCst).div_ceil(4) - (k + 1);
        assert!(ahead <= 2 * 2, "{ahead} batches prepared ahead of batch {k}");
    }

    // A failing sample is its batch's error; later batches still come.
    let (data, _) = probe(Some(9), None);
    let results: Vec<_> = DataLoader::new(data, 4).workers(2).iter().collect();
    assert_eq!(results.len(), 16);
    let err = results[2].as_ref().unwrap_err();
    assert!(err.to_string().contains("cannot decode sample 9"), "{err}");
    assert!(results.iter().enumerate().all(|(i, r)| r.is_ok() == (i != 2)));

    // A panicking sample does not take a worker down, nor hang the epoch.
    let (data, _) = probe(None, Some(30));
    let results: Vec<_> = DataLoader::new(data, 4).workers(2).iter().collect();
    let err = results[7].as_ref().unwrap_err();
    assert!(err.to_string().contains("preparing a batch panicked: sample 30 is corrupt"), "{err}");
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 15);

    // Dropping an epoch half-way stops the workers.
    let (data, _) = probe(None, None);
    let mut loader = DataLoader::new(data, 2).workers(2);
    let mut epoch = loader.iter();
    epoch.next().unwrap().unwrap();
    drop(epoch);
}

#[test]
fn collate_names_the_sample_that_does_not_fit() {
    struct Ragged;
    impl Dataset for Ragged {
        type Item = Tensor<Cpu>;
        fn len(&self) -> usize {
            4
        }
        fn get(&self, index: usize) -> Result<Tensor<Cpu>> {
            Tensor::try_zeros([if index == 2 { 3 } else { 2 }])
        }
    }
    let err = DataLoader::new(Ragged, 4).iter().next().unwrap().unwrap_err();
    assert!(
        err.to_string().contains("the sample of sample 2 of the batch does not have the shape of sample 0's"),
        "{err}"
    );

    // A collate of one's own: the batch's sum.
    struct Total;
    impl Collate<Tensor<Cpu>> for Total {
        type Batch = f32;
        fn collate(&self, items: Vec<Tensor<Cpu>>) -> Result<f32> {
            Ok(items.iter().map(|t| t.sum().item()).sum())
        }
    }
    let sums: Vec<f32> = DataLoader::new(Ragged, 2).collate(Total).iter().map(|b| b.unwrap()).collect();
    assert_eq!(sums, vec![0.0, 0.0]);
}

fn batches_arrive_on_the_device<D: Device>() {
    let mut loader = DataLoader::new(numbered(10), 4).shuffle(1).workers(1);
    let on_cpu: Vec<Vec<i64>> = labels_of(&mut loader);
    loader.set_epoch(0);
    let mut on_device = Vec::new();
    for batch in loader.to_device::<D>() {
        let (x, y): (Tensor<D>, Tensor<D, i64>) = batch.unwrap();
        assert_eq!(x.to_vec().chunks(2).map(|r| r[0] as i64).collect::<Vec<_>>(), y.to_vec());
        on_device.push(y.to_vec());
    }
    assert_eq!(on_device, on_cpu);
}

/// The order of work on the device: when batch k is handed out, the copy
/// of batch k + 1 has already been issued (on a GPU, on the copy stream, as
/// `tests/ops/async_transfer.rs` checks for `to_async`), so it is queued before
/// any computation on batch k, and runs beside it; the computation then
/// sees batch k's data whole.
fn the_next_copy_is_issued_before_compute_on_this_batch<D: Device>() {
    let mut loader = DataLoader::new(numbered(10), 2);
    let mut batches = loader.to_device::<D>();
    let mut seen = 0;
    while let Some(batch) = batches.next() {
        let (x, y): (Tensor<D>, Tensor<D, i64>) = batch.unwrap();
        let has_next = seen < 4;
        assert_eq!(batches.next_in_flight(), has_next, "batch {seen}");
        // Compute on batch k, queued after the copy of batch k + 1.
        let row_sums = x.sum_axis(1).to_vec();
        let labels = y.to_vec();
        for (s, l) in row_sums.iter().zip(&labels) {
            assert_eq!(*s, 11.0 * *l as f32);
        }
        seen += 1;
    }
    assert_eq!(seen, 5);
}

/// `TupleDataset`: one, three and four tensors of mixed types, and a list,
/// each sample their rows, batched field by field; the misfits refused.
#[test]
fn tuple_datasets_hold_any_number_of_tensors() {
    let ids = Tensor::<Cpu, i64>::from_vec((0..10).collect(), [5, 2]);
    let mask = Tensor::<Cpu, u8>::from_vec((0..5).map(|i| i % 2).collect(), [5]);
    let x = Tensor::<Cpu>::from_vec((0..15).map(|v| v as f32).collect(), [5, 3]);
    let weight = Tensor::<Cpu, f64>::from_vec(vec![0.5; 5], [5]);
    let one = TupleDataset::try_new((x.clone(),)).unwrap();
    assert_eq!(one.get(4).unwrap().0.to_vec(), vec![12.0, 13.0, 14.0]);
    let four = TupleDataset::try_new((ids.clone(), mask.clone(), x.clone(), weight)).unwrap();
    let (i, m, r, w) = four.get(3).unwrap();
    assert_eq!((i.to_vec(), m.item(), r.to_vec(), w.item()), (vec![6, 7], 1, vec![9.0, 10.0, 11.0], 0.5));
    let batches: Vec<_> = DataLoader::new(four, 2).shuffle(3).workers(2).iter().map(|b| b.unwrap()).collect();
    let mut seen: Vec<i64> = batches.iter().flat_map(|(i, _, _, _)| i.to_vec()).step_by(2).collect();
    seen.sort_unstable();
    assert_eq!(seen, [0, 2, 4, 6, 8]);
    for (i, m, r, _) in &batches {
        // Each batch's fields are the same samples' rows.
        let rows: Vec<i64> = i.to_vec().iter().step_by(2).map(|v| v / 2).collect();
        assert_eq!(m.to_vec(), rows.iter().map(|&k| (k % 2) as u8).collect::<Vec<_>>());
        assert_eq!(r.to_vec().iter().step_by(3).map(|&v| v as i64 / 3).collect::<Vec<_>>(), rows);
    }
    let list = TupleDataset::try_new(vec![x.clone(), x.clone() * 2.0]).unwrap();
    let batch = DataLoader::new(list, 5).iter().next().unwrap().unwrap();
    assert_eq!((batch.len(), batch[1].to_vec()), (2, (x * 2.0).to_vec()));
    for misfit in [
        TupleDataset::try_new((ids.clone(), Tensor::<Cpu>::zeros([4]))).map(drop),
        TupleDataset::try_new((Tensor::<Cpu>::scalar(1.0),)).map(drop),
    ] {
        let err = misfit.unwrap_err().to_string();
        assert!(err.contains("TupleDataset") && err.contains("same number of rows"), "{err}");
    }
    assert!(TupleDataset::try_new(Vec::<Tensor<Cpu>>::new()).is_err());
}

/// A stream of `0..n` (sample `k` the row `[k]`), each worker reading its
/// round-robin share; it fails at `fail_at` and panics at `panic_at`, and
/// counts the samples read so far.
struct Counting {
    n: usize,
    fail_at: Option<usize>,
    panic_at: Option<usize>,
    read: Arc<AtomicUsize>,
}

impl IterableDataset for Counting {
    type Item = Tensor<Cpu, i64>;

    fn iter(self: Arc<Self>, worker: WorkerInfo) -> Box<dyn Iterator<Item = Result<Tensor<Cpu, i64>>> + Send> {
        Box::new((0..self.n).filter(move |&k| worker.owns(k)).map(move |k| {
            self.read.fetch_add(1, Ordering::SeqCst);
            assert!(self.panic_at != Some(k), "sample {k} is corrupt");
            if self.fail_at == Some(k) {
                return Err(Error::Argument { op: "read", device: "Cpu".into(), reason: format!("no sample {k}") });
            }
            Ok(Tensor::from_vec(vec![k as i64 + 100 * worker.epoch as i64], [1]))
        }))
    }
}

fn counting(n: usize) -> (Counting, Arc<AtomicUsize>) {
    let read = Arc::new(AtomicUsize::new(0));
    (Counting { n, fail_at: None, panic_at: None, read: Arc::clone(&read) }, read)
}

/// PyTorch's order for an iterable dataset: consecutive samples of each
/// worker's share batched, the workers' batches in turn (a finished worker
/// skipped), each worker's short last batch kept or dropped.
fn stream_reference(n: usize, workers: usize, batch: usize, drop_last: bool) -> Vec<Vec<i64>> {
    let shares: Vec<Vec<Vec<i64>>> = (0..workers.max(1))
        .map(|w| {
            let share: Vec<i64> = (0..n).filter(|k| k % workers.max(1) == w).map(|k| k as i64).collect();
            share.chunks(batch).filter(|c| !drop_last || c.len() == batch).map(|c| c.to_vec()).collect()
        })
        .collect();
    let longest = shares.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest).flat_map(|round| shares.iter().filter_map(move |s| s.get(round).cloned())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn streams_batch_in_pytorchs_order(n in 0..30usize, workers in 0..4usize, batch in 1..5usize, drop_last in any::<bool>()) {
        let (dataset, _) = counting(n);
        let mut loader = StreamLoader::new(dataset, batch).workers(workers).drop_last(drop_last).prefetch(1);
        let got: Vec<Vec<i64>> = loader.iter().map(|b| b.unwrap().reshape([-1]).to_vec()).collect();
        prop_assert_eq!(got, stream_reference(n, workers, batch, drop_last));
        // A second pass, another epoch, reads the stream again.
        loader.set_epoch(1);
        let again: Vec<Vec<i64>> = loader.iter().map(|b| b.unwrap().reshape([-1]).to_vec()).collect();
        let shifted: Vec<Vec<i64>> = stream_reference(n, workers, batch, drop_last)
            .into_iter()
            .map(|b| b.into_iter().map(|k| k + 100).collect())
            .collect();
        prop_assert_eq!(again, shifted);
    }
}

/// A stream's failures: a failing sample is its batch's error and the pass
/// goes on; a panic is its worker's batch error naming the message, and
/// ends that worker's pass; workers read ahead at most `prefetch` batches.
#[test]
fn streams_report_failures_and_read_ahead_within_the_bound() {
    let (mut dataset, read) = counting(12);
    dataset.fail_at = Some(4);
    let results: Vec<Result<Tensor<Cpu, i64>>> = StreamLoader::new(dataset, 2).iter().collect();
    assert_eq!(results.len(), 7, "the failing batch is an error, then the pass goes on");
    let err = results[2].as_ref().unwrap_err().to_string();
    assert!(err.contains("no sample 4"), "{err}");
    assert_eq!(results[3].as_ref().unwrap().to_vec(), vec![5, 6], "the batch after the error starts afresh");
    assert_eq!(read.load(Ordering::SeqCst), 12);

    let (mut dataset, _) = counting(12);
    dataset.panic_at = Some(5);
    let results: Vec<Result<Tensor<Cpu, i64>>> = StreamLoader::new(dataset, 2).workers(2).iter().collect();
    let errors: Vec<String> = results.iter().filter_map(|r| r.as_ref().err().map(|e| e.to_string())).collect();
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].contains("worker 1's stream panicked") && errors[0].contains("sample 5 is corrupt"),
        "{errors:?}"
    );
    // Worker 0's share (0, 2, ..., 10) arrives whole; worker 1's stops at 5.
    let values: Vec<i64> = results.iter().filter_map(|r| r.as_ref().ok()).flat_map(|t| t.to_vec()).collect();
    assert_eq!(values, [0, 2, 1, 3, 4, 6, 8, 10]);

    // A worker blocked on a full channel reads no further: one batch held
    // by the channel, one made and waiting to be sent.
    let (dataset, read) = counting(1000);
    let mut loader = StreamLoader::new(dataset, 10).workers(1).prefetch(1);
    let mut batches = loader.iter();
    assert_eq!(batches.next().unwrap().unwrap().to_vec().len(), 10);
    std::thread::sleep(std::time::Duration::from_millis(50)); // not a timing assertion: it only gives the worker time to run ahead
    assert!(read.load(Ordering::SeqCst) <= 30, "read {} samples ahead", read.load(Ordering::SeqCst));
    drop(batches);
    let err = StreamLoader::try_new(counting(1).0, 0).err().unwrap().to_string();
    assert!(err.contains("batch_size must be at least 1"), "{err}");
}

/// A stream's batches delivered on the device, one copy ahead.
fn stream_batches_arrive_on_the_device<D: Device>() {
    let mut loader = StreamLoader::new(counting(9).0, 4).workers(2);
    let on_cpu: Vec<Vec<i64>> = loader.iter().map(|b| b.unwrap().to_vec()).collect();
    let on_device: Vec<Vec<i64>> = loader
        .to_device::<D>()
        .map(|b| {
            let t: Tensor<D, i64> = b.unwrap();
            t.to_vec()
        })
        .collect();
    assert_eq!(on_device, on_cpu);
}

device_tests! {
    stream_batches_arrive_on_the_device => stream_batches_arrive_on_the_device,
    batches_arrive_on_the_device => batches_arrive_on_the_device,
    the_next_copy_is_issued_before_compute_on_this_batch => the_next_copy_is_issued_before_compute_on_this_batch,
}
