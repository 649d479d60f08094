//! `F.unfold` and `F.fold` (im2col and col2im) and their layers
//! `nn.Unfold` and `nn.Fold`: the patches a sliding window reads out of an
//! image as columns, and columns summed back into an image.

use super::Forward;
use super::module::stateless_module;
use super::{Module, TensorKind};
use crate::element::FloatElement;
use crate::error::Result;
use crate::ops::conv::Window2d;
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;

/// PyTorch's `F.unfold(x, kernel_size, dilation, padding, stride)`: the
/// patches of `x` (`[N, C, H, W]`, or `[C, H, W]` unbatched) under
/// `window`, as columns `[N, C · KH · KW, L]` (`[C · KH · KW, L]`), `L` the
/// window's positions in row-major order; each column is one position's
/// patch, channel by channel, row by row, zeros where it covers the
/// padding. Differentiable: its gradient is [`fold`] of the columns'.
///
/// ```
/// use devtensor::nn::{fold, unfold};
/// use devtensor::ops::conv::Window2d;
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::from_vec((1..=9).map(|v| v as f32).collect(), [1, 1, 3, 3]);
/// let columns = unfold(&x, Window2d::new([2, 2]));
/// assert_eq!(columns.dims(), &[1, 4, 4]);
/// // The first column is the top-left 2x2 patch: 1, 2, 4, 5.
/// assert_eq!(columns.narrow(2, 0, 1).to_vec(), vec![1.0, 2.0, 4.0, 5.0]);
/// // Folded back, each pixel is summed once per patch that holds it.
/// let counts = fold(&unfold(&Tensor::<Cpu>::ones([1, 1, 3, 3]), Window2d::new([2, 2])), [3, 3], Window2d::new([2, 2]));
/// assert_eq!(counts.to_vec(), vec![1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0]);
/// ```
///
/// Fails, naming the shape, unless `x` is `[N, C, H, W]` or `[C, H, W]`
/// and the window fits it.
#[fallible(free)]
pub fn unfold<D: Device, E: FloatElement>(x: &Tensor<D, E>, window: Window2d) -> Tensor<D, E> {
    x.try_unfold_patches(window)
}

/// PyTorch's `F.fold(columns, output_size, kernel_size, dilation, padding,
/// stride)`, the adjoint of [`unfold`]: columns `[N, C · KH · KW, L]` (or
/// `[C · KH · KW, L]` unbatched) summed into an image `[N, C, H, W]` (or
/// `[C, H, W]`) of `output_size` `[H, W]`, each column added to the patch
/// of its window position (what falls in the padding is dropped).
/// Differentiable: its gradient is [`unfold`] of the image's.
///
/// ```
/// use devtensor::nn::fold;
/// use devtensor::ops::conv::Window2d;
/// use devtensor::{Cpu, Tensor};
/// // Two non-overlapping 1x2 patches tile a 1x4 image.
/// let columns = Tensor::<Cpu>::from_vec(vec![1.0, 3.0, 2.0, 4.0], [1, 2, 2]);
/// let window = Window2d { stride: [1, 2], ..Window2d::new([1, 2]) };
/// assert_eq!(fold(&columns, [1, 4], window).to_vec(), vec![1.0, 2.0, 3.0, 4.0]);
/// let err = devtensor::nn::try_fold(&columns, [1, 6], window).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "fold on Cpu: shape [1, 2, 2]: an output of 1x6 has 1x3 = 3 window positions, but the columns have 2 (axis 2)"
/// );
/// ```
///
/// Fails, naming the shape, unless the columns are of rank 3 (or 2), their
/// axis 1 a multiple of the kernel's taps and their axis 2 the window's
/// positions in `output_size`.
#[fallible(free)]
pub fn fold<D: Device, E: FloatElement>(
    columns: &Tensor<D, E>,
    output_size: [usize; 2],
    window: Window2d,
) -> Tensor<D, E> {
    columns.try_fold_patches(output_size, window)
}

/// PyTorch's `nn.Unfold(kernel_size, dilation, padding, stride)`: [`unfold`]
/// as a layer.
///
/// ```
/// use devtensor::nn::Unfold;
/// use devtensor::ops::conv::Window2d;
/// use devtensor::{Cpu, Tensor};
/// let patches = Unfold::new(Window2d { padding: [1, 1], ..Window2d::new([3, 3]) });
/// assert_eq!(patches.forward(&Tensor::<Cpu>::ones([2, 5, 4, 4])).dims(), &[2, 45, 16]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unfold {
    /// The sliding window: kernel size, dilation, padding and stride.
    pub window: Window2d,
}

/// PyTorch's `nn.Fold(output_size, kernel_size, dilation, padding,
/// stride)`: [`fold`] as a layer.
///
/// ```
/// use devtensor::nn::{Fold, Unfold};
/// use devtensor::ops::conv::Window2d;
/// use devtensor::{Cpu, Tensor};
/// // Non-overlapping patches: folding undoes unfolding.
/// let window = Window2d { stride: [2, 2], ..Window2d::new([2, 2]) };
/// let x = Tensor::<Cpu>::randn([1, 3, 4, 6]);
/// let back = Fold::new([4, 6], window).forward(&Unfold::new(window).forward(&x));
/// assert_eq!(back.to_vec(), x.to_vec());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fold {
    /// The image's `[H, W]`.
    pub output_size: [usize; 2],
    /// The sliding window: kernel size, dilation, padding and stride.
    pub window: Window2d,
}

impl Unfold {
    /// The layer with `window`.
    pub fn new(window: Window2d) -> Self {
        Unfold { window }
    }

    /// [`unfold`] of `x` under this layer's window.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        try_unfold(x, self.window)
    }
}

impl Fold {
    /// The layer folding into images of `output_size` under `window`.
    pub fn new(output_size: [usize; 2], window: Window2d) -> Self {
        Fold { output_size, window }
    }

    /// [`fold`] of `columns` into this layer's output size.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, columns: &Tensor<D, E>) -> Tensor<D, E> {
        try_fold(columns, self.output_size, self.window)
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for Unfold {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for Fold {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

stateless_module!(Unfold, Fold);
