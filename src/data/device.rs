//! Batches moved to a device one step ahead.

use crate::backend::Cpu;
use crate::element::Element;
use crate::error::Result;
use crate::tensor::Device;
use crate::tensor::{PendingTransfer, Tensor};

/// A CPU batch that can be copied to a device asynchronously: a tensor, a
/// tuple of one to four of them, or a `Vec` of them.
pub trait ToDevice: Sized {
    /// The batch on `D`.
    type On<D: Device>;
    /// The batch while its copy to `D` runs.
    type Pending<D: Device>;

    /// Starts the copy to `D` (from page-locked memory on the copy stream,
    /// for a GPU).
    fn start<D: Device>(&self) -> Result<Self::Pending<D>>;

    /// The batch on `D`, with `D`'s later work ordered after the copy (the
    /// host does not wait).
    fn finish<D: Device>(pending: Self::Pending<D>) -> Result<Self::On<D>>;
}

impl<E: Element> ToDevice for Tensor<Cpu, E> {
    type On<D: Device> = Tensor<D, E>;
    type Pending<D: Device> = PendingTransfer<D, E>;

    fn start<D: Device>(&self) -> Result<PendingTransfer<D, E>> {
        self.try_to_async()
    }

    fn finish<D: Device>(pending: PendingTransfer<D, E>) -> Result<Tensor<D, E>> {
        pending.try_join()
    }
}

impl<A: ToDevice, B: ToDevice> ToDevice for (A, B) {
    type On<D: Device> = (A::On<D>, B::On<D>);
    type Pending<D: Device> = (A::Pending<D>, B::Pending<D>);

    fn start<D: Device>(&self) -> Result<Self::Pending<D>> {
        Ok((self.0.start()?, self.1.start()?))
    }

    fn finish<D: Device>((a, b): Self::Pending<D>) -> Result<Self::On<D>> {
        Ok((A::finish(a)?, B::finish(b)?))
    }
}

impl<A: ToDevice, B: ToDevice, C: ToDevice> ToDevice for (A, B, C) {
    type On<D: Device> = (A::On<D>, B::On<D>, C::On<D>);
    type Pending<D: Device> = (A::Pending<D>, B::Pending<D>, C::Pending<D>);

    fn start<D: Device>(&self) -> Result<Self::Pending<D>> {
        Ok((self.0.start()?, self.1.start()?, self.2.start()?))
    }

    fn finish<D: Device>((a, b, c): Self::Pending<D>) -> Result<Self::On<D>> {
        Ok((A::finish(a)?, B::finish(b)?, C::finish(c)?))
    }
}

impl<A: ToDevice> ToDevice for (A,) {
    type On<D: Device> = (A::On<D>,);
    type Pending<D: Device> = (A::Pending<D>,);

    fn start<D: Device>(&self) -> Result<Self::Pending<D>> {
        Ok((self.0.start()?,))
    }

    fn finish<D: Device>((a,): Self::Pending<D>) -> Result<Self::On<D>> {
        Ok((A::finish(a)?,))
    }
}

impl<A: ToDevice, B: ToDevice, C: ToDevice, F: ToDevice> ToDevice for (A, B, C, F) {
    type On<D: Device> = (A::On<D>, B::On<D>, C::On<D>, F::On<D>);
    type Pending<D: Device> = (A::Pending<D>, B::Pending<D>, C::Pending<D>, F::Pending<D>);

    fn start<D: Device>(&self) -> Result<Self::Pending<D>> {
        Ok((self.0.start()?, self.1.start()?, self.2.start()?, self.3.start()?))
    }

    fn finish<D: Device>((a, b, c, f): Self::Pending<D>) -> Result<Self::On<D>> {
        Ok((A::finish(a)?, B::finish(b)?, C::finish(c)?, F::finish(f)?))
    }
}

impl<A: ToDevice> ToDevice for Vec<A> {
    type On<D: Device> = Vec<A::On<D>>;
    type Pending<D: Device> = Vec<A::Pending<D>>;

    fn start<D: Device>(&self) -> Result<Self::Pending<D>> {
        self.iter().map(A::start).collect()
    }

    fn finish<D: Device>(pending: Self::Pending<D>) -> Result<Self::On<D>> {
        pending.into_iter().map(A::finish).collect()
    }
}

/// Batches of an iterator of CPU batches, on `D`: the copy of batch k + 1
/// starts before batch k is handed out, so it overlaps whatever the caller
/// computes on batch k. From [`DataLoader::to_device`](super::DataLoader::to_device).
pub struct DeviceBatches<D: Device, I: BatchIterator> {
    inner: I,
    ahead: Option<Result<<I::Batch as ToDevice>::Pending<D>>>,
}

/// An iterator of `Result<Batch>` for a batch type that can move.
pub trait BatchIterator: Iterator<Item = Result<Self::Batch>> {
    /// The CPU batch.
    type Batch: ToDevice;
}

impl<B: ToDevice, I: Iterator<Item = Result<B>>> BatchIterator for I {
    type Batch = B;
}

impl<D: Device, I: BatchIterator> DeviceBatches<D, I> {
    pub(crate) fn new(inner: I) -> Self {
        DeviceBatches { inner, ahead: None }
    }

    /// Whether the copy of the next batch has already been issued: true
    /// right after a batch is handed out, while there is a next one, so the
    /// copy of batch k + 1 runs while batch k is being used.
    ///
    /// ```
    /// use devtensor::data::{DataLoader, TensorDataset};
    /// use devtensor::{Cpu, Tensor};
    /// let data = TensorDataset::try_new(Tensor::<Cpu>::zeros([6, 2]), Tensor::<Cpu, i64>::zeros([6]))?;
    /// let mut loader = DataLoader::new(data, 2);
    /// let mut batches = loader.to_device::<Cpu>();
    /// assert!(!batches.next_in_flight());
    /// let _first = batches.next().unwrap()?;
    /// assert!(batches.next_in_flight()); // batch 2's copy is on its way
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    pub fn next_in_flight(&self) -> bool {
        matches!(self.ahead, Some(Ok(_)))
    }

    fn start_next(&mut self) -> Option<Result<<I::Batch as ToDevice>::Pending<D>>> {
        Some(self.inner.next()?.and_then(|batch| batch.start::<D>()))
    }
}

impl<D: Device, I: BatchIterator> Iterator for DeviceBatches<D, I> {
    type Item = Result<<I::Batch as ToDevice>::On<D>>;

    fn next(&mut self) -> Option<Self::Item> {
        let current = match self.ahead.take() {
            Some(pending) => pending,
            None => self.start_next()?,
        };
        self.ahead = self.start_next();
        Some(current.and_then(<I::Batch as ToDevice>::finish::<D>))
    }
}
