//! [`PinnedTensor`]: host data in page-locked memory, the source of
//! asynchronous uploads (PyTorch's `pin_memory()`).

use super::{PendingTransfer, Tensor};
use crate::backend::Cpu;
use crate::backend::cuda::pinned::PinnedBuffer;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::error::{check_elem_count, checked_bytes};
use crate::layout::Shape;
use crate::tensor::Device;
use devtensor_macros::fallible;
use std::marker::PhantomData;
use std::sync::Arc;

/// A dense, row-major host tensor in page-locked ("pinned") memory, which
/// a GPU's copy engine can read while the program goes on: the source of
/// [`to_async`](PinnedTensor::to_async), like a PyTorch tensor after
/// `pin_memory()`.
///
/// It is not a [`Tensor`] and takes part in no operation; it is a staging
/// buffer. Make one with [`Tensor::pin_memory`] or
/// [`PinnedTensor::zeros`], refill it with
/// [`copy_from`](PinnedTensor::copy_from) (uploads in flight keep the
/// contents they started with), and read it back with
/// [`to_tensor`](PinnedTensor::to_tensor). Page-locked memory needs the
/// CUDA driver: without one, making a `PinnedTensor` returns
/// [`Error::DeviceUnavailable`].
///
/// ```
/// use devtensor::{Cpu, Cuda, Tensor};
/// let batch = Tensor::<Cpu>::arange(0.0, 6.0).reshape([2, 3]);
/// if let Ok(pinned) = batch.try_pin_memory() {
///     let pending = pinned.to_async::<Cuda<0>>(); // returns at once
///     // ... prepare the next batch on the CPU meanwhile ...
///     let x: Tensor<Cuda<0>> = pending.join(); // later GPU work waits for the copy
///     assert_eq!((&x * 2.0).to_vec(), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
/// }
/// ```
pub struct PinnedTensor<E: Element = f32> {
    /// Shared with the transfers in flight, which keep it alive; only this
    /// value reads or writes the bytes, after waiting for them.
    buffer: Arc<PinnedBuffer>,
    shape: Shape,
    _element: PhantomData<E>,
}

impl<E: Element> std::fmt::Debug for PinnedTensor<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedTensor {{ shape: {:?}, dtype: {:?} }}", self.shape.dims(), E::DTYPE)
    }
}

impl<E: Element> Tensor<Cpu, E> {
    /// A copy of this tensor in page-locked memory, ready for asynchronous
    /// uploads; fails with [`Error::DeviceUnavailable`] without a CUDA driver.
    ///
    /// Like PyTorch's `pin_memory()`.
    ///
    /// ```no_run
    /// use devtensor::{Cpu, Tensor};
    /// let pinned = Tensor::<Cpu>::ones([2, 2]).pin_memory(); // needs a CUDA driver
    /// assert_eq!(pinned.dims(), &[2, 2]);
    /// ```
    #[fallible]
    pub fn pin_memory(&self) -> PinnedTensor<E> {
        let values = self.try_contiguous()?;
        let range = values.layout().contiguous_range().expect("a contiguous tensor has a contiguous range");
        let buffer = PinnedBuffer::from_slice("pin_memory", &values.storage().as_slice()[range])?;
        Ok(PinnedTensor { buffer: Arc::new(buffer), shape: self.shape().clone(), _element: PhantomData })
    }
}

impl<E: Element> PinnedTensor<E> {
    /// A page-locked tensor of zeros, to be filled with
    /// [`copy_from`](Self::copy_from): a staging buffer reused batch after batch.
    ///
    /// Fails with [`Error::Shape`] for a shape whose elements cannot exist
    /// (their count or bytes overflow), before the driver is asked; with
    /// [`Error::DeviceUnavailable`] without a CUDA driver; and with the
    /// driver's error when it cannot lock that much memory.
    ///
    /// ```no_run
    /// use devtensor::PinnedTensor;
    /// let staging = PinnedTensor::<f32>::zeros([64, 784]); // needs a CUDA driver
    /// assert_eq!(staging.elem_count(), 64 * 784);
    /// ```
    #[fallible]
    pub fn zeros(shape: impl Into<Shape>) -> Self {
        const OP: &str = "pinned zeros";
        let shape = shape.into();
        let host = || "Cpu (page-locked memory)".to_string();
        let len = check_elem_count(OP, host, &[&shape])?;
        let bytes = checked_bytes::<E>(OP, host, len)?;
        // Zeroed where it lives: no host-sized vector first.
        let buffer = PinnedBuffer::zeroed(OP, bytes)?;
        Ok(PinnedTensor { buffer: Arc::new(buffer), shape, _element: PhantomData })
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The dimension sizes.
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// Number of elements.
    pub fn elem_count(&self) -> usize {
        self.shape.elem_count()
    }

    /// Overwrites the contents with `src`'s, which must have the same shape.
    ///
    /// Uploads started earlier still send what the tensor held when they
    /// started: while one may be in flight, the new contents go into another
    /// page-locked buffer (from a cache), so this never waits for the GPU.
    ///
    /// ```no_run
    /// use devtensor::{Cpu, Cuda, PinnedTensor, Tensor};
    /// let mut staging = PinnedTensor::<f32>::zeros([2]);
    /// staging.copy_from(&Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2]));
    /// let first = staging.to_async::<Cuda<0>>();
    /// staging.copy_from(&Tensor::<Cpu>::from_vec(vec![3.0, 4.0], [2])); // does not disturb `first`
    /// assert_eq!(first.wait().to_vec(), vec![1.0, 2.0]);
    /// ```
    #[fallible]
    pub fn copy_from(&mut self, src: &Tensor<Cpu, E>) {
        if src.shape() != &self.shape {
            return Err(Error::Shape {
                op: "copy_from",
                device: "Cpu (page-locked memory)".into(),
                shapes: vec![self.shape.clone(), src.shape().clone()],
                reason: "the source must have the pinned tensor's shape".into(),
            });
        }
        let values = src.try_contiguous()?;
        let range = values.layout().contiguous_range().expect("a contiguous tensor has a contiguous range");
        let buffer = self.exclusive_buffer()?;
        buffer.write("copy_from", &values.storage().as_slice()[range])
    }

    /// The buffer for writing. Transfers in flight hold clones of the `Arc`
    /// only to keep the memory alive; they never touch it from the host.
    fn exclusive_buffer(&mut self) -> Result<&mut PinnedBuffer> {
        if Arc::get_mut(&mut self.buffer).is_none() {
            // Some transfer still holds the buffer. Rather than wait for its
            // fence to be dropped, move to a fresh buffer and leave the old
            // one to the transfers: uploads keep reading what was there.
            let fresh = PinnedBuffer::alloc("copy_from", self.buffer.len())?;
            self.buffer = Arc::new(fresh);
        }
        Ok(Arc::get_mut(&mut self.buffer).expect("the buffer was just made exclusive"))
    }

    /// A copy on the host as an ordinary [`Tensor<Cpu>`](Tensor).
    ///
    /// ```no_run
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::ones([3]);
    /// assert_eq!(x.pin_memory().to_tensor().to_vec(), x.to_vec());
    /// ```
    #[fallible]
    pub fn to_tensor(&self) -> Tensor<Cpu, E> {
        let values = self.buffer.read::<E>("to_tensor", self.elem_count())?;
        Tensor::try_from_vec(values, self.shape.clone())
    }

    /// Starts copying this tensor to device `D` and returns at once, like
    /// PyTorch's `.to(device, non_blocking=True)` from pinned memory. The
    /// copy runs on the GPU's copy stream, alongside its computations; the
    /// result becomes a tensor through [`PendingTransfer::join`] or
    /// [`PendingTransfer::wait`]. To `Cpu`, the copy is made at once.
    ///
    /// See the example on [`PinnedTensor`].
    #[fallible]
    pub fn to_async<D: Device>(&self) -> PendingTransfer<D, E> {
        PendingTransfer::upload(Arc::clone(&self.buffer), self.shape.clone())
    }
}
