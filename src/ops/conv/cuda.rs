//! Convolution kernels on CUDA (`kernels/conv.cu`).

use super::{ConvKernel, Unfold2d};
use crate::backend::cuda::AnyCuda;
use crate::backend::cuda::launch::{elementwise, launch_kernel};
use crate::backend::cuda::{CudaStorage, narrowed, widened};
use crate::element::FloatElement;
use crate::error::Result;

impl ConvKernel for AnyCuda {
    fn unfold<E: FloatElement>(image: &CudaStorage<E>, offset: usize, g: &Unfold2d, pad: E) -> Result<CudaStorage<E>> {
        const OP: &str = "unfold";
        if E::DTYPE.is_half() {
            // A copy: exact through f32.
            return narrowed(OP, &Self::unfold(&widened(OP, image)?, offset, g, pad.cast::<f32>())?);
        }
        let device = Self::device()?;
        let total = g.columns_len();
        let out = CudaStorage::alloc(&device, OP, total)?;
        if total == 0 {
            return Ok(out);
        }
        let ([n, c, h, w], win, [oh, ow]) = (g.image, g.window, g.output);
        let name = format!("conv_unfold_{}", E::DTYPE.name());
        launch_kernel!(device, OP, "conv", name, elementwise(total);
            total, n, c, h, w, win.kernel[0], win.kernel[1], win.stride[0], win.stride[1], win.padding[0],
            win.padding[1], win.dilation[0], win.dilation[1], oh, ow, image.ptr(), offset, pad, out.ptr())?;
        Ok(out)
    }

    fn fold<E: FloatElement>(columns: &CudaStorage<E>, g: &Unfold2d) -> Result<CudaStorage<E>> {
        const OP: &str = "fold";
        if E::DTYPE.is_half() {
            return narrowed(OP, &Self::fold(&widened(OP, columns)?, g)?);
        }
        let device = Self::device()?;
        let ([n, c, h, w], win, [oh, ow]) = (g.image, g.window, g.output);
        let total = n * c * h * w;
        let out = CudaStorage::alloc(&device, OP, total)?;
        if total == 0 {
            return Ok(out);
        }
        let name = format!("conv_fold_{}", E::DTYPE.name());
        launch_kernel!(device, OP, "conv", name, elementwise(total);
            total, n, c, h, w, win.kernel[0], win.kernel[1], win.stride[0], win.stride[1], win.padding[0],
            win.padding[1], win.dilation[0], win.dilation[1], oh, ow, columns.ptr(), out.ptr())?;
        Ok(out)
    }
}
