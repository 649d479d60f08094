//! `Conv2d`, `Conv1d`, `Conv3d`, `ConvTranspose2d` and `ConvTranspose1d`.

use super::forward::call;
use super::init::{default_bound, uniform};
use super::parameter::{parameter, shape_error};
use super::{Forward, Hookable, ModuleHooks};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::ops::conv::{Window1d, Window2d, Window3d};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// PyTorch's `nn.Conv2d`: a 2-D convolution of `[N, C, H, W]` images with
/// `weight` `[out_channels, in_channels / groups, KH, KW]` and `bias`
/// `[out_channels]`, initialised as PyTorch does (`U(-k, k)`,
/// `k = 1 / sqrt(in_channels / groups · KH · KW)`).
///
/// ```
/// use devtensor::nn::Conv2d;
/// use devtensor::{Cpu, Tensor};
/// // Seed 002's layer: Conv2d(3, 16, 3, padding=1).
/// let conv = Conv2d::<Cpu>::new(3, 16, 3).padding(1);
/// let y = conv.forward(&Tensor::<Cpu>::zeros([2, 3, 64, 64]));
/// assert_eq!(y.dims(), &[2, 16, 64, 64]);
/// ```
///
/// Every setting at once, and a layer from your own tensors:
/// ```
/// use devtensor::nn::{Conv2d, Conv2dConfig};
/// use devtensor::{Cpu, Tensor};
/// let config = Conv2dConfig { stride: [2, 2], groups: 2, ..Default::default() };
/// let conv = Conv2d::<Cpu>::with_config(4, 6, [3, 3], config);
/// assert_eq!(conv.weight.dims(), &[6, 2, 3, 3]);
/// let same = Conv2d::from_weights(conv.weight.clone(), conv.bias.clone(), config);
/// let x = Tensor::<Cpu>::randn([1, 4, 9, 9]);
/// assert_eq!(same.forward(&x).to_vec(), conv.forward(&x).to_vec());
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Conv2d<D: Device, E: FloatElement = f32> {
    /// `[out_channels, in_channels / groups, KH, KW]`.
    pub weight: Tensor<D, E>,
    /// `[out_channels]`, if the layer has one.
    pub bias: Option<Tensor<D, E>>,
    /// Stride, padding and dilation (the kernel size is the weight's).
    pub window: Window2d,
    /// Channel groups: input and output channels split into this many
    /// independent convolutions.
    pub groups: usize,
    /// The hooks registered on the layer ([`Hooks`](crate::nn::Hooks)).
    hooks: ModuleHooks<D, E>,
}

/// The settings of a [`Conv2d`], PyTorch's keyword arguments with its
/// defaults by `Default`: stride 1, no padding, dilation 1, one group.
/// Build one with `..Default::default()`, so that a setting added later
/// breaks no program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dConfig {
    /// Step between output positions, `[rows, columns]`.
    pub stride: [usize; 2],
    /// Implicit zeros on each side, `[rows, columns]`.
    pub padding: [usize; 2],
    /// Spacing between kernel taps, `[rows, columns]`.
    pub dilation: [usize; 2],
    /// Channel groups, which divide both channel counts.
    pub groups: usize,
}

impl Default for Conv2dConfig {
    fn default() -> Self {
        Conv2dConfig { stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 1 }
    }
}

impl Conv2dConfig {
    fn window(&self, kernel: [usize; 2]) -> Window2d {
        Window2d { kernel, stride: self.stride, padding: self.padding, dilation: self.dilation }
    }
}

impl<D: Device, E: FloatElement> Conv2d<D, E> {
    /// A `kernel x kernel` convolution with stride 1, no padding, no
    /// dilation, one group and a bias.
    #[fallible]
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        Self::try_with_config(in_channels, out_channels, [kernel, kernel], Conv2dConfig::default())
    }

    /// A `kernel` (`[KH, KW]`) convolution with `config`'s settings,
    /// initialised as [`new`](Self::new). Fails unless `config.groups`
    /// divides both channel counts.
    #[fallible]
    pub fn with_config(in_channels: usize, out_channels: usize, kernel: [usize; 2], config: Conv2dConfig) -> Self {
        let groups = config.groups;
        check_groups::<D>("Conv2d", in_channels, out_channels, groups)?;
        let fan_in = in_channels / groups * kernel[0] * kernel[1];
        let bound = default_bound(fan_in);
        Ok(Conv2d {
            weight: uniform::<D, E>([out_channels, in_channels / groups, kernel[0], kernel[1]], bound)?.requires_grad(),
            bias: Some(uniform::<D, E>([out_channels], bound)?.requires_grad()),
            window: config.window(kernel),
            groups,
            hooks: ModuleHooks::new(),
        })
    }

    /// A convolution with your own `weight` (`[out_channels, in_channels /
    /// groups, KH, KW]`) and `bias` (`[out_channels]`), which become its
    /// parameters as in [`Linear::from_weights`](super::Linear::from_weights).
    /// Fails, naming the shapes, when they do not fit, or when
    /// `config.groups` does not divide `out_channels`.
    #[fallible]
    pub fn from_weights(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>, config: Conv2dConfig) -> Self {
        let &[out, _, kh, kw] = weight.dims() else {
            return Err(conv_shape_error("Conv2d::from_weights", &weight, bias.as_ref(), 2));
        };
        check_weights("Conv2d::from_weights", &weight, bias.as_ref(), out, config.groups, 2)?;
        Ok(Conv2d {
            weight: parameter(weight),
            bias: bias.map(parameter),
            window: config.window([kh, kw]),
            groups: config.groups,
            hooks: ModuleHooks::new(),
        })
    }

    /// The former name of [`try_with_config`](Self::try_with_config) with
    /// only `groups` set.
    #[deprecated(note = "use `try_with_config(.., Conv2dConfig { groups, ..Default::default() })`")]
    pub fn try_with_groups(in_channels: usize, out_channels: usize, kernel: [usize; 2], groups: usize) -> Result<Self> {
        Self::try_with_config(in_channels, out_channels, kernel, Conv2dConfig { groups, ..Default::default() })
    }

    /// The layer with stride `stride` on both axes.
    pub fn stride(mut self, stride: usize) -> Self {
        self.window.stride = [stride, stride];
        self
    }

    /// The layer with `padding` zeros on every side.
    pub fn padding(mut self, padding: usize) -> Self {
        self.window.padding = [padding, padding];
        self
    }

    /// The layer with dilation `dilation` on both axes.
    pub fn dilation(mut self, dilation: usize) -> Self {
        self.window.dilation = [dilation, dilation];
        self
    }

    /// The layer without its bias (PyTorch's `bias=False`).
    pub fn without_bias(mut self) -> Self {
        self.bias = None;
        self
    }

    /// The convolution of `x` (`[N, C, H, W]`, on the layer's device,
    /// checked at compile time). Fails when `x`'s shape does not fit.
    #[fallible]
    pub fn forward<D2: Device, EX: Element>(&self, x: &Tensor<D2, EX>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
        E: SameDtype<EX>,
    {
        call(self, same_device(x))
    }
}

impl<D: Device, E: FloatElement> Hookable<D, E> for Conv2d<D, E> {}

impl<D: Device, E: FloatElement> Forward<D, E> for Conv2d<D, E> {
    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        Some(&self.hooks)
    }

    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        x.try_conv2d(&self.weight, self.bias.as_ref(), self.window, self.groups)
    }
}

crate::module!(Conv2d<E> { weight, bias, hooks; window, groups });

/// The error of a convolution's `from_weights`, for a weight of
/// `spatial` kernel axes.
fn conv_shape_error<D: Device, E: FloatElement>(
    op: &'static str,
    weight: &Tensor<D, E>,
    bias: Option<&Tensor<D, E>>,
    spatial: usize,
) -> Error {
    let mut tensors = vec![weight];
    tensors.extend(bias);
    let kernel = ["K", "KH, KW", "KD, KH, KW"][spatial - 1];
    let (channels, second) = if op.starts_with("ConvTranspose") {
        ("in_channels", "out_channels / groups")
    } else {
        ("out_channels", "in_channels / groups")
    };
    let bias_channels = if op.starts_with("ConvTranspose") { "out_channels" } else { channels };
    shape_error(
        op,
        &tensors,
        format!("expected a weight [{channels}, {second}, {kernel}] and a bias [{bias_channels}]"),
    )
}

/// Fails unless `bias` has `bias_channels` elements and `groups` divides
/// the weight's first axis.
fn check_weights<D: Device, E: FloatElement>(
    op: &'static str,
    weight: &Tensor<D, E>,
    bias: Option<&Tensor<D, E>>,
    bias_channels: usize,
    groups: usize,
    spatial: usize,
) -> Result<()> {
    if bias.is_some_and(|b| b.dims() != [bias_channels]) {
        return Err(conv_shape_error(op, weight, bias, spatial));
    }
    if groups == 0 || !weight.dims()[0].is_multiple_of(groups) {
        return Err(Error::Argument {
            op,
            device: D::name(),
            reason: format!("groups = {groups} must divide the weight's first axis ({})", weight.dims()[0]),
        });
    }
    Ok(())
}

/// Fails unless `groups` divides both channel counts.
fn check_groups<D: Device>(op: &'static str, in_channels: usize, out_channels: usize, groups: usize) -> Result<()> {
    if groups == 0 || !in_channels.is_multiple_of(groups) || !out_channels.is_multiple_of(groups) {
        return Err(Error::Argument {
            op,
            device: D::name(),
            reason: format!(
                "groups = {groups} must divide in_channels = {in_channels} and out_channels = {out_channels}"
            ),
        });
    }
    Ok(())
}

/// PyTorch's `nn.Conv1d`: a 1-D convolution of `[N, C, L]` sequences with
/// `weight` `[out_channels, in_channels / groups, K]` and `bias`
/// `[out_channels]`, initialised as PyTorch does (`U(-k, k)`,
/// `k = 1 / sqrt(in_channels / groups · K)`).
///
/// ```
/// use devtensor::nn::Conv1d;
/// use devtensor::{Cpu, Tensor};
/// let conv = Conv1d::<Cpu>::new(8, 16, 3).padding(1);
/// assert_eq!(conv.forward(&Tensor::<Cpu>::zeros([2, 8, 50])).dims(), &[2, 16, 50]);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Conv1d<D: Device, E: FloatElement = f32> {
    /// `[out_channels, in_channels / groups, K]`.
    pub weight: Tensor<D, E>,
    /// `[out_channels]`, if the layer has one.
    pub bias: Option<Tensor<D, E>>,
    /// Stride, padding and dilation (the kernel size is the weight's).
    pub window: Window1d,
    /// Channel groups, as for [`Conv2d`].
    pub groups: usize,
    /// The hooks registered on the layer ([`Hooks`](crate::nn::Hooks)).
    hooks: ModuleHooks<D, E>,
}

/// The settings of a [`Conv1d`], PyTorch's keyword arguments with its
/// defaults by `Default`, as [`Conv2dConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv1dConfig {
    /// Step between output positions.
    pub stride: usize,
    /// Implicit zeros on each side.
    pub padding: usize,
    /// Spacing between kernel taps.
    pub dilation: usize,
    /// Channel groups, which divide both channel counts.
    pub groups: usize,
}

impl Default for Conv1dConfig {
    fn default() -> Self {
        Conv1dConfig { stride: 1, padding: 0, dilation: 1, groups: 1 }
    }
}

impl Conv1dConfig {
    fn window(&self) -> Window1d {
        Window1d { stride: self.stride, padding: self.padding, dilation: self.dilation }
    }
}

impl<D: Device, E: FloatElement> Conv1d<D, E> {
    /// A convolution with kernel size `kernel`, stride 1, no padding, no
    /// dilation, one group and a bias. Fails when `D` is unavailable.
    #[fallible]
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        Self::try_with_config(in_channels, out_channels, kernel, Conv1dConfig::default())
    }

    /// A convolution with kernel size `kernel` and `config`'s settings.
    /// Fails unless `config.groups` divides both channel counts.
    ///
    /// ```
    /// use devtensor::nn::{Conv1d, Conv1dConfig};
    /// use devtensor::Cpu;
    /// let conv = Conv1d::<Cpu>::with_config(4, 6, 3, Conv1dConfig { groups: 2, ..Default::default() });
    /// assert_eq!(conv.weight.dims(), &[6, 2, 3]);
    /// ```
    #[fallible]
    pub fn with_config(in_channels: usize, out_channels: usize, kernel: usize, config: Conv1dConfig) -> Self {
        check_groups::<D>("Conv1d", in_channels, out_channels, config.groups)?;
        // Conv2d's initialisation over a height of 1 is Conv1d's.
        let conv2d = Conv2dConfig { groups: config.groups, ..Default::default() };
        let conv = Conv2d::<D, E>::try_with_config(in_channels, out_channels, [1, kernel], conv2d)?;
        let weight = conv.weight.detach().try_squeeze(2)?.requires_grad();
        Ok(Conv1d {
            weight,
            bias: conv.bias,
            window: config.window(),
            groups: config.groups,
            hooks: ModuleHooks::new(),
        })
    }

    /// A convolution with your own `weight` (`[out_channels, in_channels /
    /// groups, K]`) and `bias` (`[out_channels]`), as
    /// [`Conv2d::from_weights`].
    #[fallible]
    pub fn from_weights(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>, config: Conv1dConfig) -> Self {
        let &[out, _, _] = weight.dims() else {
            return Err(conv_shape_error("Conv1d::from_weights", &weight, bias.as_ref(), 1));
        };
        check_weights("Conv1d::from_weights", &weight, bias.as_ref(), out, config.groups, 1)?;
        Ok(Conv1d {
            weight: parameter(weight),
            bias: bias.map(parameter),
            window: config.window(),
            groups: config.groups,
            hooks: ModuleHooks::new(),
        })
    }

    /// The former name of [`try_with_config`](Self::try_with_config) with
    /// only `groups` set.
    #[deprecated(note = "use `try_with_config(.., Conv1dConfig { groups, ..Default::default() })`")]
    pub fn try_with_groups(in_channels: usize, out_channels: usize, kernel: usize, groups: usize) -> Result<Self> {
        Self::try_with_config(in_channels, out_channels, kernel, Conv1dConfig { groups, ..Default::default() })
    }

    /// The layer with stride `stride`.
    pub fn stride(mut self, stride: usize) -> Self {
        self.window.stride = stride;
        self
    }

    /// The layer with `padding` zeros on each side.
    pub fn padding(mut self, padding: usize) -> Self {
        self.window.padding = padding;
        self
    }

    /// The layer with dilation `dilation`.
    pub fn dilation(mut self, dilation: usize) -> Self {
        self.window.dilation = dilation;
        self
    }

    /// The layer without its bias (PyTorch's `bias=False`).
    pub fn without_bias(mut self) -> Self {
        self.bias = None;
        self
    }

    /// The convolution of `x` (`[N, C, L]`, on the layer's device, checked
    /// at compile time). Fails when `x`'s shape does not fit.
    #[fallible]
    pub fn forward<D2: Device, EX: Element>(&self, x: &Tensor<D2, EX>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
        E: SameDtype<EX>,
    {
        call(self, same_device(x))
    }
}

impl<D: Device, E: FloatElement> Hookable<D, E> for Conv1d<D, E> {}

impl<D: Device, E: FloatElement> Forward<D, E> for Conv1d<D, E> {
    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        Some(&self.hooks)
    }

    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        x.try_conv1d(&self.weight, self.bias.as_ref(), self.window, self.groups)
    }
}

crate::module!(Conv1d<E> { weight, bias, hooks; window, groups });

/// PyTorch's `nn.ConvTranspose2d`: the transposed convolution of `[N, C,
/// H, W]` images (see [`Tensor::conv_transpose2d`]) with `weight`
/// `[in_channels, out_channels / groups, KH, KW]` and `bias`
/// `[out_channels]`, initialised as PyTorch does (`U(-k, k)`,
/// `k = 1 / sqrt(out_channels / groups · KH · KW)`: PyTorch counts the
/// weight's second axis as its fan-in).
///
/// ```
/// use devtensor::nn::ConvTranspose2d;
/// use devtensor::{Cpu, Tensor};
/// // A decoder's upsampling: 16x16 to 32x32.
/// let up = ConvTranspose2d::<Cpu>::new(32, 16, 4).stride(2).padding(1);
/// assert_eq!(up.forward(&Tensor::<Cpu>::zeros([2, 32, 16, 16])).dims(), &[2, 16, 32, 32]);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConvTranspose2d<D: Device, E: FloatElement = f32> {
    /// `[in_channels, out_channels / groups, KH, KW]`.
    pub weight: Tensor<D, E>,
    /// `[out_channels]`, if the layer has one.
    pub bias: Option<Tensor<D, E>>,
    /// Stride, padding and dilation (the kernel size is the weight's).
    pub window: Window2d,
    /// Extra rows and columns at the bottom and right of the output.
    pub output_padding: [usize; 2],
    /// Channel groups.
    pub groups: usize,
    /// The hooks registered on the layer ([`Hooks`](crate::nn::Hooks)).
    hooks: ModuleHooks<D, E>,
}

/// The settings of a [`ConvTranspose2d`], PyTorch's keyword arguments with
/// its defaults by `Default`, as [`Conv2dConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose2dConfig {
    /// Step between input positions in the output, `[rows, columns]`.
    pub stride: [usize; 2],
    /// Rows and columns taken off each side of the output.
    pub padding: [usize; 2],
    /// Extra rows and columns at the bottom and right of the output.
    pub output_padding: [usize; 2],
    /// Spacing between kernel taps, `[rows, columns]`.
    pub dilation: [usize; 2],
    /// Channel groups, which divide both channel counts.
    pub groups: usize,
}

impl Default for ConvTranspose2dConfig {
    fn default() -> Self {
        ConvTranspose2dConfig { stride: [1, 1], padding: [0, 0], output_padding: [0, 0], dilation: [1, 1], groups: 1 }
    }
}

impl<D: Device, E: FloatElement> ConvTranspose2d<D, E> {
    /// A `kernel x kernel` transposed convolution with stride 1, no
    /// padding, no dilation, one group and a bias. Fails when `D` is
    /// unavailable.
    #[fallible]
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        Self::try_with_config(in_channels, out_channels, [kernel, kernel], ConvTranspose2dConfig::default())
    }

    /// A `kernel` (`[KH, KW]`) transposed convolution with `config`'s
    /// settings. Fails unless `config.groups` divides both channel counts.
    ///
    /// ```
    /// use devtensor::nn::{ConvTranspose2d, ConvTranspose2dConfig};
    /// use devtensor::{Cpu, Tensor};
    /// let config = ConvTranspose2dConfig { stride: [2, 2], padding: [1, 1], ..Default::default() };
    /// let up = ConvTranspose2d::<Cpu>::with_config(8, 4, [4, 4], config);
    /// assert_eq!(up.forward(&Tensor::<Cpu>::zeros([1, 8, 5, 5])).dims(), &[1, 4, 10, 10]);
    /// ```
    #[fallible]
    pub fn with_config(
        in_channels: usize,
        out_channels: usize,
        kernel: [usize; 2],
        config: ConvTranspose2dConfig,
    ) -> Self {
        let groups = config.groups;
        check_groups::<D>("ConvTranspose2d", in_channels, out_channels, groups)?;
        // PyTorch counts the weight's second axis as the fan-in.
        let bound = default_bound(out_channels / groups * kernel[0] * kernel[1]);
        let shape = [in_channels, out_channels / groups, kernel[0], kernel[1]];
        let weight = uniform::<D, E>(shape, bound)?.requires_grad();
        let bias = uniform::<D, E>([out_channels], bound)?.requires_grad();
        Ok(Self::assemble(weight, Some(bias), config))
    }

    /// A transposed convolution with your own `weight` (`[in_channels,
    /// out_channels / groups, KH, KW]`) and `bias` (`[out_channels]`), as
    /// [`Conv2d::from_weights`].
    #[fallible]
    pub fn from_weights(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>, config: ConvTranspose2dConfig) -> Self {
        let &[_, per_group, _, _] = weight.dims() else {
            return Err(conv_shape_error("ConvTranspose2d::from_weights", &weight, bias.as_ref(), 2));
        };
        let out_channels = per_group.saturating_mul(config.groups);
        check_weights("ConvTranspose2d::from_weights", &weight, bias.as_ref(), out_channels, config.groups, 2)?;
        Ok(Self::assemble(parameter(weight), bias.map(parameter), config))
    }

    fn assemble(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>, config: ConvTranspose2dConfig) -> Self {
        let kernel = [weight.dims()[2], weight.dims()[3]];
        let window = Window2d { kernel, stride: config.stride, padding: config.padding, dilation: config.dilation };
        ConvTranspose2d {
            weight,
            bias,
            window,
            output_padding: config.output_padding,
            groups: config.groups,
            hooks: ModuleHooks::new(),
        }
    }

    /// The layer with stride `stride` on both axes.
    pub fn stride(mut self, stride: usize) -> Self {
        self.window.stride = [stride, stride];
        self
    }

    /// The layer with `padding` taken off every side of the output.
    pub fn padding(mut self, padding: usize) -> Self {
        self.window.padding = [padding, padding];
        self
    }

    /// The layer with `output_padding` more rows and columns at the bottom
    /// and right (to reach an even size after a stride).
    pub fn output_padding(mut self, output_padding: usize) -> Self {
        self.output_padding = [output_padding, output_padding];
        self
    }

    /// The layer with dilation `dilation` on both axes.
    pub fn dilation(mut self, dilation: usize) -> Self {
        self.window.dilation = [dilation, dilation];
        self
    }

    /// The layer without its bias (PyTorch's `bias=False`).
    pub fn without_bias(mut self) -> Self {
        self.bias = None;
        self
    }

    /// The transposed convolution of `x` (`[N, C, H, W]`, on the layer's
    /// device, checked at compile time). Fails when `x`'s shape does not fit.
    #[fallible]
    pub fn forward<D2: Device, EX: Element>(&self, x: &Tensor<D2, EX>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
        E: SameDtype<EX>,
    {
        call(self, same_device(x))
    }
}

impl<D: Device, E: FloatElement> Hookable<D, E> for ConvTranspose2d<D, E> {}

impl<D: Device, E: FloatElement> Forward<D, E> for ConvTranspose2d<D, E> {
    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        Some(&self.hooks)
    }

    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        x.try_conv_transpose2d(&self.weight, self.bias.as_ref(), self.window, self.output_padding, self.groups)
    }
}

crate::module!(ConvTranspose2d<E> { weight, bias, hooks; window, output_padding, groups });

/// PyTorch's `nn.Conv3d`: a 3-D convolution of `[N, C, D, H, W]` volumes
/// with `weight` `[out_channels, in_channels / groups, KD, KH, KW]` and
/// `bias` `[out_channels]`, initialised as PyTorch does (`U(-k, k)`,
/// `k = 1 / sqrt(in_channels / groups · KD · KH · KW)`); see
/// [`Tensor::try_conv3d`].
///
/// ```
/// use devtensor::nn::{Conv3d, Conv3dConfig};
/// use devtensor::{Cpu, Tensor};
/// let conv = Conv3d::<Cpu>::new(2, 8, 3).padding(1);
/// assert_eq!(conv.forward(&Tensor::<Cpu>::zeros([1, 2, 4, 6, 6])).dims(), &[1, 8, 4, 6, 6]);
/// let config = Conv3dConfig { stride: [1, 2, 2], groups: 2, ..Default::default() };
/// let conv = Conv3d::<Cpu>::with_config(4, 6, [1, 3, 3], config);
/// assert_eq!(conv.weight.dims(), &[6, 2, 1, 3, 3]);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Conv3d<D: Device, E: FloatElement = f32> {
    /// `[out_channels, in_channels / groups, KD, KH, KW]`.
    pub weight: Tensor<D, E>,
    /// `[out_channels]`, if the layer has one.
    pub bias: Option<Tensor<D, E>>,
    /// Stride, padding and dilation (the kernel size is the weight's).
    pub window: Window3d,
    /// Channel groups, as for [`Conv2d`].
    pub groups: usize,
    /// The hooks registered on the layer ([`Hooks`](crate::nn::Hooks)).
    hooks: ModuleHooks<D, E>,
}

/// The settings of a [`Conv3d`], PyTorch's keyword arguments with its
/// defaults by `Default`, as [`Conv2dConfig`]; each axis's as
/// `[depth, height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv3dConfig {
    /// Step between output positions.
    pub stride: [usize; 3],
    /// Implicit zeros on each side.
    pub padding: [usize; 3],
    /// Spacing between kernel taps.
    pub dilation: [usize; 3],
    /// Channel groups, which divide both channel counts.
    pub groups: usize,
}

impl Default for Conv3dConfig {
    fn default() -> Self {
        Conv3dConfig { stride: [1; 3], padding: [0; 3], dilation: [1; 3], groups: 1 }
    }
}

impl Conv3dConfig {
    fn window(&self) -> Window3d {
        Window3d { stride: self.stride, padding: self.padding, dilation: self.dilation }
    }
}

impl<D: Device, E: FloatElement> Conv3d<D, E> {
    /// A `kernel x kernel x kernel` convolution with stride 1, no padding,
    /// no dilation, one group and a bias.
    #[fallible]
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        Self::try_with_config(in_channels, out_channels, [kernel; 3], Conv3dConfig::default())
    }

    /// A `kernel` (`[KD, KH, KW]`) convolution with `config`'s settings,
    /// initialised as [`new`](Self::new). Fails unless `config.groups`
    /// divides both channel counts.
    #[fallible]
    pub fn with_config(in_channels: usize, out_channels: usize, kernel: [usize; 3], config: Conv3dConfig) -> Self {
        let groups = config.groups;
        check_groups::<D>("Conv3d", in_channels, out_channels, groups)?;
        let bound = default_bound(in_channels / groups * kernel.iter().product::<usize>());
        let shape = [out_channels, in_channels / groups, kernel[0], kernel[1], kernel[2]];
        Ok(Conv3d {
            weight: uniform::<D, E>(shape, bound)?.requires_grad(),
            bias: Some(uniform::<D, E>([out_channels], bound)?.requires_grad()),
            window: config.window(),
            groups,
            hooks: ModuleHooks::new(),
        })
    }

    /// A convolution with your own `weight` (`[out_channels, in_channels /
    /// groups, KD, KH, KW]`) and `bias` (`[out_channels]`), as
    /// [`Conv2d::from_weights`].
    #[fallible]
    pub fn from_weights(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>, config: Conv3dConfig) -> Self {
        let &[out, _, _, _, _] = weight.dims() else {
            return Err(conv_shape_error("Conv3d::from_weights", &weight, bias.as_ref(), 3));
        };
        check_weights("Conv3d::from_weights", &weight, bias.as_ref(), out, config.groups, 3)?;
        Ok(Conv3d {
            weight: parameter(weight),
            bias: bias.map(parameter),
            window: config.window(),
            groups: config.groups,
            hooks: ModuleHooks::new(),
        })
    }

    /// The layer with stride `stride` on every axis.
    pub fn stride(mut self, stride: usize) -> Self {
        self.window.stride = [stride; 3];
        self
    }

    /// The layer with `padding` zeros on every side.
    pub fn padding(mut self, padding: usize) -> Self {
        self.window.padding = [padding; 3];
        self
    }

    /// The layer with dilation `dilation` on every axis.
    pub fn dilation(mut self, dilation: usize) -> Self {
        self.window.dilation = [dilation; 3];
        self
    }

    /// The layer without its bias (PyTorch's `bias=False`).
    pub fn without_bias(mut self) -> Self {
        self.bias = None;
        self
    }

    /// The convolution of `x` (`[N, C, D, H, W]`, on the layer's device,
    /// checked at compile time). Fails when `x`'s shape does not fit.
    #[fallible]
    pub fn forward<D2: Device, EX: Element>(&self, x: &Tensor<D2, EX>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
        E: SameDtype<EX>,
    {
        call(self, same_device(x))
    }
}

impl<D: Device, E: FloatElement> Hookable<D, E> for Conv3d<D, E> {}

impl<D: Device, E: FloatElement> Forward<D, E> for Conv3d<D, E> {
    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        Some(&self.hooks)
    }

    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        x.try_conv3d(&self.weight, self.bias.as_ref(), self.window, self.groups)
    }
}

crate::module!(Conv3d<E> { weight, bias, hooks; window, groups });

/// PyTorch's `nn.ConvTranspose1d`: the transposed 1-D convolution of
/// `[N, C, L]` sequences with `weight` `[in_channels, out_channels /
/// groups, K]` and `bias` `[out_channels]`, initialised as PyTorch does
/// (the fan-in is the weight's second axis times `K`); see
/// [`Tensor::try_conv_transpose1d`].
///
/// ```
/// use devtensor::nn::ConvTranspose1d;
/// use devtensor::{Cpu, Tensor};
/// // An audio decoder's upsampling: 50 steps to 100.
/// let up = ConvTranspose1d::<Cpu>::new(16, 8, 4).stride(2).padding(1);
/// assert_eq!(up.forward(&Tensor::<Cpu>::zeros([2, 16, 50])).dims(), &[2, 8, 100]);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConvTranspose1d<D: Device, E: FloatElement = f32> {
    /// `[in_channels, out_channels / groups, K]`.
    pub weight: Tensor<D, E>,
    /// `[out_channels]`, if the layer has one.
    pub bias: Option<Tensor<D, E>>,
    /// Stride, padding and dilation (the kernel size is the weight's).
    pub window: Window1d,
    /// Extra positions at the end of the output.
    pub output_padding: usize,
    /// Channel groups.
    pub groups: usize,
    /// The hooks registered on the layer ([`Hooks`](crate::nn::Hooks)).
    hooks: ModuleHooks<D, E>,
}

/// The settings of a [`ConvTranspose1d`], PyTorch's keyword arguments with
/// its defaults by `Default`, as [`Conv2dConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose1dConfig {
    /// Step between input positions in the output.
    pub stride: usize,
    /// Positions taken off each end of the output.
    pub padding: usize,
    /// Extra positions at the end of the output (below the stride or the
    /// dilation).
    pub output_padding: usize,
    /// Spacing between kernel taps.
    pub dilation: usize,
    /// Channel groups, which divide both channel counts.
    pub groups: usize,
}

impl Default for ConvTranspose1dConfig {
    fn default() -> Self {
        ConvTranspose1dConfig { stride: 1, padding: 0, output_padding: 0, dilation: 1, groups: 1 }
    }
}

impl<D: Device, E: FloatElement> ConvTranspose1d<D, E> {
    /// A transposed convolution of `kernel` taps with stride 1, no padding,
    /// no dilation, one group and a bias.
    #[fallible]
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        Self::try_with_config(in_channels, out_channels, kernel, ConvTranspose1dConfig::default())
    }

    /// A transposed convolution of `kernel` taps with `config`'s settings.
    /// Fails unless `config.groups` divides both channel counts.
    #[fallible]
    pub fn with_config(in_channels: usize, out_channels: usize, kernel: usize, config: ConvTranspose1dConfig) -> Self {
        let groups = config.groups;
        check_groups::<D>("ConvTranspose1d", in_channels, out_channels, groups)?;
        // PyTorch counts the weight's second axis as the fan-in.
        let bound = default_bound(out_channels / groups * kernel);
        let weight = uniform::<D, E>([in_channels, out_channels / groups, kernel], bound)?.requires_grad();
        let bias = uniform::<D, E>([out_channels], bound)?.requires_grad();
        Ok(Self::assemble(weight, Some(bias), config))
    }

    /// A transposed convolution with your own `weight` (`[in_channels,
    /// out_channels / groups, K]`) and `bias` (`[out_channels]`), as
    /// [`Conv2d::from_weights`].
    #[fallible]
    pub fn from_weights(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>, config: ConvTranspose1dConfig) -> Self {
        let &[_, per_group, _] = weight.dims() else {
            return Err(conv_shape_error("ConvTranspose1d::from_weights", &weight, bias.as_ref(), 1));
        };
        let out_channels = per_group.saturating_mul(config.groups);
        check_weights("ConvTranspose1d::from_weights", &weight, bias.as_ref(), out_channels, config.groups, 1)?;
        Ok(Self::assemble(parameter(weight), bias.map(parameter), config))
    }

    fn assemble(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>, config: ConvTranspose1dConfig) -> Self {
        let window = Window1d { stride: config.stride, padding: config.padding, dilation: config.dilation };
        ConvTranspose1d {
            weight,
            bias,
            window,
            output_padding: config.output_padding,
            groups: config.groups,
            hooks: ModuleHooks::new(),
        }
    }

    /// The layer with stride `stride`.
    pub fn stride(mut self, stride: usize) -> Self {
        self.window.stride = stride;
        self
    }

    /// The layer with `padding` positions taken off each end of the output.
    pub fn padding(mut self, padding: usize) -> Self {
        self.window.padding = padding;
        self
    }

    /// The layer with `output_padding` more positions at the end.
    pub fn output_padding(mut self, output_padding: usize) -> Self {
        self.output_padding = output_padding;
        self
    }

    /// The layer with dilation `dilation`.
    pub fn dilation(mut self, dilation: usize) -> Self {
        self.window.dilation = dilation;
        self
    }

    /// The layer without its bias (PyTorch's `bias=False`).
    pub fn without_bias(mut self) -> Self {
        self.bias = None;
        self
    }

    /// The transposed convolution of `x` (`[N, C, L]`, on the layer's
    /// device, checked at compile time). Fails when `x`'s shape does not fit.
    #[fallible]
    pub fn forward<D2: Device, EX: Element>(&self, x: &Tensor<D2, EX>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
        E: SameDtype<EX>,
    {
        call(self, same_device(x))
    }
}

impl<D: Device, E: FloatElement> Hookable<D, E> for ConvTranspose1d<D, E> {}

impl<D: Device, E: FloatElement> Forward<D, E> for ConvTranspose1d<D, E> {
    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        Some(&self.hooks)
    }

    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        x.try_conv_transpose1d(&self.weight, self.bias.as_ref(), self.window, self.output_padding, self.groups)
    }
}

crate::module!(ConvTranspose1d<E> { weight, bias, hooks; window, output_padding, groups });
