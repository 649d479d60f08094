//! The patches of an image as columns and back: PyTorch's `F.unfold`
//! (im2col) and `F.fold` (col2im), on the kernels every convolution is
//! built on. Each is the other's adjoint, so each one's gradient is the
//! other, to any order.

use super::{Fns, Unfold2d, Window2d};
use crate::element::FloatElement;
use crate::error::{Error, Result, check_elem_count};
use crate::layout::Shape;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// `F.unfold`: see [`nn::unfold`](crate::nn::unfold).
    pub(crate) fn try_unfold_patches(&self, window: Window2d) -> Result<Self> {
        core_call!(D, Fns<E>.unfold_patches(self.core(), window))
    }

    /// `F.fold`: see [`nn::fold`](crate::nn::fold).
    pub(crate) fn try_fold_patches(&self, output_size: [usize; 2], window: Window2d) -> Result<Self> {
        core_call!(D, Fns<E>.fold_patches(self.core(), output_size, window))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    /// `[N, C, H, W]` (or `[C, H, W]`) to `[N, C · KH · KW, L]` (or
    /// `[C · KH · KW, L]`), `L` the window's positions, zeros in the
    /// padding.
    pub(super) fn core_unfold_patches(&self, window: Window2d) -> Result<Self> {
        const OP: &str = "unfold";
        let error =
            |reason: String| Error::Shape { op: OP, device: D::name(), shapes: vec![self.shape().clone()], reason };
        let batched = match self.rank() {
            4 => true,
            3 => false,
            _ => return Err(error("expected an image batch [N, C, H, W] or an image [C, H, W]".into())),
        };
        let [h, w] = [self.dims()[self.rank() - 2], self.dims()[self.rank() - 1]];
        if window.output_size([h, w]).is_none() {
            return Err(error(format!(
                "a window of kernel {:?}, stride {:?}, padding {:?} and dilation {:?} does not fit an image of {h}x{w}",
                window.kernel, window.stride, window.padding, window.dilation
            )));
        }
        let images = if batched { self.clone() } else { self.try_unsqueeze(0)? };
        let geometry = images.unfold_geometry(OP, window)?;
        let [n, c, _, _] = geometry.image;
        let taps = window.kernel[0] * window.kernel[1];
        let positions = geometry.output[0] * geometry.output[1];
        let columns = images.unfold(geometry, E::ZERO)?.try_reshape([n, c * taps, positions])?;
        if batched { Ok(columns) } else { columns.try_squeeze(0) }
    }

    /// `[N, C · KH · KW, L]` (or `[C · KH · KW, L]`) summed into
    /// `[N, C, H, W]` (or `[C, H, W]`), `[H, W]` = `output_size`.
    pub(super) fn core_fold_patches(&self, output_size: [usize; 2], window: Window2d) -> Result<Self> {
        const OP: &str = "fold";
        let error =
            |reason: String| Error::Shape { op: OP, device: D::name(), shapes: vec![self.shape().clone()], reason };
        let (batched, n, rows, positions) = match *self.dims() {
            [n, rows, positions] => (true, n, rows, positions),
            [rows, positions] => (false, 1, rows, positions),
            _ => {
                return Err(error(
                    "expected columns [N, C · kernel_size[0] · kernel_size[1], L] or [C · kernel_size[0] · kernel_size[1], L]"
                        .into(),
                ));
            }
        };
        let taps = window.kernel[0].checked_mul(window.kernel[1]).unwrap_or(0);
        if taps == 0 || !rows.is_multiple_of(taps) {
            return Err(error(format!(
                "the columns' axis {} ({rows}) must be a multiple of the kernel's {}x{} taps",
                usize::from(batched),
                window.kernel[0],
                window.kernel[1]
            )));
        }
        let output = window.output_size(output_size).ok_or_else(|| {
            error(format!(
                "a window of kernel {:?}, stride {:?}, padding {:?} and dilation {:?} does not fit an output of {}x{}",
                window.kernel, window.stride, window.padding, window.dilation, output_size[0], output_size[1]
            ))
        })?;
        if output[0] * output[1] != positions {
            return Err(error(format!(
                "an output of {}x{} has {}x{} = {} window positions, but the columns have {positions} (axis {})",
                output_size[0],
                output_size[1],
                output[0],
                output[1],
                output[0] * output[1],
                usize::from(batched) + 1
            )));
        }
        let channels = rows / taps;
        let geometry = Unfold2d { image: [n, channels, output_size[0], output_size[1]], window, output };
        check_elem_count(OP, D::name, &[&Shape::from(geometry.image), &geometry.columns_shape()])?;
        // In the layout of `unfold`'s result, which the gradient takes.
        let image = self.try_reshape([n, channels, taps, positions])?.fold(geometry)?;
        if batched { Ok(image) } else { image.try_squeeze(0) }
    }
}
