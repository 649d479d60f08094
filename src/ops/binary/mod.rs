//! Elementwise arithmetic with broadcasting: `+ - * /`, `maximum`, `minimum`,
//! with tensors or scalars, and their in-place forms (`+=`, ...).

mod cpu;
mod cuda;
pub(crate) mod grad;

use crate::autograd::{self, as_float, float_rule};
use crate::device::{Backend, Device, SameDevice, same_device, same_device_owned};
use crate::element::{Element, FloatElement, InPlaceDivision};
use crate::error::{Error, Result, or_panic};
use crate::error::{broadcast_error, check_elem_count};
use crate::shape::Layout;
use crate::tensor::Tensor;
use devtensor_macros::fallible;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Sub, SubAssign};

/// An elementwise binary operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`: true division for floats; integers truncate (the API sends
    /// integer `/` to floats first, so only `div_trunc` reaches this for them)
    Div,
    /// `a / b` rounded toward zero (integer division by zero is an error)
    DivTrunc,
    /// `a / b` rounded toward negative infinity (integer division by zero is an error)
    DivFloor,
    /// the larger of `a` and `b`
    Maximum,
    /// the smaller of `a` and `b`
    Minimum,
}

impl BinaryOp {
    /// The operation's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::DivTrunc => "div_trunc",
            BinaryOp::DivFloor => "div_floor",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
        }
    }

    /// Whether an integer zero on the right-hand side is an error.
    pub fn is_division(self) -> bool {
        matches!(self, BinaryOp::Div | BinaryOp::DivTrunc | BinaryOp::DivFloor)
    }
}

/// Device kernels for [`BinaryOp`]s. Implemented by every [`Device`].
pub trait BinaryKernel: Backend {
    /// `lhs op rhs` into a new contiguous storage; both layouts already have
    /// the output's (broadcast) shape.
    fn binary<E: Element>(
        op: BinaryOp,
        lhs: &Self::Storage<E>,
        lhs_layout: &Layout,
        rhs: &Self::Storage<E>,
        rhs_layout: &Layout,
    ) -> Result<Self::Storage<E>>;

    /// `x op scalar`, or `scalar op x` when `scalar_first`.
    fn binary_scalar<E: Element>(
        op: BinaryOp,
        x: &Self::Storage<E>,
        layout: &Layout,
        scalar: E,
        scalar_first: bool,
    ) -> Result<Self::Storage<E>>;

    /// `lhs = lhs op rhs` in place; `lhs_layout` is contiguous and `rhs_layout`
    /// has its shape.
    fn binary_assign<E: Element>(
        op: BinaryOp,
        lhs: &mut Self::Storage<E>,
        lhs_layout: &Layout,
        rhs: &Self::Storage<E>,
        rhs_layout: &Layout,
    ) -> Result<()>;
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// `self op rhs` with broadcasting, recorded for autograd.
    fn try_binary(&self, op: BinaryOp, rhs: &Self) -> Result<Self> {
        autograd::track(
            op.name(),
            &[self.node(), rhs.node()],
            || self.binary_untracked(op, rhs),
            |_| float_rule!(E, F => grad::binary::<D, F>(op, as_float(self), as_float(rhs))),
        )
    }

    fn binary_untracked(&self, op: BinaryOp, rhs: &Self) -> Result<Self> {
        // Equal shapes (the common case) need no broadcast layouts: this
        // keeps the fixed cost of a small op low.
        if self.shape() == rhs.shape() {
            let storage = D::binary(op, self.storage(), self.layout(), rhs.storage(), rhs.layout())?;
            return Ok(Tensor::from_storage(storage, self.shape().clone()));
        }
        let shape = self
            .shape()
            .broadcast_with(rhs.shape())
            .ok_or_else(|| broadcast_error(op.name(), D::name(), self.shape(), rhs.shape()))?;
        check_elem_count(op.name(), D::name, &[self.shape(), rhs.shape(), &shape])?;
        let lhs_layout = self.layout().broadcast_to(&shape).expect("broadcast shape fits lhs");
        let rhs_layout = rhs.layout().broadcast_to(&shape).expect("broadcast shape fits rhs");
        let storage = D::binary(op, self.storage(), &lhs_layout, rhs.storage(), &rhs_layout)?;
        Ok(Tensor::from_storage(storage, shape))
    }

    /// `self op scalar`, or `scalar op self`.
    pub(crate) fn try_binary_scalar(&self, op: BinaryOp, scalar: E, scalar_first: bool) -> Result<Self> {
        let forward = || {
            let storage = D::binary_scalar(op, self.storage(), self.layout(), scalar, scalar_first)?;
            Ok(Tensor::from_storage(storage, self.shape().clone()))
        };
        let name = match (op, scalar_first) {
            (BinaryOp::Sub, true) => "rsub_scalar",
            (BinaryOp::Div, true) => "rdiv_scalar",
            (BinaryOp::Add, _) => "add_scalar",
            (BinaryOp::Sub, _) => "sub_scalar",
            (BinaryOp::Mul, _) => "mul_scalar",
            (BinaryOp::Div, _) => "div_scalar",
            _ => op.name(),
        };
        autograd::track(name, &[self.node()], forward, |_| {
            // `E` is `F`, so the round trip through `f64` is exact.
            float_rule!(E, F => grad::binary_scalar::<D, F>(op, as_float(self), F::from_f64(scalar.to_f64()), scalar_first))
        })
    }

    /// `self = self op rhs`; `rhs` must broadcast to `self`'s shape.
    ///
    /// As in PyTorch, a leaf that requires grad cannot be written in place
    /// while gradients are enabled (update parameters under `no_grad`); a
    /// computed tracked tensor is replaced by the recorded result. Under
    /// `no_grad`, the tensor keeps its place in the graph, so a parameter
    /// updated in place stays the same leaf.
    fn try_binary_assign(&mut self, op: BinaryOp, rhs: &Self) -> Result<()> {
        if (self.tracks_grad() || rhs.tracks_grad()) && autograd::is_grad_enabled() {
            if self.tracks_grad() && self.is_leaf() {
                return Err(Error::Argument {
                    op: op.name(),
                    device: D::name(),
                    reason: "a leaf tensor that requires grad cannot be modified in place while \
                             gradients are enabled; update it inside `no_grad`"
                        .into(),
                });
            }
            if self.shape().broadcast_with(rhs.shape()).as_ref() == Some(self.shape()) {
                *self = self.try_binary(op, rhs)?;
                return Ok(());
            }
        }
        let node = self.node().cloned();
        self.binary_assign_untracked(op, rhs)?;
        self.set_node(node);
        Ok(())
    }

    fn binary_assign_untracked(&mut self, op: BinaryOp, rhs: &Self) -> Result<()> {
        let rhs_layout = rhs
            .layout()
            .broadcast_to(self.shape())
            .ok_or_else(|| broadcast_error(op.name(), D::name(), self.shape(), rhs.shape()))?;
        let lhs_layout = self.layout().clone();
        if lhs_layout.is_contiguous()
            && let Some(storage) = self.storage_mut()
        {
            return D::binary_assign(op, storage, &lhs_layout, rhs.storage(), &rhs_layout);
        }
        // Shared or strided: keep value semantics by writing a fresh tensor.
        *self = self.binary_untracked(op, rhs)?;
        Ok(())
    }

    /// `self + rhs`, broadcasting both. Fails when the shapes do not broadcast.
    pub fn try_add<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Result<Self>
    where
        D: SameDevice<D2>,
    {
        self.try_binary(BinaryOp::Add, same_device(rhs))
    }

    /// `self - rhs`, broadcasting both. Fails when the shapes do not broadcast.
    pub fn try_sub<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Result<Self>
    where
        D: SameDevice<D2>,
    {
        self.try_binary(BinaryOp::Sub, same_device(rhs))
    }

    /// `self * rhs`, broadcasting both. Fails when the shapes do not broadcast.
    pub fn try_mul<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Result<Self>
    where
        D: SameDevice<D2>,
    {
        self.try_binary(BinaryOp::Mul, same_device(rhs))
    }

    /// `self / rhs`, broadcasting both: true division, as PyTorch's `/`.
    /// Float tensors divide in their own type; integer and `u8` tensors
    /// give [`E::Quotient`](Element::Quotient), `f32` (PyTorch's default
    /// float), so `7 / 2` is `3.5` and `1 / 0` is `inf`. For an integer
    /// quotient use [`div_trunc`](Self::div_trunc) or
    /// [`div_floor`](Self::div_floor). Fails when the shapes do not
    /// broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, i64>::from_vec(vec![7, -7, 1], [3]);
    /// let b = Tensor::<Cpu, i64>::from_vec(vec![2, 2, 0], [3]);
    /// let q: Tensor<Cpu, f32> = a.try_div(&b)?;
    /// assert_eq!(q.to_vec(), vec![3.5, -3.5, f32::INFINITY]);
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    ///
    /// The method form of `/`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let correct = Tensor::<Cpu, i64>::scalar(91);
    /// let total = Tensor::<Cpu, i64>::scalar(100);
    /// assert_eq!(correct.div(&total).item(), 0.91);
    /// ```
    #[fallible]
    pub fn div<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Tensor<D, E::Quotient>
    where
        D: SameDevice<D2>,
    {
        self.try_true_div(same_device(rhs))
    }

    /// `self / rhs` rounded toward zero, broadcasting both: PyTorch's
    /// `torch.div(a, b, rounding_mode="trunc")`, in the element type itself.
    /// Fails when the shapes do not broadcast, or on an integer division by
    /// zero (float division by zero gives `inf` or NaN).
    ///
    /// ```
    /// use devtensor::{Cpu, Error, Tensor};
    /// let a = Tensor::<Cpu, i64>::from_vec(vec![7, 8], [2]);
    /// let b = Tensor::<Cpu, i64>::from_vec(vec![2, 0], [2]);
    /// let err = a.try_div_trunc(&b).unwrap_err();
    /// assert!(matches!(err, Error::Argument { op: "div_trunc", .. }));
    /// assert_eq!(err.to_string(), "div_trunc on Cpu: integer division by zero");
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, i64>::from_vec(vec![7, -7], [2]);
    /// assert_eq!(a.div_trunc(&Tensor::<Cpu, i64>::scalar(2)).to_vec(), vec![3, -3]);
    /// ```
    #[fallible]
    pub fn div_trunc<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Self
    where
        D: SameDevice<D2>,
    {
        self.try_binary(BinaryOp::DivTrunc, same_device(rhs))
    }

    /// `self / rhs` rounded toward negative infinity, broadcasting both:
    /// Python's and PyTorch's `//` (`rounding_mode="floor"`), in the element
    /// type itself. Fails when the shapes do not broadcast, or on an integer
    /// division by zero.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, i64>::from_vec(vec![7, -7], [2]);
    /// assert_eq!(a.div_floor(&Tensor::<Cpu, i64>::scalar(2)).to_vec(), vec![3, -4]);
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![7.5, -0.5], [2]);
    /// assert_eq!(x.div_floor(&Tensor::<Cpu, f64>::scalar(2.0)).to_vec(), vec![3.0, -1.0]);
    /// ```
    #[fallible]
    pub fn div_floor<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Self
    where
        D: SameDevice<D2>,
    {
        self.try_binary(BinaryOp::DivFloor, same_device(rhs))
    }

    /// This tensor as the operand of a true division: itself for floats,
    /// converted to `E::Quotient` (`f32`) for integers.
    fn as_quotient(&self) -> Result<Tensor<D, E::Quotient>> {
        let any: &dyn std::any::Any = self;
        match any.downcast_ref::<Tensor<D, E::Quotient>>() {
            Some(same) => Ok(same.clone()),
            None => self.try_to_dtype::<E::Quotient>(),
        }
    }

    /// PyTorch's true division `self / rhs`, broadcasting both.
    fn try_true_div(&self, rhs: &Self) -> Result<Tensor<D, E::Quotient>> {
        self.as_quotient()?.try_binary(BinaryOp::Div, &rhs.as_quotient()?)
    }

    /// PyTorch's true division by a scalar, or of a scalar when `scalar_first`.
    fn try_true_div_scalar(&self, scalar: E, scalar_first: bool) -> Result<Tensor<D, E::Quotient>> {
        self.as_quotient()?.try_binary_scalar(BinaryOp::Div, scalar.cast::<E::Quotient>(), scalar_first)
    }

    /// The elementwise larger of `self` and `rhs`, broadcasting both; NaN
    /// wins. Fails when the shapes do not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu>::from_vec(vec![1.0, 5.0], [2]);
    /// let b = Tensor::<Cpu>::from_vec(vec![3.0, 2.0], [2]);
    /// assert_eq!(a.maximum(&b).to_vec(), vec![3.0, 5.0]);
    /// ```
    #[fallible]
    pub fn maximum<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Self
    where
        D: SameDevice<D2>,
    {
        self.try_binary(BinaryOp::Maximum, same_device(rhs))
    }

    /// The elementwise smaller of `self` and `rhs`, broadcasting both; NaN wins.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu>::from_vec(vec![1.0, 5.0], [2]);
    /// assert_eq!(a.minimum(&Tensor::<Cpu>::scalar(2.0)).to_vec(), vec![1.0, 2.0]);
    /// ```
    #[fallible]
    pub fn minimum<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Self
    where
        D: SameDevice<D2>,
    {
        self.try_binary(BinaryOp::Minimum, same_device(rhs))
    }

    /// `self + scalar`.
    pub fn try_add_scalar(&self, scalar: E) -> Result<Self> {
        self.try_binary_scalar(BinaryOp::Add, scalar, false)
    }

    /// `self - scalar`.
    pub fn try_sub_scalar(&self, scalar: E) -> Result<Self> {
        self.try_binary_scalar(BinaryOp::Sub, scalar, false)
    }

    /// `self * scalar`.
    pub fn try_mul_scalar(&self, scalar: E) -> Result<Self> {
        self.try_binary_scalar(BinaryOp::Mul, scalar, false)
    }

    /// `self / scalar`, true division as [`div`](Self::div): an
    /// integer tensor gives `f32`.
    pub fn try_div_scalar(&self, scalar: E) -> Result<Tensor<D, E::Quotient>> {
        self.try_true_div_scalar(scalar, false)
    }

    /// `self / scalar` rounded toward zero; fails on an integer division by zero.
    pub fn try_div_trunc_scalar(&self, scalar: E) -> Result<Self> {
        self.try_binary_scalar(BinaryOp::DivTrunc, scalar, false)
    }

    /// `self // scalar` (rounded toward negative infinity); fails on an
    /// integer division by zero.
    pub fn try_div_floor_scalar(&self, scalar: E) -> Result<Self> {
        self.try_binary_scalar(BinaryOp::DivFloor, scalar, false)
    }

    /// `scalar - self`: the fallible twin of `scalar - &tensor`, like
    /// `torch.rsub`. (`scalar + &tensor` and `scalar * &tensor` are
    /// [`try_add_scalar`](Self::try_add_scalar) and
    /// [`try_mul_scalar`](Self::try_mul_scalar).)
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2]);
    /// assert_eq!(x.try_rsub_scalar(10.0)?.to_vec(), (10.0 - &x).to_vec());
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    pub fn try_rsub_scalar(&self, scalar: E) -> Result<Self> {
        self.try_binary_scalar(BinaryOp::Sub, scalar, true)
    }

    /// `scalar / self`, true division: the fallible twin of `scalar / &tensor`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let t = Tensor::<Cpu, i64>::from_vec(vec![4, 0], [2]);
    /// assert_eq!(t.try_rdiv_scalar(10)?.to_vec(), vec![2.5, f32::INFINITY]);
    /// assert_eq!((10 / &t).to_vec(), vec![2.5, f32::INFINITY]);
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    pub fn try_rdiv_scalar(&self, scalar: E) -> Result<Tensor<D, E::Quotient>> {
        self.try_true_div_scalar(scalar, true)
    }

    /// `scalar / self` rounded toward zero; fails on an integer division by zero.
    pub fn try_rdiv_trunc_scalar(&self, scalar: E) -> Result<Self> {
        self.try_binary_scalar(BinaryOp::DivTrunc, scalar, true)
    }

    /// `scalar // self` (rounded toward negative infinity); fails on an
    /// integer division by zero.
    pub fn try_rdiv_floor_scalar(&self, scalar: E) -> Result<Self> {
        self.try_binary_scalar(BinaryOp::DivFloor, scalar, true)
    }

    /// `self += rhs` in place; `rhs` must broadcast to `self`'s shape.
    pub fn try_add_assign<D2: Device>(&mut self, rhs: &Tensor<D2, E>) -> Result<()>
    where
        D: SameDevice<D2>,
    {
        self.try_binary_assign(BinaryOp::Add, same_device(rhs))
    }

    /// `self -= rhs` in place; `rhs` must broadcast to `self`'s shape.
    pub fn try_sub_assign<D2: Device>(&mut self, rhs: &Tensor<D2, E>) -> Result<()>
    where
        D: SameDevice<D2>,
    {
        self.try_binary_assign(BinaryOp::Sub, same_device(rhs))
    }

    /// `self *= rhs` in place; `rhs` must broadcast to `self`'s shape.
    pub fn try_mul_assign<D2: Device>(&mut self, rhs: &Tensor<D2, E>) -> Result<()>
    where
        D: SameDevice<D2>,
    {
        self.try_binary_assign(BinaryOp::Mul, same_device(rhs))
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// `self /= rhs` in place; `rhs` must broadcast to `self`'s shape.
    /// Float tensors only: PyTorch's `/` makes a float, which an integer
    /// tensor cannot hold (use `div_trunc` or `div_floor` and assign).
    pub fn try_div_assign<D2: Device>(&mut self, rhs: &Tensor<D2, E>) -> Result<()>
    where
        D: SameDevice<D2>,
    {
        self.try_binary_assign(BinaryOp::Div, same_device(rhs))
    }
}

/// `tensor op tensor` for the four owned/borrowed combinations, and
/// `tensor op scalar` for owned and borrowed tensors, each computed by
/// `$call(lhs, rhs)` / `$scalar(lhs, scalar)` and typed `$Out` (written with
/// the impls' own `D1`/`D` and `E`). All panic with the `try_*` message.
macro_rules! binary_operator {
    ($Trait:ident, $method:ident, $Out:ty, $ScalarOut:ty, |$l:ident, $r:ident| $call:expr, |$sl:ident, $s:ident| $scalar:expr) => {
        impl<D1: Device, D2: Device, E: Element> $Trait<&Tensor<D2, E>> for &Tensor<D1, E>
        where
            D1: SameDevice<D2>,
        {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: &Tensor<D2, E>) -> $Out {
                let ($l, $r) = (self, same_device(rhs));
                or_panic($call)
            }
        }
        impl<D1: Device, D2: Device, E: Element> $Trait<Tensor<D2, E>> for &Tensor<D1, E>
        where
            D1: SameDevice<D2>,
        {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: Tensor<D2, E>) -> $Out {
                let ($l, $r) = (self, &same_device_owned(rhs));
                or_panic($call)
            }
        }
        impl<D1: Device, D2: Device, E: Element> $Trait<&Tensor<D2, E>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
        {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: &Tensor<D2, E>) -> $Out {
                let ($l, $r) = (&self, same_device(rhs));
                or_panic($call)
            }
        }
        impl<D1: Device, D2: Device, E: Element> $Trait<Tensor<D2, E>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
        {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: Tensor<D2, E>) -> $Out {
                let ($l, $r) = (&self, &same_device_owned(rhs));
                or_panic($call)
            }
        }
        impl<D: Device, E: Element> $Trait<E> for &Tensor<D, E> {
            type Output = $ScalarOut;
            #[track_caller]
            fn $method(self, rhs: E) -> $ScalarOut {
                let ($sl, $s) = (self, rhs);
                or_panic($scalar)
            }
        }
        impl<D: Device, E: Element> $Trait<E> for Tensor<D, E> {
            type Output = $ScalarOut;
            #[track_caller]
            fn $method(self, rhs: E) -> $ScalarOut {
                let ($sl, $s) = (&self, rhs);
                or_panic($scalar)
            }
        }
    };
    ($Trait:ident, $method:ident, $op:ident) => {
        binary_operator!(
            $Trait, $method, Tensor<D1, E>, Tensor<D, E>,
            |l, r| l.try_binary(BinaryOp::$op, r),
            |l, s| l.try_binary_scalar(BinaryOp::$op, s, false)
        );
    };
}

binary_operator!(Add, add, Add);
binary_operator!(Sub, sub, Sub);
binary_operator!(Mul, mul, Mul);
// `/` is PyTorch's true division: integer tensors divide into `f32`.
binary_operator!(
    Div, div, Tensor<D1, E::Quotient>, Tensor<D, E::Quotient>,
    |l, r| l.try_true_div(r),
    |l, s| l.try_true_div_scalar(s, false)
);

/// `scalar op tensor` for each element type (a generic impl on the left
/// side is not allowed by Rust's orphan rules). Their fallible twins are
/// `try_add_scalar`, `try_rsub_scalar`, `try_mul_scalar` and `try_rdiv_scalar`.
macro_rules! scalar_first_operator {
    ($($E:ty),*) => {$(
        scalar_first_operator!(@one $E, Add, add, Tensor<D, $E>, |t, s| t.try_binary_scalar(BinaryOp::Add, s, true));
        scalar_first_operator!(@one $E, Sub, sub, Tensor<D, $E>, |t, s| t.try_binary_scalar(BinaryOp::Sub, s, true));
        scalar_first_operator!(@one $E, Mul, mul, Tensor<D, $E>, |t, s| t.try_binary_scalar(BinaryOp::Mul, s, true));
        scalar_first_operator!(@one $E, Div, div, Tensor<D, <$E as Element>::Quotient>, |t, s| t.try_true_div_scalar(s, true));
    )*};
    (@one $E:ty, $Trait:ident, $method:ident, $Out:ty, |$t:ident, $s:ident| $call:expr) => {
        impl<D: Device> $Trait<&Tensor<D, $E>> for $E {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: &Tensor<D, $E>) -> $Out {
                let ($t, $s) = (rhs, self);
                or_panic($call)
            }
        }
        impl<D: Device> $Trait<Tensor<D, $E>> for $E {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: Tensor<D, $E>) -> $Out {
                let ($t, $s) = (&rhs, self);
                or_panic($call)
            }
        }
    };
}

scalar_first_operator!(f32, f64, i64, u8);

/// `tensor op= tensor` (owned or borrowed right side) and `tensor op= scalar`,
/// for the element types the optional `where` bounds allow.
macro_rules! assign_operator {
    ($Trait:ident, $method:ident, $op:ident $(; $($bound:tt)*)?) => {
        impl<D1: Device, D2: Device, E: Element> $Trait<&Tensor<D2, E>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
            $($($bound)*)?
        {
            #[track_caller]
            fn $method(&mut self, rhs: &Tensor<D2, E>) {
                or_panic(self.try_binary_assign(BinaryOp::$op, same_device(rhs)))
            }
        }
        impl<D1: Device, D2: Device, E: Element> $Trait<Tensor<D2, E>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
            $($($bound)*)?
        {
            #[track_caller]
            fn $method(&mut self, rhs: Tensor<D2, E>) {
                or_panic(self.try_binary_assign(BinaryOp::$op, &same_device_owned(rhs)))
            }
        }
        impl<D: Device, E: Element> $Trait<E> for Tensor<D, E>
        where
            $($($bound)*)?
        {
            #[track_caller]
            fn $method(&mut self, rhs: E) {
                let result = or_panic(self.try_binary_scalar(BinaryOp::$op, rhs, false));
                *self = result;
            }
        }
    };
}

assign_operator!(AddAssign, add_assign, Add);
assign_operator!(SubAssign, sub_assign, Sub);
assign_operator!(MulAssign, mul_assign, Mul);
impl<D: Device, E: InPlaceDivision<E>> DivAssign<E> for Tensor<D, E> {
    #[track_caller]
    fn div_assign(&mut self, rhs: E) {
        let result = or_panic(self.try_binary_scalar(BinaryOp::Div, rhs, false));
        *self = result;
    }
}

// `/=` with a tensor on the right: the element bound names the right-hand
// element type, so that rustc defers it (as it does `SameDevice`) and then
// prints `InPlaceDivision`'s message instead of a bare E0368.
impl<D1: Device, D2: Device, E: Element, E2: Element> DivAssign<&Tensor<D2, E2>> for Tensor<D1, E>
where
    D1: SameDevice<D2>,
    E: InPlaceDivision<E2>,
{
    #[track_caller]
    fn div_assign(&mut self, rhs: &Tensor<D2, E2>) {
        let rhs: &Tensor<D2, E> = same_element(rhs);
        or_panic(self.try_binary_assign(BinaryOp::Div, same_device(rhs)))
    }
}

impl<D1: Device, D2: Device, E: Element, E2: Element> DivAssign<Tensor<D2, E2>> for Tensor<D1, E>
where
    D1: SameDevice<D2>,
    E: InPlaceDivision<E2>,
{
    #[track_caller]
    fn div_assign(&mut self, rhs: Tensor<D2, E2>) {
        *self /= &rhs;
    }
}

/// `tensor` as a tensor of `E` once `E: InPlaceDivision<E2>` has proved the
/// element types equal.
fn same_element<D: Device, E: Element, E2: Element>(tensor: &Tensor<D, E2>) -> &Tensor<D, E> {
    let any: &dyn std::any::Any = tensor;
    any.downcast_ref().expect("InPlaceDivision<E2> is only implemented for E2 itself")
}
