//! Pooling layers: `MaxPool2d`, `AvgPool2d`, `AdaptiveAvgPool2d`,
//! `AdaptiveMaxPool2d`, and the 1-D ones (`MaxPool1d`, `AvgPool1d`,
//! `AdaptiveAvgPool1d`, `AdaptiveMaxPool1d`) through the 2-D ones on a
//! height of 1.

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

/// PyTorch's `nn.AdaptiveMaxPool2d`: the largest element of each window
/// that tiles the image of `[N, C, H, W]` (or `[C, H, W]`) into `size`
/// (`[OH, OW]`) cells, cell `(i, j)` covering rows
/// `floor(i H / OH)..ceil((i + 1) H / OH)` and the columns alike. The
/// gradient goes to the first largest element of each window, and NaN
/// wins, as in PyTorch. (`return_indices` is not supported.)
///
/// ```
/// use devtensor::nn::AdaptiveMaxPool2d;
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::from_vec((0..12).map(|v| v as f32).collect(), [1, 1, 3, 4]);
/// assert_eq!(AdaptiveMaxPool2d::new([2, 2]).forward(&x).to_vec(), vec![5.0, 7.0, 9.0, 11.0]);
/// assert_eq!(AdaptiveMaxPool2d::new([1, 1]).forward(&x).to_vec(), vec![11.0]); // global max pooling
/// ```
///
/// Composite: one `argmax` and `gather` per output cell, so meant for the
/// small outputs models use (`[1, 1]`, `[7, 7]`), not measured for speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdaptiveMaxPool2d {
    /// The output's `[OH, OW]`.
    pub size: [usize; 2],
}

impl AdaptiveMaxPool2d {
    /// A layer pooling to `size`.
    pub fn new(size: [usize; 2]) -> Self {
        AdaptiveMaxPool2d { size }
    }

    /// The pooled `x` (`[N, C, H, W]` or `[C, H, W]`, any device). Fails
    /// on another rank, an empty image or a zero output size.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        let op = "AdaptiveMaxPool2d";
        match x.rank() {
            3 => adaptive_max_pool(op, &x.try_unsqueeze(0)?, self.size)?.try_squeeze(0),
            4 => adaptive_max_pool(op, x, self.size),
            _ => Err(Error::Shape {
                op,
                device: D::name(),
                shapes: vec![x.shape().clone()],
                reason: "expected [N, C, H, W] or [C, H, W]".into(),
            }),
        }
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for AdaptiveMaxPool2d {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

stateless_module!(AdaptiveMaxPool2d);

/// PyTorch's `nn.AdaptiveMaxPool1d`: the largest element of each window
/// that tiles the length of `[N, C, L]` (or `[C, L]`) into `output_size`
/// cells, as [`AdaptiveMaxPool2d`] on one axis.
///
/// ```
/// use devtensor::nn::AdaptiveMaxPool1d;
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 2.0, 0.0, 3.0], [1, 5]);
/// assert_eq!(AdaptiveMaxPool1d::new(2).forward(&x).to_vec(), vec![5.0, 3.0]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdaptiveMaxPool1d {
    /// The output's length.
    pub output_size: usize,
}

impl AdaptiveMaxPool1d {
    /// A layer pooling to `output_size` positions.
    pub fn new(output_size: usize) -> Self {
        AdaptiveMaxPool1d { output_size }
    }

    /// The pooled `x` (`[N, C, L]` or `[C, L]`, any device). Fails on
    /// another rank, an empty sequence or a zero output size.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        let op = "AdaptiveMaxPool1d";
        pool1d(op, x, None, |x4| adaptive_max_pool(op, x4, [1, self.output_size]))
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for AdaptiveMaxPool1d {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

stateless_module!(AdaptiveMaxPool1d);

/// The adaptive max pooling of `x` `[N, C, H, W]` to `[N, C, OH, OW]`:
/// each cell's window flattened, its first argmax found without a graph,
/// and the value taken with a `gather`, whose gradient reaches that one
/// element.
fn adaptive_max_pool<D: Device, E: FloatElement>(
    op: &'static str,
    x: &Tensor<D, E>,
    size: [usize; 2],
) -> Result<Tensor<D, E>> {
    let [n, c, h, w] = [x.dims()[0], x.dims()[1], x.dims()[2], x.dims()[3]];
    let [oh, ow] = size;
    if h == 0 || w == 0 || oh == 0 || ow == 0 {
        return Err(Error::Shape {
            op,
            device: D::name(),
            shapes: vec![x.shape().clone()],
            reason: format!("cannot pool an image of {h}x{w} to {oh}x{ow}: both must be non-empty"),
        });
    }
    // PyTorch's windows: floor(i * in / out)..ceil((i + 1) * in / out).
    let window = |i: usize, input: usize, output: usize| (i * input / output, ((i + 1) * input).div_ceil(output));
    let mut cells = Vec::with_capacity(oh * ow);
    for i in 0..oh {
        let (top, bottom) = window(i, h, oh);
        let rows = x.try_narrow(2, top, bottom - top)?;
        for j in 0..ow {
            let (left, right) = window(j, w, ow);
            let flat = rows.try_narrow(3, left, right - left)?.try_reshape([n, c, (bottom - top) * (right - left)])?;
            let at = flat.detach().try_argmax(2)?.try_unsqueeze(2)?;
            cells.push(flat.try_gather::<D>(2, &at)?);
        }
    }
    let cells: Vec<&Tensor<D, E>> = cells.iter().collect();
    Tensor::try_cat(&cells, 2)?.try_reshape([n, c, oh, ow])
}
