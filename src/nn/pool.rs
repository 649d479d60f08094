//! Pooling layers: `MaxPool2d`, `AvgPool2d`, `AdaptiveAvgPool2d`.

use super::Forward;
use super::module::stateless_module;
use super::{Module, TensorKind};
use crate::element::FloatElement;
use crate::error::Result;
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
