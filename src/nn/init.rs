//! Parameter initialisation, PyTorch's `nn.init`: the layers' defaults,
//! the named initialisations (`normal_`, `trunc_normal_`, `xavier_uniform_`,
//! `kaiming_normal_`, ...) and [`apply`] for a whole model, all drawn from
//! the generator that [`manual_seed`](crate::manual_seed) seeds.

use super::{Module, TensorKind};
use crate::autograd::LeafId;
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::tensor::Device;
use crate::tensor::Tensor;
use devtensor_macros::fallible;
use std::collections::HashMap;

/// Samples of `U(-bound, bound)`: PyTorch's `nn.init.uniform_`.
pub fn uniform<D: Device, E: FloatElement>(shape: impl Into<Shape>, bound: f64) -> Result<Tensor<D, E>> {
    uniform_between(shape, -bound, bound)
}

/// Samples of `U(low, high)`.
fn uniform_between<D: Device, E: FloatElement>(shape: impl Into<Shape>, low: f64, high: f64) -> Result<Tensor<D, E>> {
    Tensor::<D, E>::try_rand(shape)?.try_mul_scalar(E::from_f64(high - low))?.try_add_scalar(E::from_f64(low))
}

/// PyTorch's default for the weight of `Linear` and `Conv2d`:
/// `kaiming_uniform_(w, a=sqrt(5))`, which is `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`.
/// The bias gets the same bound.
pub fn default_bound(fan_in: usize) -> f64 {
    if fan_in == 0 { 0.0 } else { 1.0 / (fan_in as f64).sqrt() }
}

/// `nn.init.calculate_gain(nonlinearity, param)`: the gain the Xavier and
/// Kaiming initialisations scale by, for PyTorch's names: 1 for
/// `"linear"`, the convolutions (`"conv2d"`, `"conv_transpose2d"`, ...) and
/// `"sigmoid"`; 5/3 for `"tanh"`; `sqrt(2)` for `"relu"`;
/// `sqrt(2 / (1 + slope²))` for `"leaky_relu"` (`param` the slope, 0.01 if
/// `None`); 3/4 for `"selu"`. Names, not an enum, as in PyTorch: an enum
/// variant called `Linear` or `Relu` would make rustc print the layers'
/// full paths in every compile error that names them. Fails on any other
/// name.
///
/// ```
/// use devtensor::nn::init::calculate_gain;
/// assert_eq!(calculate_gain("tanh", None).unwrap(), 5.0 / 3.0);
/// assert_eq!(calculate_gain("leaky_relu", Some(0.0)).unwrap(), 2f64.sqrt());
/// assert!(calculate_gain("relu6", None).is_err());
/// ```
pub fn calculate_gain(nonlinearity: &str, param: Option<f64>) -> Result<f64> {
    Ok(match nonlinearity {
        "linear" | "conv1d" | "conv2d" | "conv3d" | "conv_transpose1d" | "conv_transpose2d" | "conv_transpose3d"
        | "sigmoid" => 1.0,
        "tanh" => 5.0 / 3.0,
        "relu" => 2f64.sqrt(),
        "leaky_relu" => {
            let slope = param.unwrap_or(0.01);
            (2.0 / (1.0 + slope * slope)).sqrt()
        }
        "selu" => 0.75,
        other => {
            return Err(Error::Argument {
                op: "calculate_gain",
                device: "any device".into(),
                reason: format!("unsupported nonlinearity {other:?}"),
            });
        }
    })
}

/// Which fan the Kaiming initialisations keep the variance of: PyTorch's
/// `mode="fan_in"` (the forward pass) or `"fan_out"` (the backward pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// `fan_in`: input features times the receptive field.
    FanIn,
    /// `fan_out`: output features times the receptive field.
    FanOut,
}

/// `(fan_in, fan_out)` of a weight of shape `dims`, as PyTorch computes
/// them: `dims[1]` and `dims[0]` times the product of the remaining axes
/// (a convolution's receptive field). `None` under two axes.
///
/// ```
/// use devtensor::nn::init::fans;
/// assert_eq!(fans(&[16, 3, 5, 5]), Some((75, 400)));
/// assert_eq!(fans(&[4]), None);
/// ```
pub fn fans(dims: &[usize]) -> Option<(usize, usize)> {
    let [out, inp, field @ ..] = dims else { return None };
    let field: usize = field.iter().product();
    Some((inp * field, out * field))
}

/// `t`'s fans, or an error naming the initialisation.
fn fans_of<D: Device, E: FloatElement>(op: &'static str, t: &Tensor<D, E>) -> Result<(usize, usize)> {
    fans(t.dims()).ok_or_else(|| Error::Shape {
        op,
        device: D::name(),
        shapes: vec![t.shape().clone()],
        reason: "fan in and fan out cannot be computed for a tensor of fewer than 2 axes".into(),
    })
}

/// `t` replaced by `values` (of its shape), still a parameter if it was one.
fn replace<D: Device, E: FloatElement>(t: &mut Tensor<D, E>, values: Tensor<D, E>) {
    *t = if t.tracks_grad() { values.requires_grad() } else { values };
}

/// Samples of `N(mean, std²)` of `t`'s shape in its place, like
/// `nn.init.normal_(t, mean, std)`: GPT-2's and nanoGPT's
/// `normal_(w, 0.0, 0.02)`. Call it before making the optimizer, which
/// tracks parameters by identity; to keep tied weights tied, use [`apply`].
///
/// ```
/// use devtensor::nn::{Linear, init};
/// use devtensor::Cpu;
/// let mut fc = Linear::<Cpu>::new(64, 64);
/// init::normal_(&mut fc.weight, 0.0, 0.02);
/// assert!(fc.weight.tracks_grad());
/// assert!(fc.weight.abs().max().item() < 0.2); // 10 standard deviations
/// ```
#[fallible(free)]
pub fn normal_<D: Device, E: FloatElement>(t: &mut Tensor<D, E>, mean: f64, std: f64) -> () {
    let values =
        Tensor::<D, E>::try_randn(t.dims())?.try_mul_scalar(E::from_f64(std))?.try_add_scalar(E::from_f64(mean))?;
    replace(t, values);
    Ok(())
}

/// Samples of `N(mean, std²)` truncated to `[a, b]` in `t`'s place, like
/// `nn.init.trunc_normal_(t, mean, std, a, b)` (the ViT's and timm's
/// `trunc_normal_(w, std=.02)`, whose PyTorch defaults are `mean = 0`,
/// `std = 1`, `a = -2`, `b = 2`; `a` and `b` are values, not standard
/// deviations). Drawn as PyTorch draws them: a uniform sample between the
/// normal CDF at `a` and at `b`, mapped back through the inverse CDF, so
/// that a window far in a tail costs no more than one near the mean. Fails
/// unless `std > 0` and `a < b`.
///
/// ```
/// use devtensor::nn::{Linear, init};
/// use devtensor::Cpu;
/// let mut head = Linear::<Cpu>::new(384, 1000);
/// init::trunc_normal_(&mut head.weight, 0.0, 0.02, -0.04, 0.04);
/// let w = head.weight.to_vec();
/// assert!(w.iter().all(|v| v.abs() <= 0.04));
/// assert!(head.weight.tracks_grad());
/// ```
#[fallible(free)]
pub fn trunc_normal_<D: Device, E: FloatElement>(t: &mut Tensor<D, E>, mean: f64, std: f64, a: f64, b: f64) -> () {
    if !(std > 0.0 && a < b) {
        return Err(Error::Argument {
            op: "trunc_normal_",
            device: D::name(),
            reason: format!("expected std > 0 and a < b, got std {std}, a {a}, b {b}"),
        });
    }
    let cdf = |x: f64| 0.5 * (1.0 + libm::erf((x - mean) / (std * std::f64::consts::SQRT_2)));
    let (low, high) = (2.0 * cdf(a) - 1.0, 2.0 * cdf(b) - 1.0);
    // In f64 on the host: an initialisation runs once, and the inverse
    // error function is not a device op.
    let u = Tensor::<crate::Cpu, f64>::try_rand(t.dims())?.try_to_vec()?;
    let values: Vec<E> = u
        .iter()
        .map(|&u| {
            let x = mean + std * std::f64::consts::SQRT_2 * erfinv(low + (high - low) * u);
            E::from_f64(x.clamp(a, b))
        })
        .collect();
    replace(t, Tensor::<D, E>::try_from_vec(values, t.dims())?);
    Ok(())
}

/// The inverse of `erf` on `(-1, 1)` (`±inf` at `±1`): Giles's
/// approximation ("Approximating the erfinv function", 2010) refined by
/// two Newton steps on `libm::erf`, to a few ulps.
fn erfinv(y: f64) -> f64 {
    if y <= -1.0 {
        return f64::NEG_INFINITY;
    }
    if y >= 1.0 {
        return f64::INFINITY;
    }
    let w = -((1.0 - y) * (1.0 + y)).ln();
    let mut x = if w < 5.0 {
        let w = w - 2.5;
        let p = [
            2.81022636e-08,
            3.43273939e-07,
            -3.5233877e-06,
            -4.39150654e-06,
            0.00021858087,
            -0.00125372503,
            -0.00417768164,
            0.246640727,
            1.50140941,
        ];
        p.iter().fold(0.0, |acc, c| acc * w + c) * y
    } else {
        let w = w.sqrt() - 3.0;
        let p = [
            -0.000200214257,
            0.000100950558,
            0.00134934322,
            -0.00367342844,
            0.00573950773,
            -0.0076224613,
            0.00943887047,
            1.00167406,
            2.83297682,
        ];
        p.iter().fold(0.0, |acc, c| acc * w + c) * y
    };
    for _ in 0..2 {
        let slope = 2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp();
        if slope == 0.0 {
            break;
        }
        x -= (libm::erf(x) - y) / slope;
    }
    x
}

/// Samples of `U(low, high)` in `t`'s place, like `nn.init.uniform_(t, a, b)`.
#[fallible(free)]
pub fn uniform_<D: Device, E: FloatElement>(t: &mut Tensor<D, E>, low: f64, high: f64) -> () {
    let values = uniform_between(t.dims(), low, high)?;
    replace(t, values);
    Ok(())
}

/// `value` everywhere in `t`'s place, like `nn.init.constant_`.
#[fallible(free)]
pub fn constant_<D: Device, E: FloatElement>(t: &mut Tensor<D, E>, value: f64) -> () {
    let values = Tensor::<D, E>::try_full(t.dims(), E::from_f64(value))?;
    replace(t, values);
    Ok(())
}

/// Zeros in `t`'s place, like `nn.init.zeros_`.
///
/// ```
/// use devtensor::nn::init;
/// use devtensor::{Cpu, Tensor};
/// let mut bias = Tensor::<Cpu>::ones([3]).requires_grad();
/// init::zeros_(&mut bias);
/// assert_eq!((bias.to_vec(), bias.tracks_grad()), (vec![0.0; 3], true));
/// ```
#[fallible(free)]
pub fn zeros_<D: Device, E: FloatElement>(t: &mut Tensor<D, E>) -> () {
    try_constant_(t, 0.0)
}

/// Ones in `t`'s place, like `nn.init.ones_`.
#[fallible(free)]
pub fn ones_<D: Device, E: FloatElement>(t: &mut Tensor<D, E>) -> () {
    try_constant_(t, 1.0)
}

/// `nn.init.xavier_uniform_(t, gain)`: `U(-a, a)` with
/// `a = gain · sqrt(6 / (fan_in + fan_out))`. Fails under two axes.
#[fallible(free)]
pub fn xavier_uniform_<D: Device, E: FloatElement>(t: &mut Tensor<D, E>, gain: f64) -> () {
    let (fan_in, fan_out) = fans_of("xavier_uniform_", t)?;
    let bound = gain * (6.0 / (fan_in + fan_out) as f64).sqrt();
    try_uniform_(t, -bound, bound)
}

/// `nn.init.xavier_normal_(t, gain)`: `N(0, std²)` with
/// `std = gain · sqrt(2 / (fan_in + fan_out))`. Fails under two axes.
#[fallible(free)]
pub fn xavier_normal_<D: Device, E: FloatElement>(t: &mut Tensor<D, E>, gain: f64) -> () {
    let (fan_in, fan_out) = fans_of("xavier_normal_", t)?;
    try_normal_(t, 0.0, gain * (2.0 / (fan_in + fan_out) as f64).sqrt())
}

/// `nn.init.kaiming_uniform_(t, a, mode, nonlinearity)`: `U(-b, b)` with
/// `b = gain · sqrt(3 / fan)`, the gain of `nonlinearity` with parameter
/// `a` (see [`calculate_gain`]); PyTorch's defaults are
/// `a = 0, FanMode::FanIn, "leaky_relu"`. Fails under two axes and on an
/// unknown nonlinearity.
#[fallible(free)]
pub fn kaiming_uniform_<D: Device, E: FloatElement>(
    t: &mut Tensor<D, E>,
    a: f64,
    mode: FanMode,
    nonlinearity: &str,
) -> () {
    let fan = kaiming_fan("kaiming_uniform_", t, mode)?;
    let bound = calculate_gain(nonlinearity, Some(a))? * (3.0 / fan as f64).sqrt();
    try_uniform_(t, -bound, bound)
}

/// `nn.init.kaiming_normal_(t, a, mode, nonlinearity)`: `N(0, std²)` with
/// `std = gain / sqrt(fan)`, as ResNets are initialised
/// (`0.0, FanMode::FanOut, "relu"`). Fails under two axes and on an
/// unknown nonlinearity.
#[fallible(free)]
pub fn kaiming_normal_<D: Device, E: FloatElement>(
    t: &mut Tensor<D, E>,
    a: f64,
    mode: FanMode,
    nonlinearity: &str,
) -> () {
    let fan = kaiming_fan("kaiming_normal_", t, mode)?;
    try_normal_(t, 0.0, calculate_gain(nonlinearity, Some(a))? / (fan as f64).sqrt())
}

fn kaiming_fan<D: Device, E: FloatElement>(op: &'static str, t: &Tensor<D, E>, mode: FanMode) -> Result<usize> {
    let (fan_in, fan_out) = fans_of(op, t)?;
    Ok(match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
    })
}

/// Re-initialises every parameter of `model` for which `init(name, tensor)`
/// gives new values (of the same shape), like PyTorch's
/// `model.apply(init_fn)`; `None` leaves a parameter as it is. A tied
/// parameter (one tensor under two names) is initialised once and stays
/// tied. Call it before making the optimizer. Fails with `init`'s first
/// error, or when new values do not have the parameter's shape.
///
/// nanoGPT's initialisation, by name:
/// ```
/// use devtensor::nn::{Embedding, Linear, Module, init};
/// use devtensor::{Cpu, Device, Tensor};
/// struct Lm<D: Device> {
///     wte: Embedding<D>,
///     lm_head: Linear<D>,
/// }
/// devtensor::module!(Lm { wte, lm_head });
///
/// let wte = Embedding::<Cpu>::new(65, 32);
/// let mut lm = Lm { lm_head: Linear::from_weights(wte.weight.clone(), None), wte }; // tied
/// init::apply(&mut lm, |_name, w| {
///     let mut w = w.clone();
///     init::try_normal_(&mut w, 0.0, 0.02)?;
///     Ok(Some(w))
/// })
/// .unwrap();
/// assert_eq!(lm.wte.weight.to_vec(), lm.lm_head.weight.to_vec()); // still one tensor
/// assert_eq!(lm.parameters().len(), 1);
/// ```
pub fn apply<D: Device, E: FloatElement, M: Module<D, E>>(
    model: &mut M,
    mut init: impl FnMut(&str, &Tensor<D, E>) -> Result<Option<Tensor<D, E>>>,
) -> Result<()> {
    let mut done: HashMap<LeafId, Tensor<D, E>> = HashMap::new();
    let mut failure = None;
    model.visit_mut("", &mut |name, kind, t| {
        if failure.is_some() || kind != TensorKind::Parameter {
            return;
        }
        if let Some(same) = t.leaf_id().and_then(|id| done.get(&id)) {
            *t = same.clone();
            return;
        }
        match init(name, t) {
            Ok(None) => {}
            Ok(Some(values)) if values.dims() != t.dims() => {
                failure = Some(Error::Shape {
                    op: "init::apply",
                    device: D::name(),
                    shapes: vec![t.shape().clone(), values.shape().clone()],
                    reason: format!("the new values of `{name}` do not have its shape"),
                });
            }
            Ok(Some(values)) => {
                let values = values.detach().requires_grad();
                if let Some(id) = t.leaf_id() {
                    done.insert(id, values.clone());
                }
                *t = values;
            }
            Err(e) => failure = Some(e),
        }
    });
    failure.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::erfinv;

    /// `erf(erfinv(y)) = y` across `(-1, 1)`, into both tails.
    #[test]
    fn erfinv_inverts_erf() {
        for k in -999_999i64..=999_999 {
            if k % 997 != 0 && k.abs() < 999_990 {
                continue;
            }
            let y = k as f64 / 1_000_000.0;
            let x = erfinv(y);
            assert!((libm::erf(x) - y).abs() <= 4.0 * f64::EPSILON * y.abs().max(1e-300), "erfinv({y}) = {x}");
        }
        assert_eq!((erfinv(1.0), erfinv(-1.0), erfinv(0.0)), (f64::INFINITY, f64::NEG_INFINITY, 0.0));
    }
}
