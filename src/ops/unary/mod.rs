//! Elementwise functions of one tensor: `neg`, `abs`, `relu`, `clamp`,
//! `clamp_min`, `clamp_max`, `square`, `floor`, `ceil`, `round`, `trunc`,
//! `sign` on every element type; on floats `exp`, `exp2`, `expm1`, `log`,
//! `log2`, `log10`, `log1p`, `sqrt`, `rsqrt`, `powf`, `recip`, `frac`, `erf`,
//! the trigonometric functions (`sin`, `cos`, `tan`, `asin`, `acos`, `atan`)
//! and the hyperbolic ones (`sinh`, `cosh`, `tanh`, `asinh`, `acosh`,
//! `atanh`), and the activations: `sigmoid`, `silu`, `gelu`, `gelu_tanh`,
//! `leaky_relu`, `elu`, `selu`, `celu`, `softplus`, `mish`, `hardswish`,
//! `hardsigmoid`, `hardtanh`, `relu6`, `log_sigmoid`, `softsign`.
//!
//! Integer results wrap like the element type's own arithmetic (`-i64::MIN`
//! is `i64::MIN`, `-1u8` is `255`); floats follow IEEE 754 as PyTorch does
//! (`log(0) = -inf`, `sqrt(-1) = NaN`, NaN in gives NaN out).
//!
//! Each operation is a type implementing [`UnaryOp`], declared once in
//! `ops.rs`, `math.rs` or `activation.rs`: the CPU backend, the CUDA launch, autograd and the `x`/`try_x`
//! methods all come from that one definition. Your own operations use the
//! same trait and run through [`Tensor::apply_unary`], with device typing,
//! autograd and a `try_` form like the built-in ones.
//!
//! The types of `relu`, `sigmoid` and `tanh` are [`ReluOp`], [`SigmoidOp`]
//! and [`TanhOp`]: the plain names are the layers
//! [`nn::Relu`](crate::nn::Relu), [`nn::Sigmoid`](crate::nn::Sigmoid) and
//! [`nn::Tanh`](crate::nn::Tanh), and a compile error or a glob import
//! should never have to tell two `Relu`s apart.

/// [`UnaryOp::apply_f32`] for an op that is a `UnaryOp<f32>` itself: its
/// own `f32` function, so that a half-precision element rounds once.
macro_rules! apply_in_f32 {
    () => {
        #[inline(always)]
        fn apply_f32<const FMA: bool>(self, x: f32) -> f32 {
            <Self as UnaryOp<f32>>::apply_in_loop::<FMA>(self, x)
        }
    };
}

mod activation;
mod cpu;
mod cuda;
mod math;
mod ops;

pub use crate::ops::KernelSource;

pub use activation::{
    CeluOp, EluOp, HardsigmoidOp, HardswishOp, LeakyReluOp, LogSigmoidOp, MishOp, SeluOp, SoftplusOp, SoftsignOp,
};
pub use math::{
    Acos, Acosh, Asin, Asinh, Atan, Atanh, Ceil, Cosh, Exp2, Floor, Frac, Log2, Log10, Round, Sign, Sinh, Tan, Trunc,
};
pub use ops::{
    Abs, Clamp, ClampMax, ClampMin, Cos, Erf, Exp, Expm1, GeluErf, GeluTanh, Log, Log1p, Neg, Powf, Recip, ReluOp,
    Rsqrt, SigmoidOp, Silu, Sin, Sqrt, Square, TanhOp,
};

/// The former name of [`ReluOp`] (the layer is [`nn::Relu`](crate::nn::Relu)).
#[deprecated(note = "renamed `ReluOp`; `nn::Relu` is the layer")]
pub type Relu = ReluOp;
/// The former name of [`SigmoidOp`] (the layer is [`nn::Sigmoid`](crate::nn::Sigmoid)).
#[deprecated(note = "renamed `SigmoidOp`; `nn::Sigmoid` is the layer")]
pub type Sigmoid = SigmoidOp;
/// The former name of [`TanhOp`] (the layer is [`nn::Tanh`](crate::nn::Tanh)).
#[deprecated(note = "renamed `TanhOp`; `nn::Tanh` is the layer")]
pub type Tanh = TanhOp;

use crate::autograd::{self, rule, saved_output};
use crate::backend::Backend;
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::layout::Layout;
use crate::tensor::shell::{call, core_call, core_table};
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

/// An elementwise function of one tensor, declared once: the built-in ops
/// (`Exp`, `Clamp`, ...) and your own. Implement it for the element types
/// the function takes (`impl<F: FloatElement> UnaryOp<F> for MyOp`), and
/// run it with [`Tensor::apply_unary`].
///
/// From this one definition devtensor makes the CPU kernel (a vectorised,
/// parallel loop over [`apply`](Self::apply)), the CUDA launch (kernels
/// named after [`NAME`](Self::NAME) in the source [`KERNELS`](Self::KERNELS)
/// names), and the autograd node ([`backward`](Self::backward)).
///
/// A custom op with its gradient, on the CPU:
/// ```
/// use devtensor::ops::unary::{KernelSource, UnaryOp};
/// use devtensor::{Cpu, Device, FloatElement, Result, Tensor};
///
/// /// `x³`.
/// #[derive(Clone, Copy)]
/// struct Cube;
///
/// impl<F: FloatElement> UnaryOp<F> for Cube {
///     const NAME: &'static str = "cube";
///     // CPU only. With a CUDA kernel (see `KernelSource::cuda` for the contract):
///     // `unsafe { KernelSource::cuda("DT_UNARY_FLOAT(cube, x * x * x)") }`.
///     const KERNELS: KernelSource = KernelSource::NONE;
///
///     fn apply(self, x: F) -> F {
///         x * x * x
///     }
///
///     fn backward<D: Device>(self, x: &Tensor<D, F>, _y: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
///         grad.try_mul(&x.try_square()?.try_mul_scalar(F::from_f64(3.0))?)
///     }
/// }
///
/// let x = Tensor::<Cpu>::from_vec(vec![1.0, -2.0], [2]).requires_grad();
/// let y = x.apply_unary(Cube);
/// assert_eq!(y.to_vec(), vec![1.0, -8.0]);
/// let grads = y.sum().backward();
/// assert_eq!(grads.get(&x).unwrap().to_vec(), vec![3.0, 12.0]);
/// ```
pub trait UnaryOp<E: Element>: Copy + Send + Sync + 'static {
    /// The op's name: in error messages and autograd's graph, and in its
    /// CUDA kernels' names, `unary_<NAME>_<dtype>` (`unary_exp_f32`).
    /// Unique among the ops of one program.
    const NAME: &'static str;

    /// Where the CUDA kernels come from: [`KernelSource::NONE`] (the op runs
    /// on the CPU only, and fails on a GPU with an error naming it) or the
    /// CUDA source to compile with NVRTC at first use.
    const KERNELS: KernelSource = KernelSource::NONE;

    /// The function on one element.
    fn apply(self, x: E) -> E;

    /// [`apply`](Self::apply) as the CPU's vectorised loops run it, built
    /// with fused multiply-add (`FMA`, in the AVX2 and AVX-512 loops) or
    /// without. The built-in ops whose polynomials gain from it (GELU,
    /// sigmoid) override it; an op of yours has no need to. Internal, and
    /// not covered by semver.
    #[doc(hidden)]
    #[inline(always)]
    fn apply_in_loop<const FMA: bool>(self, x: E) -> E {
        self.apply(x)
    }

    /// [`apply_in_loop`](Self::apply_in_loop) for a half-precision
    /// element (`bf16`, `f16`) widened to `f32`: the CPU's half kernels
    /// compute in `f32` and round once, as PyTorch's do. The built-in ops
    /// override it with their `f32` function; by default an op computes in
    /// its own type, which is right, only less accurate for a long body.
    /// Internal, and not covered by semver.
    #[doc(hidden)]
    #[inline(always)]
    fn apply_f32<const FMA: bool>(self, x: f32) -> f32 {
        self.apply_in_loop::<FMA>(E::from_f32(x)).cast::<f32>()
    }

    /// The op's scalar parameters, passed to the CUDA kernel after its input
    /// (`a`, then `b`, in the kernel's expression): `clamp`'s bounds,
    /// `powf`'s exponent. None by default.
    fn params(self) -> Params<E> {
        Params::none()
    }

    /// The gradient with respect to the input `x`, given the result `y` and
    /// the gradient `grad` flowing into `y`. Called only on float tensors,
    /// the ones that track gradients.
    fn backward<D: Device>(self, x: &Tensor<D, E>, y: &Tensor<D, E>, grad: &Tensor<D, E>) -> Result<Tensor<D, E>>;
}

/// Up to two scalar parameters of a [`UnaryOp`], in kernel order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params<E> {
    values: [E; 2],
    len: usize,
}

impl<E: Element> Params<E> {
    /// No parameters.
    pub fn none() -> Self {
        Params { values: [E::ZERO; 2], len: 0 }
    }

    /// One parameter, `a` in the kernel.
    pub fn one(a: E) -> Self {
        Params { values: [a, E::ZERO], len: 1 }
    }

    /// Two parameters, `a` and `b` in the kernel.
    pub fn two(a: E, b: E) -> Self {
        Params { values: [a, b], len: 2 }
    }

    /// The parameters, in order.
    pub fn as_slice(&self) -> &[E] {
        &self.values[..self.len]
    }
}

/// Device kernels for [`UnaryOp`]s. Implemented by the core
/// devices ([`CoreDevice`]): `Cpu`, and one for every GPU.
pub trait UnaryKernel: Backend {
    /// `op` on each element `layout` selects, into a new contiguous storage
    /// of `layout`'s shape.
    fn unary<E: Element, Op: UnaryOp<E>>(op: Op, x: &Self::Storage<E>, layout: &Layout) -> Result<Self::Storage<E>>;
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// Applies `op` to every element, recording its gradient when `self`
    /// tracks one: how your own [`UnaryOp`] runs (the built-in ops run the
    /// same code, compiled once inside devtensor). Fails when the device
    /// cannot run the op (a GPU without its kernel, or out of memory).
    ///
    /// See [`UnaryOp`] for an example.
    #[fallible]
    pub fn apply_unary<Op: UnaryOp<E>>(&self, op: Op) -> Self {
        call::<D, _>(|| self.core().unary(op))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// `op` on every element, recorded for autograd: the core of every
    /// unary op.
    pub(crate) fn unary<Op: UnaryOp<E>>(&self, op: Op) -> Result<Self> {
        let forward = || Ok(Tensor::from_storage(D::unary(op, self.storage(), self.layout())?, self.shape().clone()));
        autograd::track(Op::NAME, &[self.node()], forward, |y| {
            let (x, y) = (self.clone(), y.detach());
            rule(move |grad: &Tensor<D, E>, _| Ok(vec![Some(op.backward(&x, &saved_output(&y), grad)?)]))
        })
    }
}

/// The built-in unary ops of every element type, as the core's table
/// takes them: one value that names the op and holds its parameters.
#[derive(Clone, Copy)]
pub(crate) enum Builtin<E> {
    Neg,
    Abs,
    Relu,
    Clamp(Clamp<E>),
    ClampMin(ClampMin<E>),
    ClampMax(ClampMax<E>),
    Square,
    Floor,
    Ceil,
    Round,
    Trunc,
    Sign,
}

impl<E: Element> Builtin<E> {
    fn run<C: CoreDevice>(self, x: &Tensor<C, E>) -> Result<Tensor<C, E>> {
        match self {
            Builtin::Neg => x.unary(Neg),
            Builtin::Abs => x.unary(Abs),
            Builtin::Relu => x.unary(ReluOp),
            Builtin::Clamp(op) => x.unary(op),
            Builtin::ClampMin(op) => x.unary(op),
            Builtin::ClampMax(op) => x.unary(op),
            Builtin::Square => x.unary(Square),
            Builtin::Floor => x.unary(Floor),
            Builtin::Ceil => x.unary(Ceil),
            Builtin::Round => x.unary(Round),
            Builtin::Trunc => x.unary(Trunc),
            Builtin::Sign => x.unary(Sign),
        }
    }
}

/// The built-in unary ops of the float types.
#[derive(Clone, Copy)]
pub(crate) enum FloatBuiltin<F> {
    Exp,
    Expm1,
    Log,
    Log1p,
    Sqrt,
    Rsqrt,
    Tanh,
    Sigmoid,
    Silu,
    Gelu,
    GeluTanh,
    Sin,
    Cos,
    Erf,
    Recip,
    Powf(Powf<F>),
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Log2,
    Log10,
    Exp2,
    Frac,
    LeakyRelu(LeakyReluOp<F>),
    Elu(EluOp<F>),
    Selu,
    Celu(CeluOp<F>),
    Softplus(SoftplusOp<F>),
    Mish,
    Hardswish,
    Hardsigmoid,
    LogSigmoid,
    Softsign,
}

impl<F: FloatElement> FloatBuiltin<F> {
    fn run<C: CoreDevice>(self, x: &Tensor<C, F>) -> Result<Tensor<C, F>> {
        match self {
            FloatBuiltin::Exp => x.unary(Exp),
            FloatBuiltin::Expm1 => x.unary(Expm1),
            FloatBuiltin::Log => x.unary(Log),
            FloatBuiltin::Log1p => x.unary(Log1p),
            FloatBuiltin::Sqrt => x.unary(Sqrt),
            FloatBuiltin::Rsqrt => x.unary(Rsqrt),
            FloatBuiltin::Tanh => x.unary(TanhOp),
            FloatBuiltin::Sigmoid => x.unary(SigmoidOp),
            FloatBuiltin::Silu => x.unary(Silu),
            FloatBuiltin::Gelu => x.unary(GeluErf),
            FloatBuiltin::GeluTanh => x.unary(GeluTanh),
            FloatBuiltin::Sin => x.unary(Sin),
            FloatBuiltin::Cos => x.unary(Cos),
            FloatBuiltin::Erf => x.unary(Erf),
            FloatBuiltin::Recip => x.unary(Recip),
            FloatBuiltin::Powf(op) => x.unary(op),
            FloatBuiltin::Tan => x.unary(Tan),
            FloatBuiltin::Asin => x.unary(Asin),
            FloatBuiltin::Acos => x.unary(Acos),
            FloatBuiltin::Atan => x.unary(Atan),
            FloatBuiltin::Sinh => x.unary(Sinh),
            FloatBuiltin::Cosh => x.unary(Cosh),
            FloatBuiltin::Asinh => x.unary(Asinh),
            FloatBuiltin::Acosh => x.unary(Acosh),
            FloatBuiltin::Atanh => x.unary(Atanh),
            FloatBuiltin::Log2 => x.unary(Log2),
            FloatBuiltin::Log10 => x.unary(Log10),
            FloatBuiltin::Exp2 => x.unary(Exp2),
            FloatBuiltin::Frac => x.unary(Frac),
            FloatBuiltin::LeakyRelu(op) => x.unary(op),
            FloatBuiltin::Elu(op) => x.unary(op),
            FloatBuiltin::Selu => x.unary(SeluOp),
            FloatBuiltin::Celu(op) => x.unary(op),
            FloatBuiltin::Softplus(op) => x.unary(op),
            FloatBuiltin::Mish => x.unary(MishOp),
            FloatBuiltin::Hardswish => x.unary(HardswishOp),
            FloatBuiltin::Hardsigmoid => x.unary(HardsigmoidOp),
            FloatBuiltin::LogSigmoid => x.unary(LogSigmoidOp),
            FloatBuiltin::Softsign => x.unary(SoftsignOp),
        }
    }
}

core_table! {
    /// The core's unary ops of every element type.
    pub(crate) struct Fns<C, E: Element> {
        unary: fn(&Tensor<C, E>, Builtin<E>) -> Result<Tensor<C, E>> = |x, op| op.run(x),
    }
}

core_table! {
    /// The core's unary ops of the float types.
    pub(crate) struct FloatFns<C, F: FloatElement> {
        unary: fn(&Tensor<C, F>, FloatBuiltin<F>) -> Result<Tensor<C, F>> = |x, op| op.run(x),
    }
}

/// Defines `x` and `try_x` for each unary op: the first doc block
/// describes it, the second holds its example.
macro_rules! unary_methods {
    ($Table:ident<$E:ident>: $(
        $(#[$doc:meta])*
        $try_name:ident, $name:ident($($arg:ident: $ty:ty),*) => $op:expr,
        $(#[$example:meta])*
    ;)*) => {$(
        $(#[$doc])*
        /// Fails only when the device cannot run the kernel.
        ///
        $(#[$example])*
        #[fallible($try_name)]
        pub fn $name(&self $(, $arg: $ty)*) -> Self {
            core_call!(D, $Table<$E>.unary(self.core(), $op))
        }
    )*};
}

impl<D: Device, E: Element> Tensor<D, E> {
    unary_methods! { Fns<E>:
        /// `-x` elementwise; integers wrap (`-i64::MIN == i64::MIN`, `-1u8 == 255`).
        try_neg, neg() => Builtin::Neg,
        /// Also available as the `-` operator.
        ///
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![1.0, -2.0], [2]);
        /// assert_eq!(x.neg().to_vec(), vec![-1.0, 2.0]);
        /// assert_eq!((-&x).to_vec(), vec![-1.0, 2.0]);
        /// let b = Tensor::<Cpu, u8>::from_vec(vec![0, 1], [2]);
        /// assert_eq!(b.neg().to_vec(), vec![0, 255]);
        /// ```
        ;
        /// `|x|` elementwise; `|i64::MIN|` wraps to `i64::MIN`, as in PyTorch.
        try_abs, abs() => Builtin::Abs,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, i64>::from_vec(vec![-3, 0, 4], [3]);
        /// assert_eq!(x.abs().to_vec(), vec![3, 0, 4]);
        /// ```
        ;
        /// `max(x, 0)` elementwise; NaN stays NaN.
        try_relu, relu() => Builtin::Relu,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-1.0, 0.5, 2.0], [3]);
        /// assert_eq!(x.relu().to_vec(), vec![0.0, 0.5, 2.0]);
        /// ```
        ;
        /// Limits every element to `min..=max` like `torch.clamp`: the lower
        /// bound applies first, so when `min > max` every element becomes
        /// `max`. NaN elements stay NaN.
        try_clamp, clamp(min: E, max: E) => Builtin::Clamp(Clamp { min, max }),
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-5.0, 0.5, 5.0], [3]);
        /// assert_eq!(x.clamp(-1.0, 1.0).to_vec(), vec![-1.0, 0.5, 1.0]);
        /// // As in PyTorch, an empty range gives `max` everywhere.
        /// assert_eq!(x.clamp(2.0, 1.0).to_vec(), vec![1.0, 1.0, 1.0]);
        /// ```
        ;
        /// `torch.clamp(x, min=min)` (`torch.clamp_min`): every element at
        /// least `min`; NaN elements stay NaN.
        try_clamp_min, clamp_min(min: E) => Builtin::ClampMin(ClampMin { min }),
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-5.0, 0.5, f32::NAN], [3]);
        /// let y = x.clamp_min(0.0).to_vec();
        /// assert_eq!(y[..2], [0.0, 0.5]);
        /// assert!(y[2].is_nan());
        /// let n = Tensor::<Cpu, i64>::from_vec(vec![1, 5, 9], [3]);
        /// assert_eq!(n.clamp_min(3).to_vec(), vec![3, 5, 9]);
        /// ```
        ;
        /// `torch.clamp(x, max=max)` (`torch.clamp_max`): every element at
        /// most `max`; NaN elements stay NaN.
        try_clamp_max, clamp_max(max: E) => Builtin::ClampMax(ClampMax { max }),
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-5.0, 0.5, 5.0], [3]);
        /// assert_eq!(x.clamp_max(1.0).to_vec(), vec![-5.0, 0.5, 1.0]);
        /// ```
        ;
        /// `x * x` elementwise; integers wrap.
        try_square, square() => Builtin::Square,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, u8>::from_vec(vec![3, 16], [2]);
        /// assert_eq!(x.square().to_vec(), vec![9, 0]); // 256 wraps to 0
        /// ```
        ;
        /// `torch.floor`: the largest integer not above each element;
        /// integers are unchanged. Its gradient is zero.
        try_floor, floor() => Builtin::Floor,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-1.5, 0.5, 2.0], [3]);
        /// assert_eq!(x.floor().to_vec(), vec![-2.0, 0.0, 2.0]);
        /// ```
        ;
        /// `torch.ceil`: the smallest integer not below each element;
        /// integers are unchanged. Its gradient is zero.
        try_ceil, ceil() => Builtin::Ceil,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-1.5, 0.5, 2.0], [3]);
        /// assert_eq!(x.ceil().to_vec(), vec![-1.0, 1.0, 2.0]);
        /// ```
        ;
        /// `torch.round`: the nearest integer, halves to the even one, as
        /// PyTorch (`round(0.5) = 0`, `round(1.5) = 2`, `round(-0.5) = -0.0`);
        /// integers are unchanged. Its gradient is zero.
        try_round, round() => Builtin::Round,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![0.5, 1.5, 2.5, -0.7], [4]);
        /// assert_eq!(x.round().to_vec(), vec![0.0, 2.0, 2.0, -1.0]);
        /// ```
        ;
        /// `torch.trunc` (`torch.fix`): each element rounded toward zero;
        /// integers are unchanged. Its gradient is zero.
        try_trunc, trunc() => Builtin::Trunc,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-1.7, 1.7], [2]);
        /// assert_eq!(x.trunc().to_vec(), vec![-1.0, 1.0]);
        /// ```
        ;
        /// `torch.sign`: `1` where positive, `-1` where negative, `0`
        /// elsewhere; as in PyTorch 2.15 both float zeros give `+0.0` and
        /// NaN gives `0`. Its gradient is zero.
        try_sign, sign() => Builtin::Sign,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-3.0, 0.0, 2.5, f32::NAN], [4]);
        /// assert_eq!(x.sign().to_vec(), vec![-1.0, 0.0, 1.0, 0.0]);
        /// let n = Tensor::<Cpu, i64>::from_vec(vec![-7, 0, 9], [3]);
        /// assert_eq!(n.sign().to_vec(), vec![-1, 0, 1]);
        /// ```
        ;
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    unary_methods! { FloatFns<E>:
        /// `e^x` elementwise.
        try_exp, exp() => FloatBuiltin::Exp,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1.0], [2]);
        /// assert_eq!(x.exp().to_vec(), vec![1.0, std::f64::consts::E]);
        /// ```
        ;
        /// `e^x - 1` elementwise, exact for small `x`, where `x.exp() - 1`
        /// loses every digit (`torch.expm1`).
        try_expm1, expm1() => FloatBuiltin::Expm1,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1e-20, f64::NEG_INFINITY], [3]);
        /// assert_eq!(x.expm1().to_vec(), vec![0.0, 1e-20, -1.0]);
        /// ```
        ;
        /// Natural logarithm elementwise; `log(0) = -inf` and negative inputs give NaN.
        try_log, log() => FloatBuiltin::Log,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 0.0], [2]);
        /// assert_eq!(x.log().to_vec(), vec![0.0, f32::NEG_INFINITY]);
        /// ```
        ;
        /// `log(1 + x)` elementwise, exact for small `x`, where `(1 + x).log()`
        /// loses every digit (`torch.log1p`).
        try_log1p, log1p() => FloatBuiltin::Log1p,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1e-20, -1.0], [3]);
        /// assert_eq!(x.log1p().to_vec(), vec![0.0, 1e-20, f64::NEG_INFINITY]);
        /// ```
        ;
        /// Square root elementwise; negative inputs give NaN.
        try_sqrt, sqrt() => FloatBuiltin::Sqrt,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![4.0, -1.0], [2]);
        /// let y = x.sqrt().to_vec();
        /// assert_eq!(y[0], 2.0);
        /// assert!(y[1].is_nan());
        /// ```
        ;
        /// `1 / √x` elementwise (`torch.rsqrt`): `rsqrt(0) = inf`,
        /// `rsqrt(-0.0) = -inf`, `rsqrt(inf) = 0`, negative inputs give NaN.
        try_rsqrt, rsqrt() => FloatBuiltin::Rsqrt,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![4.0, 0.0, -0.0, f32::INFINITY, -1.0], [5]);
        /// let y = x.rsqrt().to_vec();
        /// assert_eq!(y[..4], [0.5, f32::INFINITY, f32::NEG_INFINITY, 0.0]);
        /// assert!(y[4].is_nan());
        /// ```
        ;
        /// Hyperbolic tangent elementwise.
        try_tanh, tanh() => FloatBuiltin::Tanh,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![0.0, 100.0], [2]);
        /// assert_eq!(x.tanh().to_vec(), vec![0.0, 1.0]);
        /// ```
        ;
        /// The logistic function `1 / (1 + e^-x)` elementwise, without overflow for large `|x|`.
        try_sigmoid, sigmoid() => FloatBuiltin::Sigmoid,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![0.0, -1000.0, 1000.0], [3]);
        /// assert_eq!(x.sigmoid().to_vec(), vec![0.5, 0.0, 1.0]);
        /// ```
        ;
        /// SiLU (swish) elementwise, `x * sigmoid(x)`, the activation of
        /// many transformers' feed-forward blocks (`torch.nn.functional.silu`).
        try_silu, silu() => FloatBuiltin::Silu,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![0.0, 1000.0, -1000.0], [3]);
        /// assert_eq!(x.silu().to_vec(), vec![0.0, 1000.0, -0.0]);
        /// ```
        ;
        /// GELU elementwise, `x · Φ(x)` with `Φ` the standard normal CDF,
        /// exactly: `x/2 · (1 + erf(x/√2))` (`torch.nn.functional.gelu`),
        /// in one pass. [`nn::Gelu`](crate::nn::Gelu) is the layer.
        try_gelu, gelu() => FloatBuiltin::Gelu,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1.0, -40.0], [3]);
        /// let y = x.gelu().to_vec();
        /// assert!(y[0] == 0.0 && (y[1] - 0.8413447460685429).abs() < 1e-15 && y[2] == 0.0);
        /// ```
        ;
        /// GELU with PyTorch's tanh approximation elementwise,
        /// `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`
        /// (`torch.nn.functional.gelu(x, approximate="tanh")`), in one pass.
        try_gelu_tanh, gelu_tanh() => FloatBuiltin::GeluTanh,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1.0], [2]);
        /// let y = x.gelu_tanh().to_vec();
        /// assert!(y[0] == 0.0 && (y[1] - 0.8411919906082768).abs() < 1e-15);
        /// ```
        ;
        /// Sine elementwise (radians).
        try_sin, sin() => FloatBuiltin::Sin,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![0.0], [1]);
        /// assert_eq!(x.sin().to_vec(), vec![0.0]);
        /// ```
        ;
        /// Cosine elementwise (radians).
        try_cos, cos() => FloatBuiltin::Cos,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![0.0], [1]);
        /// assert_eq!(x.cos().to_vec(), vec![1.0]);
        /// ```
        ;
        /// The error function elementwise (`torch.erf`).
        try_erf, erf() => FloatBuiltin::Erf,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, f64::INFINITY], [2]);
        /// assert_eq!(x.erf().to_vec(), vec![0.0, 1.0]);
        /// ```
        ;
        /// `1 / x` elementwise; `1 / 0 = inf` as in IEEE 754.
        try_recip, recip() => FloatBuiltin::Recip,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![2.0, 0.0], [2]);
        /// assert_eq!(x.recip().to_vec(), vec![0.5, f32::INFINITY]);
        /// ```
        ;
        /// `x^exponent` elementwise, like `torch.pow` with a float exponent:
        /// negative bases with non-integer exponents give NaN.
        try_powf, powf(exponent: E) => FloatBuiltin::Powf(Powf { exponent }),
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![2.0, 9.0], [2]);
        /// assert_eq!(x.powf(2.0).to_vec(), vec![4.0, 81.0]);
        /// assert_eq!(x.powf(0.5).to_vec()[1], 3.0);
        /// ```
        ;
        /// The tangent elementwise (radians), `torch.tan`.
        try_tan, tan() => FloatBuiltin::Tan,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, std::f64::consts::FRAC_PI_4], [2]);
        /// let y = x.tan().to_vec();
        /// assert!(y[0] == 0.0 && (y[1] - 1.0).abs() < 1e-15);
        /// ```
        ;
        /// The inverse sine elementwise, `torch.asin` (`arcsin`): NaN outside `[-1, 1]`.
        try_asin, asin() => FloatBuiltin::Asin,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1.0, 2.0], [3]);
        /// let y = x.asin().to_vec();
        /// assert!(y[0] == 0.0 && y[1] == std::f64::consts::FRAC_PI_2 && y[2].is_nan());
        /// ```
        ;
        /// The inverse cosine elementwise, `torch.acos` (`arccos`): NaN outside `[-1, 1]`.
        try_acos, acos() => FloatBuiltin::Acos,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 0.0], [2]);
        /// assert_eq!(x.acos().to_vec(), vec![0.0, std::f64::consts::FRAC_PI_2]);
        /// ```
        ;
        /// The inverse tangent elementwise, `torch.atan` (`arctan`).
        try_atan, atan() => FloatBuiltin::Atan,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, f64::INFINITY], [2]);
        /// assert_eq!(x.atan().to_vec(), vec![0.0, std::f64::consts::FRAC_PI_2]);
        /// ```
        ;
        /// The hyperbolic sine elementwise, `torch.sinh`.
        try_sinh, sinh() => FloatBuiltin::Sinh,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1000.0], [2]);
        /// assert_eq!(x.sinh().to_vec(), vec![0.0, f64::INFINITY]);
        /// ```
        ;
        /// The hyperbolic cosine elementwise, `torch.cosh`.
        try_cosh, cosh() => FloatBuiltin::Cosh,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, -1000.0], [2]);
        /// assert_eq!(x.cosh().to_vec(), vec![1.0, f64::INFINITY]);
        /// ```
        ;
        /// The inverse hyperbolic sine elementwise, `torch.asinh` (`arcsinh`).
        try_asinh, asinh() => FloatBuiltin::Asinh,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, f64::NEG_INFINITY], [2]);
        /// assert_eq!(x.asinh().to_vec(), vec![0.0, f64::NEG_INFINITY]);
        /// ```
        ;
        /// The inverse hyperbolic cosine elementwise, `torch.acosh`
        /// (`arccosh`): NaN below 1.
        try_acosh, acosh() => FloatBuiltin::Acosh,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 0.5], [2]);
        /// let y = x.acosh().to_vec();
        /// assert!(y[0] == 0.0 && y[1].is_nan());
        /// ```
        ;
        /// The inverse hyperbolic tangent elementwise, `torch.atanh`
        /// (`arctanh`): `±inf` at `±1`, NaN beyond.
        try_atanh, atanh() => FloatBuiltin::Atanh,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1.0, -1.0], [3]);
        /// assert_eq!(x.atanh().to_vec(), vec![0.0, f64::INFINITY, f64::NEG_INFINITY]);
        /// ```
        ;
        /// The base-2 logarithm elementwise, `torch.log2`.
        try_log2, log2() => FloatBuiltin::Log2,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![8.0, 0.5, 0.0], [3]);
        /// assert_eq!(x.log2().to_vec(), vec![3.0, -1.0, f32::NEG_INFINITY]);
        /// ```
        ;
        /// The base-10 logarithm elementwise, `torch.log10`.
        try_log10, log10() => FloatBuiltin::Log10,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![1000.0, 0.01], [2]);
        /// assert_eq!(x.log10().to_vec(), vec![3.0, -2.0]);
        /// ```
        ;
        /// `2^x` elementwise, `torch.exp2`.
        try_exp2, exp2() => FloatBuiltin::Exp2,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![3.0, -1.0], [2]);
        /// assert_eq!(x.exp2().to_vec(), vec![8.0, 0.5]);
        /// ```
        ;
        /// The fractional part `x - trunc(x)` elementwise, with `x`'s sign,
        /// `torch.frac`; NaN for infinities. Its gradient is 1.
        try_frac, frac() => FloatBuiltin::Frac,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![2.75, -1.25], [2]);
        /// assert_eq!(x.frac().to_vec(), vec![0.75, -0.25]);
        /// ```
        ;
        /// Leaky ReLU elementwise, `x` where positive and
        /// `negative_slope · x` elsewhere, `F.leaky_relu(x, negative_slope)`
        /// (PyTorch's default slope is 0.01). [`nn::LeakyRelu`](crate::nn::LeakyRelu) is the layer.
        try_leaky_relu, leaky_relu(negative_slope: E) => FloatBuiltin::LeakyRelu(LeakyReluOp { negative_slope }),
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-2.0, 3.0], [2]);
        /// assert_eq!(x.leaky_relu(0.25).to_vec(), vec![-0.5, 3.0]);
        /// ```
        ;
        /// ELU elementwise, `x` where positive and `alpha · (e^x - 1)`
        /// elsewhere, `F.elu(x, alpha)` (PyTorch's default `alpha` is 1).
        /// [`nn::Elu`](crate::nn::Elu) is the layer.
        try_elu, elu(alpha: E) => FloatBuiltin::Elu(EluOp { alpha }),
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![2.0, f64::NEG_INFINITY], [2]);
        /// assert_eq!(x.elu(1.5).to_vec(), vec![2.0, -1.5]);
        /// ```
        ;
        /// SELU elementwise, `scale · elu(x, alpha)` with PyTorch's
        /// constants (`alpha = 1.6732632423543772`,
        /// `scale = 1.0507009873554805`), `F.selu`.
        try_selu, selu() => FloatBuiltin::Selu,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, f64::NEG_INFINITY], [2]);
        /// let y = x.selu().to_vec();
        /// assert!((y[0] - 1.0507009873554805).abs() < 1e-15 && (y[1] + 1.7580993408473766).abs() < 1e-15);
        /// ```
        ;
        /// CELU elementwise, `x` where positive and `alpha · (e^(x/alpha) - 1)`
        /// elsewhere, `F.celu(x, alpha)` (PyTorch's default `alpha` is 1).
        try_celu, celu(alpha: E) => FloatBuiltin::Celu(CeluOp { alpha }),
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![2.0, f64::NEG_INFINITY], [2]);
        /// assert_eq!(x.celu(0.5).to_vec(), vec![2.0, -0.5]);
        /// ```
        ;
        /// Softplus elementwise, `log(1 + e^(beta · x)) / beta`, and `x`
        /// itself where `beta · x > threshold`, `F.softplus(x, beta,
        /// threshold)` (PyTorch's defaults are `beta = 1`, `threshold = 20`).
        try_softplus, softplus(beta: E, threshold: E) => FloatBuiltin::Softplus(SoftplusOp { beta, threshold }),
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 30.0, -800.0], [3]);
        /// assert_eq!(x.softplus(1.0, 20.0).to_vec(), vec![std::f64::consts::LN_2, 30.0, 0.0]);
        /// ```
        ;
        /// Mish elementwise, `x · tanh(softplus(x))`, `F.mish`.
        try_mish, mish() => FloatBuiltin::Mish,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 100.0], [2]);
        /// assert_eq!(x.mish().to_vec(), vec![0.0, 100.0]);
        /// ```
        ;
        /// Hardswish elementwise, `x · min(max(x + 3, 0), 6) / 6`, `F.hardswish`.
        try_hardswish, hardswish() => FloatBuiltin::Hardswish,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-4.0, 0.0, 1.5, 4.0], [4]);
        /// assert_eq!(x.hardswish().to_vec(), vec![-0.0, 0.0, 1.125, 4.0]);
        /// ```
        ;
        /// Hardsigmoid elementwise, `min(max(x + 3, 0), 6) / 6`, `F.hardsigmoid`.
        try_hardsigmoid, hardsigmoid() => FloatBuiltin::Hardsigmoid,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-4.0, 0.0, 1.5, 4.0], [4]);
        /// assert_eq!(x.hardsigmoid().to_vec(), vec![0.0, 0.5, 0.75, 1.0]);
        /// ```
        ;
        /// `log(sigmoid(x))` elementwise without overflow at either end,
        /// `F.logsigmoid`.
        try_log_sigmoid, log_sigmoid() => FloatBuiltin::LogSigmoid,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, -1000.0, 1000.0], [3]);
        /// assert_eq!(x.log_sigmoid().to_vec(), vec![-std::f64::consts::LN_2, -1000.0, 0.0]);
        /// ```
        ;
        /// Softsign elementwise, `x / (1 + |x|)`, `F.softsign`.
        try_softsign, softsign() => FloatBuiltin::Softsign,
        /// ```
        /// use devtensor::{Cpu, Tensor};
        /// let x = Tensor::<Cpu>::from_vec(vec![-3.0, 1.0], [2]);
        /// assert_eq!(x.softsign().to_vec(), vec![-0.75, 0.5]);
        /// ```
        ;
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// `F.hardtanh(x, min_val, max_val)`: [`clamp`](Self::clamp), whose
    /// gradient is PyTorch's for hardtanh too (0 at and beyond the bounds).
    /// PyTorch's defaults are -1 and 1.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![-3.0, 0.5, 3.0], [3]);
    /// assert_eq!(x.hardtanh(-1.0, 1.0).to_vec(), vec![-1.0, 0.5, 1.0]);
    /// ```
    #[fallible]
    pub fn hardtanh(&self, min_val: E, max_val: E) -> Self {
        self.try_clamp(min_val, max_val)
    }

    /// `F.relu6`: `min(max(x, 0), 6)`, as PyTorch computes it (through
    /// hardtanh, so the gradient is 0 at 0 and at 6).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![-3.0, 0.5, 9.0], [3]);
    /// assert_eq!(x.relu6().to_vec(), vec![0.0, 0.5, 6.0]);
    /// ```
    #[fallible]
    pub fn relu6(&self) -> Self {
        self.try_clamp(E::ZERO, E::from_f64(6.0))
    }
}

impl<D: Device, E: Element> std::ops::Neg for &Tensor<D, E> {
    type Output = Tensor<D, E>;

    /// Same as [`Tensor::neg`].
    #[track_caller]
    fn neg(self) -> Tensor<D, E> {
        Tensor::neg(self)
    }
}

impl<D: Device, E: Element> std::ops::Neg for Tensor<D, E> {
    type Output = Tensor<D, E>;

    /// Same as [`Tensor::neg`].
    #[track_caller]
    fn neg(self) -> Tensor<D, E> {
        Tensor::neg(&self)
    }
}
