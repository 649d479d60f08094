//! Pooling layers: `MaxPool2d`, `AvgPool2d`, `AdaptiveAvgPool2d`, and the
//! 1-D ones (`MaxPool1d`, `AvgPool1d`, `AdaptiveAvgPool1d`) through the 2-D
//! kernels on a height of 1.

use super::Forward;
use super::module::stateless_module;
use super::{Module, TensorKind};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::ops::conv::Window2d;
use crate::tensor::Device;
use crate::tensor::Tensor;
use devtensor_macros::fallible;

/// Defines a pooling layer over a [`Window2d`] whose stride defaults to
/// its kernel, as PyTorch's do.
macro_rules! window_pool {
    ($($name:ident, $method:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct $name {
            /// Kernel, stride, padding and dilation.
            pub window: Window2d,
        }

        impl $name {
            /// A `kernel x kernel` window with stride `kernel` (PyTorch's default).
            pub fn new(kernel: usize) -> Self {
                $name { window: Window2d { stride: [kernel, kernel], ..Window2d::new([kernel, kernel]) } }
            }

            /// The layer with stride `stride` on both axes.
            pub fn stride(mut self, stride: usize) -> Self {
                self.window.stride = [stride, stride];
                self
            }

            /// The layer with `padding` on every side (at most half the kernel).
            pub fn padding(mut self, padding: usize) -> Self {
                self.window.padding = [padding, padding];
                self
            }

            /// The layer with dilation `dilation` on both axes.
            pub fn dilation(mut self, dilation: usize) -> Self {
                self.window.dilation = [dilation, dilation];
                self
            }

            /// The pooled `x` (`[N, C, H, W]`, any device). Fails when the
            /// window does not fit.
            #[fallible]
            pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
                x.$method(self.window)
            }
        }

        impl<D: Device, E: FloatElement> Forward<D, E> for $name {
            fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
                self.try_forward(x)
            }
        }

        stateless_module!($name);
    )*};
}

window_pool! {
    MaxPool2d, try_max_pool2d, "PyTorch's `nn.MaxPool2d`: the largest element of each window \
        (see [`Tensor::try_max_pool2d`]).\n\n```\nuse devtensor::nn::MaxPool2d;\nuse devtensor::{Cpu, Tensor};\n\
        let y = MaxPool2d::new(2).forward(&Tensor::<Cpu>::zeros([1, 16, 64, 64]));\nassert_eq!(y.dims(), &[1, 16, 32, 32]);\n```";
    AvgPool2d, try_avg_pool2d, "PyTorch's `nn.AvgPool2d`: the mean of each window, padding counted \
        as zeros (see [`Tensor::try_avg_pool2d`]).";
}

/// PyTorch's `nn.AdaptiveAvgPool2d`: means over windows that tile the
/// image into `size` (`[OH, OW]`) cells (see [`Tensor::try_adaptive_avg_pool2d`]).
///
/// ```
/// use devtensor::nn::AdaptiveAvgPool2d;
/// use devtensor::{Cpu, Tensor};
/// let y = AdaptiveAvgPool2d::new([1, 1]).forward(&Tensor::<Cpu>::ones([2, 8, 7, 5]));
/// assert_eq!(y.dims(), &[2, 8, 1, 1]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdaptiveAvgPool2d {
    /// The output's `[OH, OW]`.
    pub size: [usize; 2],
}

impl AdaptiveAvgPool2d {
    /// A layer pooling to `size`.
    pub fn new(size: [usize; 2]) -> Self {
        AdaptiveAvgPool2d { size }
    }

    /// The pooled `x` (`[N, C, H, W]`, any device).
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        x.try_adaptive_avg_pool2d(self.size)
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for AdaptiveAvgPool2d {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

stateless_module!(AdaptiveAvgPool2d);

/// A 1-D pooling over `[N, C, L]` (or one sequence `[C, L]`) as a 2-D one
/// over `[N, C, 1, L]`, with the window's fit checked in 1-D terms first
/// (so that an error names the layer and the length, not a height of 1).
fn pool1d<D: Device, E: FloatElement>(
    op: &'static str,
    x: &Tensor<D, E>,
    window: Option<Window2d>,
    pool: impl FnOnce(&Tensor<D, E>) -> Result<Tensor<D, E>>,
) -> Result<Tensor<D, E>> {
    let error = |reason: String| Error::Shape { op, device: D::name(), shapes: vec![x.shape().clone()], reason };
    let unbatched = match x.rank() {
        2 => true,
        3 => false,
        _ => return Err(error("expected [N, C, L] or [C, L]".into())),
    };
    let length = x.dims()[x.rank() - 1];
    if let Some(w) = window {
        let [kernel, stride, padding, dilation] = [w.kernel[1], w.stride[1], w.padding[1], w.dilation[1]];
        if stride == 0 || padding * 2 > kernel || w.output_size([1, length]).is_none() {
            return Err(error(format!(
                "a window of {kernel} (stride {stride}, padding {padding}, dilation {dilation}) does not fit a \
                 length of {length}: the padding must be at most half the kernel and the stride positive"
            )));
        }
    }
    let x4 = if unbatched { x.try_unsqueeze(0)?.try_unsqueeze(2)? } else { x.try_unsqueeze(2)? };
    let y = pool(&x4)?.try_squeeze(2)?;
    if unbatched { y.try_squeeze(0) } else { Ok(y) }
}

/// Defines a 1-D pooling layer whose stride defaults to its kernel, as
/// PyTorch's do, over the 2-D op `$method`.
macro_rules! window_pool1d {
    ($($name:ident, $op:literal, $method:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct $name {
            /// The window's length (PyTorch's `kernel_size`).
            pub kernel_size: usize,
            /// Step between output positions (the kernel's length by default).
            pub stride: usize,
            /// Implicit padding on each end (at most half the kernel).
            pub padding: usize,
            /// Spacing between the window's taps (1).
            pub dilation: usize,
        }

        impl $name {
            /// A window of `kernel_size` with stride `kernel_size` (PyTorch's default).
            pub fn new(kernel_size: usize) -> Self {
                $name { kernel_size, stride: kernel_size, padding: 0, dilation: 1 }
            }

            /// The layer with stride `stride`.
            pub fn stride(mut self, stride: usize) -> Self {
                self.stride = stride;
                self
            }

            /// The layer with `padding` on each end.
            pub fn padding(mut self, padding: usize) -> Self {
                self.padding = padding;
                self
            }

            /// The pooled `x` (`[N, C, L]` or `[C, L]`, any device). Fails
            /// when the window does not fit.
            #[fallible]
            pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
                let window = Window2d {
                    kernel: [1, self.kernel_size],
                    stride: [1, self.stride],
                    padding: [0, self.padding],
                    dilation: [1, self.dilation],
                };
                pool1d($op, x, Some(window), |x4| x4.$method(window))
            }
        }

        impl<D: Device, E: FloatElement> Forward<D, E> for $name {
            fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
                self.try_forward(x)
            }
        }

        stateless_module!($name);
    )*};
}

window_pool1d! {
    MaxPool1d, "MaxPool1d", try_max_pool2d, "PyTorch's `nn.MaxPool1d`: the largest element of each window of \
        `[N, C, L]` (the padding is `-inf`; the gradient goes to the first largest element).\n\n```\n\
        use devtensor::nn::MaxPool1d;\nuse devtensor::{Cpu, Tensor};\n\
        let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 2.0, 0.0, 3.0], [1, 1, 5]);\n\
        assert_eq!(MaxPool1d::new(2).forward(&x).to_vec(), vec![5.0, 2.0]);\n\
        assert_eq!(MaxPool1d::new(3).stride(1).padding(1).forward(&x).to_vec(), vec![5.0, 5.0, 5.0, 3.0, 3.0]);\n```";
    AvgPool1d, "AvgPool1d", try_avg_pool2d, "PyTorch's `nn.AvgPool1d`: the mean of each window of `[N, C, L]`, \
        padding counted as zeros.\n\n```\nuse devtensor::nn::AvgPool1d;\nuse devtensor::{Cpu, Tensor};\n\
        let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 2.0, 0.0], [1, 4]);\n\
        assert_eq!(AvgPool1d::new(2).forward(&x).to_vec(), vec![3.0, 1.0]);\n```";
}

/// PyTorch's `nn.AdaptiveAvgPool1d`: means over windows that tile the
/// length of `[N, C, L]` (or `[C, L]`) into `output_size` cells, output `i`
/// averaging `floor(i L / O)..ceil((i + 1) L / O)`.
///
/// ```
/// use devtensor::nn::AdaptiveAvgPool1d;
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0], [1, 1, 5]);
/// assert_eq!(AdaptiveAvgPool1d::new(2).forward(&x).to_vec(), vec![2.0, 4.0]);
/// assert_eq!(AdaptiveAvgPool1d::new(1).forward(&x).dims(), &[1, 1, 1]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdaptiveAvgPool1d {
    /// The output's length.
    pub output_size: usize,
}

impl AdaptiveAvgPool1d {
    /// A layer pooling to `output_size` positions.
    pub fn new(output_size: usize) -> Self {
        AdaptiveAvgPool1d { output_size }
    }

    /// The pooled `x` (`[N, C, L]` or `[C, L]`, any device).
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        pool1d("AdaptiveAvgPool1d", x, None, |x4| x4.try_adaptive_avg_pool2d([1, self.output_size]))
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for AdaptiveAvgPool1d {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

stateless_module!(AdaptiveAvgPool1d);
