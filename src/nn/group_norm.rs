//! `GroupNorm`: normalisation over groups of channels of each sample.

use super::forward::call;
use super::parameter::{check, parameter};
use super::{Forward, Hookable, ModuleHooks};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// PyTorch's `nn.GroupNorm(num_groups, num_channels)`: the channels of each
/// sample of `[N, C, *]` split into `num_groups` groups, each standardised
/// over its channels and positions (biased variance, `eps = 1e-5`), then
/// scaled and shifted per channel by `weight` and `bias` (`[C]`, ones and
/// zeros at first). Unlike batch norm it does not depend on the batch, and
/// keeps no running statistics.
///
/// ```
/// use devtensor::nn::GroupNorm;
/// use devtensor::{Cpu, Tensor};
/// let norm = GroupNorm::<Cpu>::new(2, 4);
/// let y = norm.forward(&Tensor::<Cpu>::randn([3, 4, 5, 5]));
/// // Each sample's group of two channels has mean 0.
/// assert!(y.narrow(1, 0, 2).select(0, 1).mean().item().abs() < 1e-5);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GroupNorm<D: Device, E: FloatElement = f32> {
    /// The per-channel scale, `[C]`.
    pub weight: Tensor<D, E>,
    /// The per-channel shift, `[C]`.
    pub bias: Tensor<D, E>,
    /// The number of groups, which divides the channels.
    pub num_groups: usize,
    /// Added to the variance before the square root.
    pub eps: f64,
    /// The hooks registered on the layer ([`Hooks`](crate::nn::Hooks)).
    hooks: ModuleHooks<D, E>,
}

impl<D: Device, E: FloatElement> GroupNorm<D, E> {
    /// `num_channels` channels in `num_groups` groups, with `eps = 1e-5`.
    /// Fails unless `num_groups` divides `num_channels`, or when `D` is
    /// unavailable.
    #[fallible]
    pub fn new(num_groups: usize, num_channels: usize) -> Self {
        if num_groups == 0 || !num_channels.is_multiple_of(num_groups) {
            return Err(Error::Argument {
                op: "GroupNorm",
                device: D::name(),
                reason: format!("num_channels {num_channels} must be divisible by num_groups {num_groups}"),
            });
        }
        Ok(GroupNorm {
            weight: Tensor::try_ones([num_channels])?.requires_grad(),
            bias: Tensor::try_zeros([num_channels])?.requires_grad(),
            num_groups,
            eps: 1e-5,
            hooks: ModuleHooks::new(),
        })
    }

    /// A layer of `num_groups` groups with your own per-channel `weight`
    /// and `bias` (`[C]` each), which become its parameters as in
    /// [`Linear::from_weights`](super::Linear::from_weights); `eps = 1e-5`.
    /// Fails, naming the shapes, unless both are `[C]` with `num_groups`
    /// dividing `C`.
    ///
    /// ```
    /// use devtensor::nn::GroupNorm;
    /// use devtensor::{Cpu, Tensor};
    /// let norm = GroupNorm::from_weights(2, Tensor::<Cpu>::ones([4]), Tensor::zeros([4]));
    /// assert_eq!(norm.forward(&Tensor::<Cpu>::randn([3, 4, 5])).dims(), &[3, 4, 5]);
    /// assert!(GroupNorm::try_from_weights(3, Tensor::<Cpu>::ones([4]), Tensor::zeros([4])).is_err());
    /// ```
    #[fallible]
    pub fn from_weights(num_groups: usize, weight: Tensor<D, E>, bias: Tensor<D, E>) -> Self {
        let channels = weight.elem_count();
        let fits =
            weight.rank() == 1 && bias.dims() == weight.dims() && num_groups > 0 && channels.is_multiple_of(num_groups);
        check(fits, "GroupNorm::from_weights", &[&weight, &bias], || {
            format!("expected a weight and a bias [C], with num_groups = {num_groups} dividing C")
        })?;
        Ok(GroupNorm {
            weight: parameter(weight),
            bias: parameter(bias),
            num_groups,
            eps: 1e-5,
            hooks: ModuleHooks::new(),
        })
    }

    /// The layer with `eps` added to the variance (PyTorch's `eps=`).
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }
}

impl<D: Device, E: FloatElement> Hookable<D, E> for GroupNorm<D, E> {}

impl<D: Device, E: FloatElement> Forward<D, E> for GroupNorm<D, E> {
    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        Some(&self.hooks)
    }

    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        let channels = self.weight.elem_count();
        if x.rank() < 2 || x.dims()[1] != channels {
            return Err(Error::Shape {
                op: "GroupNorm",
                device: D::name(),
                shapes: vec![x.shape().clone(), self.weight.shape().clone()],
                reason: format!("expected an input [N, {channels}, ..]"),
            });
        }
        let groups = x.dims()[0] * self.num_groups;
        let per_group = x.elem_count().checked_div(groups).unwrap_or(0);
        // The fused standardisation per (sample, group), then the
        // per-channel affine step broadcast over the positions.
        let [y, _, _] = x.try_standardize("GroupNorm", [1, groups, per_group], self.eps, None)?;
        let mut column = vec![1; x.rank() - 1];
        column[0] = channels;
        y.try_mul(&self.weight.try_reshape(column.clone())?)?.try_add(&self.bias.try_reshape(column)?)
    }
}

impl<D: Device, E: FloatElement> GroupNorm<D, E> {
    /// The layer applied to `x` (`[N, C, *]`), which must be on the layer's
    /// device (checked at compile time). Fails when `x`'s shape does not fit.
    #[fallible]
    pub fn forward<D2: Device, EX: Element>(&self, x: &Tensor<D2, EX>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
        E: SameDtype<EX>,
    {
        call(self, same_device(x))
    }
}

crate::module!(GroupNorm<E> { weight, bias, hooks; num_groups, eps });
