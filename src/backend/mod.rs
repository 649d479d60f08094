//! The devices beneath the tensors: where elements live and how they are
//! copied.
//!
//! [`Cpu`] and [`Cuda<N>`](Cuda) are zero-sized markers. Each implements
//! [`Backend`] (storage, allocation, transfers, copies) here. The core
//! devices, `Cpu` and `AnyCuda` (the one device all GPUs share in the
//! core, `cuda/mod.rs`), also implement one kernel trait per op family in
//! `ops/` (`ops/<family>/cpu.rs`, `cuda.rs`). This layer knows nothing of
//! tensors, autograd or operations: the trait that gathers the kernel
//! traits, [`CoreDevice`](crate::tensor::CoreDevice), the typed
//! [`Device`](crate::tensor::Device), and the compile-time device checks
//! live with the tensor, above it.

pub mod cpu;
pub mod cuda;

pub use cpu::Cpu;
pub use cuda::Cuda;

use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;
use std::fmt::Debug;

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// Storage, allocation and copies: what every device provides beneath the
/// op families. Sealed; implemented by [`Cpu`], [`Cuda<N>`](Cuda) and the
/// GPUs' core device (`AnyCuda`) only.
pub trait Backend: sealed::Sealed + Copy + Default + Debug + Send + Sync + 'static {
    /// Where a tensor's elements live on this device.
    type Storage<E: Element>: Send + Sync + 'static;

    /// The device as written in a program: `"Cpu"`, `"Cuda<0>"`.
    fn name() -> String;

    /// The ordinal `N` of `Cuda<N>`; `None` for [`Cpu`].
    ///
    /// ```
    /// use devtensor::{Backend, Cpu, Cuda};
    /// assert_eq!(Cuda::<1>::cuda_ordinal(), Some(1));
    /// assert_eq!(Cpu::cuda_ordinal(), None);
    /// ```
    fn cuda_ordinal() -> Option<usize> {
        None
    }

    /// The GPU a storage lives on, `None` on the CPU: for code that runs
    /// outside every operation's scope (adding two gradients of a store),
    /// where the storage is the only witness. Internal, not covered by
    /// semver.
    #[doc(hidden)]
    fn ordinal_of<E: Element>(storage: &Self::Storage<E>) -> Option<usize> {
        let _ = storage;
        Self::cuda_ordinal()
    }

    /// Moves host data onto the device.
    fn storage_from_vec<E: Element>(data: Vec<E>) -> Result<Self::Storage<E>>;

    /// Copies host data onto the device; a GPU reads the slice directly,
    /// without the intermediate `Vec` that `storage_from_vec` would need.
    fn storage_from_slice<E: Element>(data: &[E]) -> Result<Self::Storage<E>> {
        Self::storage_from_vec(data.to_vec())
    }

    /// A storage of `len` elements, all equal to `value`; `op` names the
    /// operation in an allocation error.
    fn storage_full<E: Element>(op: &'static str, len: usize, value: E) -> Result<Self::Storage<E>>;

    /// Copies the elements `layout` selects back to the host, in row-major order.
    fn storage_to_vec<E: Element>(storage: &Self::Storage<E>, layout: &Layout) -> Result<Vec<E>>;

    /// Number of elements in a storage.
    fn storage_len<E: Element>(storage: &Self::Storage<E>) -> usize;

    /// A new contiguous storage holding the elements `layout` selects.
    fn copy_strided<E: Element>(storage: &Self::Storage<E>, layout: &Layout) -> Result<Self::Storage<E>>;

    /// The elements `layout` selects, converted to `T` with `as` semantics.
    fn cast<E: Element, T: Element>(storage: &Self::Storage<E>, layout: &Layout) -> Result<Self::Storage<T>>;

    /// A contiguous copy, on this device, of the elements `layout` selects in
    /// a storage of device `S`, made without a trip through the host; `None`
    /// when this backend has no such path from `S` (the caller then copies
    /// through the host). `S` is never `Self`.
    fn storage_from_device<S: Backend, E: Element>(
        storage: &S::Storage<E>,
        layout: &Layout,
    ) -> Result<Option<Self::Storage<E>>> {
        let _ = (storage, layout);
        Ok(None)
    }
}
