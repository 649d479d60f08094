//! Bucketed gradient reduction across replicas over peer copies: each
//! replica hands a bucket to the reducer as soon as backward has finished
//! every gradient in it, so reduction overlaps the rest of backward.

use super::collective::Collective;
use super::compress::WireType;
use crate::error::Result;
use crate::tensor::Device;
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// PyTorch DDP's default bucket size.
pub const DEFAULT_BUCKET_BYTES: usize = 25 * 1024 * 1024;

/// Groups parameters into buckets of at most `bucket_bytes` (at least one
/// parameter each), in reverse order of the model's parameters: the order
/// in which backward finishes their gradients, roughly, so that the first
/// bucket is ready first. `sizes` are the parameters' byte sizes.
pub(crate) fn plan_buckets(sizes: &[usize], bucket_bytes: usize) -> Vec<Vec<usize>> {
    let mut buckets: Vec<Vec<usize>> = Vec::new();
    let mut filled = 0;
    for index in (0..sizes.len()).rev() {
        match buckets.last_mut() {
            Some(bucket) if filled + sizes[index] <= bucket_bytes => bucket.push(index),
            _ => {
                buckets.push(vec![index]);
                filled = 0;
            }
        }
        filled += sizes[index];
    }
    buckets
}

/// Why a replica stopped: its own error, or another replica's failure.
#[doc(hidden)]
pub enum Stop {
    /// This replica failed.
    Failed(crate::Error),
    /// Another replica failed first; this one gave up waiting.
    Aborted,
}

impl From<crate::Error> for Stop {
    fn from(e: crate::Error) -> Self {
        Stop::Failed(e)
    }
}

/// How gradients are summed across replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReducePath {
    /// NCCL when every replica is on a distinct GPU and NCCL is installed,
    /// peer copies otherwise.
    #[default]
    Auto,
    /// Every bucket copied to the root device, summed there, and copied
    /// back (works for any devices, the CPU included).
    PeerCopies,
    /// NCCL's all-reduce, queued on each GPU's stream (GPUs only).
    Nccl,
}

/// One bucket's contributions, one slot per replica, and their sum.
struct Bucket<R: Device> {
    state: Mutex<BucketState<R>>,
    done: Condvar,
}

struct BucketState<R: Device> {
    parts: Vec<Option<Tensor<R>>>,
    arrived: usize,
    sum: Option<Tensor<R>>,
}

/// The meeting point of the replicas during one step, bucket by bucket.
///
/// Over peer copies every replica copies its (weighted) bucket to the root
/// device `R`; the last one to arrive adds them in replica order, so the
/// sum does not depend on timing, and every replica copies the sum back.
/// With gradient compression the copies travel in the half type, and the
/// root sums their `f32` widenings (so the sum is rounded once, when it
/// travels back).
/// Over NCCL the replicas only meet before each bucket's all-reduce, so
/// that none enters a collective that a failed replica will never join.
#[doc(hidden)]
pub struct Exchange<'a, R: Device> {
    buckets: Vec<Bucket<R>>,
    failed: AtomicBool,
    group: Option<&'a dyn Collective>,
    wire: WireType,
}

impl<'a, R: Device> Exchange<'a, R> {
    pub(crate) fn new(buckets: usize, replicas: usize, group: Option<&'a dyn Collective>, wire: WireType) -> Self {
        let bucket = || Bucket {
            state: Mutex::new(BucketState { parts: vec![None; replicas], arrived: 0, sum: None }),
            done: Condvar::new(),
        };
        Exchange { buckets: (0..buckets).map(|_| bucket()).collect(), failed: AtomicBool::new(false), group, wire }
    }

    /// The type buckets travel in between replicas.
    pub(crate) fn wire(&self) -> WireType {
        self.wire
    }

    /// The collective that sums buckets in place, when there is one (NCCL).
    pub(crate) fn group(&self) -> Option<&'a dyn Collective> {
        self.group
    }

    fn lock(&self, bucket: usize) -> MutexGuard<'_, BucketState<R>> {
        // A replica that panicked while holding the lock has already marked
        // the step failed; the state is only read to give up.
        self.buckets[bucket].state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits on bucket `bucket` until `ready` holds or the step failed.
    fn wait_until<'s>(
        &'s self,
        bucket: usize,
        mut state: MutexGuard<'s, BucketState<R>>,
        ready: impl Fn(&BucketState<R>) -> bool,
    ) -> std::result::Result<MutexGuard<'s, BucketState<R>>, Stop> {
        loop {
            if ready(&state) {
                return Ok(state);
            }
            if self.failed.load(Ordering::Acquire) {
                return Err(Stop::Aborted);
            }
            state = self.buckets[bucket].done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Adds `rank`'s part of bucket `bucket` (peer copies); the last part
    /// completes the sum.
    pub(crate) fn contribute(&self, bucket: usize, rank: usize, part: Tensor<R>) -> Result<()> {
        let mut state = self.lock(bucket);
        state.parts[rank] = Some(part);
        if state.parts.iter().all(Option::is_some) {
            let mut parts = state.parts.iter_mut().map(|p| p.take().expect("checked above"));
            let first = parts.next().expect("at least one replica");
            let sum = parts.try_fold(first, |sum, part| sum.try_add(&part))?;
            state.sum = Some(sum);
            self.buckets[bucket].done.notify_all();
        }
        Ok(())
    }

    /// The sum of bucket `bucket` (peer copies), once every replica has
    /// contributed, or `Aborted` as soon as another replica has failed.
    pub(crate) fn sum(&self, bucket: usize) -> std::result::Result<Tensor<R>, Stop> {
        let state = self.wait_until(bucket, self.lock(bucket), |s| s.sum.is_some())?;
        Ok(state.sum.clone().expect("waited for it"))
    }

    /// Returns once every replica has reached bucket `bucket` (NCCL), or
    /// `Aborted` as soon as another replica has failed.
    pub(crate) fn meet(&self, bucket: usize) -> std::result::Result<(), Stop> {
        let mut state = self.lock(bucket);
        state.arrived += 1;
        let everyone = |s: &BucketState<R>| s.arrived == s.parts.len();
        if everyone(&state) {
            self.buckets[bucket].done.notify_all();
        }
        self.wait_until(bucket, state, everyone).map(drop)
    }

    /// Marks the step failed and wakes every waiting replica.
    pub(crate) fn fail(&self) {
        self.failed.store(true, Ordering::Release);
        for (index, bucket) in self.buckets.iter().enumerate() {
            let _guard = self.lock(index);
            bucket.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::plan_buckets;

    #[test]
    fn buckets_fill_in_reverse_order_up_to_the_limit() {
        // Parameters of 40, 8, 100 and 8 bytes, 50-byte buckets.
        assert_eq!(plan_buckets(&[40, 8, 100, 8], 50), vec![vec![3], vec![2], vec![1, 0]]);
        assert_eq!(plan_buckets(&[4, 4, 4], 1 << 20), vec![vec![2, 1, 0]]);
        assert_eq!(plan_buckets(&[], 10), Vec::<Vec<usize>>::new());
    }
}
