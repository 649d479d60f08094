//! Pooling over the windows of an image batch `[N, C, H, W]`:
//! `max_pool2d` (with PyTorch's `ceil_mode` and `return_indices`), its
//! inverse `max_unpool2d`, `avg_pool2d` (with `ceil_mode`,
//! `count_include_pad` and `divisor_override`) and `adaptive_avg_pool2d`.
//!
//! The window pools unfold the image into its windows' columns
//! (`unfold`) and reduce them over the tap axis, so their
//! gradients are those of the reduction and of `unfold` (a `fold`), on
//! every device and to any order. `max_unpool2d` is a `scatter` into zeros.

use super::{Fns, Unfold2d, Window2d};
use crate::element::FloatElement;
use crate::error::{Error, Result, check_elem_count};
use crate::layout::Shape;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// The options of PyTorch's `F.avg_pool2d` (and `nn.AvgPool2d`) beyond
/// its window, with PyTorch's defaults by `Default`: no `ceil_mode`,
/// padding counted in each mean, no divisor override. Build one with
/// `..Default::default()`, so that an option added later breaks no program.
///
/// ```
/// use devtensor::ops::conv::{AvgPoolOptions, Window2d};
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::ones([1, 1, 3, 3]);
/// let window = Window2d { stride: [2, 2], padding: [1, 1], ..Window2d::new([2, 2]) };
/// // The corner windows hold one pixel and three padding zeros.
/// assert_eq!(x.avg_pool2d(window).to_vec(), vec![0.25, 0.5, 0.5, 1.0]);
/// let options = AvgPoolOptions { count_include_pad: false, ..Default::default() };
/// assert_eq!(x.avg_pool2d_with(window, options).to_vec(), vec![1.0; 4]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPoolOptions {
    /// Output sizes rounded up rather than down (PyTorch's `ceil_mode`):
    /// a last window that starts inside the image or its leading padding
    /// is kept even where it runs past the trailing padding.
    pub ceil_mode: bool,
    /// Padding zeros count in each window's mean (PyTorch's
    /// `count_include_pad`, `true`). With `false`, each window is the mean
    /// of its pixels inside the image. Neither counts the part of a
    /// `ceil_mode` window past the padding.
    pub count_include_pad: bool,
    /// One divisor for every window in place of its size (PyTorch's
    /// `divisor_override`); it must not be zero.
    pub divisor_override: Option<usize>,
}

impl Default for AvgPoolOptions {
    fn default() -> Self {
        AvgPoolOptions { ceil_mode: false, count_include_pad: true, divisor_override: None }
    }
}

impl Window2d {
    /// The pooled size of an image of `size` (`[H, W]`), PyTorch's
    /// `pooling_output_shape`: `(size + 2 padding - span) / stride + 1`,
    /// the quotient rounded up with `ceil_mode` (so a window running past
    /// the padding can be kept, even where no whole window fits), less the
    /// last window where it would start past the image and its leading
    /// padding. `None` where no window is left or a size is zero.
    pub(crate) fn pooled_size(&self, size: [usize; 2], ceil_mode: bool) -> Option<[usize; 2]> {
        if !ceil_mode {
            return self.output_size(size);
        }
        let axis = |a: usize| -> Option<usize> {
            let (stride, padding) = (self.stride[a], self.padding[a]);
            let span = self.dilation[a].checked_mul(self.kernel[a].checked_sub(1)?)?.checked_add(1)?;
            let reach = size[a].checked_add(padding.checked_mul(2)?)?.checked_add(stride.checked_sub(1)?)?;
            if self.dilation[a] == 0 || size[a] == 0 || reach < span {
                return None;
            }
            let out = (reach - span) / stride + 1;
            // (out - 1) stride <= reach - span, so neither side overflows.
            Some(if (out - 1) * stride >= size[a] + padding { out - 1 } else { out }).filter(|&o| o > 0)
        };
        Some([axis(0)?, axis(1)?])
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// The largest element of each window, PyTorch's `F.max_pool2d` (the
    /// padding is `-inf`; NaN wins). `[N, C, H, W]` becomes `[N, C, OH, OW]`.
    /// The gradient goes to the first largest element of each window.
    ///
    /// ```
    /// use devtensor::ops::conv::Window2d;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec((0..16).map(|v| v as f32).collect(), [1, 1, 4, 4]);
    /// let window = Window2d { stride: [2, 2], ..Window2d::new([2, 2]) };
    /// assert_eq!(x.try_max_pool2d(window)?.to_vec(), vec![5.0, 7.0, 13.0, 15.0]);
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    #[fallible]
    pub fn max_pool2d(&self, window: Window2d) -> Self {
        core_call!(D, Fns<E>.max_pool2d(self.core(), window, false))
    }

    /// [`max_pool2d`](Self::max_pool2d) with PyTorch's `ceil_mode`: with
    /// `true`, the output sizes are rounded up, so that a last window
    /// running past the image (into `-inf`) is kept, as long as it starts
    /// inside the image or its leading padding.
    ///
    /// ```
    /// use devtensor::ops::conv::Window2d;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec((0..5).map(|v| v as f32).collect(), [1, 1, 1, 5]);
    /// let window = Window2d { stride: [1, 2], ..Window2d::new([1, 2]) };
    /// assert_eq!(x.max_pool2d_with(window, false).to_vec(), vec![1.0, 3.0]);
    /// assert_eq!(x.max_pool2d_with(window, true).to_vec(), vec![1.0, 3.0, 4.0]);
    /// ```
    #[fallible]
    pub fn max_pool2d_with(&self, window: Window2d, ceil_mode: bool) -> Self {
        core_call!(D, Fns<E>.max_pool2d(self.core(), window, ceil_mode))
    }

    /// [`max_pool2d_with`](Self::max_pool2d_with) and, beside it, where
    /// each maximum was: PyTorch's `F.max_pool2d(.., return_indices=True)`.
    /// An index is the flat position `row * W + column` in its image plane,
    /// what [`max_unpool2d`](Self::max_unpool2d) takes. It is the first
    /// largest element's, and the first NaN's where a window holds one
    /// (PyTorch's CPU kernel gives the last NaN's). A window of `-inf`
    /// alone points, as PyTorch's, at its first tap at or after the
    /// image's first row and column (outside the image, with dilation, if
    /// every tap is in the padding).
    ///
    /// ```
    /// use devtensor::ops::conv::Window2d;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 2.0, 0.0, 3.0, 4.0, 9.0, 8.0], [1, 1, 2, 4]);
    /// let window = Window2d { stride: [2, 2], ..Window2d::new([2, 2]) };
    /// let (values, indices) = x.max_pool2d_with_indices(window, false);
    /// assert_eq!((values.to_vec(), indices.to_vec()), (vec![5.0, 9.0], vec![1, 6]));
    /// ```
    #[fallible]
    pub fn max_pool2d_with_indices(&self, window: Window2d, ceil_mode: bool) -> (Self, Tensor<D, i64>) {
        core_call!(D, Fns<E>.max_pool2d_with_indices(self.core(), window, ceil_mode))
    }

    /// The inverse of [`max_pool2d_with_indices`](Self::max_pool2d_with_indices),
    /// PyTorch's `F.max_unpool2d`: zeros of `[N, C, OH, OW]` (or
    /// `[C, OH, OW]` for one image) with each value of this tensor at the
    /// flat position its index gives in its plane. `window` is the
    /// pool's kernel, stride and padding. The output size is
    /// `(H - 1) stride - 2 padding + dilation (kernel - 1) + 1` (PyTorch's,
    /// whose `MaxUnpool2d` has no dilation), or `output_size`, which must
    /// lie strictly within a stride of it, as PyTorch requires. Where two
    /// values share an index, the later one is kept. Fails when the
    /// shapes differ or an index is outside the output plane.
    ///
    /// ```
    /// use devtensor::ops::conv::Window2d;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 2.0, 0.0, 3.0, 4.0, 9.0, 8.0], [1, 1, 2, 4]);
    /// let window = Window2d { stride: [2, 2], ..Window2d::new([2, 2]) };
    /// let (values, indices) = x.max_pool2d_with_indices(window, false);
    /// let restored = values.max_unpool2d(&indices, window, None);
    /// assert_eq!(restored.to_vec(), vec![0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 9.0, 0.0]);
    /// ```
    #[fallible]
    pub fn max_unpool2d<D2: Device>(
        &self,
        indices: &Tensor<D2, i64>,
        window: Window2d,
        output_size: Option<[usize; 2]>,
    ) -> Self
    where
        D: SameDevice<D2>,
    {
        let indices: &Tensor<D, i64> = same_device(indices);
        core_call!(D, Fns<E>.max_unpool2d(self.core(), indices.core(), window, output_size))
    }

    /// The mean of each window, PyTorch's `F.avg_pool2d` with its defaults
    /// (padding counts as zeros in the mean).
    #[fallible]
    pub fn avg_pool2d(&self, window: Window2d) -> Self {
        core_call!(D, Fns<E>.avg_pool2d(self.core(), window, AvgPoolOptions::default()))
    }

    /// [`avg_pool2d`](Self::avg_pool2d) with PyTorch's other arguments,
    /// `ceil_mode`, `count_include_pad` and `divisor_override`
    /// ([`AvgPoolOptions`]). A window with no pixel of the image in it
    /// (possible with `ceil_mode`) is 0, as in PyTorch.
    ///
    /// ```
    /// use devtensor::ops::conv::{AvgPoolOptions, Window2d};
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0], [1, 1, 1, 5]);
    /// let window = Window2d { stride: [1, 2], ..Window2d::new([1, 2]) };
    /// let ceil = AvgPoolOptions { ceil_mode: true, ..Default::default() };
    /// // The last window holds 5 alone, and past the padding counts nothing.
    /// assert_eq!(x.avg_pool2d_with(window, ceil).to_vec(), vec![1.5, 3.5, 5.0]);
    /// let summed = AvgPoolOptions { divisor_override: Some(1), ..Default::default() };
    /// assert_eq!(x.avg_pool2d_with(window, summed).to_vec(), vec![3.0, 7.0]);
    /// ```
    #[fallible]
    pub fn avg_pool2d_with(&self, window: Window2d, options: AvgPoolOptions) -> Self {
        core_call!(D, Fns<E>.avg_pool2d(self.core(), window, options))
    }

    /// The mean over `size` (`[OH, OW]`) windows that tile the image as
    /// evenly as possible, PyTorch's `F.adaptive_avg_pool2d`: output row `i`
    /// averages input rows `floor(i H / OH)..ceil((i + 1) H / OH)`, and
    /// likewise for columns.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec((0..9).map(|v| v as f32).collect(), [1, 1, 3, 3]);
    /// assert_eq!(x.try_adaptive_avg_pool2d([1, 1])?.to_vec(), vec![4.0]);
    /// assert_eq!(x.try_adaptive_avg_pool2d([2, 2])?.to_vec(), vec![2.0, 3.0, 5.0, 6.0]);
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    #[fallible]
    pub fn adaptive_avg_pool2d(&self, size: [usize; 2]) -> Self {
        core_call!(D, Fns<E>.adaptive_avg_pool2d(self.core(), size))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    /// Checks PyTorch's pooling rule (padding at most half the kernel) and
    /// sizes the output, rounding up with `ceil_mode`.
    fn pooling_geometry(&self, op: &'static str, window: Window2d, ceil_mode: bool) -> Result<Unfold2d> {
        if (0..2).any(|a| window.padding[a] > window.kernel[a] / 2) {
            return Err(Error::Argument {
                op,
                device: D::name(),
                reason: format!("padding {:?} must be at most half the kernel {:?}", window.padding, window.kernel),
            });
        }
        self.window_geometry(op, window, |size| window.pooled_size(size, ceil_mode))
    }

    /// The columns `[N, C, KH * KW, OH * OW]` of the pooled image.
    fn pool_columns(&self, op: &'static str, window: Window2d, ceil_mode: bool, pad: E) -> Result<(Self, Unfold2d)> {
        let geometry = self.pooling_geometry(op, window, ceil_mode)?;
        Ok((self.unfold(geometry, pad)?, geometry))
    }

    pub(super) fn core_max_pool2d(&self, window: Window2d, ceil_mode: bool) -> Result<Self> {
        let (columns, geometry) = self.pool_columns("max_pool2d", window, ceil_mode, E::MIN)?;
        columns.try_max_axis(2)?.try_reshape(pooled_shape(&geometry))
    }

    pub(super) fn core_max_pool2d_with_indices(
        &self,
        window: Window2d,
        ceil_mode: bool,
    ) -> Result<(Self, Tensor<D, i64>)> {
        let (columns, geometry) = self.pool_columns("max_pool2d_with_indices", window, ceil_mode, E::MIN)?;
        let shape = pooled_shape(&geometry);
        let values = columns.try_max_axis(2)?.try_reshape(shape)?;
        // The tap of each maximum, turned into its pixel by a table of
        // every window's taps (`[KH * KW, OH * OW]`, as the columns).
        let taps = columns.try_argmax_keepdim(2)?;
        let table =
            Tensor::<D, i64>::try_from_vec(tap_positions(&geometry), [1, 1, columns.dims()[2], columns.dims()[3]])?;
        let table = table.try_expand(columns.dims().iter().map(|&d| d as isize).collect::<Vec<_>>())?;
        Ok((values, table.try_gather(2, &taps)?.try_reshape(shape)?))
    }

    pub(super) fn core_max_unpool2d(
        &self,
        indices: &Tensor<D, i64>,
        window: Window2d,
        output_size: Option<[usize; 2]>,
    ) -> Result<Self> {
        const OP: &str = "max_unpool2d";
        let error = |reason: String| Error::Shape {
            op: OP,
            device: D::name(),
            shapes: vec![self.shape().clone(), indices.shape().clone()],
            reason,
        };
        let (n, c, h, w) = match *self.dims() {
            [n, c, h, w] => (n, c, h, w),
            [c, h, w] => (1, c, h, w),
            _ => return Err(error("expected an input [N, C, H, W] or [C, H, W]".into())),
        };
        if indices.shape() != self.shape() {
            return Err(error("the indices must have the input's shape".into()));
        }
        let mut size = [0; 2];
        for (axis, len) in [h, w].into_iter().enumerate() {
            let (k, s, p, d) = (window.kernel[axis], window.stride[axis], window.padding[axis], window.dilation[axis]);
            let default = len
                .saturating_sub(1)
                .checked_mul(s)
                .and_then(|v| v.checked_add(d.checked_mul(k.saturating_sub(1))?.checked_add(1)?))
                .and_then(|v| v.checked_sub(p.checked_mul(2)?))
                .filter(|_| len > 0 && k > 0)
                .ok_or_else(|| error(format!("the window {window:?} leaves no output for a size of {len}")))?;
            size[axis] = match output_size {
                None => default,
                Some(given) if given[axis].saturating_add(s) > default && given[axis] < default.saturating_add(s) => {
                    given[axis]
                }
                Some(given) => {
                    return Err(error(format!(
                        "output_size {given:?} must lie strictly within a stride of the default size: axis {axis} \
                         must be between {} and {} (exclusive)",
                        default as i128 - s as i128,
                        default as u128 + s as u128
                    )));
                }
            };
        }
        let [oh, ow] = size;
        check_elem_count(OP, D::name, &[&Shape::from([n, c, oh, ow])])?;
        let plane = oh.checked_mul(ow).ok_or_else(|| error(format!("an output plane of {oh}x{ow} is too large")))?;
        let zeros = Tensor::<D, E>::try_zeros([n, c, plane])?;
        let placed = zeros
            .try_scatter(2, &indices.try_reshape([n, c, h * w])?, &self.try_reshape([n, c, h * w])?)
            .map_err(|e| match e {
                Error::Index { index, .. } => Error::Argument {
                    op: OP,
                    device: D::name(),
                    reason: format!("found an invalid max index {index} (the output planes are {oh}x{ow})"),
                },
                other => other,
            })?;
        if self.rank() == 3 { placed.try_reshape([c, oh, ow]) } else { placed.try_reshape([n, c, oh, ow]) }
    }

    pub(super) fn core_avg_pool2d(&self, window: Window2d, options: AvgPoolOptions) -> Result<Self> {
        const OP: &str = "avg_pool2d";
        if options.divisor_override == Some(0) {
            return Err(Error::Argument {
                op: OP,
                device: D::name(),
                reason: "divisor_override must not be zero".into(),
            });
        }
        let (columns, geometry) = self.pool_columns(OP, window, options.ceil_mode, E::ZERO)?;
        let shape = pooled_shape(&geometry);
        if options == AvgPoolOptions::default() {
            // Every window lies inside the padded image: a plain mean.
            return columns.try_mean_axis(2)?.try_reshape(shape);
        }
        let divisors = Tensor::<D, E>::try_from_vec(divisors(&geometry, options), [columns.dims()[3]])?;
        columns.try_sum_axis(2)?.try_div(&divisors)?.try_reshape(shape)
    }

    pub(super) fn core_adaptive_avg_pool2d(&self, size: [usize; 2]) -> Result<Self> {
        const OP: &str = "adaptive_avg_pool2d";
        let &[_, _, h, w] = self.dims() else {
            return Err(Error::Shape {
                op: OP,
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: "expected an image batch [N, C, H, W]".into(),
            });
        };
        if size.contains(&0) || h == 0 || w == 0 {
            return Err(Error::Argument {
                op: OP,
                device: D::name(),
                reason: format!("output size {size:?} and input size [{h}, {w}] must be positive"),
            });
        }
        // Rows, then columns: the mean of a rectangle is the mean over its
        // rows of the means over its columns.
        let along = |x: &Self, axis: usize, input: usize, output: usize| -> Result<Self> {
            if input == output {
                return Ok(x.clone());
            }
            let parts = (0..output)
                .map(|i| {
                    let (start, end) = (i * input / output, ((i + 1) * input).div_ceil(output));
                    x.try_narrow(axis as isize, start, end - start)?.try_mean_keepdim(axis as isize)
                })
                .collect::<Result<Vec<_>>>()?;
            Tensor::try_cat(&parts.iter().collect::<Vec<_>>(), axis as isize)
        };
        along(&along(self, 2, h, size[0])?, 3, w, size[1])
    }
}

/// `[N, C, OH, OW]` of a pooling.
fn pooled_shape(geometry: &Unfold2d) -> [usize; 4] {
    let [n, c, _, _] = geometry.image;
    [n, c, geometry.output[0], geometry.output[1]]
}

/// For every tap (`KH * KW`) of every window (`OH * OW`), the flat pixel
/// `row * W + column` it reads. A tap in the padding takes the pixel
/// PyTorch's kernel starts its search from: the window's first tap at or
/// after the image's first row and column.
fn tap_positions(geometry: &Unfold2d) -> Vec<i64> {
    let [_, _, h, w] = geometry.image;
    let window = &geometry.window;
    let [kh, kw] = window.kernel;
    let [oh, ow] = geometry.output;
    // Along axis `a`, the pixel that tap `t` of window `o` reads, in the
    // padded image's coordinates.
    let padded = |a: usize, o: usize, t: usize| o * window.stride[a] + t * window.dilation[a];
    let first = |a: usize, o: usize| {
        let skipped = window.padding[a].saturating_sub(padded(a, o, 0)).div_ceil(window.dilation[a]);
        padded(a, o, skipped) - window.padding[a]
    };
    let inside =
        |a: usize, len: usize, o: usize, t: usize| padded(a, o, t).checked_sub(window.padding[a]).filter(|&p| p < len);
    let mut table = Vec::with_capacity(kh * kw * oh * ow);
    for i in 0..kh {
        for j in 0..kw {
            for y in 0..oh {
                for x in 0..ow {
                    let (row, column) = match (inside(0, h, y, i), inside(1, w, x, j)) {
                        (Some(row), Some(column)) => (row, column),
                        _ => (first(0, y), first(1, x)),
                    };
                    table.push((row * w + column) as i64);
                }
            }
        }
    }
    table
}

/// Each window's divisor (`OH * OW` of them), as PyTorch's kernel counts
/// it: the taps inside the padded image, or inside the image alone without
/// `count_include_pad`, or the override; 1 for a window outside the image,
/// whose sum is 0 (PyTorch writes 0 there).
fn divisors<E: FloatElement>(geometry: &Unfold2d, options: AvgPoolOptions) -> Vec<E> {
    let [_, _, h, w] = geometry.image;
    let window = &geometry.window;
    let [oh, ow] = geometry.output;
    // Along one axis, (taps inside the padded image, taps inside the image).
    let counts = |a: usize, len: usize, o: usize| -> (usize, usize) {
        let (stride, padding, dilation) = (window.stride[a], window.padding[a], window.dilation[a]);
        (0..window.kernel[a]).map(|t| o * stride + t * dilation).fold((0, 0), |(padded, inside), p| {
            (padded + usize::from(p < len + 2 * padding), inside + usize::from(p >= padding && p < len + padding))
        })
    };
    let mut out = Vec::with_capacity(oh * ow);
    for y in 0..oh {
        for x in 0..ow {
            let ((padded_h, inside_h), (padded_w, inside_w)) = (counts(0, h, y), counts(1, w, x));
            let inside = inside_h * inside_w;
            let divisor = match options.divisor_override {
                _ if inside == 0 => 1,
                Some(d) => d,
                None if options.count_include_pad => padded_h * padded_w,
                None => inside,
            };
            out.push(E::from_f64(divisor as f64));
        }
    }
    out
}
