//! `InstanceNorm1d`, `InstanceNorm2d` and `InstanceNorm3d`: each channel of
//! each sample normalised over its positions (style transfer, CycleGAN's
//! generators), written once by `instance_norm!`.

use super::forward::call;
use super::{Forward, Hookable, ModuleHooks};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// Writes one instance-norm layer for inputs of `$spatial` spatial axes.
macro_rules! instance_norm {
    ($(#[$doc:meta])* $name:ident, $op:literal, $spatial:literal, $layout:literal) => {
        $(#[$doc])*
        ///
        /// PyTorch's defaults: no affine parameters (`weight` and `bias` are
        /// `None`; [`affine`](Self::affine) adds them, ones and zeros at
        /// first, as `affine=True`), `eps = 1e-5`, and no running
        /// statistics (`track_running_stats=False`, the only form here).
        /// The fields are public to read and assign, and the struct is
        /// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
        #[derive(Clone, Debug)]
        #[non_exhaustive]
        pub struct $name<D: Device, E: FloatElement = f32> {
            /// The per-channel scale `[C]`, with `affine`.
            pub weight: Option<Tensor<D, E>>,
            /// The per-channel shift `[C]`, with `affine`.
            pub bias: Option<Tensor<D, E>>,
            /// The number of channels `C`.
            pub num_features: usize,
            /// Added to the variance before the square root.
            pub eps: f64,
            /// The hooks registered on the layer ([`Hooks`](crate::nn::Hooks)).
            hooks: ModuleHooks<D, E>,
        }

        impl<D: Device, E: FloatElement> $name<D, E> {
            /// A layer for `num_features` channels, without parameters.
            pub fn new(num_features: usize) -> Self {
                $name { weight: None, bias: None, num_features, eps: 1e-5, hooks: ModuleHooks::new() }
            }

            /// The layer with a learned per-channel scale and shift
            /// (PyTorch's `affine=True`). Fails when `D` is unavailable.
            #[fallible]
            pub fn affine(mut self) -> Self {
                self.weight = Some(Tensor::try_ones([self.num_features])?.requires_grad());
                self.bias = Some(Tensor::try_zeros([self.num_features])?.requires_grad());
                Ok(self)
            }

            /// The layer with `eps` added to the variance (PyTorch's `eps=`).
            pub fn eps(mut self, eps: f64) -> Self {
                self.eps = eps;
                self
            }

            /// The normalised `x` (batched, or one sample without the batch
            /// axis), on the layer's device (checked at compile time). Fails
            /// when its rank or channels differ from the layer's.
            #[fallible]
            pub fn forward<D2: Device, EX: Element>(&self, x: &Tensor<D2, EX>) -> Tensor<D, E>
            where
                D: SameDevice<D2>,
                E: SameDtype<EX>,
            {
                call(self, same_device(x))
            }
        }

        impl<D: Device, E: FloatElement> Hookable<D, E> for $name<D, E> {}

        impl<D: Device, E: FloatElement> Forward<D, E> for $name<D, E> {
            fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
                Some(&self.hooks)
            }

            fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
                let c = self.num_features;
                let unbatched = x.rank() == $spatial + 1;
                let channel_axis = usize::from(!unbatched);
                if !(unbatched || x.rank() == $spatial + 2) || x.dims()[channel_axis] != c {
                    return Err(Error::Shape {
                        op: $op,
                        device: D::name(),
                        shapes: vec![x.shape().clone()],
                        reason: format!($layout, c = c),
                    });
                }
                instance_norm(
                    $op,
                    x,
                    channel_axis,
                    self.weight.as_ref().zip(self.bias.as_ref()),
                    self.eps,
                )
            }
        }

        crate::module!($name<E> { weight, bias, hooks; num_features, eps });
    };
}

/// Each `(sample, channel)` of `x` standardised over its positions (one
/// fused op over `[1, N · C, positions]`), then scaled and shifted per
/// channel when the layer is affine.
fn instance_norm<D: Device, E: FloatElement>(
    op: &'static str,
    x: &Tensor<D, E>,
    channel_axis: usize,
    affine: Option<(&Tensor<D, E>, &Tensor<D, E>)>,
    eps: f64,
) -> Result<Tensor<D, E>> {
    let groups: usize = x.dims()[..=channel_axis].iter().product();
    let positions = x.elem_count().checked_div(groups).unwrap_or(0);
    let [y, _, _] = x.try_standardize(op, [1, groups, positions], eps, None)?;
    let Some((weight, bias)) = affine else { return Ok(y) };
    // [C, 1, ..]: one value per channel, broadcast over the positions.
    let mut column = vec![1; x.rank() - channel_axis];
    column[0] = weight.elem_count();
    y.try_mul(&weight.try_reshape(column.clone())?)?.try_add(&bias.try_reshape(column)?)
}

instance_norm! {
    /// PyTorch's `nn.InstanceNorm1d`: each channel of each sample of
    /// `[N, C, L]` (or `[C, L]`) normalised to mean 0 and (biased) variance 1
    /// over its positions.
    ///
    /// ```
    /// use devtensor::nn::InstanceNorm1d;
    /// use devtensor::{Cpu, Tensor};
    /// let norm = InstanceNorm1d::<Cpu, f64>::new(1).eps(0.0);
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 3.0, 10.0, 30.0], [2, 1, 2]);
    /// assert_eq!(norm.forward(&x).to_vec(), vec![-1.0, 1.0, -1.0, 1.0]);
    /// ```
    InstanceNorm1d, "InstanceNorm1d", 1, "expected [N, {c}, L] or [{c}, L]"
}

instance_norm! {
    /// PyTorch's `nn.InstanceNorm2d`: each channel of each image of
    /// `[N, C, H, W]` (or `[C, H, W]`) normalised over its pixels.
    ///
    /// ```
    /// use devtensor::nn::{InstanceNorm2d, Module};
    /// use devtensor::{Cpu, Tensor};
    /// let norm = InstanceNorm2d::<Cpu>::new(3).affine();
    /// assert_eq!(norm.parameters().len(), 2);
    /// assert_eq!(norm.forward(&Tensor::<Cpu>::randn([2, 3, 4, 4])).dims(), &[2, 3, 4, 4]);
    /// ```
    InstanceNorm2d, "InstanceNorm2d", 2, "expected [N, {c}, H, W] or [{c}, H, W]"
}

instance_norm! {
    /// PyTorch's `nn.InstanceNorm3d`: each channel of each volume of
    /// `[N, C, D, H, W]` (or `[C, D, H, W]`) normalised over its voxels.
    ///
    /// ```
    /// use devtensor::nn::InstanceNorm3d;
    /// use devtensor::{Cpu, Tensor};
    /// let y = InstanceNorm3d::<Cpu>::new(2).forward(&Tensor::<Cpu>::randn([1, 2, 2, 3, 3]));
    /// assert!(y.narrow(1, 0, 1).mean().item().abs() < 1e-5);
    /// ```
    InstanceNorm3d, "InstanceNorm3d", 3, "expected [N, {c}, D, H, W] or [{c}, D, H, W]"
}
