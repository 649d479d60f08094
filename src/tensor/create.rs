//! Creating tensors: from data, constants, ranges and random numbers.

use super::Tensor;
use crate::backend::cpu::{try_collect, zeroed_vec};
use crate::element::{Element, FloatElement, Number};
use crate::error::check_elem_count;
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::random::{Generator, with_thread_generator};
use crate::tensor::shell::{core_call, core_table};
use crate::tensor::{CoreDevice, Device};
use devtensor_macros::fallible;

impl<D: Device, E: Element> Tensor<D, E> {
    /// A tensor holding `data` in row-major order, with `shape`.
    ///
    /// Fails when `data.len()` is not the shape's element count, or when the
    /// device is unavailable.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let t = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    /// assert_eq!(t.dims(), &[2, 3]);
    /// ```
    #[fallible]
    pub fn from_vec(data: Vec<E>, shape: impl Into<Shape>) -> Self {
        core_call!(D, Fns<E>.from_vec(data, shape.into()))
    }

    /// Like [`from_vec`](Self::from_vec), copying from a slice.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let labels = Tensor::<Cpu, i64>::from_slice(&[3, 1, 4], [3]);
    /// assert_eq!(labels.to_vec(), vec![3, 1, 4]);
    /// ```
    #[fallible]
    pub fn from_slice(data: &[E], shape: impl Into<Shape>) -> Self {
        core_call!(D, Fns<E>.from_slice(data, shape.into()))
    }

    /// A tensor of `shape` with every element `value`; `op` names the
    /// creation function in errors.
    fn filled(op: &'static str, shape: Shape, value: E) -> Result<Self> {
        core_call!(D, Fns<E>.filled(op, shape, value))
    }

    /// A rank-0 tensor holding one value, like `torch.tensor(3.0)`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::scalar(2.5).item(), 2.5);
    /// ```
    #[fallible]
    pub fn scalar(value: E) -> Self {
        Self::filled("scalar", Shape::from(()), value)
    }

    /// A tensor with every element equal to `value`.
    ///
    /// Fails with [`Error::Shape`] when the shape has more than `2^63 - 1`
    /// elements or their bytes exceed `isize::MAX`, and with
    /// [`Error::OutOfMemory`] when the device cannot hold them.
    ///
    /// ```
    /// use devtensor::{Cpu, Error, Tensor};
    /// let err = Tensor::<Cpu>::try_full([1 << 32, 1 << 32], 1.0).unwrap_err();
    /// assert!(matches!(err, Error::Shape { op: "full", .. }));
    /// let err = Tensor::<Cpu>::try_full([1 << 40, 1 << 20], 1.0).unwrap_err(); // 4 EiB
    /// assert!(matches!(err, Error::Shape { .. } | Error::OutOfMemory { .. }));
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu, i64>::full([2], 7).to_vec(), vec![7, 7]);
    /// ```
    #[fallible]
    pub fn full(shape: impl Into<Shape>, value: E) -> Self {
        Self::filled("full", shape.into(), value)
    }

    /// A tensor of zeros.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::zeros([2]).to_vec(), vec![0.0, 0.0]);
    /// ```
    #[fallible]
    pub fn zeros(shape: impl Into<Shape>) -> Self {
        Self::filled("zeros", shape.into(), E::ZERO)
    }

    /// A tensor of `shape` to be written before it is read, like
    /// `torch.empty`: here zero-filled, so that reading it first is
    /// defined (PyTorch's holds whatever the memory held).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::empty([2, 3]).dims(), &[2, 3]);
    /// ```
    #[fallible]
    pub fn empty(shape: impl Into<Shape>) -> Self {
        Self::filled("empty", shape.into(), E::ZERO)
    }

    /// A tensor of ones.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu, u8>::ones([3]).to_vec(), vec![1, 1, 1]);
    /// ```
    #[fallible]
    pub fn ones(shape: impl Into<Shape>) -> Self {
        Self::filled("ones", shape.into(), E::ONE)
    }

    /// The `n x n` identity matrix. Fails when `n * n` elements cannot exist
    /// or do not fit in memory.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::eye(2).to_vec(), vec![1.0, 0.0, 0.0, 1.0]);
    /// ```
    #[fallible]
    pub fn eye(n: usize) -> Self {
        core_call!(D, Fns<E>.eye(n))
    }

    /// `start, start + step, ...` up to but excluding `end`, like `torch.arange`.
    ///
    /// The bounds are plain numbers as in PyTorch ([`Element::Number`]:
    /// `f64` for float tensors, `i64` for integer ones), and the length is
    /// computed in them exactly as PyTorch does: `ceil((end - start) / step)`
    /// in `f64` for floats (so `arange_step(0.0, 0.3, 0.1)` has 3 elements),
    /// exactly for integers (every `i64` is reachable). Each value is
    /// `start + i * step` in that type, then converted.
    ///
    /// Fails on a zero or non-finite step, non-finite bounds, a step pointing
    /// away from `end`, more elements than a tensor can hold, and, for `u8`,
    /// values outside `0..=255`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::arange_step(0.0, 0.3, 0.1).elem_count(), 3);
    /// let top = Tensor::<Cpu, i64>::arange(i64::MAX - 2, i64::MAX);
    /// assert_eq!(top.to_vec(), vec![i64::MAX - 2, i64::MAX - 1]);
    /// let err = Tensor::<Cpu>::try_arange_step(0.0, 1.0, 0.0).unwrap_err();
    /// assert_eq!(err.to_string(), "arange on Cpu: the step must be non-zero, got 0");
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::arange_step(0.0, 1.0, 0.25).to_vec(), vec![0.0, 0.25, 0.5, 0.75]);
    /// assert_eq!(Tensor::<Cpu, i64>::arange_step(5, 0, -2).to_vec(), vec![5, 3, 1]);
    /// ```
    #[fallible]
    pub fn arange_step(start: impl Into<E::Number>, end: impl Into<E::Number>, step: impl Into<E::Number>) -> Self {
        core_call!(D, Fns<E>.arange_step(start.into(), end.into(), step.into()))
    }

    /// `start, start + 1, ...` up to but excluding `end`; see
    /// [`arange_step`](Self::arange_step).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu, i64>::arange(2, 5).to_vec(), vec![2, 3, 4]);
    /// assert_eq!(Tensor::<Cpu>::arange(0, 3).to_vec(), vec![0.0, 1.0, 2.0]);
    /// ```
    #[fallible]
    pub fn arange(start: impl Into<E::Number>, end: impl Into<E::Number>) -> Self {
        Self::try_arange_step(start, end, E::Number::from(1u8))
    }

    /// A tensor of this one's shape filled with `value`, on the same device.
    #[fallible]
    pub fn full_like(&self, value: E) -> Self {
        Self::try_full(self.shape(), value)
    }

    /// Zeros of this tensor's shape, on the same device.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::ones([2, 2]);
    /// assert_eq!(x.zeros_like().to_vec(), vec![0.0; 4]);
    /// ```
    #[fallible]
    pub fn zeros_like(&self) -> Self {
        self.try_full_like(E::ZERO)
    }

    /// Ones of this tensor's shape, on the same device.
    #[fallible]
    pub fn ones_like(&self) -> Self {
        self.try_full_like(E::ONE)
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// `steps` evenly spaced values from `start` to `end`, both included.
    /// Fails when `steps` values cannot exist or do not fit in memory.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::linspace(0.0, 1.0, 5).to_vec(), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    /// ```
    #[fallible]
    pub fn linspace(start: E, end: E, steps: usize) -> Self {
        core_call!(D, FloatFns<E>.linspace(start, end, steps))
    }

    /// Uniform samples in `[0, 1)` from `generator`.
    #[fallible]
    pub fn rand_with(shape: impl Into<Shape>, generator: &mut Generator) -> Self {
        core_call!(D, FloatFns<E>.rand_with(shape.into(), generator))
    }

    /// Uniform samples in `[0, 1)` from this thread's generator (see
    /// [`manual_seed`](crate::manual_seed)).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let u = Tensor::<Cpu>::rand([1000]);
    /// assert!(u.to_vec().iter().all(|&x| (0.0..1.0).contains(&x)));
    /// ```
    #[fallible]
    pub fn rand(shape: impl Into<Shape>) -> Self {
        with_thread_generator(|g| Self::try_rand_with(shape, g))
    }

    /// Standard normal samples from `generator`.
    #[fallible]
    pub fn randn_with(shape: impl Into<Shape>, generator: &mut Generator) -> Self {
        core_call!(D, FloatFns<E>.randn_with(shape.into(), generator))
    }

    /// Standard normal samples from this thread's generator.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let z = Tensor::<Cpu, f64>::randn([10_000]);
    /// assert!(z.mean().item().abs() < 0.05);
    /// ```
    #[fallible]
    pub fn randn(shape: impl Into<Shape>) -> Self {
        with_thread_generator(|g| Self::try_randn_with(shape, g))
    }

    /// Uniform samples of this tensor's shape, on the same device.
    #[fallible]
    pub fn rand_like(&self) -> Self {
        Self::try_rand(self.shape())
    }

    /// Standard normal samples of this tensor's shape, on the same device.
    #[fallible]
    pub fn randn_like(&self) -> Self {
        Self::try_randn(self.shape())
    }
}

/// The core of tensor creation: the data made on the host (or filled on
/// the device) and moved to the core device `D`.
impl<D: CoreDevice, E: Element> Tensor<D, E> {
    fn core_from_vec(data: Vec<E>, shape: Shape) -> Result<Self> {
        check_len("from_vec", D::name(), data.len(), &shape)?;
        Ok(Self::from_storage(D::storage_from_vec(data)?, shape))
    }

    fn core_from_slice(data: &[E], shape: Shape) -> Result<Self> {
        check_len("from_slice", D::name(), data.len(), &shape)?;
        Ok(Self::from_storage(D::storage_from_slice(data)?, shape))
    }

    fn core_filled(op: &'static str, shape: Shape, value: E) -> Result<Self> {
        let len = check_elem_count(op, D::name, &[&shape])?;
        Ok(Self::from_storage(D::storage_full(op, len, value)?, shape))
    }

    fn core_eye(n: usize) -> Result<Self> {
        let shape = Shape::from([n, n]);
        let len = check_elem_count("eye", D::name, &[&shape])?;
        let mut data = zeroed_vec::<E>("eye", len)?;
        for i in 0..n {
            data[i * n + i] = E::ONE;
        }
        Ok(Self::from_storage(D::storage_from_vec(data)?, shape))
    }

    fn core_arange_step(start: E::Number, end: E::Number, step: E::Number) -> Result<Self> {
        let bad = |reason: String| Error::Argument { op: "arange", device: D::name(), reason };
        let data = if E::IS_FLOAT {
            let r = float_range(start.as_f64(), end.as_f64(), step.as_f64()).map_err(bad)?;
            try_collect("arange", r.len, (0..r.len).map(|i| E::from_f64(r.start + i as f64 * r.step)))?
        } else {
            let r = int_range::<E>(start.as_i64(), end.as_i64(), step.as_i64()).map_err(bad)?;
            // In range of `i64` (and of `E`): `int_range` checked the last value.
            try_collect("arange", r.len, (0..r.len).map(|i| E::from_i64((r.start + i as i128 * r.step) as i64)))?
        };
        let len = data.len();
        Ok(Self::from_storage(D::storage_from_vec(data)?, Shape::from(len)))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    fn core_linspace(start: E, end: E, steps: usize) -> Result<Self> {
        let shape = Shape::from(steps);
        check_elem_count("linspace", D::name, &[&shape])?;
        let (s, e) = (start.to_f64(), end.to_f64());
        let step = if steps > 1 { (e - s) / (steps - 1) as f64 } else { 0.0 };
        // Filled from both ends, so that the last value is exactly `end`.
        let value = |i: usize| match steps {
            1 => start,
            _ if i < steps / 2 => E::from_f64(s + i as f64 * step),
            _ => E::from_f64(e - (steps - 1 - i) as f64 * step),
        };
        let data = try_collect("linspace", steps, (0..steps).map(value))?;
        Ok(Self::from_storage(D::storage_from_vec(data)?, shape))
    }

    fn core_rand_with(shape: Shape, generator: &mut Generator) -> Result<Self> {
        let len = check_elem_count("rand", D::name, &[&shape])?;
        // A draw just below 1 can round to 1 in `E`: drawn again, so that
        // every value is in [0, 1) as PyTorch's.
        let below_one = generator.uniform().map(E::from_f64).filter(|&u| u.to_f64() < 1.0);
        let data = try_collect("rand", len, below_one)?;
        Ok(Self::from_storage(D::storage_from_vec(data)?, shape))
    }

    fn core_randn_with(shape: Shape, generator: &mut Generator) -> Result<Self> {
        let len = check_elem_count("randn", D::name, &[&shape])?;
        let data = try_collect("randn", len, generator.normal().map(E::from_f64))?;
        Ok(Self::from_storage(D::storage_from_vec(data)?, shape))
    }
}

impl<D: CoreDevice> Tensor<D, i64> {
    fn core_randperm_with(n: usize, generator: &mut Generator) -> Result<Self> {
        let shape = Shape::from([n]);
        check_elem_count("randperm", D::name, &[&shape])?;
        let mut perm = try_collect("randperm", n, 0..n as i64)?;
        // Fisher-Yates: position i swaps with a uniform pick among 0..=i.
        for (i, u) in (1..n).rev().zip(generator.uniform()) {
            let j = ((u * (i + 1) as f64) as usize).min(i);
            perm.swap(i, j);
        }
        Self::core_from_vec(perm, shape)
    }
}

core_table! {
    /// The core's tensor creation (and the samplers of `sample.rs`).
    pub(crate) struct Fns<C, E: Element> {
        from_vec: fn(Vec<E>, Shape) -> Result<Tensor<C, E>> = Tensor::core_from_vec,
        from_slice: fn(&[E], Shape) -> Result<Tensor<C, E>> = Tensor::core_from_slice,
        filled: fn(&'static str, Shape, E) -> Result<Tensor<C, E>> = Tensor::core_filled,
        eye: fn(usize) -> Result<Tensor<C, E>> = Tensor::core_eye,
        arange_step: fn(E::Number, E::Number, E::Number) -> Result<Tensor<C, E>> = Tensor::core_arange_step,
        randperm_with: fn(usize, &mut Generator) -> Result<Tensor<C, i64>> = Tensor::core_randperm_with,
        randint_with: fn(i64, i64, Shape, &mut Generator) -> Result<Tensor<C, E>> = Tensor::core_randint_with,
    }
}

core_table! {
    /// The core's creation of float tensors.
    pub(crate) struct FloatFns<C, F: FloatElement> {
        linspace: fn(F, F, usize) -> Result<Tensor<C, F>> = Tensor::core_linspace,
        rand_with: fn(Shape, &mut Generator) -> Result<Tensor<C, F>> = Tensor::core_rand_with,
        randn_with: fn(Shape, &mut Generator) -> Result<Tensor<C, F>> = Tensor::core_randn_with,
        bernoulli_with: fn(&Tensor<C, F>, &mut Generator) -> Result<Tensor<C, F>> = Tensor::core_bernoulli_with,
        normal_with: fn(f64, f64, Shape, &mut Generator) -> Result<Tensor<C, F>> = Tensor::core_normal_with,
        normal_tensor_with: fn(&Tensor<C, F>, &Tensor<C, F>, &mut Generator) -> Result<Tensor<C, F>> =
            Tensor::core_normal_tensor_with,
    }
}

/// The error of a constructor given `len` values for `shape`.
fn check_len(op: &'static str, device: String, len: usize, shape: &Shape) -> Result<()> {
    let places = check_elem_count(op, || device.clone(), &[shape])?;
    if len == places {
        return Ok(());
    }
    Err(Error::Shape {
        op,
        device,
        shapes: vec![shape.clone()],
        reason: format!("{len} elements were given for {places} places"),
    })
}

/// The values of an `arange`, once its length is known: `start + i * step`.
struct Range<T> {
    start: T,
    step: T,
    len: usize,
}

/// An `arange` over floats, counted in `f64` as PyTorch does.
fn float_range(start: f64, end: f64, step: f64) -> std::result::Result<Range<f64>, String> {
    if !(start.is_finite() && end.is_finite()) {
        return Err(format!("the bounds must be finite, got {start} and {end}"));
    }
    if step == 0.0 || !step.is_finite() {
        return Err(format!("the step must be non-zero, got {step}"));
    }
    if (end - start) * step < 0.0 {
        return Err(format!("a step of {step} never goes from {start} to {end}"));
    }
    let len = ((end - start) / step).ceil();
    if len >= crate::layout::MAX_ELEMS as f64 {
        return Err(format!("{start}..{end} in steps of {step} has more than 2^63 - 1 elements"));
    }
    Ok(Range { start, step, len: len as usize })
}

/// An `arange` over integers, counted exactly (in `i128`, where no `i64`
/// difference overflows). `E` bounds the values (`u8`: `0..=255`).
fn int_range<E: Element>(start: i64, end: i64, step: i64) -> std::result::Result<Range<i128>, String> {
    if step == 0 {
        return Err("the step must be non-zero, got 0".into());
    }
    let (s, e, st) = (i128::from(start), i128::from(end), i128::from(step));
    if (e - s) * st.signum() < 0 {
        return Err(format!("a step of {step} never goes from {start} to {end}"));
    }
    // ceil((e - s) / st) for a quotient that is >= 0.
    let len = ((e - s).abs() + st.abs() - 1) / st.abs();
    let len = usize::try_from(len)
        .ok()
        .filter(|&n| n <= crate::layout::MAX_ELEMS)
        .ok_or_else(|| format!("{start}..{end} in steps of {step} has more than 2^63 - 1 elements"))?;
    // `E`'s range (for i64, `to_f64` rounds its ends outward, which is harmless).
    let valid = (E::MIN.to_f64() as i128)..=(E::MAX.to_f64() as i128);
    let last = s + (len as i128 - 1) * st;
    if len > 0 && !(valid.contains(&s) && valid.contains(&last)) {
        let outside = if valid.contains(&s) { last } else { s };
        return Err(format!("{} holds {valid:?}, but the range reaches {outside}", E::DTYPE.name()));
    }
    Ok(Range { start: s, step: st, len })
}

impl<D: Device> Tensor<D, i64> {
    /// A random permutation of `0..n` from `generator`, PyTorch's
    /// `torch.randperm`: how a data set is shuffled.
    #[fallible]
    pub fn randperm_with(n: usize, generator: &mut Generator) -> Self {
        core_call!(D, Fns<i64>.randperm_with(n, generator))
    }

    /// A random permutation of `0..n` from this thread's generator.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let mut p = Tensor::<Cpu, i64>::randperm(10).to_vec();
    /// p.sort();
    /// assert_eq!(p, (0..10).collect::<Vec<_>>());
    /// ```
    #[fallible]
    pub fn randperm(n: usize) -> Self {
        with_thread_generator(|g| Self::try_randperm_with(n, g))
    }
}
