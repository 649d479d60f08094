//! Convolution and pooling over images `[N, C, H, W]`: `conv2d`; the
//! pools (`pool`: `max_pool2d`, `max_unpool2d`, `avg_pool2d`,
//! `adaptive_avg_pool2d`); and, composed from `conv2d` (see `composed`),
//! `conv1d` over sequences, `conv3d` over volumes, `conv_transpose1d` and
//! `conv_transpose2d`.
//!
//! Each is built on one device kernel pair: `unfold` (im2col) lays the
//! patches an output position reads out as columns, and `fold` is its
//! adjoint (summing columns back into an image). Pooling is a reduction
//! over the patch axis, with its gradient from the rules of `max` and
//! `mean` (`unfold`'s rule is `fold`). A convolution is a product with the
//! columns, and its two gradients are products too; with one group it is
//! recorded as one operation whose three products each take the device's
//! direct kernel where it has one (see `direct`), else unfold + `matmul`.
//! The two kernels are public as PyTorch's `F.unfold` and `F.fold` (see
//! `patches`).

mod composed;
mod cpu;
mod cuda;
mod direct;
mod patches;
mod pool;
mod simd;

use super::autocast::{self, autocast_in};
use crate::autograd::{self, rule};
use crate::backend::Backend;
use crate::element::{DType, Element, FloatElement, SameDtype};
use crate::error::check_elem_count;
use crate::error::{Error, Result};
use crate::layout::{Layout, Shape};
use crate::tensor::shell::{core_call, core_table};
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

pub use composed::{Window1d, Window3d};
pub use pool::AvgPoolOptions;

/// The sizes of a 2-D window sliding over an image, as `(height, width)`
/// pairs: kernel, stride, padding (zeros for convolution and average
/// pooling, `-inf` for max pooling) and dilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window2d {
    /// Kernel size.
    pub kernel: [usize; 2],
    /// Step between output positions.
    pub stride: [usize; 2],
    /// Implicit padding on each side.
    pub padding: [usize; 2],
    /// Spacing between kernel taps.
    pub dilation: [usize; 2],
}

impl Window2d {
    /// A `kernel` window with stride 1, no padding and no dilation.
    pub fn new(kernel: [usize; 2]) -> Self {
        Window2d { kernel, stride: [1, 1], padding: [0, 0], dilation: [1, 1] }
    }

    /// The output size for an input of `size` (`[H, W]`), PyTorch's
    /// `(size + 2 padding - dilation (kernel - 1) - 1) / stride + 1`, or `None`
    /// when the window does not fit or a size is zero.
    pub fn output_size(&self, size: [usize; 2]) -> Option<[usize; 2]> {
        let axis = |a: usize| -> Option<usize> {
            let span = self.dilation[a].checked_mul(self.kernel[a].checked_sub(1)?)?.checked_add(1)?;
            let padded = size[a].checked_add(self.padding[a].checked_mul(2)?)?;
            if self.stride[a] == 0 || self.dilation[a] == 0 || padded < span {
                return None;
            }
            Some((padded - span) / self.stride[a] + 1)
        };
        Some([axis(0)?, axis(1)?])
    }
}

/// An image and the window sliding over it, as the kernels see them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unfold2d {
    /// The image's `[N, C, H, W]`.
    pub image: [usize; 4],
    /// The window.
    pub window: Window2d,
    /// The output's `[OH, OW]`.
    pub output: [usize; 2],
}

impl Unfold2d {
    /// The shape of the columns, `[N, C, KH, KW, OH, OW]`.
    pub fn columns_shape(&self) -> Shape {
        let [n, c, _, _] = self.image;
        Shape::from([n, c, self.window.kernel[0], self.window.kernel[1], self.output[0], self.output[1]])
    }

    /// Elements of the columns (checked against overflow when the geometry
    /// was made, so the product here cannot wrap).
    pub fn columns_len(&self) -> usize {
        self.columns_shape().elem_count()
    }
}

/// Device kernels for convolution and pooling. Implemented by the core
/// devices ([`CoreDevice`]): `Cpu`, and one for every GPU.
pub trait ConvKernel: Backend {
    /// The columns (dense `[N, C, KH, KW, OH, OW]`) of the dense image that
    /// starts at `offset` of `image`, with `pad` where a tap falls in the
    /// padding.
    fn unfold<E: FloatElement>(
        image: &Self::Storage<E>,
        offset: usize,
        geometry: &Unfold2d,
        pad: E,
    ) -> Result<Self::Storage<E>>;

    /// The adjoint of [`unfold`](Self::unfold): a dense image `[N, C, H, W]`
    /// holding, at each pixel, the sum of the column entries that read it.
    fn fold<E: FloatElement>(columns: &Self::Storage<E>, geometry: &Unfold2d) -> Result<Self::Storage<E>>;

    /// `conv2d` of the image batch `image` (shaped `geometry.image`) with
    /// the weight `[out_channels, C, KH, KW]` and the optional bias
    /// `[out_channels]`, one group, into a new dense
    /// `[N, out_channels, OH, OW]`, computed directly where the device has
    /// a kernel for this geometry, element type and these layouts; `None`
    /// where it has not, and the caller unfolds and multiplies.
    ///
    /// With `round_to` (a half type, for `f32` storages), the three
    /// inputs and the output are rounded to that type's values: what the
    /// same convolution of half tensors gives, widened back. Only where
    /// [`fuses_rounding`](Self::fuses_rounding) says the device does it.
    fn conv2d_direct<E: FloatElement>(
        image: (&Self::Storage<E>, &Layout),
        weight: (&Self::Storage<E>, &Layout),
        bias: Option<(&Self::Storage<E>, &Layout)>,
        geometry: &Unfold2d,
        out_channels: usize,
        round_to: Option<DType>,
    ) -> Result<Option<Self::Storage<E>>> {
        let _ = (image, weight, bias, geometry, out_channels, round_to);
        Ok(None)
    }

    /// The weight gradient `[out_channels, C, KH, KW]` of a one-group
    /// `conv2d` of `image` (shaped `geometry.image`) whose output gradient
    /// is `grad` (`[N, out_channels, OH, OW]`), and the bias's (`grad`
    /// summed per channel, `[out_channels]`), computed directly where the
    /// device has a kernel for this geometry, element type and these
    /// layouts; `None` where it has not, and the caller unfolds the image
    /// and multiplies.
    ///
    /// `round_to` rounds the inputs and both gradients to a half type's
    /// values, as in [`conv2d_direct`](Self::conv2d_direct).
    fn conv2d_weight_direct<E: FloatElement>(
        image: (&Self::Storage<E>, &Layout),
        grad: (&Self::Storage<E>, &Layout),
        geometry: &Unfold2d,
        out_channels: usize,
        round_to: Option<DType>,
    ) -> Result<Option<[Self::Storage<E>; 2]>> {
        let _ = (image, grad, geometry, out_channels, round_to);
        Ok(None)
    }

    /// Whether this device's direct kernels compute an `autocast`
    /// convolution in `half` for this geometry by rounding in `f32`
    /// ([`conv2d_direct`](Self::conv2d_direct)'s `round_to`), the values of
    /// the half convolution without casting the tensors around it. Where
    /// they do not, `autocast` casts and runs the half kernels (the
    /// products on a GPU's tensor cores).
    fn fuses_rounding(half: DType, geometry: &Unfold2d) -> bool {
        let _ = (half, geometry);
        false
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// 2-D convolution (cross-correlation, as in PyTorch) of this image
    /// batch `[N, C, H, W]` with `weight` `[O, C / groups, KH, KW]` and an
    /// optional `bias` `[O]` (on the weight's device, which must be this
    /// tensor's): PyTorch's `F.conv2d`. The kernel size is the weight's;
    /// `window` gives the stride, padding and dilation. The result is
    /// `[N, O, OH, OW]`. Fails when the shapes do not fit.
    ///
    /// ```
    /// use devtensor::ops::conv::Window2d;
    /// use devtensor::{Cpu, Tensor};
    /// let image = Tensor::<Cpu>::from_vec((0..16).map(|v| v as f32).collect(), [1, 1, 4, 4]);
    /// let kernel = Tensor::<Cpu>::ones([1, 1, 2, 2]);
    /// let window = Window2d { stride: [2, 2], ..Window2d::new([2, 2]) };
    /// let y = image.try_conv2d(&kernel, None, window, 1)?;
    /// assert_eq!(y.to_vec(), vec![10.0, 18.0, 42.0, 50.0]);
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    #[fallible]
    pub fn conv2d<D2: Device, E2: Element>(
        &self,
        weight: &Tensor<D2, E2>,
        bias: Option<&Tensor<D2, E2>>,
        window: Window2d,
        groups: usize,
    ) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let (weight, bias): (&Self, Option<&Self>) = (same_device(weight), bias.map(same_device));
        core_call!(D, Fns<E>.conv2d(self.core(), weight.core(), bias.map(|b| b.core()), window, groups))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    /// Checks an image `[N, C, H, W]` against `window` for `op`.
    fn unfold_geometry(&self, op: &'static str, window: Window2d) -> Result<Unfold2d> {
        self.window_geometry(op, window, |size| window.output_size(size))
    }

    /// [`unfold_geometry`](Self::unfold_geometry) with the output size of
    /// `output_size` (`None` where the window does not fit).
    fn window_geometry(
        &self,
        op: &'static str,
        window: Window2d,
        output_size: impl FnOnce([usize; 2]) -> Option<[usize; 2]>,
    ) -> Result<Unfold2d> {
        let error = |reason: String| Error::Shape { op, device: D::name(), shapes: vec![self.shape().clone()], reason };
        let &[n, c, h, w] = self.dims() else {
            return Err(error("expected an image batch [N, C, H, W]".into()));
        };
        let output = output_size([h, w]).ok_or_else(|| {
            error(format!(
                "a window of kernel {:?}, stride {:?}, padding {:?} and dilation {:?} does not fit an image of {h}x{w}",
                window.kernel, window.stride, window.padding, window.dilation
            ))
        })?;
        let geometry = Unfold2d { image: [n, c, h, w], window, output };
        // The columns are the largest tensor a window makes: their count is
        // a product of six sizes, any of which a caller may have made huge.
        check_elem_count(op, D::name, &[self.shape(), &geometry.columns_shape()])?;
        Ok(geometry)
    }

    /// The patches of this image as `[N, C, KH * KW, OH * OW]`, `pad` in the
    /// padding; differentiable to any order: its gradient is the fold of
    /// the columns' gradient ([`fold`](Self::fold)), whose own gradient is
    /// this unfold again (both are linear, each the other's adjoint).
    fn unfold(&self, geometry: Unfold2d, pad: E) -> Result<Self> {
        let [n, c, _, _] = geometry.image;
        let taps = geometry.window.kernel[0] * geometry.window.kernel[1];
        let positions = geometry.output[0] * geometry.output[1];
        let forward = || {
            let dense = self.try_contiguous()?;
            let storage = D::unfold(dense.storage(), dense.layout().offset(), &geometry, pad)?;
            Ok(Tensor::from_storage(storage, [n, c, taps, positions].into()))
        };
        autograd::track("unfold", &[self.node()], forward, |_| {
            rule(move |g: &Tensor<D, E>, _| Ok(vec![Some(g.fold(geometry)?)]))
        })
    }

    /// Columns `[N, C, KH * KW, OH * OW]` (any shape of that many
    /// elements) summed back into the image `[N, C, H, W]` they were
    /// unfolded from: the adjoint of [`unfold`](Self::unfold), recorded
    /// with it as its gradient.
    fn fold(&self, geometry: Unfold2d) -> Result<Self> {
        let forward = || {
            // The kernel reads the columns from the storage's start.
            let copied;
            let columns = if self.is_contiguous() && self.layout().offset() == 0 {
                self.storage()
            } else {
                copied = D::copy_strided(self.storage(), self.layout())?;
                &copied
            };
            Ok(Tensor::from_storage(D::fold(columns, &geometry)?, geometry.image.into()))
        };
        autograd::track("fold", &[self.node()], forward, |_| {
            rule(move |g: &Tensor<D, E>, _| Ok(vec![Some(g.unfold(geometry, E::ZERO)?)]))
        })
    }

    /// `conv2d` of one group written out with recorded ops (the columns
    /// times the weight, plus the bias): what its gradients are computed
    /// from when they must be differentiated again (`create_graph`), as
    /// the fused kernels have no derivatives of their own.
    fn conv2d_composed(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        geometry: Unfold2d,
        out_channels: usize,
    ) -> Result<Self> {
        let [n, _, _, _] = geometry.image;
        let [oh, ow] = geometry.output;
        let taps = weight.elem_count() / out_channels;
        let columns = self.unfold(geometry, E::ZERO)?.try_reshape([n, taps, oh * ow])?;
        let out =
            weight.try_reshape([out_channels, taps])?.try_matmul(&columns)?.try_reshape([n, out_channels, oh, ow])?;
        match bias {
            Some(b) => out.try_add(&b.try_reshape([out_channels, 1, 1])?),
            None => Ok(out),
        }
    }

    pub(super) fn core_conv2d(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        window: Window2d,
        groups: usize,
    ) -> Result<Self> {
        const OP: &str = "conv2d";
        let error = |reason: String| {
            let mut shapes = vec![self.shape().clone(), weight.shape().clone()];
            shapes.extend(bias.map(|b| b.shape().clone()));
            Error::Shape { op: OP, device: D::name(), shapes, reason }
        };
        let &[out_channels, group_channels, kh, kw] = weight.dims() else {
            return Err(error("expected a weight [O, C / groups, KH, KW]".into()));
        };
        let window = Window2d { kernel: [kh, kw], ..window };
        let geometry = self.unfold_geometry(OP, window)?;
        let [n, c, _, _] = geometry.image;
        if groups == 0
            || !c.is_multiple_of(groups)
            || !out_channels.is_multiple_of(groups)
            || group_channels != c / groups
        {
            return Err(error(format!(
                "{c} input channels in {groups} groups need a weight with C / groups = {} channels and O divisible by {groups}",
                c.checked_div(groups).unwrap_or(0)
            )));
        }
        if bias.is_some_and(|b| b.dims() != [out_channels]) {
            return Err(error(format!("the bias must be [{out_channels}]")));
        }
        if let Some(half) = autocast::lowered::<E>() {
            if groups == 1 && D::fuses_rounding(half, &geometry) {
                return self.conv2d_one_group(weight, bias, geometry, out_channels, Some(half));
            }
            return autocast_in!(half, H => {
                let (x, weight) = (self.try_to_dtype::<H>()?, weight.try_to_dtype::<H>()?);
                let bias = bias.map(|b| b.try_to_dtype::<H>()).transpose()?;
                x.core_conv2d(&weight, bias.as_ref(), window, groups)?.try_to_dtype::<E>()
            });
        }
        let taps = kh * kw * group_channels;
        let positions = geometry.output[0] * geometry.output[1];
        if groups == 1 {
            return self.conv2d_one_group(weight, bias, geometry, out_channels, None);
        }
        // [N, C, KH*KW, L] -> [N, groups, C/groups * KH*KW, L], times
        // the weight as [groups, O/groups, C/groups * KH*KW].
        let columns = self.unfold(geometry, E::ZERO)?.try_reshape([n, groups, taps, positions])?;
        let w = weight.try_reshape([groups, out_channels / groups, taps])?;
        let out = w.try_matmul(&columns)?.try_reshape([n, out_channels, geometry.output[0], geometry.output[1]])?;
        match bias {
            Some(b) => out.try_add(&b.try_reshape([out_channels, 1, 1])?),
            None => Ok(out),
        }
    }

    /// One-group `conv2d`, recorded as one operation so that each of its
    /// three products takes the device's direct kernel where it has one
    /// for the geometry, and unfold + product where it has not: the output
    /// `w · columns` (plus the bias), the weight's gradient `Σ g · columnsᵀ`
    /// over the batch (with the bias's, `g` summed per channel), the
    /// image's the fold of `wᵀ · g`.
    ///
    /// With `round_to`, `autocast`'s convolution in that half type where
    /// the device fuses the casts ([`ConvKernel::fuses_rounding`]): every
    /// input of each product (the output gradient too) and every result is
    /// rounded to the half type's values, so the result and the gradients
    /// are those of the half convolution between casts, bit for bit where
    /// the direct kernels run.
    fn conv2d_one_group(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        geometry: Unfold2d,
        out_channels: usize,
        round_to: Option<DType>,
    ) -> Result<Self> {
        let [n, _, _, _] = geometry.image;
        let [oh, ow] = geometry.output;
        let taps = weight.elem_count() / out_channels;
        // Detached: the rule below is the graph's only record of the products.
        let (x, w) = (self.try_contiguous()?.detach(), weight.detach());
        let b = bias.map(Tensor::detach);
        // The columns of `x`, dense `[N, taps, OH * OW]`.
        let columns = move |x: &Self| -> Result<Self> {
            let columns = D::unfold(x.storage(), x.layout().offset(), &geometry, E::ZERO)?;
            Ok(Tensor::from_storage(columns, [n, taps, oh * ow].into()))
        };
        // Where no direct kernel runs, the products' inputs and results
        // are rounded here, as the kernels would have.
        let round = move |t: &Self| rounded_to(t, round_to);
        let forward = || {
            let bias = b.as_ref().map(|b| (b.storage(), b.layout()));
            let (image, kernel) = ((x.storage(), x.layout()), (w.storage(), w.layout()));
            if let Some(out) = D::conv2d_direct(image, kernel, bias, &geometry, out_channels, round_to)? {
                return Ok(Tensor::from_storage(out, [n, out_channels, oh, ow].into()));
            }
            let out = round(&w)?.try_reshape([out_channels, taps])?.try_matmul(&columns(&round(&x)?)?)?;
            let out = out.try_reshape([n, out_channels, oh, ow])?;
            round(&match &b {
                Some(b) => out.try_add(&round(b)?.try_reshape([out_channels, 1, 1])?)?,
                None => out,
            })
        };
        let inputs = [self.node(), weight.node(), bias.and_then(Tensor::node)];
        autograd::track("conv2d", &inputs, forward, |_| {
            let (x, w) = (x.clone(), w.clone());
            // The operands with their nodes, for a recorded backward.
            let operands =
                (x.with_node_of(self), w.with_node_of(weight), b.as_ref().zip(bias).map(|(b, o)| b.with_node_of(o)));
            rule(move |g: &Tensor<D, E>, needs| {
                if autograd::is_grad_enabled() {
                    // Recorded (`create_graph`): the gradients of the same
                    // convolution composed of recorded ops, which can be
                    // differentiated again (in the op's own precision: the
                    // rounding of `autocast` is not composed).
                    let (x, w, b) = &operands;
                    let mut read = vec![x, w];
                    read.extend(b.as_ref());
                    let mut grads = autograd::composed_gradients(&read, g, || {
                        x.conv2d_composed(w, b.as_ref(), geometry, out_channels)
                    })?;
                    grads.resize(3, None);
                    return Ok(grads);
                }
                let g = g.try_contiguous()?;
                let image = needs.then(0, || {
                    if let Some(image) = image_gradient_direct(&g, &w, &geometry, round_to)? {
                        return Ok(image);
                    }
                    let g = round(&g)?.try_reshape([n, out_channels, oh * ow])?;
                    let w = round(&w)?.try_reshape([out_channels, taps])?;
                    let columns = w.try_t()?.try_matmul(&g)?.try_contiguous()?;
                    round(&Tensor::from_storage(D::fold(columns.storage(), &geometry)?, geometry.image.into()))
                })?;
                let (image_dense, grad_dense) = ((x.storage(), x.layout()), (g.storage(), g.layout()));
                let direct = if needs.get(1) || needs.get(2) {
                    D::conv2d_weight_direct(image_dense, grad_dense, &geometry, out_channels, round_to)?
                } else {
                    None
                };
                let (weight, bias) = match direct {
                    Some([weight, bias]) => (
                        needs.get(1).then(|| Tensor::from_storage(weight, w.shape().clone())),
                        needs.get(2).then(|| Tensor::from_storage(bias, [out_channels].into())),
                    ),
                    None => {
                        let g = round(&g)?.try_reshape([n, out_channels, oh * ow])?;
                        let weight = needs.then(1, || {
                            let per_image = g.try_matmul(&columns(&round(&x)?)?.try_transpose(1, 2)?)?;
                            let weight = per_image.try_sum_to_shape(&[1, out_channels, taps].into())?;
                            round(&weight.try_reshape(w.shape().clone())?)
                        })?;
                        let sum =
                            || round(&g.try_sum_to_shape(&[1, out_channels, 1].into())?.try_reshape([out_channels])?);
                        (weight, needs.then(2, sum)?)
                    }
                };
                Ok(vec![image, weight, bias])
            })
        })
    }
}

/// The image gradient of a stride-1 convolution through the device's
/// direct kernel, where it has one: the convolution of the output gradient
/// `g` `[N, O, OH, OW]` with the weight flipped on both spatial axes and
/// its channel axes swapped, padded by `kernel - 1 - padding`, which gives
/// `[N, C, H, W]`. `None` for other strides and dilations, where the kernel
/// does not run, or where the padding exceeds `kernel - 1`; the caller then
/// folds `wᵀ · g`. `round_to` as [`ConvKernel::conv2d_direct`]'s.
fn image_gradient_direct<D: CoreDevice, E: FloatElement>(
    g: &Tensor<D, E>,
    weight: &Tensor<D, E>,
    forward: &Unfold2d,
    round_to: Option<DType>,
) -> Result<Option<Tensor<D, E>>> {
    let [n, c, h, w] = forward.image;
    let &[o, _, kh, kw] = weight.dims() else { return Ok(None) };
    if forward.window.stride != [1, 1] || forward.window.dilation != [1, 1] {
        return Ok(None);
    }
    let [ph, pw] = forward.window.padding;
    let (Some(ph), Some(pw)) = ((kh - 1).checked_sub(ph), (kw - 1).checked_sub(pw)) else { return Ok(None) };
    let window = Window2d { kernel: [kh, kw], stride: [1, 1], padding: [ph, pw], dilation: [1, 1] };
    let geometry = Unfold2d { image: [n, o, forward.output[0], forward.output[1]], window, output: [h, w] };
    let reversed = |len: usize| Tensor::<D, i64>::try_arange_step(len as i64 - 1, -1, -1);
    let flipped = weight.try_index_select(2, &reversed(kh)?)?.try_index_select(3, &reversed(kw)?)?;
    let flipped = flipped.try_permute([1, 0, 2, 3])?.try_contiguous()?;
    let g = g.try_contiguous()?;
    let (g, flipped) = ((g.storage(), g.layout()), (flipped.storage(), flipped.layout()));
    let storage = D::conv2d_direct(g, flipped, None, &geometry, c, round_to)?;
    Ok(storage.map(|s| Tensor::from_storage(s, [n, c, h, w].into())))
}

/// `t`, or with `round_to` its values rounded to that half type (a cast
/// there and back).
fn rounded_to<D: CoreDevice, E: FloatElement>(t: &Tensor<D, E>, round_to: Option<DType>) -> Result<Tensor<D, E>> {
    match round_to {
        None => Ok(t.clone()),
        Some(half) => autocast_in!(half, H => t.try_to_dtype::<H>()?.try_to_dtype::<E>()),
    }
}

core_table! {
    /// The core's convolutions and pooling.
    pub(crate) struct Fns<C, F: FloatElement> {
        conv2d: fn(&Tensor<C, F>, &Tensor<C, F>, Option<&Tensor<C, F>>, Window2d, usize) -> Result<Tensor<C, F>> =
            Tensor::core_conv2d,
        conv1d: fn(&Tensor<C, F>, &Tensor<C, F>, Option<&Tensor<C, F>>, Window1d, usize) -> Result<Tensor<C, F>> =
            Tensor::core_conv1d,
        conv_transpose2d: fn(
            &Tensor<C, F>,
            &Tensor<C, F>,
            Option<&Tensor<C, F>>,
            Window2d,
            [usize; 2],
            usize,
        ) -> Result<Tensor<C, F>> = Tensor::core_conv_transpose2d,
        conv3d: fn(&Tensor<C, F>, &Tensor<C, F>, Option<&Tensor<C, F>>, Window3d, usize) -> Result<Tensor<C, F>> =
            Tensor::core_conv3d,
        conv_transpose1d: fn(&Tensor<C, F>, &Tensor<C, F>, Option<&Tensor<C, F>>, Window1d, usize, usize) -> Result<Tensor<C, F>> =
            Tensor::core_conv_transpose1d,
        max_pool2d: fn(&Tensor<C, F>, Window2d, bool) -> Result<Tensor<C, F>> = Tensor::core_max_pool2d,
        max_pool2d_with_indices: fn(&Tensor<C, F>, Window2d, bool) -> Result<(Tensor<C, F>, Tensor<C, i64>)> =
            Tensor::core_max_pool2d_with_indices,
        max_unpool2d: fn(&Tensor<C, F>, &Tensor<C, i64>, Window2d, Option<[usize; 2]>) -> Result<Tensor<C, F>> =
            Tensor::core_max_unpool2d,
        avg_pool2d: fn(&Tensor<C, F>, Window2d, AvgPoolOptions) -> Result<Tensor<C, F>> = Tensor::core_avg_pool2d,
        adaptive_avg_pool2d: fn(&Tensor<C, F>, [usize; 2]) -> Result<Tensor<C, F>> = Tensor::core_adaptive_avg_pool2d,
        unfold_patches: fn(&Tensor<C, F>, Window2d) -> Result<Tensor<C, F>> = Tensor::core_unfold_patches,
        fold_patches: fn(&Tensor<C, F>, [usize; 2], Window2d) -> Result<Tensor<C, F>> = Tensor::core_fold_patches,
    }
}
