//! [`PendingTransfer`]: a copy between devices that is still running, and
//! [`Tensor::to_async`], which starts one.

use super::Tensor;
use crate::autograd::{self, Backward, Node};
use crate::backend::cuda::CudaStorage;
use crate::backend::cuda::context;
use crate::backend::cuda::pinned::PinnedBuffer;
use crate::backend::cuda::transfer::{self, Fence};
use crate::backend::{Backend, Cpu};
use crate::element::Element;
use crate::error::Result;
use crate::layout::Shape;
use crate::tensor::Device;
use crate::tensor::transfer::Fns;
use devtensor_macros::fallible;
use std::any::{Any, TypeId};
use std::sync::Arc;

/// A copy to device `D` that may still be running: the typed form of
/// PyTorch's `.to(device, non_blocking=True)`.
///
/// It is not a [`Tensor`], so no operation accepts it: using the values
/// before the copy is over cannot compile. It becomes a tensor in one of
/// two ways:
/// - [`join`](Self::join): the tensor at once, with `D`'s stream made to
///   wait for the copy, so the host never blocks and the GPU runs the
///   consuming operations after it; the usual choice on a GPU.
/// - [`wait`](Self::wait): blocks the host until the copy is over.
///
/// On `Cpu` both block until the data has arrived. Dropping a pending
/// transfer without either is safe: the copy finishes on its own.
///
/// ```
/// use devtensor::{Cpu, Cuda, Tensor};
/// let labels = Tensor::<Cpu, i64>::from_vec(vec![3, 1, 4], [3]);
/// if let Ok(pending) = labels.try_to_async::<Cuda<0>>() {
///     let gpu_labels: Tensor<Cuda<0>, i64> = pending.join();
///     assert_eq!(gpu_labels.to_vec(), vec![3, 1, 4]);
/// }
/// ```
#[must_use = "a pending transfer does nothing useful until `.join()` or `.wait()` turns it into a tensor"]
pub struct PendingTransfer<D: Device, E: Element = f32> {
    shape: Shape,
    /// `None` once the transfer has been turned into a tensor.
    state: Option<(Landing<D, E>, Fence)>,
    /// The source's autograd node and the rule that moves a gradient back,
    /// when the transfer started from a tracked tensor with gradients on.
    grad: Option<(Arc<Node>, Box<dyn Backward>)>,
}

/// Where the copy lands.
enum Landing<D: Device, E: Element> {
    /// The destination storage, written by the copy.
    Storage(<D::Core as Backend>::Storage<E>),
    /// A page-locked buffer the copy writes into, moved into a `Cpu` tensor
    /// once it is complete.
    Staged(Arc<PinnedBuffer>),
    /// Nothing to copy: the source was already on `D`.
    Ready(Tensor<D, E>),
}

impl<D: Device, E: Element> std::fmt::Debug for PendingTransfer<D, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PendingTransfer<{}, {:?}> {{ shape: {:?} }}", D::name(), E::DTYPE, self.shape.dims())
    }
}

impl<D: Device, E: Element> PendingTransfer<D, E> {
    /// A transfer that has already completed.
    fn ready(tensor: Tensor<D, E>) -> Self {
        PendingTransfer {
            shape: tensor.shape().clone(),
            state: Some((Landing::Ready(tensor), Fence::done())),
            grad: None,
        }
    }

    /// Starts the upload of the first `shape.elem_count()` elements of a
    /// page-locked buffer to `D`.
    pub(crate) fn upload(src: Arc<PinnedBuffer>, shape: Shape) -> Result<Self> {
        let n = shape.elem_count();
        let (landing, fence) = match D::cuda_ordinal() {
            None => {
                let values = src.read::<E>("to_async", n)?;
                (Landing::Storage(D::enter(|| D::Core::storage_from_vec(values))?), Fence::done())
            }
            Some(ordinal) => {
                let (storage, fence) = transfer::upload::<E>(&context::device(ordinal)?, "to_async", src, n)?;
                (Landing::Storage(cuda_storage_as::<D::Core, E>(storage)), fence)
            }
        };
        Ok(PendingTransfer { shape, state: Some((landing, fence)), grad: None })
    }

    /// The shape the tensor will have.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// Whether the copy is over, without waiting (like polling a CUDA event).
    pub fn is_complete(&self) -> bool {
        self.state.as_ref().is_none_or(|(_, fence)| fence.is_complete())
    }

    /// The tensor, once the copy is over; blocks the host until then.
    ///
    /// ```
    /// use devtensor::{Cpu, Cuda, Tensor};
    /// if let Ok(x) = Tensor::<Cuda<0>>::try_ones([2]) {
    ///     let back = x.to_async::<Cpu>(); // the GPU copies while the host goes on
    ///     assert_eq!(back.wait().to_vec(), vec![1.0, 1.0]);
    /// }
    /// ```
    #[fallible]
    pub fn wait(mut self) -> Tensor<D, E> {
        let (landing, fence) = self.state.take().expect("a pending transfer is consumed once");
        fence.wait("wait")?;
        self.land(landing)
    }

    /// The tensor, at once: every operation queued on `D` from now on runs
    /// after the copy, and the host does not block. On `Cpu`, the same as
    /// [`wait`](Self::try_wait).
    ///
    /// See the example on [`PendingTransfer`].
    #[fallible]
    pub fn join(mut self) -> Tensor<D, E> {
        let (landing, fence) = self.state.take().expect("a pending transfer is consumed once");
        Self::finish(fence, "join")?;
        self.land(landing)
    }

    /// Orders the copy before `D`'s next operations: a stream wait on a GPU,
    /// a host wait on `Cpu`.
    fn finish(fence: Fence, op: &'static str) -> Result<()> {
        match D::cuda_ordinal() {
            Some(ordinal) => fence.join(op, &context::device(ordinal)?),
            None => fence.wait(op),
        }
    }

    fn land(&mut self, landing: Landing<D, E>) -> Result<Tensor<D, E>> {
        let storage = match landing {
            Landing::Storage(storage) => storage,
            Landing::Staged(buffer) => {
                let values = buffer.read::<E>("to_async", self.shape.elem_count())?;
                D::enter(|| D::Core::storage_from_vec(values))?
            }
            Landing::Ready(tensor) => return Ok(tensor),
        };
        let tensor = Tensor::from_storage(storage, self.shape.clone());
        Ok(match self.grad.take() {
            Some((source, rule)) => {
                Tensor::from_core(autograd::attach(tensor.into_core(), "to_async", vec![Some(source)], rule))
            }
            None => tensor,
        })
    }
}

impl<D: Device, E: Element> Drop for PendingTransfer<D, E> {
    fn drop(&mut self) {
        if let Some((landing, fence)) = self.state.take() {
            // The destination may be reused once dropped: order the copy
            // before whatever reuses it. A failure here resurfaces at the
            // device's next synchronisation.
            let _ = Self::finish(fence, "drop");
            drop(landing);
        }
    }
}

impl<D: Device, E: Element> Tensor<D, E> {
    fn to_async_untracked<D2: Device>(&self) -> Result<PendingTransfer<D2, E>> {
        const OP: &str = "to_async";
        if TypeId::of::<D>() == TypeId::of::<D2>() {
            let any: &dyn Any = self;
            let same: &Tensor<D2, E> = any.downcast_ref().expect("TypeIds are equal");
            return Ok(PendingTransfer::ready(same.clone()));
        }
        let shape = self.shape().clone();
        let Some(from) = D::cuda_ordinal() else {
            // From the host: stage in page-locked memory, then upload.
            let host: &dyn Any = self.storage();
            let host = host.downcast_ref::<<Cpu as Backend>::Storage<E>>().expect("the only non-CUDA device is Cpu");
            let staged = match self.layout().contiguous_range() {
                Some(range) => PinnedBuffer::from_slice(OP, &host.as_slice()[range])?,
                None => PinnedBuffer::from_slice(OP, &self.try_to_vec()?)?,
            };
            return PendingTransfer::upload(Arc::new(staged), shape);
        };
        let source: &dyn Any = self.storage();
        let source = source.downcast_ref::<CudaStorage<E>>().expect("every Cuda<N> stores a CudaStorage");
        let from = context::device(from)?;
        let owner: Box<dyn Any + Send> = Box::new(self.clone());
        let (landing, fence) = match D2::cuda_ordinal() {
            None => {
                let (staging, fence) = transfer::download(&from, OP, source, self.layout(), owner)?;
                (Landing::Staged(staging), fence)
            }
            Some(to) => {
                let to = context::device(to)?;
                let (storage, fence) = transfer::peer(&from, OP, source, self.layout(), owner, &to)?;
                (Landing::Storage(cuda_storage_as::<D2::Core, E>(storage)), fence)
            }
        };
        Ok(PendingTransfer { shape, state: Some((landing, fence)), grad: None })
    }

    /// Starts copying this tensor to device `D2` and returns at once, like
    /// PyTorch's `.to(device, non_blocking=True)`; see [`PendingTransfer`].
    ///
    /// - From `Cpu` to a GPU: the values are first copied into page-locked
    ///   memory (on the host, now), then sent by the GPU's copy engine.
    ///   Keep a [`PinnedTensor`](super::PinnedTensor) to skip that step.
    /// - From a GPU to `Cpu`: the copy waits for the operations queued
    ///   before it and lands in page-locked memory; `wait` moves it into a
    ///   `Cpu` tensor.
    /// - Between two GPUs: a peer copy on the destination's copy stream.
    /// - To the same device: complete at once, sharing storage as
    ///   [`to`](Self::to) does.
    ///
    /// ```
    /// use devtensor::{Cpu, Cuda, Tensor};
    /// if Cuda::<0>::is_available() {
    ///     let w = Tensor::<Cuda<0>>::ones([3, 2]);
    ///     let x = Tensor::<Cpu>::ones([4, 3]).to_async::<Cuda<0>>();
    ///     // `x.matmul(&w)` would not compile: `x` is still in flight.
    ///     let y = x.join().matmul(&w);
    ///     assert_eq!(y.to_vec(), vec![3.0; 8]);
    /// }
    /// ```
    #[fallible]
    pub fn to_async<D2: Device>(&self) -> PendingTransfer<D2, E> {
        let mut pending = self.to_async_untracked()?;
        if let (Some(node), true) = (self.node(), autograd::is_grad_enabled()) {
            let rule = D2::enter(|| (Fns::<D2::Core, E>::get().transfer_rule)(D::cuda_ordinal()));
            pending.grad = Some((Arc::clone(node), rule));
        }
        Ok(pending)
    }
}

/// The storage of `Cuda<N>` as that of the device type `D`, which the
/// caller knows to be a `Cuda<N>`: every one stores a [`CudaStorage`].
fn cuda_storage_as<D: Backend, E: Element>(storage: CudaStorage<E>) -> D::Storage<E> {
    let mut slot = Some(storage);
    let any: &mut dyn Any = &mut slot;
    let slot: &mut Option<D::Storage<E>> = any.downcast_mut().expect("D is a Cuda<N>");
    slot.take().expect("the slot was filled just above")
}

/// What arithmetic on a [`PendingTransfer`] to device `Self` would need,
/// and never has: the copy may still be running, so its values are not
/// there to compute with. Implemented for no device; it exists so that
/// `pending + &x` fails to compile with a message that names the fix.
/// `Other` is the other operand's device: rustc shows the message only for
/// a trait whose failure it cannot rule out before choosing the impl, which
/// a second, never-matching impl with a parameter ensures.
#[diagnostic::on_unimplemented(
    message = "a `PendingTransfer` to `{Self}` is not a tensor yet: the copy may still be running",
    label = "still in flight: turn it into a tensor first",
    note = "call `.join()` on the transfer (later work on its device waits for the copy; the host does not), \
            or `.wait()` (the host waits)"
)]
pub trait TransferCompleted<Other = ()>: crate::backend::sealed::Sealed {}

/// The never-matching impl: without it, rustc reports a bare "cannot add"
/// and never shows the message above.
#[allow(dead_code)] // Never constructed, by design.
mod never {
    pub enum NotADevice {}
    impl crate::backend::sealed::Sealed for NotADevice {}
    #[diagnostic::do_not_recommend]
    impl<D: crate::tensor::Device> super::TransferCompleted<NotADevice> for D {}
}

/// `pending ⊕ x` and `x ⊕ pending` (owned or borrowed `x` and `pending`
/// on the right) for the four arithmetic operators, each bounded by
/// [`TransferCompleted`], which no device satisfies.
macro_rules! not_yet_a_tensor {
    ($($Op:ident $method:ident),* $(,)?) => {$(
        not_yet_a_tensor!(@impl $Op $method: PendingTransfer<D, E>, Tensor<D2, E>, D: TransferCompleted<D2>);
        not_yet_a_tensor!(@impl $Op $method: PendingTransfer<D, E>, &Tensor<D2, E>, D: TransferCompleted<D2>);
        not_yet_a_tensor!(@impl $Op $method: Tensor<D, E>, PendingTransfer<D2, E>, D2: TransferCompleted<D>);
        not_yet_a_tensor!(@impl $Op $method: Tensor<D, E>, &PendingTransfer<D2, E>, D2: TransferCompleted<D>);
        not_yet_a_tensor!(@impl $Op $method: &Tensor<D, E>, PendingTransfer<D2, E>, D2: TransferCompleted<D>);
        not_yet_a_tensor!(@impl $Op $method: &Tensor<D, E>, &PendingTransfer<D2, E>, D2: TransferCompleted<D>);
    )*};
    (@impl $Op:ident $method:ident: $Lhs:ty, $Rhs:ty, $pending:ident: TransferCompleted<$other:ident>) => {
        impl<D: Device, D2: Device, E: Element> std::ops::$Op<$Rhs> for $Lhs
        where
            $pending: TransferCompleted<$other>,
        {
            type Output = Tensor<D, E>;
            fn $method(self, _: $Rhs) -> Tensor<D, E> {
                unreachable!("TransferCompleted has no implementations for devices")
            }
        }
    };
}

not_yet_a_tensor!(Add add, Sub sub, Mul mul, Div div);
