//! `BatchNorm1d`, `BatchNorm2d` and `BatchNorm3d`: one layer written once
//! (`batch_norm!`) for inputs of different ranks, as PyTorch's three
//! classes share `_BatchNorm`.

use super::forward::call;
use super::module::{child_name, convert_parameter, move_parameter};
use super::parameter::{check, parameter};
use super::{Forward, Hookable, Module, ModuleHooks, TensorKind, ToDtype};
use crate::autograd::no_grad;
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::ops::reduce::AffineAxis;
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;
use std::sync::Mutex;

#[derive(Clone, Debug)]
struct RunningStats<D: Device, E: FloatElement> {
    mean: Tensor<D, E>,
    var: Tensor<D, E>,
    num_batches_tracked: Tensor<D, i64>,
}

/// Writes one batch-norm layer: the struct (its doc given), constructors,
/// `forward` for inputs of the ranks `rank`, `Module` and `ToDtype`.
/// `$expected` is the shape error's wording, `{c}` the layer's channels.
macro_rules! batch_norm {
    ($(#[$doc:meta])* $name:ident, $op:literal, [$($rank:literal),+], $expected:literal) => {
        $(#[$doc])*
        #[derive(Debug)]
        #[non_exhaustive]
        pub struct $name<D: Device, E: FloatElement = f32> {
            /// Per-channel scale `[C]`, initialised to 1.
            pub weight: Tensor<D, E>,
            /// Per-channel shift `[C]`, initialised to 0.
            pub bias: Tensor<D, E>,
            running: Mutex<RunningStats<D, E>>,
            /// Added to the variance before the square root (1e-5).
            pub eps: f64,
            /// Weight of a new batch in the running statistics (0.1).
            pub momentum: f64,
            training: bool,
            /// The hooks registered on the layer ([`Hooks`](crate::nn::Hooks)).
            hooks: ModuleHooks<D, E>,
        }

        impl<D: Device, E: FloatElement> Clone for $name<D, E> {
            fn clone(&self) -> Self {
                $name {
                    weight: self.weight.clone(),
                    bias: self.bias.clone(),
                    running: Mutex::new(self.stats()),
                    eps: self.eps,
                    momentum: self.momentum,
                    training: self.training,
                    hooks: self.hooks.clone(),
                }
            }
        }

        impl<D: Device, E: FloatElement> $name<D, E> {
            /// A layer for `channels` channels, with PyTorch's defaults.
            #[fallible]
            pub fn new(channels: usize) -> Self {
                Self::try_from_weights(
                    Tensor::try_ones([channels])?,
                    Tensor::try_zeros([channels])?,
                    Tensor::try_zeros([channels])?,
                    Tensor::try_ones([channels])?,
                )
            }

            /// A layer with your own per-channel `weight` and `bias`, which become
            /// its parameters as in
            /// [`Linear::from_weights`](super::Linear::from_weights), and running
            /// statistics `running_mean` and `running_var` (buffers), all `[C]`;
            /// `eps` and `momentum` PyTorch's defaults, no batches tracked yet.
            /// Fails, naming the shapes, unless all four are `[C]`.
            #[fallible]
            pub fn from_weights(
                weight: Tensor<D, E>,
                bias: Tensor<D, E>,
                running_mean: Tensor<D, E>,
                running_var: Tensor<D, E>,
            ) -> Self {
                let tensors = [&weight, &bias, &running_mean, &running_var];
                let fits = weight.rank() == 1 && tensors.iter().all(|t| t.dims() == weight.dims());
                check(fits, concat!($op, "::from_weights"), &tensors, || {
                    "expected a weight, a bias, a running mean and a running variance [C]".into()
                })?;
                Ok($name {
                    weight: parameter(weight),
                    bias: parameter(bias),
                    running: Mutex::new(RunningStats {
                        mean: running_mean.detach(),
                        var: running_var.detach(),
                        num_batches_tracked: Tensor::try_scalar(0)?,
                    }),
                    eps: 1e-5,
                    momentum: 0.1,
                    training: true,
                    hooks: ModuleHooks::new(),
                })
            }

            /// The layer with `eps` added to the variance (PyTorch's `eps=`).
            pub fn eps(mut self, eps: f64) -> Self {
                self.eps = eps;
                self
            }

            /// The layer with `momentum` as the weight of a new batch in the
            /// running statistics (PyTorch's `momentum=`).
            pub fn momentum(mut self, momentum: f64) -> Self {
                self.momentum = momentum;
                self
            }

            fn stats(&self) -> RunningStats<D, E> {
                self.running.lock().unwrap_or_else(|e| e.into_inner()).clone()
            }

            /// The normalised `x` (on the layer's device, checked at compile time).
            /// Fails when `x`'s rank or channels differ from the layer's.
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
                let channels = self.weight.elem_count();
                let dims = x.dims();
                if ![$($rank),+].contains(&dims.len()) || dims[1] != channels {
                    return Err(Error::Shape {
                        op: $op,
                        device: D::name(),
                        shapes: vec![x.shape().clone()],
                        reason: format!($expected, c = channels),
                    });
                }
                let (n, c, spatial) = (dims[0], dims[1], dims[2..].iter().product::<usize>());
                // [1, C, 1, ..]: one value per channel, broadcast over the rest.
                let mut channel_dims = vec![1; dims.len()];
                channel_dims[1] = channels;
                let per_channel = |t: &Tensor<D, E>| t.try_reshape(channel_dims.clone());
                if !self.training {
                    let stats = self.stats();
                    let (mean, var) = (per_channel(&stats.mean)?, per_channel(&stats.var)?);
                    let normed = x.try_sub(&mean)?.try_div(&var.try_add_scalar(E::from_f64(self.eps))?.try_sqrt()?)?;
                    return normed.try_mul(&per_channel(&self.weight)?)?.try_add(&per_channel(&self.bias)?);
                }
                let count = n * spatial;
                if count < 2 {
                    return Err(Error::Shape {
                        op: $op,
                        device: D::name(),
                        shapes: vec![x.shape().clone()],
                        reason: "expected more than 1 value per channel when training".into(),
                    });
                }
                // One fused op: each channel standardised over the batch and the
                // positions, then scaled and shifted.
                let affine = Some((&self.weight, &self.bias, AffineAxis::Group));
                let [y, mean, var] = x.try_standardize($op, [n, c, spatial], self.eps, affine)?;
                no_grad(|| -> Result<()> {
                    let m = E::from_f64(self.momentum);
                    let keep = E::from_f64(1.0 - self.momentum);
                    let unbiased = count as f64 / (count - 1) as f64;
                    let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
                    let batch_var = var.try_mul_scalar(E::from_f64(unbiased))?;
                    running.mean = running.mean.try_mul_scalar(keep)?.try_add(&mean.try_mul_scalar(m)?)?;
                    running.var = running.var.try_mul_scalar(keep)?.try_add(&batch_var.try_mul_scalar(m)?)?;
                    running.num_batches_tracked = running.num_batches_tracked.try_add_scalar(1)?;
                    Ok(())
                })?;
                Ok(y)
            }
        }


        impl<D: Device, E: FloatElement> Module<D, E> for $name<D, E> {
            type On<D2: Device> = $name<D2, E>;

            fn try_to<D2: Device>(&self) -> Result<$name<D2, E>> {
                let stats = self.stats();
                Ok($name {
                    weight: move_parameter(&self.weight)?,
                    bias: move_parameter(&self.bias)?,
                    running: Mutex::new(RunningStats {
                        mean: stats.mean.try_to()?,
                        var: stats.var.try_to()?,
                        num_batches_tracked: stats.num_batches_tracked.try_to()?,
                    }),
                    eps: self.eps,
                    momentum: self.momentum,
                    training: self.training,
                    hooks: self.hooks.try_to()?,
                })
            }

            fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
                f(&child_name(prefix, "weight"), TensorKind::Parameter, &self.weight);
                f(&child_name(prefix, "bias"), TensorKind::Parameter, &self.bias);
                let stats = self.stats();
                f(&child_name(prefix, "running_mean"), TensorKind::Buffer, &stats.mean);
                f(&child_name(prefix, "running_var"), TensorKind::Buffer, &stats.var);
            }

            fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
                f(&child_name(prefix, "weight"), TensorKind::Parameter, &mut self.weight);
                f(&child_name(prefix, "bias"), TensorKind::Parameter, &mut self.bias);
                let running = self.running.get_mut().unwrap_or_else(|e| e.into_inner());
                f(&child_name(prefix, "running_mean"), TensorKind::Buffer, &mut running.mean);
                f(&child_name(prefix, "running_var"), TensorKind::Buffer, &mut running.var);
            }

            fn set_training(&mut self, training: bool) {
                self.training = training;
            }

            fn visit_int_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor<D, i64>)) {
                f(&child_name(prefix, "num_batches_tracked"), &self.stats().num_batches_tracked);
            }

            fn visit_int_buffers_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor<D, i64>)) {
                let running = self.running.get_mut().unwrap_or_else(|e| e.into_inner());
                f(&child_name(prefix, "num_batches_tracked"), &mut running.num_batches_tracked);
            }
        }

        /// The running statistics are float buffers: they convert with the
        /// parameters, as PyTorch's `model.to(dtype)` converts them.
        impl<D: Device, E: FloatElement> ToDtype<D, E> for $name<D, E> {
            type Of<T: FloatElement> = $name<D, T>;

            fn try_to_dtype<T: FloatElement>(&self) -> Result<$name<D, T>> {
                let stats = self.stats();
                Ok($name {
                    weight: convert_parameter(&self.weight)?,
                    bias: convert_parameter(&self.bias)?,
                    running: Mutex::new(RunningStats {
                        mean: stats.mean.detach().try_to_dtype()?,
                        var: stats.var.detach().try_to_dtype()?,
                        num_batches_tracked: stats.num_batches_tracked.clone(),
                    }),
                    eps: self.eps,
                    momentum: self.momentum,
                    training: self.training,
                    hooks: self.hooks.try_to_dtype()?,
                })
            }
        }
    };
}

batch_norm! {
    /// PyTorch's `nn.BatchNorm2d`: each channel of `[N, C, H, W]` normalised to
    /// mean 0 and variance 1, then scaled by `weight` and shifted by `bias`.
    ///
    /// In training (the initial mode) it uses the batch's statistics (biased
    /// variance) and updates the running ones,
    /// `running = (1 - momentum) · running + momentum · batch` (unbiased
    /// variance there, as PyTorch); in evaluation it uses the running ones.
    /// The running statistics are buffers: saved in checkpoints and moved by
    /// `to`, not trained. So is `num_batches_tracked`, PyTorch's count of the
    /// batches seen in training (an `i64` rank-0 tensor), which makes a
    /// PyTorch `state_dict` load as it is; with a fixed `momentum` it is only
    /// counted, as in PyTorch. `forward` takes `&self`, so the buffers sit
    /// behind a lock.
    ///
    /// ```
    /// use devtensor::nn::{BatchNorm2d, Module};
    /// use devtensor::{Cpu, Tensor};
    /// let mut bn = BatchNorm2d::<Cpu, f64>::new(1);
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 3.0, 5.0, 7.0], [2, 1, 1, 2]);
    /// let y = bn.forward(&x).to_vec();
    /// assert!((y[3] - 3.0 / (5.0f64 + 1e-5).sqrt()).abs() < 1e-12);
    /// // running mean: 0.9 * 0 + 0.1 * 4; running var: 0.9 * 1 + 0.1 * (20 / 3)
    /// let state = bn.named_tensors();
    /// assert!((state[2].2.item() - 0.4).abs() < 1e-12);
    /// assert!((state[3].2.item() - (0.9 + 0.1 * 20.0 / 3.0)).abs() < 1e-12);
    /// bn.eval();
    /// ```
    ///
    /// From your own tensors, with the running statistics in use:
    ///
    /// ```
    /// use devtensor::nn::{BatchNorm2d, Module};
    /// use devtensor::{Cpu, Tensor};
    /// let ones = Tensor::<Cpu>::ones([2]);
    /// let mut bn = BatchNorm2d::from_weights(ones.clone(), Tensor::zeros([2]), Tensor::full([2], 3.0), ones).eps(0.0);
    /// bn.eval(); // the running statistics normalise
    /// let y = bn.forward(&Tensor::<Cpu>::full([1, 2, 1, 1], 5.0));
    /// assert_eq!(y.to_vec(), vec![2.0, 2.0]);
    /// ```
    ///
    /// The fields are public to read and assign, and the struct is
    /// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
    BatchNorm2d, "BatchNorm2d", [4], "expected an image batch [N, {c}, H, W]"
}

batch_norm! {
    /// PyTorch's `nn.BatchNorm1d`: each channel of `[N, C]` or `[N, C, L]`
    /// (features of a batch, or channels of sequences) normalised over the
    /// batch (and the positions), with running statistics, as
    /// [`BatchNorm2d`] does for images.
    ///
    /// ```
    /// use devtensor::nn::{BatchNorm1d, Module};
    /// use devtensor::{Cpu, Tensor};
    /// let mut bn = BatchNorm1d::<Cpu, f64>::new(2).eps(0.0);
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 10.0, 3.0, 30.0], [2, 2]);
    /// assert_eq!(bn.forward(&x).to_vec(), vec![-1.0, -1.0, 1.0, 1.0]);
    /// bn.eval();
    /// let names: Vec<String> = bn.named_tensors().into_iter().map(|(name, _, _)| name).collect();
    /// assert_eq!(names, ["weight", "bias", "running_mean", "running_var"]);
    /// ```
    ///
    /// The fields are public to read and assign, and the struct is
    /// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
    BatchNorm1d, "BatchNorm1d", [2, 3], "expected [N, {c}] or [N, {c}, L]"
}

batch_norm! {
    /// PyTorch's `nn.BatchNorm3d`: each channel of `[N, C, D, H, W]`
    /// (volumes, video) normalised over the batch and the positions, with
    /// running statistics, as [`BatchNorm2d`] does for images.
    ///
    /// ```
    /// use devtensor::nn::BatchNorm3d;
    /// use devtensor::{Cpu, Tensor};
    /// let bn = BatchNorm3d::<Cpu, f64>::new(1).eps(0.0);
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![2.0, 4.0], [1, 1, 2, 1, 1]);
    /// assert_eq!(bn.forward(&x).to_vec(), vec![-1.0, 1.0]);
    /// ```
    ///
    /// The fields are public to read and assign, and the struct is
    /// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
    BatchNorm3d, "BatchNorm3d", [5], "expected a batch of volumes [N, {c}, D, H, W]"
}
