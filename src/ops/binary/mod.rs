//! Elementwise arithmetic with broadcasting: `+ - * /`, `maximum`, `minimum`,
//! `pow`, with tensors or scalars, and their in-place forms (`+=`, ...).
//!
//! Each operation is a type implementing [`BinaryOp`], declared once in
//! `ops.rs`: the CPU loops, the CUDA launches (zip, row and scalar
//! kernels), the zero-divisor check, autograd and the methods all come from
//! that one definition. Your own operations use the same trait and run
//! through [`Tensor::apply_binary`].

mod cpu;
mod cuda;
mod ops;

pub use ops::{Add, Atan2, Div, DivFloor, DivTrunc, Fmod, Logaddexp, Maximum, Minimum, Mul, Pow, Remainder, Sub};

use crate::autograd::{self, rule};
use crate::backend::Backend;
use crate::element::{Element, FloatElement, InPlaceDivision, SameDtype};
use crate::error::{Error, Result, or_panic};
use crate::error::{broadcast_error, check_elem_count};
use crate::layout::Layout;
use crate::ops::unary::KernelSource;
use crate::tensor::shell::{call, core_call, core_table};
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device, same_device_owned};
use devtensor_macros::fallible;
use std::ops::{AddAssign, DivAssign, MulAssign, SubAssign};

/// An elementwise function of two tensors (or a tensor and a scalar),
/// declared once: the built-in ops (`Add`, `Maximum`, ...) and your own.
/// Implement it for the element types the function takes, and run it with
/// [`Tensor::apply_binary`].
///
/// From this one definition devtensor makes the CPU kernels (vectorised,
/// parallel loops over [`apply`](Self::apply), for broadcast operands, a
/// scalar on either side, and in place), the CUDA launches (kernels named
/// after [`NAME`](Self::NAME) in the source [`KERNELS`](Self::KERNELS)
/// names) and the autograd node ([`backward`](Self::backward)).
///
/// A custom op with its gradient, on the CPU:
/// ```
/// use devtensor::ops::binary::{BinaryOp, Grads, Needs};
/// use devtensor::ops::unary::KernelSource;
/// use devtensor::{Cpu, Device, FloatElement, Tensor};
///
/// /// `a² + b²`.
/// #[derive(Clone, Copy)]
/// struct SquareSum;
///
/// impl<F: FloatElement> BinaryOp<F> for SquareSum {
///     const NAME: &'static str = "square_sum";
///     // CPU only. With a CUDA kernel (see `KernelSource::cuda` for the contract):
///     // `unsafe { KernelSource::cuda("DT_BINARY_FLOAT(square_sum, a * a + b * b)") }`.
///     const KERNELS: KernelSource = KernelSource::NONE;
///
///     fn apply(self, a: F, b: F) -> F {
///         a * a + b * b
///     }
///
///     fn backward<D: Device>(self, a: &Tensor<D, F>, b: &Tensor<D, F>, grad: &Tensor<D, F>, needs: Needs) -> Grads<D, F> {
///         let two = F::from_f64(2.0);
///         needs.grads(|| grad.try_mul(&a.try_mul_scalar(two)?), || grad.try_mul(&b.try_mul_scalar(two)?))
///     }
/// }
///
/// let a = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2]).requires_grad();
/// let b = Tensor::<Cpu>::from_vec(vec![3.0], [1]).requires_grad(); // broadcast
/// let y = a.apply_binary(SquareSum, &b);
/// assert_eq!(y.to_vec(), vec![10.0, 13.0]);
/// let grads = y.sum().backward();
/// assert_eq!(grads.get(&a).unwrap().to_vec(), vec![2.0, 4.0]);
/// assert_eq!(grads.get(&b).unwrap().to_vec(), vec![12.0]); // summed back over the broadcast
/// ```
pub trait BinaryOp<E: Element>: Copy + Send + Sync + 'static {
    /// The op's name: in error messages and autograd's graph, and in its
    /// CUDA kernels' names, `binary_<NAME>_<dtype>`,
    /// `binary_<NAME>_rows_<dtype>` and `binary_<NAME>_scalar_<dtype>`.
    /// Unique among the ops of one program.
    const NAME: &'static str;

    /// Where the CUDA kernels come from: [`KernelSource::NONE`] (the op runs
    /// on the CPU only, and fails on a GPU with an error naming it) or the
    /// CUDA source to compile with NVRTC at first use (one
    /// `DT_BINARY_FLOAT(name, expr of a and b)` or `DT_BINARY_ALL` line).
    const KERNELS: KernelSource = KernelSource::NONE;

    /// Whether a zero integer right-hand side is an error (`integer
    /// division by zero`), checked before the kernel runs. Float zeros give
    /// IEEE results.
    const DIVISION: bool = false;

    /// The function on one pair of elements.
    fn apply(self, a: E, b: E) -> E;

    /// The gradients with respect to `a` and `b`, given the gradient
    /// `grad` flowing into the result, for the operands `needs` asks for
    /// ([`Needs::grads`] computes just those). `a` and `b` have their own
    /// shapes and `grad` the broadcast one; a gradient may come back in
    /// either, and is summed back to its operand's shape. Called only on
    /// float tensors, the ones that track gradients.
    fn backward<D: Device>(self, a: &Tensor<D, E>, b: &Tensor<D, E>, grad: &Tensor<D, E>, needs: Needs) -> Grads<D, E>;
}

/// The gradients a [`BinaryOp::backward`] returns, for `a` and for `b`
/// (`None` where not needed).
pub type Grads<D, E> = Result<[Option<Tensor<D, E>>; 2]>;

/// Which operands of a [`BinaryOp`] need a gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    /// The left-hand side, `a`.
    pub a: bool,
    /// The right-hand side, `b`.
    pub b: bool,
}

impl Needs {
    /// The gradients `ga()` for `a` and `gb()` for `b`, each computed only
    /// when needed.
    pub fn grads<D: Device, E: Element>(
        self,
        ga: impl FnOnce() -> Result<Tensor<D, E>>,
        gb: impl FnOnce() -> Result<Tensor<D, E>>,
    ) -> Grads<D, E> {
        Ok([self.a.then(ga).transpose()?, self.b.then(gb).transpose()?])
    }
}

/// Device kernels for [`BinaryOp`]s. Implemented by the core
/// devices ([`CoreDevice`]): `Cpu`, and one for every GPU.
pub trait BinaryKernel: Backend {
    /// `lhs op rhs` into a new contiguous storage; both layouts already have
    /// the output's (broadcast) shape.
    fn binary<E: Element, Op: BinaryOp<E>>(
        op: Op,
        lhs: &Self::Storage<E>,
        lhs_layout: &Layout,
        rhs: &Self::Storage<E>,
        rhs_layout: &Layout,
    ) -> Result<Self::Storage<E>>;

    /// `x op scalar`, or `scalar op x` when `scalar_first`.
    fn binary_scalar<E: Element, Op: BinaryOp<E>>(
        op: Op,
        x: &Self::Storage<E>,
        layout: &Layout,
        scalar: E,
        scalar_first: bool,
    ) -> Result<Self::Storage<E>>;

    /// `lhs = lhs op rhs` in place; `lhs_layout` is contiguous and `rhs_layout`
    /// has its shape.
    fn binary_assign<E: Element, Op: BinaryOp<E>>(
        op: Op,
        lhs: &mut Self::Storage<E>,
        lhs_layout: &Layout,
        rhs: &Self::Storage<E>,
        rhs_layout: &Layout,
    ) -> Result<()>;
}

/// A broadcast gradient summed back to `operand`'s shape.
fn sum_to<D: CoreDevice, E: Element>(g: Option<Tensor<D, E>>, operand: &Tensor<D, E>) -> Result<Option<Tensor<D, E>>> {
    g.map(|g| g.try_sum_to_shape(operand.shape())).transpose()
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// `op` applied to each pair of elements of `self` and `rhs`,
    /// broadcasting both, recording its gradient when either tracks one:
    /// how your own [`BinaryOp`] runs (the built-in ops run the same code,
    /// compiled once inside devtensor). Fails when the shapes do not
    /// broadcast, on an integer division by zero (for ops with
    /// [`DIVISION`](BinaryOp::DIVISION)), or when the device cannot run the
    /// op. See [`BinaryOp`] for an example.
    #[fallible]
    pub fn apply_binary<Op: BinaryOp<E>, D2: Device, E2: Element>(&self, op: Op, rhs: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let rhs: &Self = same_device(rhs);
        call::<D, _>(|| self.core().binary(op, rhs.core()))
    }

    /// `self op rhs` for a built-in `op`, through the core's table.
    fn builtin(&self, op: Builtin, rhs: &Self) -> Result<Self> {
        core_call!(D, Fns<E>.binary(self.core(), op, rhs.core()))
    }

    /// `self op scalar`, or `scalar op self`, recorded as `name`.
    fn builtin_scalar(&self, op: Builtin, name: &'static str, scalar: E, scalar_first: bool) -> Result<Self> {
        core_call!(D, Fns<E>.scalar(self.core(), op, name, scalar, scalar_first))
    }

    /// `self = self op rhs`; `rhs` must broadcast to `self`'s shape.
    fn builtin_assign(&mut self, op: Builtin, rhs: &Self) -> Result<()> {
        core_call!(D, Fns<E>.assign(self.core_mut(), op, rhs.core()))
    }

    /// PyTorch's true division `self / rhs`, broadcasting both.
    fn true_div(&self, rhs: &Self) -> Result<Tensor<D, E::Quotient>> {
        core_call!(D, Fns<E>.true_div(self.core(), rhs.core()))
    }

    /// PyTorch's true division by a scalar, or of a scalar when `scalar_first`.
    fn true_div_scalar(&self, scalar: E, scalar_first: bool) -> Result<Tensor<D, E::Quotient>> {
        core_call!(D, Fns<E>.true_div_scalar(self.core(), scalar, scalar_first))
    }

    /// `self + rhs`, broadcasting both. Fails when the shapes do not broadcast.
    pub fn try_add<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Result<Self>
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin(Builtin::Add, same_device(rhs))
    }

    /// `self - rhs`, broadcasting both. Fails when the shapes do not broadcast.
    pub fn try_sub<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Result<Self>
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin(Builtin::Sub, same_device(rhs))
    }

    /// `self * rhs`, broadcasting both. Fails when the shapes do not broadcast.
    pub fn try_mul<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Result<Self>
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin(Builtin::Mul, same_device(rhs))
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
    pub fn div<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Tensor<D, E::Quotient>
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.true_div(same_device(rhs))
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
    pub fn div_trunc<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin(Builtin::DivTrunc, same_device(rhs))
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
    pub fn div_floor<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin(Builtin::DivFloor, same_device(rhs))
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
    pub fn maximum<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin(Builtin::Maximum, same_device(rhs))
    }

    /// The elementwise smaller of `self` and `rhs`, broadcasting both; NaN wins.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu>::from_vec(vec![1.0, 5.0], [2]);
    /// assert_eq!(a.minimum(&Tensor::<Cpu>::scalar(2.0)).to_vec(), vec![1.0, 2.0]);
    /// ```
    #[fallible]
    pub fn minimum<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin(Builtin::Minimum, same_device(rhs))
    }

    /// `torch.remainder(self, other)`, PyTorch's (and Python's) `%`: the
    /// remainder with the sign of the divisor, `self - floor(self / other)
    /// · other`, elementwise with broadcasting (also the `%` operator).
    /// Floats give NaN for a zero divisor; integers fail on one, as
    /// PyTorch's. Fails when the shapes do not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, i64>::from_vec(vec![7, -7, 7, -7], [4]);
    /// let b = Tensor::<Cpu, i64>::from_vec(vec![3, 3, -3, -3], [4]);
    /// assert_eq!(a.remainder(&b).to_vec(), vec![1, 2, -2, -1]);
    /// assert_eq!((&a % &b).to_vec(), vec![1, 2, -2, -1]);
    /// assert!(a.try_remainder(&Tensor::<Cpu, i64>::scalar(0)).is_err());
    /// ```
    #[fallible]
    pub fn remainder<D2: Device, E2: Element>(&self, other: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin(Builtin::Remainder, same_device(other))
    }

    /// [`remainder`](Self::remainder) by a scalar, `torch.remainder(self,
    /// other)` with a number (also `&tensor % scalar`).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![-1.5, 2.5], [2]);
    /// assert_eq!(x.remainder_scalar(2.0).to_vec(), vec![0.5, 0.5]);
    /// ```
    #[fallible]
    pub fn remainder_scalar(&self, other: E) -> Self {
        self.builtin_scalar(Builtin::Remainder, "remainder_scalar", other, false)
    }

    /// `torch.fmod(self, other)`, C's `fmod`: the remainder with the sign
    /// of the dividend, `self - trunc(self / other) · other`, elementwise
    /// with broadcasting. Floats give NaN for a zero divisor; integers fail
    /// on one. Fails when the shapes do not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, i64>::from_vec(vec![7, -7, 7, -7], [4]);
    /// let b = Tensor::<Cpu, i64>::from_vec(vec![3, 3, -3, -3], [4]);
    /// assert_eq!(a.fmod(&b).to_vec(), vec![1, -1, 1, -1]);
    /// ```
    #[fallible]
    pub fn fmod<D2: Device, E2: Element>(&self, other: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin(Builtin::Fmod, same_device(other))
    }

    /// [`fmod`](Self::fmod) by a scalar.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![-1.5, 2.5], [2]);
    /// assert_eq!(x.fmod_scalar(2.0).to_vec(), vec![-1.5, 0.5]);
    /// ```
    #[fallible]
    pub fn fmod_scalar(&self, other: E) -> Self {
        self.builtin_scalar(Builtin::Fmod, "fmod_scalar", other, false)
    }

    /// `self + scalar`.
    pub fn try_add_scalar(&self, scalar: E) -> Result<Self> {
        self.builtin_scalar(Builtin::Add, "add_scalar", scalar, false)
    }

    /// `self - scalar`.
    pub fn try_sub_scalar(&self, scalar: E) -> Result<Self> {
        self.builtin_scalar(Builtin::Sub, "sub_scalar", scalar, false)
    }

    /// `self * scalar`.
    pub fn try_mul_scalar(&self, scalar: E) -> Result<Self> {
        self.builtin_scalar(Builtin::Mul, "mul_scalar", scalar, false)
    }

    /// `self / scalar`, true division as [`div`](Self::div): an
    /// integer tensor gives `f32`.
    pub fn try_div_scalar(&self, scalar: E) -> Result<Tensor<D, E::Quotient>> {
        self.true_div_scalar(scalar, false)
    }

    /// `self / scalar` rounded toward zero; fails on an integer division by zero.
    pub fn try_div_trunc_scalar(&self, scalar: E) -> Result<Self> {
        self.builtin_scalar(Builtin::DivTrunc, "div_trunc", scalar, false)
    }

    /// `self // scalar` (rounded toward negative infinity); fails on an
    /// integer division by zero.
    pub fn try_div_floor_scalar(&self, scalar: E) -> Result<Self> {
        self.builtin_scalar(Builtin::DivFloor, "div_floor", scalar, false)
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
        self.builtin_scalar(Builtin::Sub, "rsub_scalar", scalar, true)
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
        self.true_div_scalar(scalar, true)
    }

    /// `scalar / self` rounded toward zero; fails on an integer division by zero.
    pub fn try_rdiv_trunc_scalar(&self, scalar: E) -> Result<Self> {
        self.builtin_scalar(Builtin::DivTrunc, "div_trunc", scalar, true)
    }

    /// `scalar // self` (rounded toward negative infinity); fails on an
    /// integer division by zero.
    pub fn try_rdiv_floor_scalar(&self, scalar: E) -> Result<Self> {
        self.builtin_scalar(Builtin::DivFloor, "div_floor", scalar, true)
    }

    /// `self += rhs` in place; `rhs` must broadcast to `self`'s shape.
    pub fn try_add_assign<D2: Device, E2: Element>(&mut self, rhs: &Tensor<D2, E2>) -> Result<()>
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin_assign(Builtin::Add, same_device(rhs))
    }

    /// `self -= rhs` in place; `rhs` must broadcast to `self`'s shape.
    pub fn try_sub_assign<D2: Device, E2: Element>(&mut self, rhs: &Tensor<D2, E2>) -> Result<()>
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin_assign(Builtin::Sub, same_device(rhs))
    }

    /// `self *= rhs` in place; `rhs` must broadcast to `self`'s shape.
    pub fn try_mul_assign<D2: Device, E2: Element>(&mut self, rhs: &Tensor<D2, E2>) -> Result<()>
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin_assign(Builtin::Mul, same_device(rhs))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// `self op rhs` with broadcasting, recorded for autograd.
    pub(crate) fn binary<Op: BinaryOp<E>>(&self, op: Op, rhs: &Self) -> Result<Self> {
        autograd::track(
            Op::NAME,
            &[self.node(), rhs.node()],
            || self.binary_untracked(op, rhs),
            |_| {
                let (a, b) = (self.clone(), rhs.clone());
                rule(move |grad: &Tensor<D, E>, needs| {
                    let [ga, gb] = op.backward(&a, &b, grad, Needs { a: needs.get(0), b: needs.get(1) })?;
                    Ok(vec![sum_to(ga, &a)?, sum_to(gb, &b)?])
                })
            },
        )
    }

    fn binary_untracked<Op: BinaryOp<E>>(&self, op: Op, rhs: &Self) -> Result<Self> {
        // Equal shapes (the common case) need no broadcast layouts: this
        // keeps the fixed cost of a small op low.
        if self.shape() == rhs.shape() {
            let storage = D::binary(op, self.storage(), self.layout(), rhs.storage(), rhs.layout())?;
            return Ok(Tensor::from_storage(storage, self.shape().clone()));
        }
        let shape = self
            .shape()
            .broadcast_with(rhs.shape())
            .ok_or_else(|| broadcast_error(Op::NAME, D::name(), self.shape(), rhs.shape()))?;
        check_elem_count(Op::NAME, D::name, &[self.shape(), rhs.shape(), &shape])?;
        let lhs_layout = self.layout().broadcast_to(&shape).expect("broadcast shape fits lhs");
        let rhs_layout = rhs.layout().broadcast_to(&shape).expect("broadcast shape fits rhs");
        let storage = D::binary(op, self.storage(), &lhs_layout, rhs.storage(), &rhs_layout)?;
        Ok(Tensor::from_storage(storage, shape))
    }

    /// `self op scalar`, or `scalar op self`, recorded as `name`.
    pub(crate) fn binary_scalar<Op: BinaryOp<E>>(
        &self,
        name: &'static str,
        op: Op,
        scalar: E,
        scalar_first: bool,
    ) -> Result<Self> {
        let forward = || {
            let storage = D::binary_scalar(op, self.storage(), self.layout(), scalar, scalar_first)?;
            Ok(Tensor::from_storage(storage, self.shape().clone()))
        };
        autograd::track(name, &[self.node()], forward, |_| {
            let x = self.clone();
            rule(move |grad: &Tensor<D, E>, _| {
                // The op's own rule, with the scalar as a 0-d tensor that
                // needs no gradient.
                let s = Tensor::<D, E>::try_scalar(scalar)?;
                let [ga, gb] = match scalar_first {
                    false => op.backward(&x, &s, grad, Needs { a: true, b: false })?,
                    true => op.backward(&s, &x, grad, Needs { a: false, b: true })?,
                };
                Ok(vec![sum_to(if scalar_first { gb } else { ga }, &x)?])
            })
        })
    }

    /// `self = self op rhs`; `rhs` must broadcast to `self`'s shape.
    ///
    /// As in PyTorch, a leaf that requires grad cannot be written in place
    /// while gradients are enabled (update parameters under `no_grad`); a
    /// computed tracked tensor is replaced by the recorded result. Under
    /// `no_grad`, the tensor keeps its place in the graph, so a parameter
    /// updated in place stays the same leaf.
    fn binary_assign<Op: BinaryOp<E>>(&mut self, op: Op, rhs: &Self) -> Result<()> {
        if (self.tracks_grad() || rhs.tracks_grad()) && autograd::is_grad_enabled() {
            if self.tracks_grad() && self.is_leaf() {
                return Err(Error::Argument {
                    op: Op::NAME,
                    device: D::name(),
                    reason: "a leaf tensor that requires grad cannot be modified in place while \
                             gradients are enabled; update it inside `no_grad`"
                        .into(),
                });
            }
            if self.shape().broadcast_with(rhs.shape()).as_ref() == Some(self.shape()) {
                *self = self.binary(op, rhs)?;
                return Ok(());
            }
        }
        let node = self.node().cloned();
        self.binary_assign_untracked(op, rhs)?;
        self.set_node(node);
        Ok(())
    }

    fn binary_assign_untracked<Op: BinaryOp<E>>(&mut self, op: Op, rhs: &Self) -> Result<()> {
        let rhs_layout = rhs
            .layout()
            .broadcast_to(self.shape())
            .ok_or_else(|| broadcast_error(Op::NAME, D::name(), self.shape(), rhs.shape()))?;
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
    fn core_true_div(&self, rhs: &Self) -> Result<Tensor<D, E::Quotient>> {
        self.as_quotient()?.binary(Div, &rhs.as_quotient()?)
    }

    /// PyTorch's true division by a scalar, or of a scalar when `scalar_first`.
    fn core_true_div_scalar(&self, scalar: E, scalar_first: bool) -> Result<Tensor<D, E::Quotient>> {
        self.as_quotient()?.binary_scalar(
            if scalar_first { "rdiv_scalar" } else { "div_scalar" },
            Div,
            scalar.cast::<E::Quotient>(),
            scalar_first,
        )
    }
}

/// The built-in binary ops of every element type, as the core's table
/// takes them (`pow`, `atan2` and `logaddexp`, for floats only, have
/// entries of their own).
#[derive(Clone, Copy)]
pub(crate) enum Builtin {
    Add,
    Sub,
    Mul,
    Div,
    DivTrunc,
    DivFloor,
    Maximum,
    Minimum,
    Remainder,
    Fmod,
}

/// `$body` with `$Op` bound to the op type that `$op`, a [`Builtin`], names.
macro_rules! with_builtin {
    ($op:expr, $o:ident => $body:expr) => {
        match $op {
            Builtin::Add => {
                let $o = Add;
                $body
            }
            Builtin::Sub => {
                let $o = Sub;
                $body
            }
            Builtin::Mul => {
                let $o = Mul;
                $body
            }
            Builtin::Div => {
                let $o = Div;
                $body
            }
            Builtin::DivTrunc => {
                let $o = DivTrunc;
                $body
            }
            Builtin::DivFloor => {
                let $o = DivFloor;
                $body
            }
            Builtin::Maximum => {
                let $o = Maximum;
                $body
            }
            Builtin::Minimum => {
                let $o = Minimum;
                $body
            }
            Builtin::Remainder => {
                let $o = Remainder;
                $body
            }
            Builtin::Fmod => {
                let $o = Fmod;
                $body
            }
        }
    };
}

core_table! {
    /// The core's binary ops of every element type.
    pub(crate) struct Fns<C, E: Element> {
        binary: fn(&Tensor<C, E>, Builtin, &Tensor<C, E>) -> Result<Tensor<C, E>> =
            |a, op, b| with_builtin!(op, op => a.binary(op, b)),
        scalar: fn(&Tensor<C, E>, Builtin, &'static str, E, bool) -> Result<Tensor<C, E>> =
            |x, op, name, scalar, first| with_builtin!(op, op => x.binary_scalar(name, op, scalar, first)),
        assign: fn(&mut Tensor<C, E>, Builtin, &Tensor<C, E>) -> Result<()> =
            |a, op, b| with_builtin!(op, op => a.binary_assign(op, b)),
        true_div: fn(&Tensor<C, E>, &Tensor<C, E>) -> Result<Tensor<C, E::Quotient>> = |a, b| a.core_true_div(b),
        true_div_scalar: fn(&Tensor<C, E>, E, bool) -> Result<Tensor<C, E::Quotient>> =
            |x, scalar, first| x.core_true_div_scalar(scalar, first),
    }
}

core_table! {
    /// The core's binary ops of the float types.
    pub(crate) struct FloatFns<C, F: FloatElement> {
        pow: fn(&Tensor<C, F>, &Tensor<C, F>) -> Result<Tensor<C, F>> = |a, b| a.binary(Pow, b),
        atan2: fn(&Tensor<C, F>, &Tensor<C, F>) -> Result<Tensor<C, F>> = |a, b| a.binary(Atan2, b),
        logaddexp: fn(&Tensor<C, F>, &Tensor<C, F>) -> Result<Tensor<C, F>> = |a, b| a.binary(Logaddexp, b),
    }
}

impl<D: Device, F: FloatElement> Tensor<D, F> {
    /// `self` to the power `exponent`, elementwise with broadcasting:
    /// `torch.pow(self, exponent)` (for a scalar exponent, see
    /// [`powf`](Self::powf)). `0^0 = 1`, and a negative base with a
    /// fractional exponent gives NaN. Fails when the shapes do not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let base = Tensor::<Cpu>::from_vec(vec![2.0, 9.0, 0.0], [3]);
    /// let exponent = Tensor::<Cpu>::from_vec(vec![3.0, 0.5, 0.0], [3]);
    /// assert_eq!(base.pow(&exponent).to_vec(), vec![8.0, 3.0, 1.0]);
    /// ```
    #[fallible]
    pub fn pow<D2: Device, F2: Element>(&self, exponent: &Tensor<D2, F2>) -> Self
    where
        D: SameDevice<D2>,
        F: SameDtype<F2>,
    {
        let exponent: &Self = same_device(exponent);
        core_call!(D, FloatFns<F>.pow(self.core(), exponent.core()))
    }

    /// `torch.atan2(self, other)`: the angle of the point `(other, self)`
    /// in `[-π, π]`, elementwise with broadcasting (`arctan2`). Fails when
    /// the shapes do not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let y = Tensor::<Cpu, f64>::from_vec(vec![1.0, 1.0, 0.0], [3]);
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, -1.0, -1.0], [3]);
    /// let pi = std::f64::consts::PI;
    /// assert_eq!(y.atan2(&x).to_vec(), vec![pi / 4.0, 3.0 * pi / 4.0, pi]);
    /// ```
    #[fallible]
    pub fn atan2<D2: Device, F2: Element>(&self, other: &Tensor<D2, F2>) -> Self
    where
        D: SameDevice<D2>,
        F: SameDtype<F2>,
    {
        let other: &Self = same_device(other);
        core_call!(D, FloatFns<F>.atan2(self.core(), other.core()))
    }

    /// `torch.lerp(self, end, weight)`: `self + weight · (end - self)`,
    /// elementwise with broadcasting, computed as PyTorch does (from `end`
    /// when `|weight| >= 0.5`, so `weight = 1` gives `end` exactly; a half
    /// type rounds each of the two steps, where PyTorch rounds once). The
    /// gradients are `1 - weight` and `weight`. Fails when the shapes do
    /// not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let start = Tensor::<Cpu>::from_vec(vec![0.0, 10.0], [2]);
    /// let end = Tensor::<Cpu>::from_vec(vec![4.0, 20.0], [2]);
    /// assert_eq!(start.lerp(&end, 0.25).to_vec(), vec![1.0, 12.5]);
    /// assert_eq!(start.lerp(&end, 1.0).to_vec(), vec![4.0, 20.0]);
    /// ```
    #[fallible]
    pub fn lerp<D2: Device, F2: Element>(&self, end: &Tensor<D2, F2>, weight: F) -> Self
    where
        D: SameDevice<D2>,
        F: SameDtype<F2>,
    {
        self.lerp_to(same_device(end), weight)
    }

    /// [`lerp`](Self::lerp) on one device (outside `lerp`'s `where`
    /// clauses, which would otherwise pick the device of every call in it).
    fn lerp_to(&self, end: &Self, weight: F) -> Result<Self> {
        let diff = end.try_sub(self)?;
        // PyTorch's two forms: each is exact at its end of the weight's range.
        if weight.abs() < F::from_f64(0.5) {
            self.try_add(&diff.try_mul_scalar(weight)?)
        } else {
            end.try_sub(&diff.try_mul_scalar(F::ONE - weight)?)
        }
    }

    /// `torch.logaddexp(self, other)`: `log(e^self + e^other)` without
    /// overflow, elementwise with broadcasting. Fails when the shapes do
    /// not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, f64>::from_vec(vec![1000.0, 0.0, f64::NEG_INFINITY], [3]);
    /// let b = Tensor::<Cpu, f64>::from_vec(vec![1000.0, 0.0, f64::NEG_INFINITY], [3]);
    /// let ln2 = std::f64::consts::LN_2;
    /// assert_eq!(a.logaddexp(&b).to_vec(), vec![1000.0 + ln2, ln2, f64::NEG_INFINITY]);
    /// ```
    #[fallible]
    pub fn logaddexp<D2: Device, F2: Element>(&self, other: &Tensor<D2, F2>) -> Self
    where
        D: SameDevice<D2>,
        F: SameDtype<F2>,
    {
        let other: &Self = same_device(other);
        core_call!(D, FloatFns<F>.logaddexp(self.core(), other.core()))
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// `self /= rhs` in place; `rhs` must broadcast to `self`'s shape.
    /// Float tensors only: PyTorch's `/` makes a float, which an integer
    /// tensor cannot hold (use `div_trunc` or `div_floor` and assign).
    pub fn try_div_assign<D2: Device, E2: Element>(&mut self, rhs: &Tensor<D2, E2>) -> Result<()>
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.builtin_assign(Builtin::Div, same_device(rhs))
    }
}

/// `tensor op tensor` for the four owned/borrowed combinations, and
/// `tensor op scalar` for owned and borrowed tensors, each computed by
/// `$call(lhs, rhs)` / `$scalar(lhs, scalar)` and typed `$Out` (written with
/// the impls' own `D1`/`D` and `E`). All panic with the `try_*` message.
macro_rules! binary_operator {
    ($Trait:ident, $method:ident, $Out:ty, $ScalarOut:ty, |$l:ident, $r:ident| $call:expr, |$sl:ident, $s:ident| $scalar:expr) => {
        impl<D1: Device, D2: Device, E: Element, E2: Element> std::ops::$Trait<&Tensor<D2, E2>> for &Tensor<D1, E>
        where
            D1: SameDevice<D2>,
            E: SameDtype<E2>,
        {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: &Tensor<D2, E2>) -> $Out {
                let ($l, $r) = (self, same_device(rhs));
                or_panic($call)
            }
        }
        impl<D1: Device, D2: Device, E: Element, E2: Element> std::ops::$Trait<Tensor<D2, E2>> for &Tensor<D1, E>
        where
            D1: SameDevice<D2>,
            E: SameDtype<E2>,
        {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: Tensor<D2, E2>) -> $Out {
                let ($l, $r) = (self, &same_device_owned(rhs));
                or_panic($call)
            }
        }
        impl<D1: Device, D2: Device, E: Element, E2: Element> std::ops::$Trait<&Tensor<D2, E2>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
            E: SameDtype<E2>,
        {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: &Tensor<D2, E2>) -> $Out {
                let ($l, $r) = (&self, same_device(rhs));
                or_panic($call)
            }
        }
        impl<D1: Device, D2: Device, E: Element, E2: Element> std::ops::$Trait<Tensor<D2, E2>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
            E: SameDtype<E2>,
        {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: Tensor<D2, E2>) -> $Out {
                let ($l, $r) = (&self, &same_device_owned(rhs));
                or_panic($call)
            }
        }
        impl<D: Device, E: Element> std::ops::$Trait<E> for &Tensor<D, E> {
            type Output = $ScalarOut;
            #[track_caller]
            fn $method(self, rhs: E) -> $ScalarOut {
                let ($sl, $s) = (self, rhs);
                or_panic($scalar)
            }
        }
        impl<D: Device, E: Element> std::ops::$Trait<E> for Tensor<D, E> {
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
            |l, r| l.builtin(Builtin::$op, r),
            |l, s| l.builtin_scalar(Builtin::$op, concat!(stringify!($method), "_scalar"), s, false)
        );
    };
}

binary_operator!(Add, add, Add);
binary_operator!(Sub, sub, Sub);
binary_operator!(Mul, mul, Mul);
// `%` is PyTorch's `torch.remainder` (the divisor's sign, as Python's), not
// Rust's truncating `%`, which is `fmod`.
binary_operator!(Rem, rem, Remainder);
// `/` is PyTorch's true division: integer tensors divide into `f32`.
binary_operator!(
    Div, div, Tensor<D1, E::Quotient>, Tensor<D, E::Quotient>,
    |l, r| l.true_div(r),
    |l, s| l.true_div_scalar(s, false)
);

/// `scalar op tensor` for each element type (a generic impl on the left
/// side is not allowed by Rust's orphan rules). Their fallible twins are
/// `try_add_scalar`, `try_rsub_scalar`, `try_mul_scalar` and `try_rdiv_scalar`.
macro_rules! scalar_first_operator {
    ($($E:ty),*) => {$(
        scalar_first_operator!(@one $E, Add, add, Tensor<D, $E>, |t, s| t.builtin_scalar(Builtin::Add, "add_scalar", s, true));
        scalar_first_operator!(@one $E, Sub, sub, Tensor<D, $E>, |t, s| t.builtin_scalar(Builtin::Sub, "rsub_scalar", s, true));
        scalar_first_operator!(@one $E, Mul, mul, Tensor<D, $E>, |t, s| t.builtin_scalar(Builtin::Mul, "mul_scalar", s, true));
        scalar_first_operator!(@one $E, Div, div, Tensor<D, <$E as Element>::Quotient>, |t, s| t.true_div_scalar(s, true));
    )*};
    (@one $E:ty, $Trait:ident, $method:ident, $Out:ty, |$t:ident, $s:ident| $call:expr) => {
        impl<D: Device> std::ops::$Trait<&Tensor<D, $E>> for $E {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: &Tensor<D, $E>) -> $Out {
                let ($t, $s) = (rhs, self);
                or_panic($call)
            }
        }
        impl<D: Device> std::ops::$Trait<Tensor<D, $E>> for $E {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: Tensor<D, $E>) -> $Out {
                let ($t, $s) = (&rhs, self);
                or_panic($call)
            }
        }
    };
}

scalar_first_operator!(f32, f64, half::bf16, half::f16, i64, u8);

/// `tensor op= tensor` (owned or borrowed right side) and `tensor op= scalar`,
/// for the element types the optional `where` bounds allow.
macro_rules! assign_operator {
    ($Trait:ident, $method:ident, $op:ident $(; $($bound:tt)*)?) => {
        impl<D1: Device, D2: Device, E: Element, E2: Element> $Trait<&Tensor<D2, E2>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
            E: SameDtype<E2>,
            $($($bound)*)?
        {
            #[track_caller]
            fn $method(&mut self, rhs: &Tensor<D2, E2>) {
                or_panic(self.builtin_assign(Builtin::$op, same_device(rhs)))
            }
        }
        impl<D1: Device, D2: Device, E: Element, E2: Element> $Trait<Tensor<D2, E2>> for Tensor<D1, E>
        where
            D1: SameDevice<D2>,
            E: SameDtype<E2>,
            $($($bound)*)?
        {
            #[track_caller]
            fn $method(&mut self, rhs: Tensor<D2, E2>) {
                or_panic(self.builtin_assign(Builtin::$op, &same_device_owned(rhs)))
            }
        }
        impl<D: Device, E: Element> $Trait<E> for Tensor<D, E>
        where
            $($($bound)*)?
        {
            #[track_caller]
            fn $method(&mut self, rhs: E) {
                let result = or_panic(self.builtin_scalar(Builtin::$op, concat!(stringify!($Trait), "_scalar"), rhs, false));
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
        let result = or_panic(self.builtin_scalar(Builtin::Div, "div_scalar", rhs, false));
        *self = result;
    }
}

// `/=` with a tensor on the right: the element bound names the right-hand
// element type, so that rustc defers it (as it does `SameDevice`) and then
// prints `InPlaceDivision`'s message instead of a bare E0368.
impl<D1: Device, D2: Device, E: Element, E2: Element> DivAssign<&Tensor<D2, E2>> for Tensor<D1, E>
where
    D1: SameDevice<D2>,
    E: InPlaceDivision<E2> + SameDtype<E2>,
{
    #[track_caller]
    fn div_assign(&mut self, rhs: &Tensor<D2, E2>) {
        or_panic(self.builtin_assign(Builtin::Div, same_device(rhs)))
    }
}

impl<D1: Device, D2: Device, E: Element, E2: Element> DivAssign<Tensor<D2, E2>> for Tensor<D1, E>
where
    D1: SameDevice<D2>,
    E: InPlaceDivision<E2> + SameDtype<E2>,
{
    #[track_caller]
    fn div_assign(&mut self, rhs: Tensor<D2, E2>) {
        *self /= &rhs;
    }
}
