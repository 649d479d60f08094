//! Pooling layers: `MaxPool2d`, `AvgPool2d`, `MaxUnpool2d`,
//! `AdaptiveAvgPool2d`, `AdaptiveMaxPool2d`, and the 1-D ones
//! (`MaxPool1d`, `AvgPool1d`, `MaxUnpool1d`, `AdaptiveAvgPool1d`,
//! `AdaptiveMaxPool1d`) through the 2-D ones on a height of 1.

use super::Forward;
use super::module::stateless_module;
use super::{Module, TensorKind};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::ops::conv::{AvgPoolOptions, Window2d};
use crate::tensor::{Device, SameDevice, Tensor};
use devtensor_macros::fallible;

/// PyTorch's `nn.MaxPool2d`: the largest element of each window of
/// `[N, C, H, W]` (or `[C, H, W]`), the padding `-inf` and NaN winning (see
/// [`Tensor::try_max_pool2d`]). The gradient goes to the first largest
/// element. [`forward_with_indices`](Self::forward_with_indices) is
/// PyTorch's `return_indices=True`, for [`MaxUnpool2d`].
///
/// ```
/// use devtensor::nn::MaxPool2d;
/// use devtensor::{Cpu, Tensor};
/// let y = MaxPool2d::new(2).forward(&Tensor::<Cpu>::zeros([1, 16, 64, 64]));
/// assert_eq!(y.dims(), &[1, 16, 32, 32]);
/// // ceil_mode keeps the last, partial window: 7 -> 4 rather than 3.
/// let y = MaxPool2d::new(2).ceil_mode(true).forward(&Tensor::<Cpu>::zeros([3, 7, 7]));
/// assert_eq!(y.dims(), &[3, 4, 4]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MaxPool2d {
    /// Kernel, stride, padding and dilation.
    pub window: Window2d,
    /// Output sizes rounded up (PyTorch's `ceil_mode`, `false`).
    pub ceil_mode: bool,
}

/// PyTorch's `nn.AvgPool2d`: the mean of each window of `[N, C, H, W]`
/// (or `[C, H, W]`), padding counted as zeros unless
/// [`count_include_pad`](Self::count_include_pad) says otherwise (see
/// [`Tensor::try_avg_pool2d_with`]).
///
/// ```
/// use devtensor::nn::AvgPool2d;
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::ones([1, 1, 3, 3]);
/// assert_eq!(AvgPool2d::new(2).stride(2).padding(1).forward(&x).to_vec(), vec![0.25, 0.5, 0.5, 1.0]);
/// let layer = AvgPool2d::new(2).stride(2).padding(1).count_include_pad(false);
/// assert_eq!(layer.forward(&x).to_vec(), vec![1.0; 4]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AvgPool2d {
    /// Kernel, stride, padding and dilation (PyTorch's has no dilation).
    pub window: Window2d,
    /// `ceil_mode`, `count_include_pad` and `divisor_override`.
    pub options: AvgPoolOptions,
}

/// The settings both 2-D window pools share: a square window whose stride
/// defaults to its kernel, as PyTorch's do.
macro_rules! window_settings {
    ($($name:ident { $($default:ident: $value:expr),* };)*) => {$(
        impl $name {
            /// A `kernel x kernel` window with stride `kernel` (PyTorch's default).
            pub fn new(kernel: usize) -> Self {
                let window = Window2d { stride: [kernel, kernel], ..Window2d::new([kernel, kernel]) };
                $name { window, $($default: $value),* }
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
        }

        impl<D: Device, E: FloatElement> Forward<D, E> for $name {
            fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
                self.try_forward(x)
            }
        }

        stateless_module!($name);
    )*};
}

window_settings! {
    MaxPool2d { ceil_mode: false };
    AvgPool2d { options: AvgPoolOptions::default() };
}

impl MaxPool2d {
    /// The layer with PyTorch's `ceil_mode`.
    pub fn ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }

    /// The pooled `x` (`[N, C, H, W]` or `[C, H, W]`, any device). Fails
    /// when the window does not fit.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        batched("MaxPool2d", x, |x4| x4.try_max_pool2d_with(self.window, self.ceil_mode))
    }

    /// The pooled `x` and where each maximum was, PyTorch's
    /// `return_indices=True` (see [`Tensor::try_max_pool2d_with_indices`]).
    ///
    /// ```
    /// use devtensor::nn::{MaxPool2d, MaxUnpool2d};
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 2.0, 0.0, 3.0, 4.0, 9.0, 8.0], [1, 2, 4]);
    /// let (y, indices) = MaxPool2d::new(2).forward_with_indices(&x);
    /// assert_eq!(indices.to_vec(), vec![1, 6]);
    /// let restored = MaxUnpool2d::new(2).forward(&y, &indices);
    /// assert_eq!(restored.to_vec(), vec![0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 9.0, 0.0]);
    /// ```
    #[fallible]
    pub fn forward_with_indices<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> (Tensor<D, E>, Tensor<D, i64>) {
        batched_pair("MaxPool2d", x, |x4| x4.try_max_pool2d_with_indices(self.window, self.ceil_mode))
    }
}

impl AvgPool2d {
    /// The layer with PyTorch's `ceil_mode`.
    pub fn ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.options.ceil_mode = ceil_mode;
        self
    }

    /// The layer with PyTorch's `count_include_pad` (`true` by default).
    pub fn count_include_pad(mut self, count_include_pad: bool) -> Self {
        self.options.count_include_pad = count_include_pad;
        self
    }

    /// The layer dividing every window's sum by `divisor` (PyTorch's
    /// `divisor_override`).
    pub fn divisor_override(mut self, divisor: usize) -> Self {
        self.options.divisor_override = Some(divisor);
        self
    }

    /// The pooled `x` (`[N, C, H, W]` or `[C, H, W]`, any device). Fails
    /// when the window does not fit.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        batched("AvgPool2d", x, |x4| x4.try_avg_pool2d_with(self.window, self.options))
    }
}

/// PyTorch's `nn.MaxUnpool2d`: the inverse of a [`MaxPool2d`] with the same
/// kernel, stride and padding, from its values and indices
/// ([`MaxPool2d::forward_with_indices`]): zeros with each value put back
/// where its maximum was (see [`Tensor::try_max_unpool2d`]).
///
/// ```
/// use devtensor::nn::{MaxPool2d, MaxUnpool2d};
/// use devtensor::{Cpu, Tensor};
/// let (y, indices) = MaxPool2d::new(2).forward_with_indices(&Tensor::<Cpu>::randn([2, 3, 4, 4]));
/// assert_eq!(MaxUnpool2d::new(2).forward(&y, &indices).dims(), &[2, 3, 4, 4]);
/// // An odd size comes back through PyTorch's output_size.
/// let (y, indices) = MaxPool2d::new(2).forward_with_indices(&Tensor::<Cpu>::randn([2, 3, 5, 5]));
/// assert_eq!(MaxUnpool2d::new(2).output_size([5, 5]).forward(&y, &indices).dims(), &[2, 3, 5, 5]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MaxUnpool2d {
    /// Kernel, stride and padding (the pool's; the dilation stays 1).
    pub window: Window2d,
    /// The output's `[H, W]` (PyTorch's `output_size` argument), if not
    /// the default `(size - 1) stride - 2 padding + kernel`.
    pub output_size: Option<[usize; 2]>,
}

impl MaxUnpool2d {
    /// A `kernel x kernel` window with stride `kernel` (PyTorch's default).
    pub fn new(kernel: usize) -> Self {
        MaxUnpool2d {
            window: Window2d { stride: [kernel, kernel], ..Window2d::new([kernel, kernel]) },
            output_size: None,
        }
    }

    /// The layer with stride `stride` on both axes.
    pub fn stride(mut self, stride: usize) -> Self {
        self.window.stride = [stride, stride];
        self
    }

    /// The layer with `padding` on every side.
    pub fn padding(mut self, padding: usize) -> Self {
        self.window.padding = [padding, padding];
        self
    }

    /// The layer giving `[H, W]` images (PyTorch's `output_size`), which
    /// must lie strictly within a stride of the default size.
    pub fn output_size(mut self, size: [usize; 2]) -> Self {
        self.output_size = Some(size);
        self
    }

    /// The unpooled `x` (`[N, C, H, W]` or `[C, H, W]`, any device) from
    /// `indices` of its shape on its device. Fails when the shapes differ
    /// or an index is outside the output.
    #[fallible]
    pub fn forward<D: Device, D2: Device, E: FloatElement>(
        &self,
        x: &Tensor<D, E>,
        indices: &Tensor<D2, i64>,
    ) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
    {
        x.try_max_unpool2d(indices, self.window, self.output_size)
    }
}

stateless_module!(MaxUnpool2d);

/// `pool` of `x` (`[N, C, H, W]`), or of `x` as a batch of one where it
/// is one image `[C, H, W]`, as PyTorch's 2-D pools take both.
fn batched<D: Device, E: FloatElement>(
    op: &'static str,
    x: &Tensor<D, E>,
    pool: impl FnOnce(&Tensor<D, E>) -> Result<Tensor<D, E>>,
) -> Result<Tensor<D, E>> {
    batched_pair(op, x, |x4| Ok((pool(x4)?, ()))).map(|(y, ())| y)
}

/// [`batched`] of a pool that also gives indices.
fn batched_pair<D: Device, E: FloatElement, I: Squeeze>(
    op: &'static str,
    x: &Tensor<D, E>,
    pool: impl FnOnce(&Tensor<D, E>) -> Result<(Tensor<D, E>, I)>,
) -> Result<(Tensor<D, E>, I)> {
    match x.rank() {
        4 => pool(x),
        3 => {
            let (y, indices) = pool(&x.try_unsqueeze(0)?)?;
            Ok((y.try_squeeze(0)?, indices.squeeze(0)?))
        }
        _ => Err(Error::Shape {
            op,
            device: D::name(),
            shapes: vec![x.shape().clone()],
            reason: "expected an image batch [N, C, H, W] or one image [C, H, W]".into(),
        }),
    }
}

/// A pool's second result (its indices, or nothing), shaped as its output:
/// squeezed where the output is, for one image or a 1-D pool.
trait Squeeze: Sized {
    fn squeeze(self, axis: isize) -> Result<Self>;
}

impl Squeeze for () {
    fn squeeze(self, _: isize) -> Result<Self> {
        Ok(())
    }
}

impl<D: Device> Squeeze for Tensor<D, i64> {
    fn squeeze(self, axis: isize) -> Result<Self> {
        self.try_squeeze(axis)
    }
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
fn pool1d<D: Device, E: FloatElement, I: Squeeze>(
    op: &'static str,
    x: &Tensor<D, E>,
    window: Option<(Window2d, bool)>,
    pool: impl FnOnce(&Tensor<D, E>) -> Result<(Tensor<D, E>, I)>,
) -> Result<(Tensor<D, E>, I)> {
    let error = |reason: String| Error::Shape { op, device: D::name(), shapes: vec![x.shape().clone()], reason };
    let unbatched = match x.rank() {
        2 => true,
        3 => false,
        _ => return Err(error("expected [N, C, L] or [C, L]".into())),
    };
    let length = x.dims()[x.rank() - 1];
    if let Some((w, ceil_mode)) = window {
        let [kernel, stride, padding, dilation] = [w.kernel[1], w.stride[1], w.padding[1], w.dilation[1]];
        if stride == 0 || padding * 2 > kernel || w.pooled_size([1, length], ceil_mode).is_none() {
            return Err(error(format!(
                "a window of {kernel} (stride {stride}, padding {padding}, dilation {dilation}) does not fit a \
                 length of {length}: the padding must be at most half the kernel and the stride positive"
            )));
        }
    }
    let x4 = if unbatched { x.try_unsqueeze(0)?.try_unsqueeze(2)? } else { x.try_unsqueeze(2)? };
    let (y, second) = pool(&x4)?;
    let (y, second) = (y.try_squeeze(2)?, second.squeeze(2)?);
    if unbatched { Ok((y.try_squeeze(0)?, second.squeeze(0)?)) } else { Ok((y, second)) }
}

/// [`pool1d`] of a pool with one result.
fn pool1d_values<D: Device, E: FloatElement>(
    op: &'static str,
    x: &Tensor<D, E>,
    window: Option<(Window2d, bool)>,
    pool: impl FnOnce(&Tensor<D, E>) -> Result<Tensor<D, E>>,
) -> Result<Tensor<D, E>> {
    pool1d(op, x, window, |x4| Ok((pool(x4)?, ()))).map(|(y, ())| y)
}

/// Defines a 1-D pooling layer whose stride defaults to its kernel, as
/// PyTorch's do, with its settings and `ceil_mode`.
macro_rules! window_pool1d {
    ($($name:ident { $($field:ident: $fty:ty = $value:expr, $fdoc:literal;)* } $doc:literal;)*) => {$(
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
            /// Output lengths rounded up (PyTorch's `ceil_mode`, `false`).
            pub ceil_mode: bool,
            $(#[doc = $fdoc] pub $field: $fty,)*
        }

        impl $name {
            /// A window of `kernel_size` with stride `kernel_size` (PyTorch's default).
            pub fn new(kernel_size: usize) -> Self {
                $name { kernel_size, stride: kernel_size, padding: 0, dilation: 1, ceil_mode: false, $($field: $value),* }
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

            /// The layer with PyTorch's `ceil_mode`.
            pub fn ceil_mode(mut self, ceil_mode: bool) -> Self {
                self.ceil_mode = ceil_mode;
                self
            }

            fn window(&self) -> Window2d {
                Window2d {
                    kernel: [1, self.kernel_size],
                    stride: [1, self.stride],
                    padding: [0, self.padding],
                    dilation: [1, self.dilation],
                }
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
    MaxPool1d {} "PyTorch's `nn.MaxPool1d`: the largest element of each window of `[N, C, L]` (or `[C, L]`; \
        the padding is `-inf`; the gradient goes to the first largest element). \
        [`forward_with_indices`](Self::forward_with_indices) is PyTorch's `return_indices=True`.\n\n```\n\
        use devtensor::nn::MaxPool1d;\nuse devtensor::{Cpu, Tensor};\n\
        let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 2.0, 0.0, 3.0], [1, 1, 5]);\n\
        assert_eq!(MaxPool1d::new(2).forward(&x).to_vec(), vec![5.0, 2.0]);\n\
        assert_eq!(MaxPool1d::new(2).ceil_mode(true).forward(&x).to_vec(), vec![5.0, 2.0, 3.0]);\n\
        assert_eq!(MaxPool1d::new(3).stride(1).padding(1).forward(&x).to_vec(), vec![5.0, 5.0, 5.0, 3.0, 3.0]);\n```";
    AvgPool1d {
        count_include_pad: bool = true, "Padding zeros count in each mean (PyTorch's `count_include_pad`, `true`).";
    } "PyTorch's `nn.AvgPool1d`: the mean of each window of `[N, C, L]` (or `[C, L]`), \
        padding counted as zeros unless [`count_include_pad`](Self::count_include_pad) says otherwise.\n\n```\n\
        use devtensor::nn::AvgPool1d;\nuse devtensor::{Cpu, Tensor};\n\
        let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 2.0, 0.0], [1, 4]);\n\
        assert_eq!(AvgPool1d::new(2).forward(&x).to_vec(), vec![3.0, 1.0]);\n\
        assert_eq!(AvgPool1d::new(2).padding(1).forward(&x).to_vec(), vec![0.5, 3.5, 0.0]);\n\
        assert_eq!(AvgPool1d::new(2).padding(1).count_include_pad(false).forward(&x).to_vec(), vec![1.0, 3.5, 0.0]);\n```";
}

impl MaxPool1d {
    /// The layer with dilation `dilation`.
    pub fn dilation(mut self, dilation: usize) -> Self {
        self.dilation = dilation;
        self
    }

    /// The pooled `x` (`[N, C, L]` or `[C, L]`, any device). Fails when
    /// the window does not fit.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        let window = self.window();
        pool1d_values("MaxPool1d", x, Some((window, self.ceil_mode)), |x4| {
            x4.try_max_pool2d_with(window, self.ceil_mode)
        })
    }

    /// The pooled `x` and the position of each maximum along the length,
    /// PyTorch's `return_indices=True`, for [`MaxUnpool1d`].
    ///
    /// ```
    /// use devtensor::nn::{MaxPool1d, MaxUnpool1d};
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 2.0, 0.0, 3.0], [1, 5]);
    /// let (y, indices) = MaxPool1d::new(2).forward_with_indices(&x);
    /// assert_eq!((y.to_vec(), indices.to_vec()), (vec![5.0, 2.0], vec![1, 2]));
    /// assert_eq!(MaxUnpool1d::new(2).forward(&y, &indices).to_vec(), vec![0.0, 5.0, 2.0, 0.0]);
    /// ```
    #[fallible]
    pub fn forward_with_indices<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> (Tensor<D, E>, Tensor<D, i64>) {
        let window = self.window();
        pool1d("MaxPool1d", x, Some((window, self.ceil_mode)), |x4| {
            x4.try_max_pool2d_with_indices(window, self.ceil_mode)
        })
    }
}

impl AvgPool1d {
    /// The layer with PyTorch's `count_include_pad` (`true` by default).
    pub fn count_include_pad(mut self, count_include_pad: bool) -> Self {
        self.count_include_pad = count_include_pad;
        self
    }

    /// The pooled `x` (`[N, C, L]` or `[C, L]`, any device). Fails when
    /// the window does not fit.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        let options = AvgPoolOptions {
            ceil_mode: self.ceil_mode,
            count_include_pad: self.count_include_pad,
            ..Default::default()
        };
        pool1d_values("AvgPool1d", x, Some((self.window(), self.ceil_mode)), |x4| {
            x4.try_avg_pool2d_with(self.window(), options)
        })
    }
}

/// PyTorch's `nn.MaxUnpool1d`: the inverse of a [`MaxPool1d`] with the same
/// kernel, stride and padding, from its values and indices
/// ([`MaxPool1d::forward_with_indices`]).
///
/// ```
/// use devtensor::nn::{MaxPool1d, MaxUnpool1d};
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::randn([2, 3, 9]);
/// let (y, indices) = MaxPool1d::new(3).stride(2).forward_with_indices(&x);
/// assert_eq!(MaxUnpool1d::new(3).stride(2).forward(&y, &indices).dims(), &[2, 3, 9]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MaxUnpool1d {
    /// The window's length (PyTorch's `kernel_size`).
    pub kernel_size: usize,
    /// Step between positions (the kernel's length by default).
    pub stride: usize,
    /// The pool's padding on each end.
    pub padding: usize,
    /// The output's length (PyTorch's `output_size`), if not the default
    /// `(length - 1) stride - 2 padding + kernel_size`.
    pub output_size: Option<usize>,
}

impl MaxUnpool1d {
    /// A window of `kernel_size` with stride `kernel_size` (PyTorch's default).
    pub fn new(kernel_size: usize) -> Self {
        MaxUnpool1d { kernel_size, stride: kernel_size, padding: 0, output_size: None }
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

    /// The layer giving sequences of `length` (PyTorch's `output_size`),
    /// which must lie strictly within a stride of the default length.
    pub fn output_size(mut self, length: usize) -> Self {
        self.output_size = Some(length);
        self
    }

    /// The unpooled `x` (`[N, C, L]` or `[C, L]`, any device) from
    /// `indices` of its shape on its device. Fails when the shapes differ
    /// or an index is outside the output.
    #[fallible]
    pub fn forward<D: Device, D2: Device, E: FloatElement>(
        &self,
        x: &Tensor<D, E>,
        indices: &Tensor<D2, i64>,
    ) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
    {
        let indices: &Tensor<D, i64> = crate::tensor::same_device(indices);
        if !matches!(x.rank(), 2 | 3) {
            return Err(Error::Shape {
                op: "MaxUnpool1d",
                device: D::name(),
                shapes: vec![x.shape().clone(), indices.shape().clone()],
                reason: "expected [N, C, L] or [C, L]".into(),
            });
        }
        let window = Window2d {
            kernel: [1, self.kernel_size],
            stride: [1, self.stride],
            padding: [0, self.padding],
            dilation: [1, 1],
        };
        let axis = x.rank() as isize - 1;
        let size = self.output_size.map(|length| [1, length]);
        let indices: Tensor<D, i64> = indices.try_unsqueeze(axis)?;
        x.try_unsqueeze(axis)?.try_max_unpool2d::<D>(&indices, window, size)?.try_squeeze(axis)
    }
}

stateless_module!(MaxUnpool1d);

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
        pool1d_values("AdaptiveAvgPool1d", x, None, |x4| x4.try_adaptive_avg_pool2d([1, self.output_size]))
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
        pool1d_values(op, x, None, |x4| adaptive_max_pool(op, x4, [1, self.output_size]))
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
