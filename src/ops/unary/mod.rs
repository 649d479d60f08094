//! Elementwise functions of one tensor: `neg`, `abs`, `relu`, `clamp`,
//! `square` on every element type, and `exp`, `log`, `sqrt`, `tanh`,
//! `sigmoid`, `powf`, `sin`, `cos`, `recip`, `erf` on floats.
//!
//! Integer results wrap like the element type's own arithmetic (`-i64::MIN`
//! is `i64::MIN`, `-1u8` is `255`); floats follow IEEE 754 as PyTorch does
//! (`log(0) = -inf`, `sqrt(-1) = NaN`, NaN in gives NaN out).

mod cpu;
mod cuda;
mod grad;

use crate::autograd::{self, as_float, float_rule};
use crate::device::{Backend, Device};
use crate::element::{Element, FloatElement};
use crate::error::{Result, or_panic};
use crate::shape::Layout;
use crate::tensor::Tensor;
use std::ops::Neg;

/// An elementwise operation defined for every [`Element`] type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp<E: Element> {
    /// `-x`, wrapping for integers.
    Neg,
    /// `|x|`, wrapping for integers (`|i64::MIN|` is `i64::MIN`).
    Abs,
    /// `max(x, 0)`; NaN stays NaN.
    Relu,
    /// `min(max(x, min), max)`, PyTorch's `clamp`: when `min > max` every
    /// element becomes `max`; NaN stays NaN.
    Clamp {
        /// Lower bound.
        min: E,
        /// Upper bound, applied last.
        max: E,
    },
    /// `x * x`, wrapping for integers.
    Square,
}

impl<E: Element> UnaryOp<E> {
    /// The operation's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Relu => "relu",
            UnaryOp::Clamp { .. } => "clamp",
            UnaryOp::Square => "square",
        }
    }
}

/// An elementwise operation defined for [`FloatElement`] types only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FloatUnaryOp<E: FloatElement> {
    /// `e^x`.
    Exp,
    /// Natural logarithm; `log(0) = -inf`, negative inputs give NaN.
    Log,
    /// Square root; negative inputs give NaN.
    Sqrt,
    /// Hyperbolic tangent.
    Tanh,
    /// `1 / (1 + e^-x)`, computed without overflow for large `|x|`.
    Sigmoid,
    /// `x^exponent`.
    Powf(E),
    /// Sine (radians).
    Sin,
    /// Cosine (radians).
    Cos,
    /// `1 / x`; `1 / 0 = inf`.
    Recip,
    /// The error function `2/√π ∫₀ˣ e^(-t²) dt`, the core of the exact GELU.
    Erf,
}

impl<E: FloatElement> FloatUnaryOp<E> {
    /// The operation's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            FloatUnaryOp::Exp => "exp",
            FloatUnaryOp::Log => "log",
            FloatUnaryOp::Sqrt => "sqrt",
            FloatUnaryOp::Tanh => "tanh",
            FloatUnaryOp::Sigmoid => "sigmoid",
            FloatUnaryOp::Powf(_) => "powf",
            FloatUnaryOp::Sin => "sin",
            FloatUnaryOp::Cos => "cos",
            FloatUnaryOp::Recip => "recip",
            FloatUnaryOp::Erf => "erf",
        }
    }
}

/// Device kernels for [`UnaryOp`]s and [`FloatUnaryOp`]s. Implemented by every
/// [`Device`].
pub trait UnaryKernel: Backend {
    /// `op(x)` for each element `layout` selects, into a new contiguous
    /// storage of `layout`'s shape.
    fn unary<E: Element>(op: UnaryOp<E>, x: &Self::Storage<E>, layout: &Layout) -> Result<Self::Storage<E>>;

    /// `op(x)` for each element `layout` selects, into a new contiguous
    /// storage of `layout`'s shape.
    fn unary_float<E: FloatElement>(
        op: FloatUnaryOp<E>,
        x: &Self::Storage<E>,
        layout: &Layout,
    ) -> Result<Self::Storage<E>>;
}

impl<D: Device, E: Element> Tensor<D, E> {
    fn try_unary(&self, op: UnaryOp<E>) -> Result<Self> {
        let forward = || Ok(Tensor::from_storage(D::unary(op, self.storage(), self.layout())?, self.shape().clone()));
        autograd::track(op.name(), &[self.node()], forward, |y| {
            float_rule!(E, F => {
                // `E` is `F`, so the round trips through `f64` are exact.
                let op = match op {
                    UnaryOp::Neg => UnaryOp::Neg,
                    UnaryOp::Abs => UnaryOp::Abs,
                    UnaryOp::Relu => UnaryOp::Relu,
                    UnaryOp::Clamp { min, max } => UnaryOp::Clamp { min: F::from_f64(min.to_f64()), max: F::from_f64(max.to_f64()) },
                    UnaryOp::Square => UnaryOp::Square,
                };
                grad::unary::<D, F>(op, as_float(self), as_float(y))
            })
        })
    }

    /// `-x` elementwise; integers wrap (`-i64::MIN == i64::MIN`, `-1u8 == 255`).
    /// Fails only when the device cannot run the kernel.
    pub fn try_neg(&self) -> Result<Self> {
        self.try_unary(UnaryOp::Neg)
    }

    /// Panicking form of [`try_neg`](Self::try_neg); also available as the `-` operator.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, -2.0], [2]);
    /// assert_eq!(x.neg().to_vec(), vec![-1.0, 2.0]);
    /// assert_eq!((-&x).to_vec(), vec![-1.0, 2.0]);
    /// let b = Tensor::<Cpu, u8>::from_vec(vec![0, 1], [2]);
    /// assert_eq!(b.neg().to_vec(), vec![0, 255]);
    /// ```
    #[track_caller]
    pub fn neg(&self) -> Self {
        or_panic(self.try_neg())
    }

    /// `|x|` elementwise; `|i64::MIN|` wraps to `i64::MIN`, as in PyTorch.
    /// Fails only when the device cannot run the kernel.
    pub fn try_abs(&self) -> Result<Self> {
        self.try_unary(UnaryOp::Abs)
    }

    /// Panicking form of [`try_abs`](Self::try_abs).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![-3, 0, 4], [3]);
    /// assert_eq!(x.abs().to_vec(), vec![3, 0, 4]);
    /// ```
    #[track_caller]
    pub fn abs(&self) -> Self {
        or_panic(self.try_abs())
    }

    /// `max(x, 0)` elementwise; NaN stays NaN. Fails only when the device
    /// cannot run the kernel.
    pub fn try_relu(&self) -> Result<Self> {
        self.try_unary(UnaryOp::Relu)
    }

    /// Panicking form of [`try_relu`](Self::try_relu).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![-1.0, 0.5, 2.0], [3]);
    /// assert_eq!(x.relu().to_vec(), vec![0.0, 0.5, 2.0]);
    /// ```
    #[track_caller]
    pub fn relu(&self) -> Self {
        or_panic(self.try_relu())
    }

    /// Limits every element to `min..=max` like `torch.clamp`: the lower
    /// bound applies first, so when `min > max` every element becomes `max`.
    /// NaN elements stay NaN. Fails only when the device cannot run the kernel.
    pub fn try_clamp(&self, min: E, max: E) -> Result<Self> {
        self.try_unary(UnaryOp::Clamp { min, max })
    }

    /// Panicking form of [`try_clamp`](Self::try_clamp).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![-5.0, 0.5, 5.0], [3]);
    /// assert_eq!(x.clamp(-1.0, 1.0).to_vec(), vec![-1.0, 0.5, 1.0]);
    /// // As in PyTorch, an empty range gives `max` everywhere.
    /// assert_eq!(x.clamp(2.0, 1.0).to_vec(), vec![1.0, 1.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn clamp(&self, min: E, max: E) -> Self {
        or_panic(self.try_clamp(min, max))
    }

    /// `x * x` elementwise; integers wrap. Fails only when the device cannot
    /// run the kernel.
    pub fn try_square(&self) -> Result<Self> {
        self.try_unary(UnaryOp::Square)
    }

    /// Panicking form of [`try_square`](Self::try_square).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, u8>::from_vec(vec![3, 16], [2]);
    /// assert_eq!(x.square().to_vec(), vec![9, 0]); // 256 wraps to 0
    /// ```
    #[track_caller]
    pub fn square(&self) -> Self {
        or_panic(self.try_square())
    }
}

/// Defines `try_x` and `x` for float-only operations without parameters.
macro_rules! float_unary {
    ($($try_name:ident, $name:ident, $op:ident, $doc:literal, $example:literal;)*) => {$(
        #[doc = $doc]
        /// Fails only when the device cannot run the kernel.
        pub fn $try_name(&self) -> Result<Self> {
            self.try_unary_float(FloatUnaryOp::$op)
        }

        #[doc = concat!("Panicking form of [`", stringify!($try_name), "`](Self::", stringify!($try_name), ").")]
        ///
        /// ```
        /// use devtensor::{Cpu, Tensor};
        #[doc = $example]
        /// ```
        #[track_caller]
        pub fn $name(&self) -> Self {
            or_panic(self.$try_name())
        }
    )*};
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    fn try_unary_float(&self, op: FloatUnaryOp<E>) -> Result<Self> {
        let forward =
            || Ok(Tensor::from_storage(D::unary_float(op, self.storage(), self.layout())?, self.shape().clone()));
        autograd::track(op.name(), &[self.node()], forward, |y| grad::unary_float(op, self.detach(), y.clone()))
    }

    float_unary! {
        try_exp, exp, Exp, "`e^x` elementwise.",
        "let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1.0], [2]);\nassert_eq!(x.exp().to_vec(), vec![1.0, std::f64::consts::E]);";
        try_log, log, Log, "Natural logarithm elementwise; `log(0) = -inf` and negative inputs give NaN.",
        "let x = Tensor::<Cpu>::from_vec(vec![1.0, 0.0], [2]);\nassert_eq!(x.log().to_vec(), vec![0.0, f32::NEG_INFINITY]);";
        try_sqrt, sqrt, Sqrt, "Square root elementwise; negative inputs give NaN.",
        "let x = Tensor::<Cpu>::from_vec(vec![4.0, -1.0], [2]);\nlet y = x.sqrt().to_vec();\nassert_eq!(y[0], 2.0);\nassert!(y[1].is_nan());";
        try_tanh, tanh, Tanh, "Hyperbolic tangent elementwise.",
        "let x = Tensor::<Cpu>::from_vec(vec![0.0, 100.0], [2]);\nassert_eq!(x.tanh().to_vec(), vec![0.0, 1.0]);";
        try_sigmoid, sigmoid, Sigmoid, "The logistic function `1 / (1 + e^-x)` elementwise, without overflow for large `|x|`.",
        "let x = Tensor::<Cpu>::from_vec(vec![0.0, -1000.0, 1000.0], [3]);\nassert_eq!(x.sigmoid().to_vec(), vec![0.5, 0.0, 1.0]);";
        try_sin, sin, Sin, "Sine elementwise (radians).",
        "let x = Tensor::<Cpu>::from_vec(vec![0.0], [1]);\nassert_eq!(x.sin().to_vec(), vec![0.0]);";
        try_cos, cos, Cos, "Cosine elementwise (radians).",
        "let x = Tensor::<Cpu>::from_vec(vec![0.0], [1]);\nassert_eq!(x.cos().to_vec(), vec![1.0]);";
        try_erf, erf, Erf, "The error function elementwise (`torch.erf`).",
        "let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, f64::INFINITY], [2]);\nassert_eq!(x.erf().to_vec(), vec![0.0, 1.0]);";
        try_recip, recip, Recip, "`1 / x` elementwise; `1 / 0 = inf` as in IEEE 754.",
        "let x = Tensor::<Cpu>::from_vec(vec![2.0, 0.0], [2]);\nassert_eq!(x.recip().to_vec(), vec![0.5, f32::INFINITY]);";
    }

    /// `x^exponent` elementwise, like `torch.pow` with a float exponent:
    /// negative bases with non-integer exponents give NaN. Fails only when
    /// the device cannot run the kernel.
    pub fn try_powf(&self, exponent: E) -> Result<Self> {
        self.try_unary_float(FloatUnaryOp::Powf(exponent))
    }

    /// Panicking form of [`try_powf`](Self::try_powf).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![2.0, 9.0], [2]);
    /// assert_eq!(x.powf(2.0).to_vec(), vec![4.0, 81.0]);
    /// assert_eq!(x.powf(0.5).to_vec()[1], 3.0);
    /// ```
    #[track_caller]
    pub fn powf(&self, exponent: E) -> Self {
        or_panic(self.try_powf(exponent))
    }
}

impl<D: Device, E: Element> Neg for &Tensor<D, E> {
    type Output = Tensor<D, E>;

    /// Same as [`Tensor::neg`].
    #[track_caller]
    fn neg(self) -> Tensor<D, E> {
        Tensor::neg(self)
    }
}

impl<D: Device, E: Element> Neg for Tensor<D, E> {
    type Output = Tensor<D, E>;

    /// Same as [`Tensor::neg`].
    #[track_caller]
    fn neg(self) -> Tensor<D, E> {
        Tensor::neg(&self)
    }
}
