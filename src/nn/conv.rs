//! `Conv2d`, `Conv1d` and `ConvTranspose2d`.

use super::Forward;
use super::init::{default_bound, uniform};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::ops::conv::{Window1d, Window2d};
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
#[derive(Clone, Debug)]
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
}

impl<D: Device, E: FloatElement> Conv2d<D, E> {
    /// A `kernel x kernel` convolution with stride 1, no padding, no
    /// dilation, one group and a bias.
    #[fallible]
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        Self::try_with_groups(in_channels, out_channels, [kernel, kernel], 1)
    }

    /// A `kernel` (`[KH, KW]`) convolution in `groups` channel groups. Fails
    /// unless `groups` divides both channel counts.
    pub fn try_with_groups(in_channels: usize, out_channels: usize, kernel: [usize; 2], groups: usize) -> Result<Self> {
        check_groups::<D>("Conv2d", in_channels, out_channels, groups)?;
        let fan_in = in_channels / groups * kernel[0] * kernel[1];
        let bound = default_bound(fan_in);
        Ok(Conv2d {
            weight: uniform::<D, E>([out_channels, in_channels / groups, kernel[0], kernel[1]], bound)?.requires_grad(),
            bias: Some(uniform::<D, E>([out_channels], bound)?.requires_grad()),
            window: Window2d::new(kernel),
            groups,
        })
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
    pub fn forward<D2: Device>(&self, x: &Tensor<D2, E>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
    {
        self.forward_on(same_device(x))
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for Conv2d<D, E> {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        x.try_conv2d(&self.weight, self.bias.as_ref(), self.window, self.groups)
    }
}

crate::module!(Conv2d<E> { weight, bias; window, groups });

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
#[derive(Clone, Debug)]
pub struct Conv1d<D: Device, E: FloatElement = f32> {
    /// `[out_channels, in_channels / groups, K]`.
    pub weight: Tensor<D, E>,
    /// `[out_channels]`, if the layer has one.
    pub bias: Option<Tensor<D, E>>,
    /// Stride, padding and dilation (the kernel size is the weight's).
    pub window: Window1d,
    /// Channel groups, as for [`Conv2d`].
    pub groups: usize,
}

impl<D: Device, E: FloatElement> Conv1d<D, E> {
    /// A convolution with kernel size `kernel`, stride 1, no padding, no
    /// dilation, one group and a bias. Fails when `D` is unavailable.
    #[fallible]
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        Self::try_with_groups(in_channels, out_channels, kernel, 1)
    }

    /// A convolution with kernel size `kernel` in `groups` channel groups.
    /// Fails unless `groups` divides both channel counts.
    pub fn try_with_groups(in_channels: usize, out_channels: usize, kernel: usize, groups: usize) -> Result<Self> {
        check_groups::<D>("Conv1d", in_channels, out_channels, groups)?;
        // Conv2d's initialisation over a height of 1 is Conv1d's.
        let conv = Conv2d::<D, E>::try_with_groups(in_channels, out_channels, [1, kernel], groups)?;
        let weight = conv.weight.detach().try_squeeze(2)?.requires_grad();
        Ok(Conv1d { weight, bias: conv.bias, window: Window1d::default(), groups })
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
    pub fn forward<D2: Device>(&self, x: &Tensor<D2, E>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
    {
        self.forward_on(same_device(x))
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for Conv1d<D, E> {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        x.try_conv1d(&self.weight, self.bias.as_ref(), self.window, self.groups)
    }
}

crate::module!(Conv1d<E> { weight, bias; window, groups });

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
#[derive(Clone, Debug)]
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
}

impl<D: Device, E: FloatElement> ConvTranspose2d<D, E> {
    /// A `kernel x kernel` transposed convolution with stride 1, no
    /// padding, no dilation, one group and a bias. Fails when `D` is
    /// unavailable.
    #[fallible]
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        let bound = default_bound(out_channels * kernel * kernel);
        Ok(ConvTranspose2d {
            weight: uniform::<D, E>([in_channels, out_channels, kernel, kernel], bound)?.requires_grad(),
            bias: Some(uniform::<D, E>([out_channels], bound)?.requires_grad()),
            window: Window2d::new([kernel, kernel]),
            output_padding: [0, 0],
            groups: 1,
        })
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
    pub fn forward<D2: Device>(&self, x: &Tensor<D2, E>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
    {
        self.forward_on(same_device(x))
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for ConvTranspose2d<D, E> {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        x.try_conv_transpose2d(&self.weight, self.bias.as_ref(), self.window, self.output_padding, self.groups)
    }
}

crate::module!(ConvTranspose2d<E> { weight, bias; window, output_padding, groups });
