//! The CUDA devices, one type per ordinal: `Cuda<0>`, `Cuda<1>`, ...
//!
//! The CUDA backend is not built yet. Until it is, every attempt to create a
//! tensor on `Cuda<N>` returns [`Error::DeviceUnavailable`], and since no
//! `Tensor<Cuda<N>>` can then exist, no operation on one can run. Programs
//! that mention `Cuda<N>` still compile, so device-generic code and the
//! compile-time device checks work today.

use super::{Backend, sealed};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::shape::Layout;
use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomData;

/// The CUDA GPU with ordinal `N`, as a type.
///
/// ```
/// use devtensor::{Cuda, Error, Tensor};
/// assert!(!Cuda::<0>::is_available());
/// let err = Tensor::<Cuda<0>>::try_zeros([2, 2]).unwrap_err();
/// assert!(matches!(err, Error::DeviceUnavailable { .. }));
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Cuda<const N: usize>;

impl<const N: usize> fmt::Debug for Cuda<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cuda<{N}>")
    }
}

impl<const N: usize> sealed::Sealed for Cuda<N> {}

impl<const N: usize> Cuda<N> {
    /// Whether this GPU can be used by this program.
    pub fn is_available() -> bool {
        Self::try_init().is_ok()
    }

    /// Checks up front that the GPU can be used, with the reason if not.
    pub fn try_init() -> Result<()> {
        Err(unavailable::<N>())
    }
}

fn unavailable<const N: usize>() -> Error {
    Error::DeviceUnavailable {
        device: format!("Cuda<{N}>"),
        reason: "this build of devtensor has no CUDA backend yet; run on `Cpu` \
                 (the program is device-generic, so only the type changes)"
            .into(),
    }
}

/// Element storage of a CUDA tensor. Cannot be constructed until the CUDA
/// backend exists, which makes every kernel on it statically unreachable.
pub struct CudaStorage<E> {
    never: Infallible,
    _element: PhantomData<E>,
}

impl<E> CudaStorage<E> {
    /// Proof that this value cannot exist.
    pub(crate) fn unreachable(&self) -> ! {
        let never: Infallible = self.never;
        match never {}
    }
}

impl<const N: usize> Backend for Cuda<N> {
    type Storage<E: Element> = CudaStorage<E>;

    fn name() -> String {
        format!("Cuda<{N}>")
    }

    fn storage_from_vec<E: Element>(_data: Vec<E>) -> Result<CudaStorage<E>> {
        Err(unavailable::<N>())
    }

    fn storage_full<E: Element>(_len: usize, _value: E) -> Result<CudaStorage<E>> {
        Err(unavailable::<N>())
    }

    fn storage_to_vec<E: Element>(storage: &CudaStorage<E>, _layout: &Layout) -> Result<Vec<E>> {
        storage.unreachable()
    }

    fn storage_len<E: Element>(storage: &CudaStorage<E>) -> usize {
        storage.unreachable()
    }

    fn copy_strided<E: Element>(storage: &CudaStorage<E>, _layout: &Layout) -> Result<CudaStorage<E>> {
        storage.unreachable()
    }

    fn cast<E: Element, T: Element>(storage: &CudaStorage<E>, _layout: &Layout) -> Result<CudaStorage<T>> {
        storage.unreachable()
    }
}
