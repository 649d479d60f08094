//! Creating tensors: from data, constants, ranges and random numbers.

use super::Tensor;
use crate::device::Device;
use crate::element::{Element, FloatElement};
use crate::error::{Error, Result, or_panic};
use crate::random::{Generator, with_thread_generator};
use crate::shape::Shape;

impl<D: Device, E: Element> Tensor<D, E> {
    /// A tensor holding `data` in row-major order, with `shape`.
    ///
    /// Fails when `data.len()` is not the shape's element count, or when the
    /// device is unavailable.
    pub fn try_from_vec(data: Vec<E>, shape: impl Into<Shape>) -> Result<Self> {
        let shape = shape.into();
        check_len("from_vec", D::name(), data.len(), &shape)?;
        Ok(Self::from_storage(D::storage_from_vec(data)?, shape))
    }

    /// Panicking form of [`try_from_vec`](Self::try_from_vec).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let t = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    /// assert_eq!(t.dims(), &[2, 3]);
    /// ```
    #[track_caller]
    pub fn from_vec(data: Vec<E>, shape: impl Into<Shape>) -> Self {
        or_panic(Self::try_from_vec(data, shape))
    }

    /// Like [`try_from_vec`](Self::try_from_vec), copying from a slice.
    pub fn try_from_slice(data: &[E], shape: impl Into<Shape>) -> Result<Self> {
        let shape = shape.into();
        check_len("from_slice", D::name(), data.len(), &shape)?;
        Ok(Self::from_storage(D::storage_from_slice(data)?, shape))
    }

    /// Panicking form of [`try_from_slice`](Self::try_from_slice).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let labels = Tensor::<Cpu, i64>::from_slice(&[3, 1, 4], [3]);
    /// assert_eq!(labels.to_vec(), vec![3, 1, 4]);
    /// ```
    #[track_caller]
    pub fn from_slice(data: &[E], shape: impl Into<Shape>) -> Self {
        or_panic(Self::try_from_slice(data, shape))
    }

    /// A rank-0 tensor holding one value, like `torch.tensor(3.0)`.
    pub fn try_scalar(value: E) -> Result<Self> {
        Self::try_full((), value)
    }

    /// Panicking form of [`try_scalar`](Self::try_scalar).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::scalar(2.5).item(), 2.5);
    /// ```
    #[track_caller]
    pub fn scalar(value: E) -> Self {
        or_panic(Self::try_scalar(value))
    }

    /// A tensor with every element equal to `value`.
    pub fn try_full(shape: impl Into<Shape>, value: E) -> Result<Self> {
        let shape = shape.into();
        Ok(Self::from_storage(D::storage_full(shape.elem_count(), value)?, shape))
    }

    /// Panicking form of [`try_full`](Self::try_full).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu, i64>::full([2], 7).to_vec(), vec![7, 7]);
    /// ```
    #[track_caller]
    pub fn full(shape: impl Into<Shape>, value: E) -> Self {
        or_panic(Self::try_full(shape, value))
    }

    /// A tensor of zeros.
    pub fn try_zeros(shape: impl Into<Shape>) -> Result<Self> {
        Self::try_full(shape, E::ZERO)
    }

    /// Panicking form of [`try_zeros`](Self::try_zeros).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::zeros([2]).to_vec(), vec![0.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn zeros(shape: impl Into<Shape>) -> Self {
        or_panic(Self::try_zeros(shape))
    }

    /// A tensor of ones.
    pub fn try_ones(shape: impl Into<Shape>) -> Result<Self> {
        Self::try_full(shape, E::ONE)
    }

    /// Panicking form of [`try_ones`](Self::try_ones).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu, u8>::ones([3]).to_vec(), vec![1, 1, 1]);
    /// ```
    #[track_caller]
    pub fn ones(shape: impl Into<Shape>) -> Self {
        or_panic(Self::try_ones(shape))
    }

    /// The `n x n` identity matrix.
    pub fn try_eye(n: usize) -> Result<Self> {
        let mut data = vec![E::ZERO; n * n];
        for i in 0..n {
            data[i * n + i] = E::ONE;
        }
        Self::try_from_vec(data, [n, n])
    }

    /// Panicking form of [`try_eye`](Self::try_eye).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::eye(2).to_vec(), vec![1.0, 0.0, 0.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn eye(n: usize) -> Self {
        or_panic(Self::try_eye(n))
    }

    /// `start, start + step, ...` up to but excluding `end`, like `torch.arange`.
    ///
    /// Fails on a zero step or a step pointing away from `end`.
    pub fn try_arange_step(start: E, end: E, step: E) -> Result<Self> {
        let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
        let bad = |reason: &str| Error::Argument { op: "arange", device: D::name(), reason: reason.into() };
        if st == 0.0 || !st.is_finite() || !s.is_finite() || !e.is_finite() {
            return Err(bad("the step must be finite and non-zero, and the ends finite"));
        }
        if (e - s) * st < 0.0 {
            return Err(bad(&format!("a step of {step} never goes from {start} to {end}")));
        }
        let len = ((e - s) / st).ceil() as usize;
        let data = (0..len).map(|i| E::from_f64(s + i as f64 * st)).collect();
        Self::try_from_vec(data, [len])
    }

    /// Panicking form of [`try_arange_step`](Self::try_arange_step).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::arange_step(0.0, 1.0, 0.25).to_vec(), vec![0.0, 0.25, 0.5, 0.75]);
    /// ```
    #[track_caller]
    pub fn arange_step(start: E, end: E, step: E) -> Self {
        or_panic(Self::try_arange_step(start, end, step))
    }

    /// `start, start + 1, ...` up to but excluding `end`.
    pub fn try_arange(start: E, end: E) -> Result<Self> {
        Self::try_arange_step(start, end, E::ONE)
    }

    /// Panicking form of [`try_arange`](Self::try_arange).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu, i64>::arange(2, 5).to_vec(), vec![2, 3, 4]);
    /// ```
    #[track_caller]
    pub fn arange(start: E, end: E) -> Self {
        or_panic(Self::try_arange(start, end))
    }

    /// A tensor of this one's shape filled with `value`, on the same device.
    pub fn try_full_like(&self, value: E) -> Result<Self> {
        Self::try_full(self.shape(), value)
    }

    /// Panicking form of [`try_full_like`](Self::try_full_like).
    #[track_caller]
    pub fn full_like(&self, value: E) -> Self {
        or_panic(self.try_full_like(value))
    }

    /// Zeros of this tensor's shape, on the same device.
    pub fn try_zeros_like(&self) -> Result<Self> {
        self.try_full_like(E::ZERO)
    }

    /// Panicking form of [`try_zeros_like`](Self::try_zeros_like).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::ones([2, 2]);
    /// assert_eq!(x.zeros_like().to_vec(), vec![0.0; 4]);
    /// ```
    #[track_caller]
    pub fn zeros_like(&self) -> Self {
        or_panic(self.try_zeros_like())
    }

    /// Ones of this tensor's shape, on the same device.
    pub fn try_ones_like(&self) -> Result<Self> {
        self.try_full_like(E::ONE)
    }

    /// Panicking form of [`try_ones_like`](Self::try_ones_like).
    #[track_caller]
    pub fn ones_like(&self) -> Self {
        or_panic(self.try_ones_like())
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// `steps` evenly spaced values from `start` to `end`, both included.
    pub fn try_linspace(start: E, end: E, steps: usize) -> Result<Self> {
        let (s, e) = (start.to_f64(), end.to_f64());
        let data = match steps {
            0 => vec![],
            1 => vec![start],
            _ => {
                let step = (e - s) / (steps - 1) as f64;
                // Fill from both ends so the last value is exactly `end`.
                (0..steps)
                    .map(|i| if i < steps / 2 { s + i as f64 * step } else { e - (steps - 1 - i) as f64 * step })
                    .map(E::from_f64)
                    .collect()
            }
        };
        Self::try_from_vec(data, [steps])
    }

    /// Panicking form of [`try_linspace`](Self::try_linspace).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::linspace(0.0, 1.0, 5).to_vec(), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    /// ```
    #[track_caller]
    pub fn linspace(start: E, end: E, steps: usize) -> Self {
        or_panic(Self::try_linspace(start, end, steps))
    }

    /// Uniform samples in `[0, 1)` from `generator`.
    pub fn try_rand_with(shape: impl Into<Shape>, generator: &mut Generator) -> Result<Self> {
        let shape = shape.into();
        let data = generator.uniform(shape.elem_count()).into_iter().map(E::from_f64).collect();
        Self::try_from_vec(data, shape)
    }

    /// Panicking form of [`try_rand_with`](Self::try_rand_with).
    #[track_caller]
    pub fn rand_with(shape: impl Into<Shape>, generator: &mut Generator) -> Self {
        or_panic(Self::try_rand_with(shape, generator))
    }

    /// Uniform samples in `[0, 1)` from this thread's generator (see
    /// [`manual_seed`](crate::manual_seed)).
    pub fn try_rand(shape: impl Into<Shape>) -> Result<Self> {
        with_thread_generator(|g| Self::try_rand_with(shape, g))
    }

    /// Panicking form of [`try_rand`](Self::try_rand).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let u = Tensor::<Cpu>::rand([1000]);
    /// assert!(u.to_vec().iter().all(|&x| (0.0..1.0).contains(&x)));
    /// ```
    #[track_caller]
    pub fn rand(shape: impl Into<Shape>) -> Self {
        or_panic(Self::try_rand(shape))
    }

    /// Standard normal samples from `generator`.
    pub fn try_randn_with(shape: impl Into<Shape>, generator: &mut Generator) -> Result<Self> {
        let shape = shape.into();
        let data = generator.normal(shape.elem_count()).into_iter().map(E::from_f64).collect();
        Self::try_from_vec(data, shape)
    }

    /// Panicking form of [`try_randn_with`](Self::try_randn_with).
    #[track_caller]
    pub fn randn_with(shape: impl Into<Shape>, generator: &mut Generator) -> Self {
        or_panic(Self::try_randn_with(shape, generator))
    }

    /// Standard normal samples from this thread's generator.
    pub fn try_randn(shape: impl Into<Shape>) -> Result<Self> {
        with_thread_generator(|g| Self::try_randn_with(shape, g))
    }

    /// Panicking form of [`try_randn`](Self::try_randn).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let z = Tensor::<Cpu, f64>::randn([10_000]);
    /// assert!(z.mean().item().abs() < 0.05);
    /// ```
    #[track_caller]
    pub fn randn(shape: impl Into<Shape>) -> Self {
        or_panic(Self::try_randn(shape))
    }

    /// Uniform samples of this tensor's shape, on the same device.
    pub fn try_rand_like(&self) -> Result<Self> {
        Self::try_rand(self.shape())
    }

    /// Panicking form of [`try_rand_like`](Self::try_rand_like).
    #[track_caller]
    pub fn rand_like(&self) -> Self {
        or_panic(self.try_rand_like())
    }

    /// Standard normal samples of this tensor's shape, on the same device.
    pub fn try_randn_like(&self) -> Result<Self> {
        Self::try_randn(self.shape())
    }

    /// Panicking form of [`try_randn_like`](Self::try_randn_like).
    #[track_caller]
    pub fn randn_like(&self) -> Self {
        or_panic(self.try_randn_like())
    }
}

/// The error of a constructor given `len` values for `shape`.
fn check_len(op: &'static str, device: String, len: usize, shape: &Shape) -> Result<()> {
    if len == shape.elem_count() {
        return Ok(());
    }
    Err(Error::Shape {
        op,
        device,
        shapes: vec![shape.clone()],
        reason: format!("{len} elements were given for {} places", shape.elem_count()),
    })
}
