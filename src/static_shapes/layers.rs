//! Layers whose sizes are in their types, over [`STensor`].

use super::dim::{Const, ConvOut, Dim, StaticDim};
use super::message::Message;
use super::shape::StaticShape;
use super::tensor::STensor;
use crate::element::FloatElement;
use crate::error::{Result, or_panic};
use crate::nn::parameter::check;
use crate::nn::{Conv2d, Conv2dConfig, Linear, Module, TensorKind, ToDtype};
use crate::ops::conv::Window2d;
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;
use std::marker::PhantomData;

/// Fails to build when an input's size (`Actual`, static) is not the one a
/// layer was made for.
struct Fits<const EXPECTED: usize, Actual, Layer>(PhantomData<(Actual, Layer)>);

/// A layer's name and sizes, for the message of [`Fits`]: it reads
/// `` `NAME(ARGS..)` expects N WHAT ``.
trait Describe {
    const NAME: &'static str;
    const ARGS: &'static [usize];
    const WHAT: &'static str;
}

const fn describe<L: Describe>(mut m: Message) -> Message {
    m = m.text("`").text(L::NAME).text("(");
    let mut i = 0;
    while i < L::ARGS.len() {
        if i > 0 {
            m = m.text(", ");
        }
        m = m.num(L::ARGS[i]);
        i += 1;
    }
    m.text(")`")
}

impl<const EXPECTED: usize, Actual: Dim, Layer: Describe> Fits<EXPECTED, Actual, Layer> {
    const OK: () = if let Some(actual) = Actual::STATIC
        && actual != EXPECTED
    {
        describe::<Layer>(Message::new())
            .text(" expects ")
            .num(EXPECTED)
            .text(Layer::WHAT)
            .text(", but its input has ")
            .num(actual)
            .fail()
    };
}

/// [`Linear`] with its sizes in its type: `SLinear<D, IN, OUT>` maps
/// `[B, IN]` to `[B, OUT]`. An input whose static last size is not `IN`
/// fails to build, with both sizes in the message: seed 002's
/// `Linear(16 * 16 * 16, 10)` after a 16x32x32 feature map reads
/// "`Linear(4096, 10)` expects 4096 input features, but its input has 16384".
///
/// ```
/// use devtensor::static_shapes::{Const, SLinear, STensor};
/// use devtensor::{Cpu, Tensor};
/// let fc = SLinear::<Cpu, 4, 2>::new();
/// let x: STensor<Cpu, (usize, Const<4>)> = Tensor::<Cpu>::ones([3, 4]).try_static()?;
/// let y: STensor<Cpu, (usize, Const<2>)> = fc.forward(&x);
/// assert_eq!(y.dynamic().dims(), &[3, 2]);
/// # Ok::<(), devtensor::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SLinear<D: Device, const IN: usize, const OUT: usize, E: FloatElement = f32> {
    /// The dynamic layer, whose kernels and parameters it uses.
    pub inner: Linear<D, E>,
}

impl<D: Device, const IN: usize, const OUT: usize, E: FloatElement> Describe for SLinear<D, IN, OUT, E> {
    const NAME: &'static str = "Linear";
    const ARGS: &'static [usize] = &[IN, OUT];
    const WHAT: &'static str = " input features";
}

impl<D: Device, const IN: usize, const OUT: usize, E: FloatElement> SLinear<D, IN, OUT, E> {
    /// A layer with PyTorch's initialisation.
    #[fallible]
    pub fn new() -> Self {
        Ok(SLinear { inner: Linear::try_new(IN, OUT)? })
    }

    /// A layer with your own `weight` (`[OUT, IN]`) and `bias` (`[OUT]`),
    /// as [`Linear::from_weights`]. Fails, naming the shapes, when they are
    /// not the type's sizes.
    ///
    /// ```
    /// use devtensor::static_shapes::SLinear;
    /// use devtensor::{Cpu, Tensor};
    /// let fc = SLinear::<Cpu, 3, 2>::from_weights(Tensor::zeros([2, 3]), None);
    /// assert!(SLinear::<Cpu, 3, 2>::try_from_weights(Tensor::zeros([3, 2]), None).is_err());
    /// ```
    #[fallible]
    pub fn from_weights(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>) -> Self {
        let mut tensors = vec![&weight];
        tensors.extend(bias.as_ref());
        let fits = weight.dims() == [OUT, IN] && bias.as_ref().is_none_or(|b| b.dims() == [OUT]);
        check(fits, "SLinear::from_weights", &tensors, || {
            format!("the layer's type is Linear({IN}, {OUT}): expected a weight [{OUT}, {IN}] and a bias [{OUT}]")
        })?;
        Ok(SLinear { inner: Linear::try_from_weights(weight, bias)? })
    }

    /// The layer applied to `x` (`[B, F]` with `F` of size `IN`, on the
    /// layer's device). A static `F` other than `IN` fails to build; a
    /// dynamic one is checked here.
    pub fn try_forward<D2: Device, B: Dim, F: Dim>(
        &self,
        x: &STensor<D2, (B, F), E>,
    ) -> Result<STensor<D, (B, Const<OUT>), E>>
    where
        D: SameDevice<D2>,
    {
        let () = Fits::<IN, F, Self>::OK;
        self.run(same_device(x.dynamic()))
    }

    /// Panicking form of [`forward`](Self::forward).
    #[track_caller]
    pub fn forward<D2: Device, B: Dim, F: Dim>(&self, x: &STensor<D2, (B, F), E>) -> STensor<D, (B, Const<OUT>), E>
    where
        D: SameDevice<D2>,
    {
        // Checked here and not only in `try_forward`, so that a size error
        // points at the caller's line.
        let () = Fits::<IN, F, Self>::OK;
        or_panic(self.run(same_device(x.dynamic())))
    }

    fn run<S: StaticShape>(&self, x: &Tensor<D, E>) -> Result<STensor<D, S, E>> {
        self.inner.try_forward::<D, E>(x)?.try_static()
    }
}

impl<D: Device, const IN: usize, const OUT: usize, E: FloatElement> Default for SLinear<D, IN, OUT, E> {
    fn default() -> Self {
        Self::new()
    }
}

/// [`Conv2d`] with its sizes in its type: `C` input and `O` output
/// channels, a `K` x `K` kernel, stride `S`, padding `P`, dilation `DL`.
/// It maps `[B, C, H, W]` to `[B, O, OH, OW]`, with `OH` and `OW` computed
/// by the compiler ([`ConvOut`]), so that a model states only its input
/// size and its layers.
///
/// ```
/// use devtensor::static_shapes::{Const, SConv2d, STensor};
/// use devtensor::{Cpu, Tensor};
/// // Seed 002's Conv2d(3, 16, 3, padding=1): 64x64 stays 64x64.
/// let conv = SConv2d::<Cpu, 3, 16, 3, 1, 1>::new();
/// let x: STensor<Cpu, (usize, Const<3>, Const<64>, Const<64>)> = Tensor::<Cpu>::zeros([2, 3, 64, 64]).try_static()?;
/// assert_eq!(conv.forward(&x).dynamic().dims(), &[2, 16, 64, 64]);
/// # Ok::<(), devtensor::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SConv2d<
    D: Device,
    const C: usize,
    const O: usize,
    const K: usize,
    const S: usize = 1,
    const P: usize = 0,
    const DL: usize = 1,
    E: FloatElement = f32,
> {
    /// The dynamic layer, whose kernels and parameters it uses.
    pub inner: Conv2d<D, E>,
}

impl<
    D: Device,
    const C: usize,
    const O: usize,
    const K: usize,
    const S: usize,
    const P: usize,
    const DL: usize,
    E: FloatElement,
> Describe for SConv2d<D, C, O, K, S, P, DL, E>
{
    const NAME: &'static str = "Conv2d";
    const ARGS: &'static [usize] = &[C, O, K];
    const WHAT: &'static str = " input channels";
}

impl<
    D: Device,
    const C: usize,
    const O: usize,
    const K: usize,
    const S: usize,
    const P: usize,
    const DL: usize,
    E: FloatElement,
> SConv2d<D, C, O, K, S, P, DL, E>
{
    /// A layer with PyTorch's initialisation.
    #[fallible]
    pub fn new() -> Self {
        Ok(SConv2d { inner: Conv2d::try_with_config(C, O, [K, K], Self::config())? })
    }

    /// A layer with your own `weight` (`[O, C, K, K]`) and `bias` (`[O]`),
    /// as [`Conv2d::from_weights`] with the type's stride, padding and
    /// dilation. Fails, naming the shapes, when they are not the type's.
    #[fallible]
    pub fn from_weights(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>) -> Self {
        let mut tensors = vec![&weight];
        tensors.extend(bias.as_ref());
        let fits = weight.dims() == [O, C, K, K] && bias.as_ref().is_none_or(|b| b.dims() == [O]);
        check(fits, "SConv2d::from_weights", &tensors, || {
            format!(
                "the layer's type is Conv2d({C}, {O}, {K}): expected a weight [{O}, {C}, {K}, {K}] and a bias [{O}]"
            )
        })?;
        Ok(SConv2d { inner: Conv2d::try_from_weights(weight, bias, Self::config())? })
    }

    fn config() -> Conv2dConfig {
        Conv2dConfig { stride: [S, S], padding: [P, P], dilation: [DL, DL], groups: 1 }
    }

    /// The convolution of `x` (`[B, C, H, W]`, on the layer's device).
    /// A static channel count other than `C` fails to build.
    #[allow(clippy::type_complexity)]
    pub fn try_forward<D2: Device, B: Dim, CI: Dim, H: StaticDim, W: StaticDim>(
        &self,
        x: &STensor<D2, (B, CI, H, W), E>,
    ) -> Result<STensor<D, (B, Const<O>, ConvOut<H, K, S, P, DL>, ConvOut<W, K, S, P, DL>), E>>
    where
        D: SameDevice<D2>,
    {
        let () = Fits::<C, CI, Self>::OK;
        self.run(same_device(x.dynamic()))
    }

    /// Panicking form of [`forward`](Self::forward).
    #[track_caller]
    #[allow(clippy::type_complexity)]
    pub fn forward<D2: Device, B: Dim, CI: Dim, H: StaticDim, W: StaticDim>(
        &self,
        x: &STensor<D2, (B, CI, H, W), E>,
    ) -> STensor<D, (B, Const<O>, ConvOut<H, K, S, P, DL>, ConvOut<W, K, S, P, DL>), E>
    where
        D: SameDevice<D2>,
    {
        let () = Fits::<C, CI, Self>::OK;
        or_panic(self.run(same_device(x.dynamic())))
    }

    fn run<SH: StaticShape>(&self, x: &Tensor<D, E>) -> Result<STensor<D, SH, E>> {
        self.inner.try_forward::<D, E>(x)?.try_static()
    }
}

impl<
    D: Device,
    const C: usize,
    const O: usize,
    const K: usize,
    const S: usize,
    const P: usize,
    const DL: usize,
    E: FloatElement,
> Default for SConv2d<D, C, O, K, S, P, DL, E>
{
    fn default() -> Self {
        Self::new()
    }
}

/// Defines a static pooling layer over a `K` x `K` window with stride `S`
/// and padding `P`.
macro_rules! static_pool {
    ($($name:ident, $method:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name<const K: usize, const S: usize, const P: usize = 0>;

        impl<const K: usize, const S: usize, const P: usize> $name<K, S, P> {
            /// The pooled `x` (`[B, C, H, W]`), on any device; the output
            /// sizes are computed by the compiler.
            #[allow(clippy::type_complexity)]
            #[fallible]
            pub fn forward<D: Device, B: Dim, C: Dim, H: StaticDim, W: StaticDim, E: FloatElement>(
                &self,
                x: &STensor<D, (B, C, H, W), E>,
            ) -> STensor<D, (B, C, ConvOut<H, K, S, P, 1>, ConvOut<W, K, S, P, 1>), E> {
                let window = Window2d { kernel: [K, K], stride: [S, S], padding: [P, P], dilation: [1, 1] };
                x.dynamic().$method(window)?.try_static()
            }
        }

        impl<D: Device, const K: usize, const S: usize, const P: usize, E: FloatElement> Module<D, E> for $name<K, S, P> {
            type On<D2: Device> = Self;

            fn try_to<D2: Device>(&self) -> Result<Self> {
                Ok(*self)
            }

            fn visit(&self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {}

            fn visit_mut(&mut self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {}
        }

        impl<D: Device, const K: usize, const S: usize, const P: usize, E: FloatElement> ToDtype<D, E> for $name<K, S, P> {
            type Of<T: FloatElement> = Self;

            fn try_to_dtype<T: FloatElement>(&self) -> Result<Self> {
                Ok(*self)
            }
        }
    )*};
}

static_pool! {
    SMaxPool2d, try_max_pool2d, "Max pooling with a `K` x `K` window, stride `S` and padding `P` (default 0), \
        on static shapes: `[B, C, H, W]` to `[B, C, OH, OW]`, the sizes computed by the compiler.";
    SAvgPool2d, try_avg_pool2d, "Average pooling with a `K` x `K` window, stride `S` and padding `P` \
        (default 0, padding counted in the average as in PyTorch), on static shapes.";
}

/// Every axis after the batch merged into one, PyTorch's `nn.Flatten()`
/// on static shapes: `[B, C, H, W]` to `[B, C * H * W]` (and `[B, C, L]`
/// to `[B, C * L]`), the product computed by the compiler.
#[derive(Clone, Copy, Debug, Default)]
pub struct SFlatten;

crate::nn::stateless_module!(SFlatten);

/// `Module` through the dynamic layer: names, device moves, checkpoints and
/// optimizers work on static layers as on the others.
macro_rules! static_module {
    ($name:ident<$($c:ident),*>, $on:ty, $of:ty) => {
        impl<D: Device, $(const $c: usize,)* E: FloatElement> Module<D, E> for $name<D, $($c,)* E> {
            type On<D2: Device> = $on;

            fn try_to<D2: Device>(&self) -> Result<Self::On<D2>> {
                Ok($name { inner: self.inner.try_to()? })
            }

            fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
                self.inner.visit(prefix, f)
            }

            fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
                self.inner.visit_mut(prefix, f)
            }
        }

        impl<D: Device, $(const $c: usize,)* E: FloatElement> ToDtype<D, E> for $name<D, $($c,)* E> {
            type Of<T: FloatElement> = $of;

            fn try_to_dtype<T: FloatElement>(&self) -> Result<Self::Of<T>> {
                Ok($name { inner: self.inner.try_to_dtype()? })
            }
        }
    };
}

static_module!(SLinear<IN, OUT>, SLinear<D2, IN, OUT, E>, SLinear<D, IN, OUT, T>);
static_module!(SConv2d<C, O, K, S, P, DL>, SConv2d<D2, C, O, K, S, P, DL, E>, SConv2d<D, C, O, K, S, P, DL, T>);
