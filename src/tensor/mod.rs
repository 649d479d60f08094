//! The [`Tensor`] type: a device-typed, strided view of shared storage.

mod create;
pub mod device;
mod display;
mod literal;
mod pending;
mod pinned;
mod sample;
pub(crate) mod shell;
pub(crate) mod transfer;

pub use device::{CoreDevice, Device, OnDevice, SameDevice};
pub(crate) use device::{same_device, same_device_owned};
pub use literal::{TensorData, tensor, try_tensor};
pub use pending::{PendingTransfer, TransferCompleted};
pub use pinned::PinnedTensor;

use crate::autograd::Node;
use crate::backend::Backend;
use crate::element::{DType, Element};
use crate::layout::{Layout, Shape};
use std::sync::Arc;

/// An n-dimensional array of `E` living on device `D`.
///
/// The device is part of the type, so an operation on tensors of two devices
/// does not compile; moving data is explicit with [`Tensor::to`]. The element
/// type defaults to `f32`.
///
/// A tensor is a shape, strides and an offset over reference-counted storage:
/// `clone`, `reshape` of a contiguous tensor, `permute`, `transpose`, `narrow`
/// and broadcasting share storage and copy no elements. Tensors have value
/// semantics all the same: an in-place operation such as `+=` writes into the
/// storage only when no other tensor shares it, and otherwise copies first.
///
/// `Tensor` is `Send + Sync`, so replicas can cross threads.
///
/// ```
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
/// let y = (&x * 2.0).sum();
/// assert_eq!(y.item(), 20.0);
/// ```
// `repr(C)`: a `Tensor<Cuda<N>, E>` and the core's `Tensor<AnyCuda, E>` have
// the same fields, so the typed shell can lend one as the other (`core`).
#[repr(C)]
pub struct Tensor<D: Device, E: Element = f32> {
    storage: Arc<CoreStorage<D, E>>,
    layout: Layout,
    /// This tensor's place in the autograd graph; `None` when it tracks
    /// nothing, which is every tensor that is not a float computed from a
    /// leaf marked with `requires_grad`.
    node: Option<Arc<Node>>,
}

/// The storage of a tensor of device `D`: its core device's.
type CoreStorage<D, E> = <<D as Device>::Core as Backend>::Storage<E>;

impl<D: Device, E: Element> Clone for Tensor<D, E> {
    /// Shares the storage; copies no elements.
    fn clone(&self) -> Self {
        Tensor { storage: Arc::clone(&self.storage), layout: self.layout.clone(), node: self.node.clone() }
    }
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// Wraps fresh storage laid out row-major with `shape`.
    pub(crate) fn from_storage(storage: CoreStorage<D, E>, shape: Shape) -> Self {
        Tensor { storage: Arc::new(storage), layout: Layout::contiguous(shape), node: None }
    }

    /// Wraps fresh storage laid out as `layout`, which a kernel chose and
    /// wrote; it lies inside the storage.
    pub(crate) fn from_storage_with(storage: CoreStorage<D, E>, layout: Layout) -> Self {
        assert!(
            layout.fits_in(D::Core::storage_len(&storage)),
            "a kernel's result reaches past its storage: {layout:?}"
        );
        Tensor { storage: Arc::new(storage), layout, node: None }
    }

    /// A tensor sharing this one's storage under another layout. The view
    /// tracks nothing: a view op records its own gradient rule.
    ///
    /// Every view goes through here, so the check that the layout stays
    /// inside the storage is kept in release builds: it costs a loop over
    /// the axes, and a view that escaped its storage would have GPU kernels
    /// (and the CPU matmul's raw pointers) read out of bounds.
    pub(crate) fn with_layout(&self, layout: Layout) -> Self {
        assert!(
            layout.fits_in(D::Core::storage_len(&self.storage)),
            "a view of {} elements reaches past its storage: {layout:?}",
            D::Core::storage_len(&self.storage)
        );
        Tensor { storage: Arc::clone(&self.storage), layout, node: None }
    }

    /// The storage, shared with every view of it.
    pub(crate) fn storage(&self) -> &CoreStorage<D, E> {
        &self.storage
    }

    /// The storage for writing, when this tensor is its only owner.
    pub(crate) fn storage_mut(&mut self) -> Option<&mut CoreStorage<D, E>> {
        Arc::get_mut(&mut self.storage)
    }

    /// This tensor as the core sees it: itself on the CPU, and a tensor of
    /// [`AnyCuda`](crate::backend::cuda::AnyCuda) for a `Cuda<N>` one. Only
    /// for the core's entry points, which run inside [`Device::enter`].
    #[inline(always)]
    pub(crate) fn core(&self) -> &Tensor<D::Core, E> {
        // SAFETY: `Tensor` is `repr(C)`, and `Tensor<D, E>` and
        // `Tensor<D::Core, E>` have the same fields: the storage is typed by
        // the core device in both (`CoreStorage`, and `D::Core::Core` is
        // `D::Core` by `CoreDevice`'s bound), the layout and node do not
        // depend on the device. So one is a valid value of the other, with
        // the same lifetime. (What the type says beyond the layout, the GPU
        // of a `Cuda<N>` tensor, is kept by `from_core`, which checks it in
        // debug builds: a core tensor is only ever returned as a `Cuda<N>`
        // one when its storage is on GPU N.)
        unsafe { &*(self as *const Self).cast::<Tensor<D::Core, E>>() }
    }

    /// [`core`](Self::core) for an operation that writes in place.
    #[inline(always)]
    pub(crate) fn core_mut(&mut self) -> &mut Tensor<D::Core, E> {
        // SAFETY: as in `core`; the borrow is exclusive for as long.
        unsafe { &mut *(self as *mut Self).cast::<Tensor<D::Core, E>>() }
    }

    /// [`from_core`](Self::from_core) for a borrowed tensor of the core's.
    #[inline(always)]
    pub(crate) fn from_core_ref(core: &Tensor<D::Core, E>) -> &Self {
        debug_assert!(Self::fits(core), "devtensor bug: a core tensor returned as one of another GPU");
        // SAFETY: as in `core`, the other way.
        unsafe { &*(core as *const Tensor<D::Core, E>).cast::<Self>() }
    }

    /// This tensor as one of the core's device, owned: the fields move.
    #[inline(always)]
    pub(crate) fn into_core(self) -> Tensor<D::Core, E> {
        let Tensor { storage, layout, node } = self;
        Tensor { storage, layout, node }
    }

    /// Whether `core` may be seen as a `Tensor<D, E>`: always for a core
    /// device, and for `Cuda<N>` when its storage is on GPU N.
    pub(crate) fn fits(core: &Tensor<D::Core, E>) -> bool {
        std::any::TypeId::of::<D>() == std::any::TypeId::of::<D::Core>()
            || D::Core::ordinal_of(core.storage()) == D::cuda_ordinal()
    }

    /// A tensor of the core's device as one of `D`: the way back from
    /// [`core`](Self::core). The fields are the same, so nothing is copied.
    #[inline(always)]
    pub(crate) fn from_core(core: Tensor<D::Core, E>) -> Self {
        debug_assert!(Self::fits(&core), "devtensor bug: a core tensor returned as one of another GPU");
        let Tensor { storage, layout, node } = core;
        Tensor { storage, layout, node }
    }

    /// This tensor's autograd node, if it tracks.
    pub(crate) fn node(&self) -> Option<&Arc<Node>> {
        self.node.as_ref()
    }

    pub(crate) fn set_node(&mut self, node: Option<Arc<Node>>) {
        self.node = node;
    }

    /// The shape, strides and offset of this view.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The shape.
    ///
    /// ```
    /// use devtensor::{Cpu, Shape, Tensor};
    /// assert_eq!(Tensor::<Cpu>::zeros([2, 3]).shape(), &Shape::from([2, 3]));
    /// ```
    pub fn shape(&self) -> &Shape {
        self.layout.shape()
    }

    /// The dimension sizes, like PyTorch's `size()`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::zeros([2, 3]).dims(), &[2, 3]);
    /// ```
    pub fn dims(&self) -> &[usize] {
        self.layout.dims()
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.layout.shape().rank()
    }

    /// Number of elements, like PyTorch's `numel()`.
    pub fn elem_count(&self) -> usize {
        self.layout.elem_count()
    }

    /// Whether the elements are dense and row-major in storage.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// The element type's run-time tag.
    pub fn dtype(&self) -> DType {
        E::DTYPE
    }

    /// The device's name, e.g. `"Cuda<0>"`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::zeros([1]).device_name(), "Cpu");
    /// ```
    pub fn device_name(&self) -> String {
        D::name()
    }
}

#[cfg(test)]
mod tests {
    use crate::{Cpu, Cuda, Tensor};

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn tensors_cross_threads() {
        assert_send_sync::<Tensor<Cpu>>();
        assert_send_sync::<Tensor<Cuda<0>, i64>>();
    }
}
