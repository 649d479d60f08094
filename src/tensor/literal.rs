//! [`tensor`]: a CPU tensor written from literals, as `torch.tensor([..])`.

use super::Tensor;
use crate::backend::{Backend, Cpu};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Shape;
use devtensor_macros::fallible;

/// Data that [`tensor`] can turn into a tensor: a number, or an array, a
/// slice or a `Vec` of such (nested for more axes).
///
/// The element type follows PyTorch's `torch.tensor`: float literals give
/// `f32`, integer literals give `i64` (`i32`, the type Rust gives an
/// unannotated integer, is widened), and `u8` or `bool` give a `u8` mask.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the elements of a `tensor(..)` literal",
    label = "`tensor(..)` takes f32 numbers, integers (i64 or i32), or u8 and bool masks, in (nested) arrays, slices or `Vec`s",
    note = "for f64 (or another element type, or another device) name the type: `Tensor::<Cpu, f64>::from_vec(data, shape)`"
)]
pub trait TensorData {
    /// The tensor's element type.
    type Elem: Element;

    /// The length of each axis, outermost first, read from the first
    /// element at every level.
    #[doc(hidden)]
    fn dims(&self, dims: &mut Vec<usize>);

    /// Appends the elements in row-major order, checking that this level
    /// has the lengths `dims` says (a `Vec` of `Vec`s can be ragged).
    #[doc(hidden)]
    fn flatten(&self, dims: &[usize], out: &mut Vec<Self::Elem>) -> Result<()>;
}

macro_rules! scalar_data {
    ($($t:ty => $elem:ty, |$v:ident| $convert:expr;)*) => {$(
        impl TensorData for $t {
            type Elem = $elem;

            fn dims(&self, _: &mut Vec<usize>) {}

            fn flatten(&self, _: &[usize], out: &mut Vec<$elem>) -> Result<()> {
                let $v = *self;
                out.push($convert);
                Ok(())
            }
        }
    )*};
}

scalar_data! {
    f32 => f32, |v| v;
    i64 => i64, |v| v;
    i32 => i64, |v| i64::from(v);
    u8 => u8, |v| v;
    bool => u8, |v| u8::from(v);
}

/// Rows as a slice: what arrays, slices and `Vec`s share.
fn rows_dims<T: TensorData>(rows: &[T], dims: &mut Vec<usize>) {
    dims.push(rows.len());
    if let Some(first) = rows.first() {
        first.dims(dims);
    }
}

fn flatten_rows<T: TensorData>(rows: &[T], dims: &[usize], out: &mut Vec<T::Elem>) -> Result<()> {
    let (&len, inner) = dims.split_first().expect("`dims` has an entry for every level");
    if rows.len() != len {
        return Err(Error::Shape {
            op: "tensor",
            device: Cpu::name(),
            shapes: vec![Shape::from(dims)],
            reason: format!("the rows are ragged: one has {} elements where the first has {len}", rows.len()),
        });
    }
    rows.iter().try_for_each(|row| row.flatten(inner, out))
}

impl<T: TensorData, const N: usize> TensorData for [T; N] {
    type Elem = T::Elem;

    fn dims(&self, dims: &mut Vec<usize>) {
        rows_dims(self, dims)
    }

    fn flatten(&self, dims: &[usize], out: &mut Vec<T::Elem>) -> Result<()> {
        flatten_rows(self, dims, out)
    }
}

impl<T: TensorData> TensorData for [T] {
    type Elem = T::Elem;

    fn dims(&self, dims: &mut Vec<usize>) {
        rows_dims(self, dims)
    }

    fn flatten(&self, dims: &[usize], out: &mut Vec<T::Elem>) -> Result<()> {
        flatten_rows(self, dims, out)
    }
}

impl<T: TensorData> TensorData for Vec<T> {
    type Elem = T::Elem;

    fn dims(&self, dims: &mut Vec<usize>) {
        rows_dims(self, dims)
    }

    fn flatten(&self, dims: &[usize], out: &mut Vec<T::Elem>) -> Result<()> {
        flatten_rows(self, dims, out)
    }
}

impl<T: TensorData + ?Sized> TensorData for &T {
    type Elem = T::Elem;

    fn dims(&self, dims: &mut Vec<usize>) {
        (**self).dims(dims)
    }

    fn flatten(&self, dims: &[usize], out: &mut Vec<T::Elem>) -> Result<()> {
        (**self).flatten(dims, out)
    }
}

/// A tensor on the CPU holding `data`, PyTorch's `torch.tensor(data)`: the
/// way to write one from literals where no device type is in scope (in
/// `main`, a test, a script). Nested arrays give its axes; float literals
/// give `f32` and integer literals `i64`, as in PyTorch. Move it with
/// [`to`](Tensor::to).
///
/// ```
/// use devtensor::nn::cross_entropy;
/// use devtensor::tensor;
/// let logits = tensor([[2.0, 0.5, 0.1], [0.2, 1.5, 0.3]]); // Tensor<Cpu, f32>, [2, 3]
/// let labels = tensor([0, 1]); // Tensor<Cpu, i64>
/// let loss = cross_entropy(&logits, &labels);
/// // mean of -log softmax at the labels: (0.3168 + 0.4534) / 2
/// assert!((loss.item() - 0.385112).abs() < 1e-5);
/// assert_eq!(tensor(3.5).dims(), &[] as &[usize]);
/// assert_eq!(tensor([true, false]).to_vec(), vec![1u8, 0]);
/// ```
///
/// Fails only for `Vec`s of `Vec`s whose rows differ in length (arrays
/// cannot), or when memory runs out.
#[fallible(free)]
pub fn tensor<T: TensorData>(data: T) -> Tensor<Cpu, T::Elem> {
    let mut dims = Vec::new();
    data.dims(&mut dims);
    let count = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let mut values = Vec::new();
    if let Some(count) = count {
        values.try_reserve_exact(count).map_err(|_| Error::OutOfMemory {
            op: "tensor",
            device: Cpu::name(),
            requested: count.saturating_mul(size_of::<T::Elem>()),
            free: None,
        })?;
    }
    data.flatten(&dims, &mut values).map_err(|e| match e {
        // Name the whole shape the first rows implied, not one level's.
        Error::Shape { op, device, reason, .. } => {
            Error::Shape { op, device, shapes: vec![Shape::from(dims.as_slice())], reason }
        }
        other => other,
    })?;
    Tensor::try_from_vec(values, dims)
}
