//! Moving tensors between devices and element types, and reading them back.

use super::Tensor;
use crate::autograd;
use crate::backend::{Backend, Cpu};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::{Layout, Shape};
use crate::tensor::Device;
use devtensor_macros::fallible;
use std::any::TypeId;

impl<D: Device, E: Element> Tensor<D, E> {
    fn to_untracked<D2: Device>(&self) -> Result<Tensor<D2, E>> {
        if TypeId::of::<D>() == TypeId::of::<D2>() {
            let any: &dyn std::any::Any = self;
            let same: &Tensor<D2, E> = any.downcast_ref().expect("TypeIds are equal");
            return Ok(same.clone());
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
        autograd::track(
            "to",
            &[self.node()],
            || self.to_untracked(),
            |_| autograd::rule_across(|g: &Tensor<D2, E>| g.try_to::<D>()),
        )
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
        D::storage_to_vec(self.storage(), self.layout())
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

    /// The single element of a one-element tensor, like PyTorch's `item()`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::ones([1, 1]).item(), 1.0);
    /// ```
    #[fallible]
    pub fn item(&self) -> E {
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
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let forward =
            || Ok(Tensor::from_storage(D::copy_strided(self.storage(), self.layout())?, self.shape().clone()));
        autograd::track("contiguous", &[self.node()], forward, |_| autograd::rule_across(|g: &Self| Ok(g.clone())))
    }
}
