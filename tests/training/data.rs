//! Data loading: every sample once per epoch in the sampler's order, with
//! and without workers; bounded prefetching; errors that name the batch;
//! distributed shards; and batches delivered on every device.

use devtensor::data::{Collate, DataLoader, Dataset, Sampler, TensorDataset};
use devtensor::{Cpu, Device, Error, Result, Tensor};
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

device_tests! {
    batches_arrive_on_the_device => batches_arrive_on_the_device,
    the_next_copy_is_issued_before_compute_on_this_batch => the_next_copy_is_issued_before_compute_on_this_batch,
}
