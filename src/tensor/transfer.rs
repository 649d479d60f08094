//! Moving tensors between devices and element types, and reading them back.

use super::Tensor;
use super::shell::{call, core_call, core_table};
use crate::autograd::{self, Backward};
use crate::backend::cuda::{self, AnyCuda};
use crate::backend::{Backend, Cpu};
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::layout::{Layout, Shape};
use crate::tensor::{CoreDevice, Device};
use devtensor_macros::fallible;
use half::{bf16, f16};

impl<D: Device, E: Element> Tensor<D, E> {
    /// This tensor on device `D2`. Moving to the device it is already on
    /// copies nothing.
    ///
    /// Fails when `D2` is unavailable (no driver, no such GPU) or runs out of memory.
    ///
    /// The move is differentiable, as in PyTorch: the gradient of the result
    /// flows back to this tensor's device.
    ///
    /// The explicit move that PyTorch's `.to(device)` is.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::ones([2]);
    /// let y: Tensor<Cpu> = x.to::<Cpu>(); // same device: shares storage
    /// assert_eq!(y.to_vec(), vec![1.0, 1.0]);
    /// ```
    #[fallible]
    pub fn to<D2: Device>(&self) -> Tensor<D2, E> {
        let fns = Fns::<D::Core, E>::get();
        let moved = D::enter(|| match D2::cuda_ordinal() {
            None => retyped((fns.to_cpu)(self.core())),
            Some(ordinal) => retyped((fns.to_cuda)(self.core(), ordinal)),
        })?;
        Ok(Tensor::from_core(moved))
    }

    /// The elements in row-major order, copied to the host.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.t().to_vec(), vec![1.0, 3.0, 2.0, 4.0]);
    /// ```
    #[fallible]
    pub fn to_vec(&self) -> Vec<E> {
        D::enter(|| (Fns::<D::Core, E>::get().to_vec)(self.core()))
    }

    /// The rows of a rank-2 tensor, copied to the host.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::arange(0, 4).reshape([2, 2]);
    /// assert_eq!(x.to_vec2(), vec![vec![0, 1], vec![2, 3]]);
    /// ```
    #[fallible]
    pub fn to_vec2(&self) -> Vec<Vec<E>> {
        D::enter(|| (Fns::<D::Core, E>::get().to_vec2)(self.core()))
    }

    /// The single element of a one-element tensor, like PyTorch's `item()`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::ones([1, 1]).item(), 1.0);
    /// ```
    #[fallible]
    pub fn item(&self) -> E {
        D::enter(|| (Fns::<D::Core, E>::get().item)(self.core()))
    }

    /// The elements converted to `T` with Rust's `as` semantics (floats to
    /// integers truncate toward zero and saturate), like PyTorch's `.to(dtype)`.
    /// To `bf16` and `f16` the values round to nearest, ties to even, from
    /// `f32`; an `f64` goes through `f32` first, as in PyTorch.
    ///
    /// Between float types the conversion is differentiable; an integer
    /// result tracks nothing, as in PyTorch.
    ///
    /// Like PyTorch's (`memory_format=torch.preserve_format`), a tensor
    /// whose elements fill their memory in some order of the axes (a
    /// transposed weight) keeps that order: the cast reads and writes
    /// memory in sequence, and a product of the result reads it as it would
    /// have read the original. Any other layout (a slice, a broadcast)
    /// comes out row-major.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor, bf16};
    /// let labels = Tensor::<Cpu, i64>::from_vec(vec![0, 2], [2]);
    /// assert_eq!(labels.to_dtype::<f32>().to_vec(), vec![0.0, 2.0]);
    /// let w = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    /// let cast = w.t().to_dtype::<bf16>();
    /// assert!(!cast.is_contiguous()); // still the transpose of a row-major [2, 3]
    /// assert_eq!(cast.to_dtype::<f32>().to_vec(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// ```
    #[fallible]
    pub fn to_dtype<T: Element>(&self) -> Tensor<D, T> {
        let casts = &Fns::<D::Core, E>::get().to_dtype;
        call::<D, _>(|| match T::DTYPE {
            DType::F32 => retyped((casts.f32)(self.core())),
            DType::F64 => retyped((casts.f64)(self.core())),
            DType::BF16 => retyped((casts.bf16)(self.core())),
            DType::F16 => retyped((casts.f16)(self.core())),
            DType::I64 => retyped((casts.i64)(self.core())),
            DType::U8 => retyped((casts.u8)(self.core())),
        })
    }

    /// This tensor with its elements dense and row-major: itself if they
    /// already are, a copy otherwise.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let t = Tensor::<Cpu>::zeros([2, 3]).t();
    /// assert!(!t.is_contiguous());
    /// assert!(t.contiguous().is_contiguous());
    /// ```
    #[fallible]
    pub fn contiguous(&self) -> Self {
        core_call!(D, Fns<E>.contiguous(self.core()))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// This tensor on the core device `D2`, which is the current GPU when it
    /// is the GPUs': a copy, or the tensor itself when `in_place` says it
    /// is there already.
    fn to_untracked<D2: CoreDevice>(&self, in_place: bool) -> Result<Tensor<D2, E>> {
        if in_place {
            return retyped(Ok(self.clone()));
        }
        // A direct path between two GPUs, when the backend has one.
        if let Some(storage) = D2::storage_from_device::<D, E>(self.storage(), self.layout())? {
            return Ok(Tensor::from_storage(storage, self.shape().clone()));
        }
        // From dense host memory, the destination reads it in place.
        let host: &dyn std::any::Any = self.storage();
        if let (Some(host), Some(range)) =
            (host.downcast_ref::<<Cpu as Backend>::Storage<E>>(), self.layout().contiguous_range())
        {
            return Ok(Tensor::from_storage(D2::storage_from_slice(&host.as_slice()[range])?, self.shape().clone()));
        }
        let data = D::storage_to_vec(self.storage(), self.layout())?;
        Ok(Tensor::from_storage(D2::storage_from_vec(data)?, self.shape().clone()))
    }

    /// This tensor on the CPU, recorded for autograd: the gradient goes
    /// back to this tensor's device.
    fn core_to_cpu(&self) -> Result<Tensor<Cpu, E>> {
        // The storage's own GPU, not the current one: in a gradient rule the
        // two differ (the rule of a move runs on the GPU the move came from).
        let from = D::ordinal_of(self.storage());
        autograd::track(
            "to",
            &[self.node()],
            || self.to_untracked::<Cpu>(D::IS_CPU),
            |_| autograd::rule_across(move |g: &Tensor<Cpu, E>| back_to::<D, Cpu, E>(g, from)),
        )
    }

    /// This tensor on GPU `ordinal`, recorded for autograd.
    fn core_to_cuda(&self, ordinal: usize) -> Result<Tensor<AnyCuda, E>> {
        let from = D::ordinal_of(self.storage());
        autograd::track(
            "to",
            &[self.node()],
            || cuda::current::enter(ordinal, || self.to_untracked::<AnyCuda>(from == Some(ordinal))),
            |_| autograd::rule_across(move |g: &Tensor<AnyCuda, E>| back_to::<D, AnyCuda, E>(g, from)),
        )
    }

    fn core_to_vec2(&self) -> Result<Vec<Vec<E>>> {
        let &[_, cols] = self.dims() else {
            return Err(Error::Shape {
                op: "to_vec2",
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: format!("expected a rank-2 tensor, got rank {}", self.rank()),
            });
        };
        let flat = self.try_to_vec()?;
        Ok(if cols == 0 { vec![Vec::new(); self.dims()[0]] } else { flat.chunks(cols).map(<[E]>::to_vec).collect() })
    }

    fn core_item(&self) -> Result<E> {
        if self.elem_count() != 1 {
            return Err(Error::Shape {
                op: "item",
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: format!("expected exactly one element, got {}", self.elem_count()),
            });
        }
        Ok(self.try_to_vec()?[0])
    }

    fn core_to_dtype<T: Element>(&self) -> Result<Tensor<D, T>> {
        let forward = || {
            let layout = self.layout();
            if layout.is_dense() && !layout.is_contiguous() {
                let flat = Shape::from([layout.elem_count()]);
                let memory = Layout::new(flat.clone(), flat.contiguous_strides(), layout.offset());
                let cast = D::cast::<E, T>(self.storage(), &memory)?;
                let kept = Layout::new(layout.shape().clone(), layout.strides().into(), 0);
                return Ok(Tensor::from_storage_with(cast, kept));
            }
            Ok(Tensor::from_storage(D::cast::<E, T>(self.storage(), layout)?, self.shape().clone()))
        };
        let input = if T::IS_FLOAT { self.node() } else { None };
        autograd::track("to_dtype", &[input], forward, |_| {
            autograd::rule_across(|g: &Tensor<D, T>| g.try_to_dtype::<E>())
        })
    }

    fn core_contiguous(&self) -> Result<Self> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let forward =
            || Ok(Tensor::from_storage(D::copy_strided(self.storage(), self.layout())?, self.shape().clone()));
        autograd::track("contiguous", &[self.node()], forward, |_| autograd::rule_across(|g: &Self| Ok(g.clone())))
    }
}

/// A gradient `g` on core device `D2` moved back to the device a transfer
/// came from: core device `D1`, GPU `from` when that is the GPUs'.
fn back_to<D1: CoreDevice, D2: CoreDevice, E: Element>(
    g: &Tensor<D2, E>,
    from: Option<usize>,
) -> Result<Tensor<D1, E>> {
    match from {
        None => retyped(g.core_to_cpu()),
        Some(ordinal) => retyped(g.core_to_cuda(ordinal)),
    }
}

/// The gradient rule of a transfer to core device `D` (to its current GPU)
/// from the CPU (`from` is `None`) or from GPU `from`: the gradient goes
/// back the way the tensor came.
fn transfer_rule<D: CoreDevice, E: Element>(from: Option<usize>) -> Box<dyn Backward> {
    match from {
        None => autograd::rule_across(|g: &Tensor<D, E>| g.core_to_cpu()),
        Some(ordinal) => autograd::rule_across(move |g: &Tensor<D, E>| g.core_to_cuda(ordinal)),
    }
}

/// `t` as a tensor of core device `D2` and element `T`, which are its own
/// (a `TypeId` check that the optimiser folds): how a table entry chosen by
/// a run-time tag returns to the shell's types.
fn retyped<D1: CoreDevice, D2: CoreDevice, E: Element, T: Element>(t: Result<Tensor<D1, E>>) -> Result<Tensor<D2, T>> {
    let mut slot = Some(t?);
    let any: &mut dyn std::any::Any = &mut slot;
    let slot: &mut Option<Tensor<D2, T>> = any.downcast_mut().expect("the table entry of the requested type");
    Ok(slot.take().expect("the slot was filled just above"))
}

/// A conversion of every element type to each one, a field per target.
pub(crate) struct Casts<C: CoreDevice, E: Element> {
    f32: fn(&Tensor<C, E>) -> Result<Tensor<C, f32>>,
    f64: fn(&Tensor<C, E>) -> Result<Tensor<C, f64>>,
    bf16: fn(&Tensor<C, E>) -> Result<Tensor<C, bf16>>,
    f16: fn(&Tensor<C, E>) -> Result<Tensor<C, f16>>,
    i64: fn(&Tensor<C, E>) -> Result<Tensor<C, i64>>,
    u8: fn(&Tensor<C, E>) -> Result<Tensor<C, u8>>,
}

impl<C: CoreDevice, E: Element> Casts<C, E> {
    const NEW: Self = Casts {
        f32: Tensor::core_to_dtype,
        f64: Tensor::core_to_dtype,
        bf16: Tensor::core_to_dtype,
        f16: Tensor::core_to_dtype,
        i64: Tensor::core_to_dtype,
        u8: Tensor::core_to_dtype,
    };
}

core_table! {
    /// The core's moves between devices and element types, and reads.
    pub(crate) struct Fns<C, E: Element> {
        to_cpu: fn(&Tensor<C, E>) -> Result<Tensor<Cpu, E>> = Tensor::core_to_cpu,
        to_cuda: fn(&Tensor<C, E>, usize) -> Result<Tensor<AnyCuda, E>> = Tensor::core_to_cuda,
        to_vec: fn(&Tensor<C, E>) -> Result<Vec<E>> = |x| C::storage_to_vec(x.storage(), x.layout()),
        to_vec2: fn(&Tensor<C, E>) -> Result<Vec<Vec<E>>> = Tensor::core_to_vec2,
        item: fn(&Tensor<C, E>) -> Result<E> = Tensor::core_item,
        to_dtype: Casts<C, E> = Casts::NEW,
        contiguous: fn(&Tensor<C, E>) -> Result<Tensor<C, E>> = Tensor::core_contiguous,
        transfer_rule: fn(Option<usize>) -> Box<dyn Backward> = transfer_rule::<C, E>,
    }
}
