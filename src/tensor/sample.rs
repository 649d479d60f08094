//! Random samples beyond `rand`, `randn` and `randperm`: integers in a
//! range, Bernoulli draws from probabilities and normal draws of any mean
//! and spread, scalar or per element (PyTorch's `randint`, `bernoulli` and
//! `normal`), each from
//! this thread's generator or a given [`Generator`]. The numbers are drawn
//! on the host, so a seed gives the same tensor on every device, as with
//! `rand`; none of them records a gradient.

use super::Tensor;
use super::create::{FloatFns, Fns};
use crate::autograd::no_grad;
use crate::backend::cpu::try_collect;
use crate::element::{Element, FloatElement};
use crate::error::check_elem_count;
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::random::{Generator, with_thread_generator};
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device};
use devtensor_macros::fallible;

impl<D: Device, E: Element> Tensor<D, E> {
    /// Integers drawn uniformly from `low..high` (`high` excluded) from
    /// `generator`, like `torch.randint(low, high, size, generator=g)`, in
    /// any element type that holds the range. Fails when `low >= high`
    /// and, for `u8`, on a range outside `0..=256`.
    ///
    /// ```
    /// use devtensor::{Cpu, Generator, Tensor};
    /// let dice = Tensor::<Cpu, i64>::randint_with(1, 7, [1000], &mut Generator::new(3));
    /// assert!(dice.to_vec().iter().all(|d| (1..7).contains(d)));
    /// assert!(Tensor::<Cpu, i64>::try_randint_with(5, 5, [2], &mut Generator::new(3)).is_err());
    /// ```
    #[fallible]
    pub fn randint_with(low: i64, high: i64, shape: impl Into<Shape>, generator: &mut Generator) -> Self {
        core_call!(D, Fns<E>.randint_with(low, high, shape.into(), generator))
    }

    /// [`randint_with`](Self::randint_with) from this thread's generator.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let labels = Tensor::<Cpu, i64>::randint(0, 10, [4, 3]);
    /// assert_eq!(labels.dims(), &[4, 3]);
    /// ```
    #[fallible]
    pub fn randint(low: i64, high: i64, shape: impl Into<Shape>) -> Self {
        with_thread_generator(|g| Self::try_randint_with(low, high, shape, g))
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// 1 where a draw from `generator` falls below this tensor's
    /// probability, 0 elsewhere, like `torch.bernoulli(p, generator=g)`:
    /// each element is 1 with its own probability. Fails on a probability
    /// outside `[0, 1]` or NaN, as PyTorch does.
    ///
    /// ```
    /// use devtensor::{Cpu, Generator, Tensor};
    /// let p = Tensor::<Cpu>::from_vec(vec![0.0, 1.0, 0.5], [3]);
    /// let draws = p.bernoulli_with(&mut Generator::new(1)).to_vec();
    /// assert_eq!(&draws[..2], &[0.0, 1.0]);
    /// assert!(Tensor::<Cpu>::from_vec(vec![1.5], [1]).try_bernoulli_with(&mut Generator::new(1)).is_err());
    /// ```
    #[fallible]
    pub fn bernoulli_with(&self, generator: &mut Generator) -> Self {
        core_call!(D, FloatFns<E>.bernoulli_with(self.core(), generator))
    }

    /// [`bernoulli_with`](Self::bernoulli_with) from this thread's generator.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let keep = Tensor::<Cpu>::full([8], 0.9).bernoulli();
    /// assert!(keep.to_vec().iter().all(|&k| k == 0.0 || k == 1.0));
    /// ```
    #[fallible]
    pub fn bernoulli(&self) -> Self {
        with_thread_generator(|g| self.try_bernoulli_with(g))
    }

    /// Normal samples of mean `mean` and standard deviation `std` from
    /// `generator`, like `torch.normal(mean, std, size, generator=g)`.
    /// Fails on a negative or NaN `std` (PyTorch: "normal expects
    /// std >= 0.0"). For a sample whose gradient reaches a learned mean and
    /// spread (a VAE's), write `mean + std * Tensor::randn_like(..)`.
    ///
    /// ```
    /// use devtensor::{Cpu, Generator, Tensor};
    /// let x = Tensor::<Cpu, f64>::normal_with(10.0, 0.5, [10_000], &mut Generator::new(2));
    /// assert!((x.mean().item() - 10.0).abs() < 0.05);
    /// ```
    #[fallible]
    pub fn normal_with(mean: f64, std: f64, shape: impl Into<Shape>, generator: &mut Generator) -> Self {
        core_call!(D, FloatFns<E>.normal_with(mean, std, shape.into(), generator))
    }

    /// [`normal_with`](Self::normal_with) from this thread's generator.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::normal(0.0, 0.02, [768, 64]).dims(), &[768, 64]);
    /// ```
    #[fallible]
    pub fn normal(mean: f64, std: f64, shape: impl Into<Shape>) -> Self {
        with_thread_generator(|g| Self::try_normal_with(mean, std, shape, g))
    }

    /// Normal samples with a mean and a standard deviation per element
    /// from `generator`, like `torch.normal(mean, std, generator=g)` with
    /// tensors (a scalar one, [`Tensor::scalar`], for PyTorch's float
    /// overloads): `mean` and `std` broadcast together to the result's
    /// shape, and each element is `mean + std · z` for a standard normal
    /// `z`, in `f64`, as [`normal_with`](Self::normal_with) draws them (so
    /// full tensors give its numbers). Records no gradient: PyTorch's is
    /// zero for both; for a sample whose gradient reaches `mean` and `std`
    /// (a VAE's), write `mean + std * Tensor::randn_like(..)`. Fails when
    /// the shapes do not broadcast, and on a negative or NaN `std`, as
    /// PyTorch does. The two are of one device and dtype by their type
    /// (so that a scalar spread takes the mean's): a `std` on another
    /// device is rustc's `mismatched types`, as for `cat`.
    ///
    /// ```
    /// use devtensor::{Cpu, Generator, Tensor};
    /// // Diffusion's forward process: x_t ~ N(sqrt(a) x_0, (1 - a) I), per pixel.
    /// let x0 = Tensor::<Cpu, f64>::from_vec(vec![1.0, -1.0, 0.5], [3]);
    /// let spread = Tensor::<Cpu, f64>::from_vec(vec![0.0, 0.0, 0.1], [3]);
    /// let xt = Tensor::normal_tensor_with(&x0, &spread, &mut Generator::new(4));
    /// assert_eq!(xt.to_vec()[..2], [1.0, -1.0]);
    /// // Broadcast: one mean per row, one spread for all.
    /// let rows = Tensor::<Cpu, f64>::from_vec(vec![0.0, 100.0], [2, 1]);
    /// let x = Tensor::normal_tensor_with(&rows, &Tensor::scalar(1.0), &mut Generator::new(4));
    /// assert_eq!(x.dims(), &[2, 1]);
    /// let err = Tensor::try_normal_tensor_with(&x0, &Tensor::scalar(-1.0), &mut Generator::new(4)).unwrap_err();
    /// assert_eq!(err.to_string(), "normal on Cpu: expected all elements of std >= 0.0, found -1");
    /// ```
    ///
    /// A spread on another device:
    /// ```compile_fail,E0308
    /// use devtensor::{Cpu, Cuda, Tensor};
    /// fn sample(mean: &Tensor<Cuda<0>>, std: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
    ///     Tensor::normal_tensor(mean, std)
    /// }
    /// ```
    #[fallible]
    pub fn normal_tensor_with(mean: &Self, std: &Self, generator: &mut Generator) -> Self {
        core_call!(D, FloatFns<E>.normal_tensor_with(mean.core(), std.core(), generator))
    }

    /// [`normal_tensor_with`](Self::normal_tensor_with) from this thread's
    /// generator.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let mean = Tensor::<Cpu>::zeros([4, 3]);
    /// assert_eq!(Tensor::normal_tensor(&mean, &Tensor::scalar(0.02)).dims(), &[4, 3]);
    /// ```
    #[fallible]
    pub fn normal_tensor(mean: &Self, std: &Self) -> Self {
        with_thread_generator(|g| Self::try_normal_tensor_with(mean, std, g))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    pub(super) fn core_randint_with(low: i64, high: i64, shape: Shape, generator: &mut Generator) -> Result<Self> {
        const OP: &str = "randint";
        let bad = |reason: String| Error::Argument { op: OP, device: D::name(), reason };
        if low >= high {
            return Err(bad(format!("expected low < high, got low = {low} and high = {high}")));
        }
        // The largest value drawn is `high - 1`, which `E` must hold.
        if !E::IS_FLOAT && ((low as f64) < E::MIN.to_f64() || ((high - 1) as f64) > E::MAX.to_f64()) {
            return Err(bad(format!("{} cannot hold the values {low}..{high}", E::DTYPE.name())));
        }
        let len = check_elem_count(OP, D::name, &[&shape])?;
        let data = try_collect(OP, len, generator.integers(low, high).map(E::from_i64))?;
        Ok(Self::from_storage(D::storage_from_vec(data)?, shape))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    pub(super) fn core_bernoulli_with(&self, generator: &mut Generator) -> Result<Self> {
        if self.elem_count() > 0 {
            // A NaN propagates through both extremes.
            let (low, high) = (self.try_amin(())?.try_item()?.to_f64(), self.try_amax(())?.try_item()?.to_f64());
            if low.is_nan() || low < 0.0 || high > 1.0 {
                let reason = format!("expected probabilities in [0, 1], found values in [{low}, {high}]");
                return Err(Error::Argument { op: "bernoulli", device: D::name(), reason });
            }
        }
        // Draws in f64 whatever the probabilities' type, so that a small
        // probability keeps its digits; u < p holds with probability p.
        let draws = Tensor::<D, f64>::try_rand_with(self.shape().clone(), generator)?;
        draws.try_lt(&self.detach().try_to_dtype::<f64>()?)?.try_to_dtype::<E>()
    }

    pub(super) fn core_normal_with(mean: f64, std: f64, shape: Shape, generator: &mut Generator) -> Result<Self> {
        if std.is_nan() || std < 0.0 {
            let reason = format!("expected std >= 0.0, got {std}");
            return Err(Error::Argument { op: "normal", device: D::name(), reason });
        }
        let len = check_elem_count("normal", D::name, &[&shape])?;
        let data = try_collect("normal", len, generator.normal().map(|z| E::from_f64(mean + std * z)))?;
        Ok(Self::from_storage(D::storage_from_vec(data)?, shape))
    }

    pub(super) fn core_normal_tensor_with(mean: &Self, std: &Self, generator: &mut Generator) -> Result<Self> {
        const OP: &str = "normal";
        let Some(shape) = mean.shape().broadcast_with(std.shape()) else {
            return Err(Error::Shape {
                op: OP,
                device: D::name(),
                shapes: vec![mean.shape().clone(), std.shape().clone()],
                reason: "the mean and the std do not broadcast together".into(),
            });
        };
        no_grad(|| {
            let std = std.try_to_dtype::<f64>()?;
            if std.elem_count() > 0 {
                // A NaN propagates through the minimum.
                let low = std.try_amin(())?.try_item()?;
                if low.is_nan() || low < 0.0 {
                    let reason = format!("expected all elements of std >= 0.0, found {low}");
                    return Err(Error::Argument { op: OP, device: D::name(), reason });
                }
            }
            // The standard normal draws of `normal_with`, then its
            // `mean + std · z` in f64, rounded once.
            let z = Tensor::<D, f64>::core_normal_with(0.0, 1.0, shape, generator)?;
            mean.try_to_dtype::<f64>()?.try_add(&std.try_mul(&z)?)?.try_to_dtype::<E>()
        })
    }
}
