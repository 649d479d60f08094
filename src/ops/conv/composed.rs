//! Convolutions built from `conv2d` and views, so their gradients come from
//! those ops: `conv1d` (a 2-D convolution over a height of 1), `conv3d`
//! (the depth taps stacked as channels of one 2-D convolution),
//! `conv_transpose2d` (the input's zero-stuffed, padded image convolved
//! with the flipped, regrouped weight) and `conv_transpose1d` (that over a
//! height of 1).

use super::{Fns, Window2d};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::ops::index::PadMode;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// The stride, padding and dilation of a 1-D convolution, PyTorch's
/// `F.conv1d` arguments (the kernel size is the weight's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window1d {
    /// Step between output positions.
    pub stride: usize,
    /// Implicit zeros on each side.
    pub padding: usize,
    /// Spacing between kernel taps.
    pub dilation: usize,
}

impl Default for Window1d {
    /// Stride 1, no padding, no dilation.
    fn default() -> Self {
        Window1d { stride: 1, padding: 0, dilation: 1 }
    }
}

impl Window1d {
    /// This window over a height of 1, for a kernel of `kernel` taps.
    fn planar(&self, kernel: usize) -> Window2d {
        Window2d {
            kernel: [1, kernel],
            stride: [1, self.stride],
            padding: [0, self.padding],
            dilation: [1, self.dilation],
        }
    }
}

/// The stride, padding and dilation of a 3-D convolution, each as
/// `[depth, height, width]`: PyTorch's `F.conv3d` arguments (the kernel
/// size is the weight's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window3d {
    /// Step between output positions.
    pub stride: [usize; 3],
    /// Implicit zeros on each side.
    pub padding: [usize; 3],
    /// Spacing between kernel taps.
    pub dilation: [usize; 3],
}

impl Default for Window3d {
    /// Stride 1, no padding, no dilation.
    fn default() -> Self {
        Window3d { stride: [1; 3], padding: [0; 3], dilation: [1; 3] }
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// 1-D convolution (cross-correlation) of this batch of sequences
    /// `[N, C, L]` with `weight` `[O, C / groups, K]` and an optional `bias`
    /// `[O]`: PyTorch's `F.conv1d`, giving `[N, O, LO]` with
    /// `LO = (L + 2 padding - dilation (K - 1) - 1) / stride + 1`. Fails when
    /// the shapes do not fit.
    ///
    /// ```
    /// use devtensor::ops::conv::Window1d;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [1, 1, 4]);
    /// let w = Tensor::<Cpu>::from_vec(vec![1.0, -1.0], [1, 1, 2]);
    /// let y = x.conv1d(&w, None, Window1d { padding: 1, ..Default::default() }, 1);
    /// assert_eq!(y.to_vec(), vec![-1.0, -1.0, -1.0, -1.0, 4.0]);
    /// ```
    #[fallible]
    pub fn conv1d<D2: Device, E2: Element>(
        &self,
        weight: &Tensor<D2, E2>,
        bias: Option<&Tensor<D2, E2>>,
        window: Window1d,
        groups: usize,
    ) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let (weight, bias): (&Self, Option<&Self>) = (same_device(weight), bias.map(same_device));
        core_call!(D, Fns<E>.conv1d(self.core(), weight.core(), bias.map(|b| b.core()), window, groups))
    }

    /// 3-D convolution (cross-correlation) of this batch of volumes
    /// `[N, C, D, H, W]` with `weight` `[O, C / groups, KD, KH, KW]` and an
    /// optional `bias` `[O]`: PyTorch's `F.conv3d`, giving
    /// `[N, O, OD, OH, OW]`, each output size as `conv2d`'s. The `KD` depth
    /// taps are stacked as channels of one `conv2d` over the `N · OD`
    /// output planes, so the product is one matrix product as PyTorch's
    /// and the gradients are those of the views and of `conv2d`. Fails
    /// when the shapes do not fit.
    ///
    /// ```
    /// use devtensor::ops::conv::Window3d;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::ones([1, 2, 4, 5, 5]);
    /// let w = Tensor::<Cpu>::ones([3, 2, 3, 3, 3]);
    /// let y = x.conv3d(&w, None, Window3d { padding: [1, 0, 0], ..Default::default() }, 1);
    /// assert_eq!(y.dims(), &[1, 3, 4, 3, 3]);
    /// // A first depth reads one padding plane of zeros: 2 · 2 · 9 taps.
    /// assert_eq!(y.to_vec()[0], 36.0);
    /// ```
    #[fallible]
    pub fn conv3d<D2: Device, E2: Element>(
        &self,
        weight: &Tensor<D2, E2>,
        bias: Option<&Tensor<D2, E2>>,
        window: Window3d,
        groups: usize,
    ) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let (weight, bias): (&Self, Option<&Self>) = (same_device(weight), bias.map(same_device));
        core_call!(D, Fns<E>.conv3d(self.core(), weight.core(), bias.map(|b| b.core()), window, groups))
    }

    /// Transposed 1-D convolution of this batch of sequences `[N, C, L]`
    /// with `weight` `[C, O / groups, K]` (PyTorch's layout for it) and an
    /// optional `bias` `[O]`: PyTorch's `F.conv_transpose1d`, giving
    /// `[N, O, LO]` with
    /// `LO = (L - 1) stride - 2 padding + dilation (K - 1) + output_padding + 1`;
    /// [`conv_transpose2d`](Self::conv_transpose2d) over a height of 1.
    /// Fails when the shapes do not fit.
    ///
    /// ```
    /// use devtensor::ops::conv::Window1d;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0], [1, 1, 3]);
    /// let w = Tensor::<Cpu>::from_vec(vec![1.0, 10.0], [1, 1, 2]);
    /// let y = x.conv_transpose1d(&w, None, Window1d { stride: 2, ..Default::default() }, 0, 1);
    /// assert_eq!(y.to_vec(), vec![1.0, 10.0, 2.0, 20.0, 3.0, 30.0]);
    /// ```
    #[fallible]
    pub fn conv_transpose1d<D2: Device, E2: Element>(
        &self,
        weight: &Tensor<D2, E2>,
        bias: Option<&Tensor<D2, E2>>,
        window: Window1d,
        output_padding: usize,
        groups: usize,
    ) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let (weight, bias): (&Self, Option<&Self>) = (same_device(weight), bias.map(same_device));
        core_call!(D, Fns<E>.conv_transpose1d(self.core(), weight.core(), bias.map(|b| b.core()), window, output_padding, groups))
    }

    /// Transposed 2-D convolution of this image batch `[N, C, H, W]` with
    /// `weight` `[C, O / groups, KH, KW]` (PyTorch's layout for it) and an
    /// optional `bias` `[O]`: PyTorch's `F.conv_transpose2d`, the gradient
    /// of `conv2d` with respect to its input, as used to upsample. `window`
    /// gives the stride, padding and dilation (its kernel size is ignored:
    /// the weight's counts), `output_padding` the extra rows and columns at
    /// the bottom and right, each below the stride or the dilation. The
    /// result is `[N, O, OH, OW]` with
    /// `OH = (H - 1) stride - 2 padding + dilation (KH - 1) + output_padding + 1`.
    /// Fails when the shapes do not fit.
    ///
    /// ```
    /// use devtensor::ops::conv::Window2d;
    /// use devtensor::{Cpu, Tensor};
    /// // Stride 2 with a 2x2 kernel of ones spreads each pixel over a 2x2 block.
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [1, 1, 2, 2]);
    /// let w = Tensor::<Cpu>::ones([1, 1, 2, 2]);
    /// let window = Window2d { stride: [2, 2], ..Window2d::new([2, 2]) };
    /// let y = x.conv_transpose2d(&w, None, window, [0, 0], 1);
    /// let rows = [[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 2.0, 2.0], [3.0, 3.0, 4.0, 4.0], [3.0, 3.0, 4.0, 4.0]];
    /// assert_eq!((y.dims(), y.to_vec()), (&[1, 1, 4, 4][..], rows.concat()));
    /// ```
    #[fallible]
    pub fn conv_transpose2d<D2: Device, E2: Element>(
        &self,
        weight: &Tensor<D2, E2>,
        bias: Option<&Tensor<D2, E2>>,
        window: Window2d,
        output_padding: [usize; 2],
        groups: usize,
    ) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let (weight, bias): (&Self, Option<&Self>) = (same_device(weight), bias.map(same_device));
        core_call!(D, Fns<E>.conv_transpose2d(self.core(), weight.core(), bias.map(|b| b.core()), window, output_padding, groups))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    pub(super) fn core_conv1d(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        window: Window1d,
        groups: usize,
    ) -> Result<Self> {
        let rank_error = || {
            let mut shapes = vec![self.shape().clone(), weight.shape().clone()];
            shapes.extend(bias.map(|b| b.shape().clone()));
            Error::Shape {
                op: "conv1d",
                device: D::name(),
                shapes,
                reason: "expected an input [N, C, L] and a weight [O, C / groups, K]".into(),
            }
        };
        if self.rank() != 3 || weight.rank() != 3 {
            return Err(rank_error());
        }
        let window = window.planar(weight.dims()[2]);
        let y = self.try_unsqueeze(2)?.try_conv2d(&weight.try_unsqueeze(2)?, bias, window, groups)?;
        y.try_squeeze(2)
    }

    pub(super) fn core_conv3d(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        window: Window3d,
        groups: usize,
    ) -> Result<Self> {
        const OP: &str = "conv3d";
        let error = |reason: String| {
            let mut shapes = vec![self.shape().clone(), weight.shape().clone()];
            shapes.extend(bias.map(|b| b.shape().clone()));
            Error::Shape { op: OP, device: D::name(), shapes, reason }
        };
        let (&[n, c, depth, h, w], &[out_channels, group_in, kd, kh, kw]) = (self.dims(), weight.dims()) else {
            return Err(error("expected an input [N, C, D, H, W] and a weight [O, C / groups, KD, KH, KW]".into()));
        };
        if groups == 0 || group_in * groups != c || !out_channels.is_multiple_of(groups) {
            return Err(error(format!(
                "the weight's second axis times groups = {groups} must be the input's {c} channels, and groups \
                 must divide its first axis"
            )));
        }
        if bias.is_some_and(|b| b.dims() != [out_channels]) {
            return Err(error(format!("the bias must be [{out_channels}]")));
        }
        let Window3d { stride, padding, dilation } = window;
        let kernel = [kd, kh, kw];
        let output = (0..3)
            .map(|a| {
                let window = Window2d {
                    kernel: [1, kernel[a]],
                    stride: [1, stride[a]],
                    padding: [0, padding[a]],
                    dilation: [1, dilation[a]],
                };
                window.output_size([1, [depth, h, w][a]]).map(|[_, o]| o)
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                error(format!(
                    "a kernel of {kernel:?} with stride {stride:?}, padding {padding:?} and dilation {dilation:?} \
                     does not fit a volume of {depth}x{h}x{w}"
                ))
            })?;
        let out_depth = output[0];
        // The depth axis padded; then the planes that depth tap `t` reads
        // for every output depth, `t · dilation + od · stride`.
        let padded = if padding[0] > 0 {
            self.try_pad(&[0, 0, 0, 0, padding[0] as isize, padding[0] as isize], PadMode::Constant(E::ZERO))?
        } else {
            self.clone()
        };
        // Each tap as a view [N, OD, groups, C / groups, H, W], stacked (the
        // one copy) into [N, OD, groups, KD, C / groups, H, W]: as
        // [N · OD, groups · KD · C / groups, H, W], each group's channels
        // hold its KD taps of its input channels, as the weight's
        // [O, KD · C / groups, KH, KW] reads them.
        let taps = (0..kd)
            .map(|t| {
                let planes = padded.strided_slice(2, t * dilation[0], out_depth, stride[0])?;
                planes.try_permute([0, 2, 1, 3, 4])?.try_unflatten(2, [groups as isize, group_in as isize])
            })
            .collect::<Result<Vec<_>>>()?;
        let stacked =
            Tensor::try_stack(&taps.iter().collect::<Vec<_>>(), 3)?.try_reshape([n * out_depth, c * kd, h, w])?;
        let planar_weight = weight.try_permute([0, 2, 1, 3, 4])?.try_reshape([out_channels, kd * group_in, kh, kw])?;
        let planar = Window2d {
            kernel: [kh, kw],
            stride: [stride[1], stride[2]],
            padding: [padding[1], padding[2]],
            dilation: [dilation[1], dilation[2]],
        };
        let y = stacked.try_conv2d(&planar_weight, bias, planar, groups)?;
        y.try_reshape([n, out_depth, out_channels, output[1], output[2]])?
            .try_permute([0, 2, 1, 3, 4])?
            .try_contiguous()
    }

    pub(super) fn core_conv_transpose1d(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        window: Window1d,
        output_padding: usize,
        groups: usize,
    ) -> Result<Self> {
        let error = |reason: String| {
            let mut shapes = vec![self.shape().clone(), weight.shape().clone()];
            shapes.extend(bias.map(|b| b.shape().clone()));
            Error::Shape { op: "conv_transpose1d", device: D::name(), shapes, reason }
        };
        let (&[_, c, _], &[wc, _, kernel]) = (self.dims(), weight.dims()) else {
            return Err(error("expected an input [N, C, L] and a weight [C, O / groups, K]".into()));
        };
        if groups == 0 || wc != c || !c.is_multiple_of(groups) {
            return Err(error(format!(
                "the weight needs the input's {c} channels first, divisible into {groups} groups"
            )));
        }
        let window = window.planar(kernel);
        let y = self.try_unsqueeze(2)?.try_conv_transpose2d(
            &weight.try_unsqueeze(2)?,
            bias,
            window,
            [0, output_padding],
            groups,
        )?;
        y.try_squeeze(2)
    }

    pub(super) fn core_conv_transpose2d(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        window: Window2d,
        output_padding: [usize; 2],
        groups: usize,
    ) -> Result<Self> {
        const OP: &str = "conv_transpose2d";
        let error = |reason: String| {
            let mut shapes = vec![self.shape().clone(), weight.shape().clone()];
            shapes.extend(bias.map(|b| b.shape().clone()));
            Error::Shape { op: OP, device: D::name(), shapes, reason }
        };
        let (&[n, c, h, w], &[wc, group_out, kh, kw]) = (self.dims(), weight.dims()) else {
            return Err(error("expected an input [N, C, H, W] and a weight [C, O / groups, KH, KW]".into()));
        };
        if groups == 0 || wc != c || !c.is_multiple_of(groups) {
            return Err(error(format!(
                "the weight needs the input's {c} channels first, divisible into {groups} groups"
            )));
        }
        let Window2d { stride, padding, dilation, .. } = window;
        for axis in 0..2 {
            if stride[axis] == 0 || dilation[axis] == 0 {
                return Err(error("stride and dilation must be at least 1".into()));
            }
            if output_padding[axis] >= stride[axis].max(dilation[axis]) {
                return Err(error(format!(
                    "output_padding {:?} must be smaller than the stride {stride:?} or the dilation {dilation:?}",
                    output_padding
                )));
            }
        }
        if n * h * w == 0 || kh * kw == 0 {
            return Err(error("the input and the kernel need at least one position".into()));
        }
        let fits = |axis: usize, len: usize, k: usize| {
            (len - 1) * stride[axis] + dilation[axis] * (k - 1) + output_padding[axis] + 1 > 2 * padding[axis]
        };
        if !fits(0, h, kh) || !fits(1, w, kw) {
            return Err(error(format!("padding {padding:?} leaves no output")));
        }
        let out_channels = group_out * groups;
        if bias.is_some_and(|b| b.dims() != [out_channels]) {
            return Err(error(format!("the bias must be [{out_channels}]")));
        }
        // Zeros between the input's rows and columns (stride - 1 of them).
        let stuffed = self.stuff(2, stride[0])?.stuff(3, stride[1])?;
        // Each side padded by dilation (k - 1) - padding (a crop where
        // negative), and output_padding more at the bottom and right.
        let side = |axis: usize, k: usize| (dilation[axis] * (k - 1)) as isize - padding[axis] as isize;
        let (top, left) = (side(0, kh), side(1, kw));
        let padded = stuffed.try_pad(
            &[left, left + output_padding[1] as isize, top, top + output_padding[0] as isize],
            PadMode::Constant(E::ZERO),
        )?;
        // The weight flipped in space, each group's [C/g, O/g] turned to [O/g, C/g].
        let reverse = |len: usize| Tensor::<D, i64>::try_from_vec((0..len as i64).rev().collect(), [len]);
        let flipped = weight.try_index_select(2, &reverse(kh)?)?.try_index_select(3, &reverse(kw)?)?;
        let regrouped = flipped
            .try_reshape([groups, c / groups, group_out, kh, kw])?
            .try_transpose(1, 2)?
            .try_reshape([out_channels, c / groups, kh, kw])?;
        let window = Window2d { kernel: [kh, kw], stride: [1, 1], padding: [0, 0], dilation };
        padded.try_conv2d(&regrouped, bias, window, groups)
    }

    /// This tensor with `stride - 1` zeros after each element along `axis`
    /// but the last (the input of a strided transposed convolution).
    fn stuff(&self, axis: usize, stride: usize) -> Result<Self> {
        if stride == 1 {
            return Ok(self.clone());
        }
        let len = self.dims()[axis];
        let mut pad = vec![0isize; 2 * (self.rank() - axis)];
        // F.pad's pairs run from the last axis: the new axis after `axis` is
        // the pair before the axes that follow it.
        let after = self.rank() - axis - 1;
        pad[2 * after + 1] = stride as isize - 1;
        let spread = self.try_unsqueeze(axis as isize + 1)?.try_pad(&pad, PadMode::Constant(E::ZERO))?;
        let mut dims = self.dims().to_vec();
        dims[axis] = len * stride;
        spread.try_reshape(dims)?.try_narrow(axis as isize, 0, (len - 1) * stride + 1)
    }
}
