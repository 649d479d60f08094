//! Comparisons producing masks, mask logic, and selection by mask.
//!
//! A mask is a `Tensor<D, u8>` holding 1 for true and 0 for false, as
//! PyTorch's `bool` tensors do. Comparisons broadcast like arithmetic and
//! follow IEEE 754: NaN compares false, except under `ne`. Mask operations
//! read any non-zero byte as true and always produce 0 or 1.

mod cpu;
mod cuda;
mod mask;
mod ops;
mod special;

pub use ops::{Equal, Greater, GreaterEqual, Less, LessEqual, LogicalAnd, LogicalOr, NotEqual};

use crate::autograd::{self, Backward, float_rule, rule};
use crate::backend::Backend;
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::error::{broadcast_error, check_elem_count};
use crate::layout::{Layout, Shape};
use crate::ops::KernelSource;
use crate::tensor::shell::{call, core_call, core_table};
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// A predicate on two tensors (or a tensor and a scalar) giving a mask,
/// declared once: the built-in comparisons (`Less`, `Equal`, ...), the
/// mask logic (`LogicalAnd`, `LogicalOr`) and your own. Implement it for
/// the element types it takes and run it with [`Tensor::apply_compare`].
///
/// From this one definition devtensor makes the CPU loops over
/// [`apply`](Self::apply) (broadcast operands, or a scalar on the right) and
/// the CUDA launches (kernels named after [`NAME`](Self::NAME) in the
/// source [`KERNELS`](Self::KERNELS) names). Masks carry no gradient.
///
/// A custom comparison, on the CPU:
/// ```
/// use devtensor::ops::compare::CompareOp;
/// use devtensor::ops::KernelSource;
/// use devtensor::{Cpu, FloatElement, Tensor};
///
/// /// Whether `a` and `b` agree to within 0.1.
/// #[derive(Clone, Copy)]
/// struct Near;
///
/// impl<F: FloatElement> CompareOp<F> for Near {
///     const NAME: &'static str = "near";
///     // CPU only. With a CUDA kernel (see `KernelSource::cuda` for the contract):
///     // `unsafe { KernelSource::cuda("DT_COMPARE_FLOAT(near, fabs(a - b) <= 0.1)") }`.
///     const KERNELS: KernelSource = KernelSource::NONE;
///
///     fn apply(self, a: F, b: F) -> bool {
///         (a - b).abs() <= F::from_f64(0.1)
///     }
/// }
///
/// let a = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0], [3]);
/// let b = Tensor::<Cpu>::from_vec(vec![1.05, 2.5, 2.95], [3]);
/// assert_eq!(a.apply_compare(Near, &b).to_vec(), vec![1, 0, 1]);
/// ```
pub trait CompareOp<E: Element>: Copy + Send + Sync + 'static {
    /// The op's name: in error messages, and in its CUDA kernels' names,
    /// `compare_<NAME>_<dtype>` and `compare_<NAME>_scalar_<dtype>`.
    /// Unique among the ops of one program.
    const NAME: &'static str;

    /// Where the CUDA kernels come from: [`KernelSource::NONE`] (the op runs
    /// on the CPU only, and fails on a GPU with an error naming it) or the
    /// CUDA source to compile with NVRTC at first use (one
    /// `DT_COMPARE_FLOAT(name, predicate of a and b)` or `DT_COMPARE_ALL`
    /// line).
    const KERNELS: KernelSource = KernelSource::NONE;

    /// The predicate on one pair of elements.
    fn apply(self, a: E, b: E) -> bool;
}

/// Device kernels for [`CompareOp`]s, mask negation and `where_cond`.
/// Implemented by the core devices
/// ([`CoreDevice`]): `Cpu`, and one for every GPU. Every layout passed already has the
/// output's (broadcast) shape; outputs are new contiguous storages.
pub trait CompareKernel: Backend {
    /// `lhs op rhs` as a 0/1 mask.
    fn compare<E: Element, Op: CompareOp<E>>(
        op: Op,
        lhs: &Self::Storage<E>,
        lhs_layout: &Layout,
        rhs: &Self::Storage<E>,
        rhs_layout: &Layout,
    ) -> Result<Self::Storage<u8>>;

    /// `x op scalar` as a 0/1 mask.
    fn compare_scalar<E: Element, Op: CompareOp<E>>(
        op: Op,
        x: &Self::Storage<E>,
        layout: &Layout,
        scalar: E,
    ) -> Result<Self::Storage<u8>>;

    /// 1 where the mask is zero, 0 elsewhere.
    fn logical_not(x: &Self::Storage<u8>, layout: &Layout) -> Result<Self::Storage<u8>>;

    /// `on_true` where `cond` is non-zero, `on_false` elsewhere.
    fn where_cond<E: Element>(
        cond: &Self::Storage<u8>,
        cond_layout: &Layout,
        on_true: &Self::Storage<E>,
        on_true_layout: &Layout,
        on_false: &Self::Storage<E>,
        on_false_layout: &Layout,
    ) -> Result<Self::Storage<E>>;
}

/// Defines `try_x`/`x` and `try_x_scalar`/`x_scalar` for one comparison.
macro_rules! comparison {
    ($($op:ident, $try_name:ident, $name:ident, $try_scalar:ident, $scalar:ident, $what:literal, $example:literal;)*) => {$(
        #[doc = concat!("A mask of `self ", $what, " rhs`, broadcasting both. Fails when the shapes do not broadcast.")]
        ///
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let a = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0], [3]);
        /// let b = Tensor::<Cpu>::from_vec(vec![2.0], [1]);
        #[doc = concat!("assert_eq!(a.", stringify!($name), "(&b).to_vec(), vec!", $example, ");")]
        /// ```
        #[fallible($try_name)]
        pub fn $name<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Tensor<D, u8>
        where
            D: SameDevice<D2>,
            E: SameDtype<E2>,
        {
            let rhs: &Self = same_device(rhs);
            core_call!(D, Fns<E>.compare(self.core(), Builtin::$op, rhs.core()))
        }

        #[doc = concat!("A mask of `self ", $what, " scalar`. Fails only when the device cannot run the kernel.")]
        ///
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let a = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0], [3]);
        #[doc = concat!("assert_eq!(a.", stringify!($scalar), "(2.0).to_vec(), vec!", $example, ");")]
        /// ```
        #[fallible($try_scalar)]
        pub fn $scalar(&self, scalar: E) -> Tensor<D, u8> {
            core_call!(D, Fns<E>.compare_scalar(self.core(), Builtin::$op, scalar))
        }
    )*};
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// The mask of `op` on `self` and `rhs`, broadcasting both: how a
    /// custom [`CompareOp`] runs (see its example); the built-in
    /// comparisons run the same code through the core's table. Fails when the shapes do not broadcast, or on a GPU when
    /// the op has no CUDA kernel.
    ///
    /// ```
    /// use devtensor::ops::compare::Less;
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, i64>::from_vec(vec![1, 5], [2]);
    /// let b = Tensor::<Cpu, i64>::from_vec(vec![3], [1]);
    /// assert_eq!(a.apply_compare(Less, &b).to_vec(), a.lt(&b).to_vec());
    /// ```
    #[fallible]
    pub fn apply_compare<D2: Device, E2: Element, Op: CompareOp<E>>(
        &self,
        op: Op,
        rhs: &Tensor<D2, E2>,
    ) -> Tensor<D, u8>
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let rhs: &Self = same_device(rhs);
        call::<D, _>(|| self.core().compare(op, rhs.core()))
    }

    comparison! {
        Equal, try_eq, eq, try_eq_scalar, eq_scalar, "==", "[0, 1, 0]";
        NotEqual, try_ne, ne, try_ne_scalar, ne_scalar, "!=", "[1, 0, 1]";
        Less, try_lt, lt, try_lt_scalar, lt_scalar, "<", "[1, 0, 0]";
        LessEqual, try_le, le, try_le_scalar, le_scalar, "<=", "[1, 1, 0]";
        Greater, try_gt, gt, try_gt_scalar, gt_scalar, ">", "[0, 0, 1]";
        GreaterEqual, try_ge, ge, try_ge_scalar, ge_scalar, ">=", "[0, 1, 1]";
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// The mask of `op` on `self` and `rhs`, broadcasting both.
    pub(crate) fn compare<Op: CompareOp<E>>(&self, op: Op, rhs: &Self) -> Result<Tensor<D, u8>> {
        let (shape, l, r) = broadcast_pair(Op::NAME, D::name(), self.layout(), rhs.layout())?;
        let storage = D::compare(op, self.storage(), &l, rhs.storage(), &r)?;
        Ok(Tensor::from_storage(storage, shape))
    }

    /// The mask of `self op scalar`.
    fn compare_scalar<Op: CompareOp<E>>(&self, op: Op, scalar: E) -> Result<Tensor<D, u8>> {
        let storage = D::compare_scalar(op, self.storage(), self.layout(), scalar)?;
        Ok(Tensor::from_storage(storage, self.shape().clone()))
    }
}

/// The built-in comparisons, as the core's table takes them.
#[derive(Clone, Copy)]
pub(crate) enum Builtin {
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
}

/// `$body` with `$o` bound to the comparison that `$op`, a [`Builtin`], names.
macro_rules! with_builtin {
    ($op:expr, $o:ident => $body:expr) => {
        match $op {
            Builtin::Equal => {
                let $o = Equal;
                $body
            }
            Builtin::NotEqual => {
                let $o = NotEqual;
                $body
            }
            Builtin::Less => {
                let $o = Less;
                $body
            }
            Builtin::LessEqual => {
                let $o = LessEqual;
                $body
            }
            Builtin::Greater => {
                let $o = Greater;
                $body
            }
            Builtin::GreaterEqual => {
                let $o = GreaterEqual;
                $body
            }
        }
    };
}

core_table! {
    /// The core's comparisons, mask logic and selection by mask.
    pub(crate) struct Fns<C, E: Element> {
        compare: fn(&Tensor<C, E>, Builtin, &Tensor<C, E>) -> Result<Tensor<C, u8>> =
            |a, op, b| with_builtin!(op, op => a.compare(op, b)),
        compare_scalar: fn(&Tensor<C, E>, Builtin, E) -> Result<Tensor<C, u8>> =
            |x, op, scalar| with_builtin!(op, op => x.compare_scalar(op, scalar)),
        where_cond: fn(&Tensor<C, u8>, &Tensor<C, E>, &Tensor<C, E>) -> Result<Tensor<C, E>> = where_cond,
        logical_not: fn(&Tensor<C, u8>) -> Result<Tensor<C, u8>> = |x| {
            let storage = C::logical_not(x.storage(), x.layout())?;
            Ok(Tensor::from_storage(storage, x.shape().clone()))
        },
        logical: fn(&Tensor<C, u8>, bool, &Tensor<C, u8>) -> Result<Tensor<C, u8>> =
            |a, and, b| if and { a.compare(LogicalAnd, b) } else { a.compare(LogicalOr, b) },
        masked_fill: fn(&Tensor<C, E>, &Tensor<C, u8>, E) -> Result<Tensor<C, E>> = Tensor::core_masked_fill,
        triangle: fn(&Tensor<C, E>, &'static str, i64, bool) -> Result<Tensor<C, E>> = Tensor::triangle,
    }
}

/// The broadcast shape of two operands and both layouts broadcast to it.
fn broadcast_pair(op: &'static str, device: String, lhs: &Layout, rhs: &Layout) -> Result<(Shape, Layout, Layout)> {
    let shape = lhs
        .shape()
        .broadcast_with(rhs.shape())
        .ok_or_else(|| broadcast_error(op, device.clone(), lhs.shape(), rhs.shape()))?;
    check_elem_count(op, || device, &[lhs.shape(), rhs.shape(), &shape])?;
    let l = lhs.broadcast_to(&shape).expect("broadcast shape fits lhs");
    let r = rhs.broadcast_to(&shape).expect("broadcast shape fits rhs");
    Ok((shape, l, r))
}

impl<D: Device> Tensor<D, u8> {
    /// 1 where this mask is zero, 0 elsewhere. Fails only when the device
    /// cannot run the kernel.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let m = Tensor::<Cpu, u8>::from_vec(vec![0, 1, 7], [3]);
    /// assert_eq!(m.logical_not().to_vec(), vec![1, 0, 0]);
    /// ```
    #[fallible]
    pub fn logical_not(&self) -> Self {
        core_call!(D, Fns<u8>.logical_not(self.core()))
    }

    /// 1 where both masks are non-zero, broadcasting both. Fails when the
    /// shapes do not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, u8>::from_vec(vec![0, 1, 1, 5], [4]);
    /// let b = Tensor::<Cpu, u8>::from_vec(vec![1, 0, 1, 2], [4]);
    /// assert_eq!(a.logical_and(&b).to_vec(), vec![0, 0, 1, 1]);
    /// ```
    #[fallible]
    pub fn logical_and<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        u8: SameDtype<E2>,
    {
        let rhs: &Self = same_device(rhs);
        core_call!(D, Fns<u8>.logical(self.core(), true, rhs.core()))
    }

    /// 1 where either mask is non-zero, broadcasting both. Fails when the
    /// shapes do not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu, u8>::from_vec(vec![0, 1, 0, 5], [4]);
    /// let b = Tensor::<Cpu, u8>::from_vec(vec![0, 0, 1, 2], [4]);
    /// assert_eq!(a.logical_or(&b).to_vec(), vec![0, 1, 1, 1]);
    /// ```
    #[fallible]
    pub fn logical_or<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        u8: SameDtype<E2>,
    {
        let rhs: &Self = same_device(rhs);
        core_call!(D, Fns<u8>.logical(self.core(), false, rhs.core()))
    }

    /// Picks `on_true` where this mask is non-zero and `on_false` elsewhere,
    /// like `torch.where(cond, a, b)`. The three shapes broadcast together
    /// (NumPy rules); fails when they do not.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![-1.0, 2.0, -3.0], [3]);
    /// let y = x.gt_scalar(0.0).try_where_cond(&x, &Tensor::<Cpu>::scalar(0.0)).unwrap();
    /// assert_eq!(y.to_vec(), vec![0.0, 2.0, 0.0]);
    /// ```
    ///
    /// All three tensors must be on one device, checked at compile time:
    /// ```compile_fail,E0277
    /// use devtensor::{Cpu, Cuda, Tensor};
    /// fn pick(mask: &Tensor<Cpu, u8>, a: &Tensor<Cuda<0>>, b: &Tensor<Cpu>) -> Tensor<Cpu> {
    ///     mask.where_cond(a, b) // error: expected all tensors to be on the same device
    /// }
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let cond = Tensor::<Cpu, u8>::from_vec(vec![1, 0], [2, 1]);
    /// let a = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 3], [3]);
    /// let b = Tensor::<Cpu, i64>::scalar(-1);
    /// assert_eq!(cond.where_cond(&a, &b).to_vec2(), vec![vec![1, 2, 3], vec![-1, -1, -1]]);
    /// ```
    #[fallible]
    pub fn where_cond<D2: Device, D3: Device, E: Element, E3: Element>(
        &self,
        on_true: &Tensor<D2, E>,
        on_false: &Tensor<D3, E3>,
    ) -> Tensor<D, E>
    where
        D: SameDevice<D2> + SameDevice<D3>,
        E: SameDtype<E3>,
    {
        let on_true: &Tensor<D, E> = same_device(on_true);
        let on_false: &Tensor<D, E> = same_device(on_false);
        core_call!(D, Fns<E>.where_cond(self.core(), on_true.core(), on_false.core()))
    }
}

/// `on_true` where `cond` is non-zero and `on_false` elsewhere, broadcasting
/// the three: the core of [`Tensor::where_cond`].
fn where_cond<D: CoreDevice, E: Element>(
    cond: &Tensor<D, u8>,
    on_true: &Tensor<D, E>,
    on_false: &Tensor<D, E>,
) -> Result<Tensor<D, E>> {
    let shapes = [cond.shape(), on_true.shape(), on_false.shape()];
    let shape =
        shapes[0].broadcast_with(shapes[1]).and_then(|s| s.broadcast_with(shapes[2])).ok_or_else(|| Error::Shape {
            op: "where_cond",
            device: D::name(),
            shapes: shapes.iter().map(|&s| s.clone()).collect(),
            reason: "the shapes cannot be broadcast together".into(),
        })?;
    check_elem_count("where_cond", D::name, &[shapes[0], shapes[1], shapes[2], &shape])?;
    let fit = |layout: &Layout| layout.broadcast_to(&shape).expect("the broadcast shape fits every operand");
    let forward = || {
        let (cl, tl, fl) = (fit(cond.layout()), fit(on_true.layout()), fit(on_false.layout()));
        let storage = D::where_cond(cond.storage(), &cl, on_true.storage(), &tl, on_false.storage(), &fl)?;
        Ok(Tensor::from_storage(storage, shape.clone()))
    };
    autograd::track(
        "where_cond",
        &[on_true.node(), on_false.node()],
        forward,
        |_| float_rule!(E, F => where_cond_grad::<D, F>(cond.clone(), on_true.shape().clone(), on_false.shape().clone())),
    )
}

/// The gradient rule of `cond.where_cond(a, b)`: each side gets the
/// gradient where it was chosen, summed back to its own shape.
fn where_cond_grad<D: CoreDevice, F: FloatElement>(cond: Tensor<D, u8>, a: Shape, b: Shape) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, needs| {
        let zero = Tensor::<D, F>::try_scalar(F::ZERO)?;
        Ok(vec![
            needs.then(0, || cond.try_where_cond(g, &zero)?.try_sum_to_shape(&a))?,
            needs.then(1, || cond.try_where_cond(&zero, g)?.try_sum_to_shape(&b))?,
        ])
    })
}

/// `g` where `keep` is true, 0 elsewhere (0 also where `g` is NaN or
/// infinite, as PyTorch's `masked_fill` gives): how gradient rules route a
/// gradient to the elements that produced the result.
pub(crate) fn masked<D: Device, E: Element>(keep: &Tensor<D, u8>, g: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    keep.try_where_cond(g, &Tensor::<D, E>::try_scalar(E::ZERO)?)
}
