//! Elementwise arithmetic with broadcasting: `+ - * /`, `maximum`, `minimum`,
//! with tensors or scalars, and their in-place forms (`+=`, ...).

mod cpu;
mod cuda;

use crate::device::{Backend, Device, SameDevice, same_device, same_device_owned};
use crate::element::Element;
use crate::error::{Result, or_panic};
use crate::shape::{Layout, broadcast_error, check_elem_count};
use crate::tensor::Tensor;
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
    /// `self op rhs` with broadcasting.
    fn try_binary(&self, op: BinaryOp, rhs: &Self) -> Result<Self> {
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
    fn try_binary_scalar(&self, op: BinaryOp, scalar: E, scalar_first: bool) -> Result<Self> {
        let storage = D::binary_scalar(op, self.storage(), self.layout(), scalar, scalar_first)?;
        Ok(Tensor::from_storage(storage, self.shape().clone()))
    }

    /// `self = self op rhs`; `rhs` must broadcast to `self`'s shape.
    fn try_binary_assign(&mut self, op: BinaryOp, rhs: &Self) -> Result<()> {
        let rhs_layout = rhs
            .layout()
            .broadcast_to(self.shape())
            .ok_or_else(|| broadcast_error(op.name(), D::name(), self.shape(), rhs.shape()))?;
        let lhs_layout = self.layout().clone();
        if lhs_layout.is_contiguous() {
            if let Some(storage) = self.storage_mut() {
                return D::binary_assign(op, storage, &lhs_layout, rhs.storage(), &rhs_layout);
            }
        }
        // Shared or strided: keep value semantics by writing a fresh tensor.
        *self = self.try_binary(op, rhs)?;
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

    /// `self / rhs`, broadcasting both. Fails when the shapes do not
    /// broadcast, or on an integer division by zero.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, i64>::from_vec(vec![7, 8], [2]);
    /// let b = Tensor::<Cpu, i64>::from_vec(vec![2, 0], [2]);
    /// assert!(a.try_div(&b).unwrap_err().to_string().contains("division by zero"));
    /// ```
    pub fn try_div<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Result<Self>
    where
        D: SameDevice<D2>,
    {
        self.try_binary(BinaryOp::Div, same_device(rhs))
    }

    /// The elementwise larger of `self` and `rhs`, broadcasting both; NaN wins.
    pub fn try_maximum<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Result<Self>
    where
        D: SameDevice<D2>,
    {
        self.try_binary(BinaryOp::Maximum, same_device(rhs))
    }

    /// Panicking form of [`try_maximum`](Self::try_maximum).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu>::from_vec(vec![1.0, 5.0], [2]);
    /// let b = Tensor::<Cpu>::from_vec(vec![3.0, 2.0], [2]);
    /// assert_eq!(a.maximum(&b).to_vec(), vec![3.0, 5.0]);
    /// ```
    #[track_caller]
    pub fn maximum<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Self
    where
        D: SameDevice<D2>,
    {
        or_panic(self.try_maximum(rhs))
    }

    /// The elementwise smaller of `self` and `rhs`, broadcasting both; NaN wins.
    pub fn try_minimum<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Result<Self>
    where
        D: SameDevice<D2>,
    {
        self.try_binary(BinaryOp::Minimum, same_device(rhs))
    }

    /// Panicking form of [`try_minimum`](Self::try_minimum).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu>::from_vec(vec![1.0, 5.0], [2]);
    /// assert_eq!(a.minimum(&Tensor::<Cpu>::scalar(2.0)).to_vec(), vec![1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn minimum<D2: Device>(&self, rhs: &Tensor<D2, E>) -> Self
    where
        D: SameDevice<D2>,
    {
        or_panic(self.try_minimum(rhs))
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

    /// `self / scalar`; fails on an integer division by zero.
    pub fn try_div_scalar(&self, scalar: E) -> Result<Self> {
        self.try_binary_scalar(BinaryOp::Div, scalar, false)
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

    /// `self /= rhs` in place; `rhs` must broadcast to `self`'s shape.
    pub fn try_div_assign<D2: Device>(&mut self, rhs: &Tensor<D2, E>) -> Result<()>
    where
        D: SameDevice<D2>,
    {
        self.try_binary_assign(BinaryOp::Div, same_device(rhs))
    }
}

/// `tensor op tensor` for the four owned/borrowed combinations, and
/// `tensor op scalar` for owned and borrowed tensors. All panic with the
/// `try_*` message on a shape mismatch.
macro_rules! binary_operator {
    ($Trait:ident, $method:ident, $op:ident) => {
        impl<D1: Device, D2: Device, E: Element> $Trait<&Tensor<D2, E>> for &Tensor<D1, E>
        where
            D1: SameDevice<D2>,
        {
            type Output = Tensor<D1, E>;
            #[track_caller]
            fn $method(self, rhs: &Tensor<D2, E>) -> Tensor<D1, E> {
                or_panic(self.try_binary(BinaryOp::$op, same_device(rhs)))
            }
        }
        impl<D1: Device, D2: Device, E: Element> $Trait<Tensor<D2, E>> for &Tensor<D1, E>
        where
            D1: SameDevice<D2>,
        {
            type Output = Tensor<D1, E>;
            #[track_caller]
            fn $method(self, rhs: Tensor<D2, E>) -> Tensor<D1, E> {
                or_panic(self.try_binary(BinaryOp::$op, &same_device_owned(rhs)))
            }
        }
        impl<D1: Device, D2: Device, E: Element> $Trait<&Tensor<D2, E>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
        {
            type Output = Tensor<D1, E>;
            #[track_caller]
            fn $method(self, rhs: &Tensor<D2, E>) -> Tensor<D1, E> {
                or_panic(self.try_binary(BinaryOp::$op, same_device(rhs)))
            }
        }
        impl<D1: Device, D2: Device, E: Element> $Trait<Tensor<D2, E>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
        {
            type Output = Tensor<D1, E>;
            #[track_caller]
            fn $method(self, rhs: Tensor<D2, E>) -> Tensor<D1, E> {
                or_panic(self.try_binary(BinaryOp::$op, &same_device_owned(rhs)))
            }
        }
        impl<D: Device, E: Element> $Trait<E> for &Tensor<D, E> {
            type Output = Tensor<D, E>;
            #[track_caller]
            fn $method(self, rhs: E) -> Tensor<D, E> {
                or_panic(self.try_binary_scalar(BinaryOp::$op, rhs, false))
            }
        }
        impl<D: Device, E: Element> $Trait<E> for Tensor<D, E> {
            type Output = Tensor<D, E>;
            #[track_caller]
            fn $method(self, rhs: E) -> Tensor<D, E> {
                or_panic(self.try_binary_scalar(BinaryOp::$op, rhs, false))
            }
        }
    };
}

binary_operator!(Add, add, Add);
binary_operator!(Sub, sub, Sub);
binary_operator!(Mul, mul, Mul);
binary_operator!(Div, div, Div);

/// `scalar op tensor` for each element type (a generic impl on the left
/// side is not allowed by Rust's orphan rules).
macro_rules! scalar_first_operator {
    ($($E:ty),*) => {$(
        scalar_first_operator!(@one $E, Add, add, Add);
        scalar_first_operator!(@one $E, Sub, sub, Sub);
        scalar_first_operator!(@one $E, Mul, mul, Mul);
        scalar_first_operator!(@one $E, Div, div, Div);
    )*};
    (@one $E:ty, $Trait:ident, $method:ident, $op:ident) => {
        impl<D: Device> $Trait<&Tensor<D, $E>> for $E {
            type Output = Tensor<D, $E>;
            #[track_caller]
            fn $method(self, rhs: &Tensor<D, $E>) -> Tensor<D, $E> {
                or_panic(rhs.try_binary_scalar(BinaryOp::$op, self, true))
            }
        }
        impl<D: Device> $Trait<Tensor<D, $E>> for $E {
            type Output = Tensor<D, $E>;
            #[track_caller]
            fn $method(self, rhs: Tensor<D, $E>) -> Tensor<D, $E> {
                or_panic(rhs.try_binary_scalar(BinaryOp::$op, self, true))
            }
        }
    };
}

scalar_first_operator!(f32, f64, i64, u8);

/// `tensor op= tensor` (owned or borrowed right side) and `tensor op= scalar`.
macro_rules! assign_operator {
    ($Trait:ident, $method:ident, $op:ident) => {
        impl<D1: Device, D2: Device, E: Element> $Trait<&Tensor<D2, E>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
        {
            #[track_caller]
            fn $method(&mut self, rhs: &Tensor<D2, E>) {
                or_panic(self.try_binary_assign(BinaryOp::$op, same_device(rhs)))
            }
        }
        impl<D1: Device, D2: Device, E: Element> $Trait<Tensor<D2, E>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
        {
            #[track_caller]
            fn $method(&mut self, rhs: Tensor<D2, E>) {
                or_panic(self.try_binary_assign(BinaryOp::$op, &same_device_owned(rhs)))
            }
        }
        impl<D: Device, E: Element> $Trait<E> for Tensor<D, E> {
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
assign_operator!(DivAssign, div_assign, Div);
