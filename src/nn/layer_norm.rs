//! `LayerNorm`: normalisation over the trailing axes of each sample.

use super::forward::call;
use super::parameter::{check, parameter};
use super::{Forward, Hookable, ModuleHooks};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::ops::reduce::AffineAxis;
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// PyTorch's `nn.LayerNorm`: each sample is normalised over its last
/// `normalized_shape.len()` axes to mean 0 and (biased) variance 1, then
/// scaled by `weight` and shifted by `bias` (initialised to 1 and 0; no
/// bias after [`without_bias`](Self::without_bias), PyTorch's
/// `bias=False`, as nanoGPT's checkpoints have).
///
/// ```
/// use devtensor::nn::LayerNorm;
/// use devtensor::{Cpu, Tensor};
/// let norm = LayerNorm::<Cpu, f64>::new(&[4]);
/// let y = norm.forward(&Tensor::<Cpu, f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [1, 4]));
/// let v = y.to_vec();
/// assert!((v.iter().sum::<f64>()).abs() < 1e-12);
/// assert!((v[3] - 1.5 / (1.25f64 + 1e-5).sqrt()).abs() < 1e-12);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LayerNorm<D: Device, E: FloatElement = f32> {
    /// The scale, shaped like the normalised axes.
    pub weight: Tensor<D, E>,
    /// The shift, shaped like the normalised axes; `None` for PyTorch's
    /// `bias=False` (its `state_dict` then has no `bias`).
    pub bias: Option<Tensor<D, E>>,
    /// Added to the variance before the square root.
    pub eps: f64,
    /// The hooks registered on the layer ([`Hooks`](crate::nn::Hooks)).
    hooks: ModuleHooks<D, E>,
}

impl<D: Device, E: FloatElement> LayerNorm<D, E> {
    /// A layer normalising over trailing axes of sizes `normalized_shape`,
    /// with `eps = 1e-5`. Fails when `D` is unavailable.
    #[fallible]
    pub fn new(normalized_shape: &[usize]) -> Self {
        Ok(LayerNorm {
            weight: Tensor::try_ones(normalized_shape)?.requires_grad(),
            bias: Some(Tensor::try_zeros(normalized_shape)?.requires_grad()),
            eps: 1e-5,
            hooks: ModuleHooks::new(),
        })
    }

    /// A layer with your own `weight` and `bias`, both shaped like the
    /// normalised axes (`normalized_shape` is their shape), which become its
    /// parameters as in [`Linear::from_weights`](super::Linear::from_weights);
    /// `eps = 1e-5`. Fails, naming both shapes, when they differ.
    ///
    /// ```
    /// use devtensor::nn::LayerNorm;
    /// use devtensor::{Cpu, Tensor};
    /// let norm = LayerNorm::from_weights(Tensor::<Cpu>::full([2], 2.0), Tensor::full([2], 1.0)).eps(0.0);
    /// assert_eq!(norm.forward(&Tensor::<Cpu>::from_vec(vec![1.0, 3.0], [1, 2])).to_vec(), vec![-1.0, 3.0]);
    /// ```
    #[fallible]
    pub fn from_weights(weight: Tensor<D, E>, bias: Tensor<D, E>) -> Self {
        check(weight.dims() == bias.dims(), "LayerNorm::from_weights", &[&weight, &bias], || {
            "expected a weight and a bias of one shape, normalized_shape".into()
        })?;
        Ok(LayerNorm { weight: parameter(weight), bias: Some(parameter(bias)), eps: 1e-5, hooks: ModuleHooks::new() })
    }

    /// The layer without its bias, PyTorch's `nn.LayerNorm(n, bias=False)`:
    /// the normalised input times `weight`, and no `bias` in its
    /// parameters or its checkpoints.
    ///
    /// ```
    /// use devtensor::nn::{LayerNorm, Module};
    /// use devtensor::{Cpu, Tensor};
    /// let norm = LayerNorm::<Cpu, f64>::new(&[2]).without_bias();
    /// let names: Vec<String> = norm.parameters().into_iter().map(|(name, _)| name).collect();
    /// assert_eq!(names, ["weight"]);
    /// let y = norm.eps(0.0).forward(&Tensor::<Cpu, f64>::from_vec(vec![1.0, 3.0], [1, 2]));
    /// assert_eq!(y.to_vec(), vec![-1.0, 1.0]);
    /// ```
    pub fn without_bias(mut self) -> Self {
        self.bias = None;
        self
    }

    /// The layer with `eps` added to the variance (PyTorch's `eps=`).
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }
}

impl<D: Device, E: FloatElement> Hookable<D, E> for LayerNorm<D, E> {}

impl<D: Device, E: FloatElement> Forward<D, E> for LayerNorm<D, E> {
    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        Some(&self.hooks)
    }

    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        let norm = self.weight.dims();
        let lead = x.rank().checked_sub(norm.len());
        if lead.is_none_or(|lead| &x.dims()[lead..] != norm) {
            return Err(Error::Shape {
                op: "LayerNorm",
                device: D::name(),
                shapes: vec![x.shape().clone(), self.weight.shape().clone()],
                reason: "the input's trailing axes must match normalized_shape".into(),
            });
        }
        let lead = lead.unwrap_or(0);
        // One fused op: each row of the trailing axes standardised, then
        // scaled and shifted element by element.
        let rows = x.dims()[..lead].iter().product();
        // Without a bias, a zero shift that tracks nothing keeps the one
        // fused op (the weight's gradient is unchanged by it).
        let zeros;
        let bias = match &self.bias {
            Some(bias) => bias,
            None => {
                zeros = Tensor::try_zeros(norm)?;
                &zeros
            }
        };
        let affine = Some((&self.weight, bias, AffineAxis::Inner));
        let [y, _, _] = x.try_standardize("LayerNorm", [1, rows, norm.iter().product()], self.eps, affine)?;
        Ok(y)
    }
}

impl<D: Device, E: FloatElement> LayerNorm<D, E> {
    /// The layer applied to `x`, which must be on the layer's device
    /// (checked at compile time). Fails when `x`'s shape does not fit.
    #[fallible]
    pub fn forward<D2: Device, EX: Element>(&self, x: &Tensor<D2, EX>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
        E: SameDtype<EX>,
    {
        call(self, same_device(x))
    }
}

crate::module!(LayerNorm<E> { weight, bias, hooks; eps });
