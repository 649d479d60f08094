//! [`SForward`]: static layers chained in a tuple, the output type of each
//! computed from the one before, PyTorch's `nn.Sequential` on static shapes.

use super::dim::ConvOut;
use super::dim::{Const, Dim, Prod, StaticDim};
use super::layers::{SAvgPool2d, SConv2d, SFlatten, SLinear, SMaxPool2d};
use super::shape::StaticShape;
use super::tensor::STensor;
use crate::element::FloatElement;
use crate::error::Result;
use crate::nn::{Gelu, Relu, Sigmoid, Tanh};
use crate::tensor::{Device, SameDevice};
use devtensor_macros::fallible;

/// A layer that maps a static tensor `X` to another, its output shape
/// computed by the compiler. Tuples of such layers are one too, applied
/// first to last, so that a whole model is a type and its sizes are checked
/// end to end:
///
/// ```
/// use devtensor::nn::{Module, Relu};
/// use devtensor::static_shapes::{Const, SConv2d, SFlatten, SForward, SLinear, SMaxPool2d, STensor};
/// use devtensor::{Cpu, Tensor};
/// // Seed 002's model on one-channel 8x8 images: 16 * 4 * 4 = 256 features.
/// let model = (SConv2d::<Cpu, 1, 16, 3, 1, 1>::new(), Relu, SMaxPool2d::<2, 2>, SFlatten, SLinear::<Cpu, 256, 10>::new());
/// let x: STensor<Cpu, (usize, Const<1>, Const<8>, Const<8>)> = Tensor::<Cpu>::zeros([5, 1, 8, 8]).try_static()?;
/// let logits: STensor<Cpu, (usize, Const<10>)> = model.forward(&x);
/// assert_eq!(logits.dynamic().dims(), &[5, 10]);
/// assert_eq!(model.num_parameters(), 16 * 9 + 16 + 256 * 10 + 10);
/// # Ok::<(), devtensor::Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot take a `{X}`",
    label = "this layer does not take a `{X}`",
    note = "a static layer takes a static tensor (`STensor`) of its own device whose rank fits the layer: \
            `[B, F]` for linear layers, `[B, C, H, W]` for convolutions and pooling"
)]
pub trait SForward<X> {
    /// The static tensor the layer returns.
    type Output;

    /// The layer applied to `x`.
    #[fallible]
    fn forward(&self, x: &X) -> Self::Output;
}

impl<D: Device, D2: Device, const IN: usize, const OUT: usize, B: Dim, F: Dim, E: FloatElement>
    SForward<STensor<D2, (B, F), E>> for SLinear<D, IN, OUT, E>
where
    D: SameDevice<D2>,
{
    type Output = STensor<D, (B, Const<OUT>), E>;

    fn try_forward(&self, x: &STensor<D2, (B, F), E>) -> Result<Self::Output> {
        SLinear::try_forward(self, x)
    }
}

impl<
    D: Device,
    D2: Device,
    const C: usize,
    const O: usize,
    const K: usize,
    const S: usize,
    const P: usize,
    const DL: usize,
    B: Dim,
    CI: Dim,
    H: StaticDim,
    W: StaticDim,
    E: FloatElement,
> SForward<STensor<D2, (B, CI, H, W), E>> for SConv2d<D, C, O, K, S, P, DL, E>
where
    D: SameDevice<D2>,
{
    type Output = STensor<D, (B, Const<O>, ConvOut<H, K, S, P, DL>, ConvOut<W, K, S, P, DL>), E>;

    fn try_forward(&self, x: &STensor<D2, (B, CI, H, W), E>) -> Result<Self::Output> {
        SConv2d::try_forward(self, x)
    }
}

/// `SForward` for a pooling layer through its inherent method.
macro_rules! pool_forward {
    ($($name:ident),*) => {$(
        impl<D: Device, const K: usize, const S: usize, const P: usize, B: Dim, C: Dim, H: StaticDim, W: StaticDim, E: FloatElement>
            SForward<STensor<D, (B, C, H, W), E>> for $name<K, S, P>
        {
            type Output = STensor<D, (B, C, ConvOut<H, K, S, P, 1>, ConvOut<W, K, S, P, 1>), E>;

            fn try_forward(&self, x: &STensor<D, (B, C, H, W), E>) -> Result<Self::Output> {
                $name::try_forward(self, x)
            }
        }
    )*};
}

pool_forward!(SMaxPool2d, SAvgPool2d);

impl<D: Device, B: Dim, C: StaticDim, H: StaticDim, W: StaticDim, E: FloatElement> SForward<STensor<D, (B, C, H, W), E>>
    for SFlatten
{
    type Output = STensor<D, (B, Prod<C, Prod<H, W>>), E>;

    fn try_forward(&self, x: &STensor<D, (B, C, H, W), E>) -> Result<Self::Output> {
        x.try_flatten()
    }
}

impl<D: Device, B: Dim, C: StaticDim, L: StaticDim, E: FloatElement> SForward<STensor<D, (B, C, L), E>> for SFlatten {
    type Output = STensor<D, (B, Prod<C, L>), E>;

    fn try_forward(&self, x: &STensor<D, (B, C, L), E>) -> Result<Self::Output> {
        x.try_flatten()
    }
}

/// `SForward` for the parameterless layers of [`nn`](crate::nn), which keep
/// the shape.
macro_rules! shape_preserving_forward {
    ($($layer:ty),*) => {$(
        impl<D: Device, S: StaticShape, E: FloatElement> SForward<STensor<D, S, E>> for $layer {
            type Output = STensor<D, S, E>;

            fn try_forward(&self, x: &STensor<D, S, E>) -> Result<Self::Output> {
                <$layer>::try_forward(self, x.dynamic())?.try_static()
            }
        }
    )*};
}

shape_preserving_forward!(Relu, Sigmoid, Tanh, Gelu);

/// `SForward` for a tuple of layers, each fed the previous one's output.
/// `Y*` name the intermediate types, which the compiler computes.
macro_rules! tuple_forward {
    ($($out:ident; $first:ident $first_out:ident 0 $(, $layer:ident $input:ident $output:ident $index:tt)*;)*) => {$(
        impl<X, $first, $first_out, $($layer, $output),*> SForward<X> for ($first, $($layer,)*)
        where
            $first: SForward<X, Output = $first_out>,
            $($layer: SForward<$input, Output = $output>,)*
        {
            type Output = $out;

            fn try_forward(&self, x: &X) -> Result<$out> {
                let y = self.0.try_forward(x)?;
                $(let y = self.$index.try_forward(&y)?;)*
                Ok(y)
            }
        }
    )*};
}

tuple_forward! {
    Y0; A Y0 0;
    Y1; A Y0 0, B Y0 Y1 1;
    Y2; A Y0 0, B Y0 Y1 1, C Y1 Y2 2;
    Y3; A Y0 0, B Y0 Y1 1, C Y1 Y2 2, F Y2 Y3 3;
    Y4; A Y0 0, B Y0 Y1 1, C Y1 Y2 2, F Y2 Y3 3, G Y3 Y4 4;
    Y5; A Y0 0, B Y0 Y1 1, C Y1 Y2 2, F Y2 Y3 3, G Y3 Y4 4, H Y4 Y5 5;
    Y6; A Y0 0, B Y0 Y1 1, C Y1 Y2 2, F Y2 Y3 3, G Y3 Y4 4, H Y4 Y5 5, I Y5 Y6 6;
    Y7; A Y0 0, B Y0 Y1 1, C Y1 Y2 2, F Y2 Y3 3, G Y3 Y4 4, H Y4 Y5 5, I Y5 Y6 6, J Y6 Y7 7;
}
