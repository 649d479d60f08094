//! [`ReshapeDims`]: the sizes `reshape` and `view` take, with PyTorch's `-1`.

use crate::error::{Error, Result};
use crate::layout::Shape;

/// The new shape of [`Tensor::reshape`](crate::Tensor::reshape) and
/// [`Tensor::view`](crate::Tensor::view): sizes as `usize` (an array, a
/// slice, a `Vec`, a [`Shape`]), or signed sizes where one `-1` stands for
/// the size that keeps the element count, as in PyTorch's
/// `x.reshape(b, -1)`:
///
/// ```
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::zeros([4, 2, 3]);
/// assert_eq!(x.reshape([4, -1]).dims(), &[4, 6]);
/// let batch = x.dims()[0] as i64;
/// assert_eq!(x.reshape([-1, batch]).dims(), &[6, 4]);
/// assert_eq!(x.reshape([2, 12]).dims(), &[2, 12]); // plain sizes
/// ```
pub trait ReshapeDims {
    /// The shape asked for, with a `-1` resolved against `elem_count`
    /// elements (of a tensor of shape `from`, for errors).
    #[doc(hidden)]
    fn resolve(self, op: &'static str, device: String, from: &Shape) -> Result<Shape>;
}

macro_rules! unsigned_dims {
    ($($t:ty $(, const $n:ident)?;)*) => {$(
        impl$(<const $n: usize>)? ReshapeDims for $t {
            fn resolve(self, _: &'static str, _: String, _: &Shape) -> Result<Shape> {
                Ok(Shape::from(self))
            }
        }
    )*};
}

unsigned_dims! {
    [usize; N], const N;
    &[usize];
    Vec<usize>;
    Shape;
    &Shape;
    ();
    usize;
}

macro_rules! signed_dims {
    ($($t:ty $(, const $n:ident)?;)*) => {$(
        impl$(<const $n: usize>)? ReshapeDims for $t {
            fn resolve(self, op: &'static str, device: String, from: &Shape) -> Result<Shape> {
                let sizes: Vec<i64> = self.iter().map(|&s| i64::from(s)).collect();
                infer_axis(op, device, from, &sizes)
            }
        }
    )*};
}

signed_dims! {
    [i32; N], const N;
    [i64; N], const N;
    &[i32];
    &[i64];
    Vec<i32>;
    Vec<i64>;
}

impl<const N: usize> ReshapeDims for [isize; N] {
    fn resolve(self, op: &'static str, device: String, from: &Shape) -> Result<Shape> {
        let sizes: Vec<i64> = self.iter().map(|&s| s as i64).collect();
        infer_axis(op, device, from, &sizes)
    }
}

/// `sizes` as a shape of `from`'s element count, with at most one `-1`
/// replaced by the size that makes the counts equal.
fn infer_axis(op: &'static str, device: String, from: &Shape, sizes: &[i64]) -> Result<Shape> {
    let error = |reason: String| Error::Argument {
        op,
        device: device.clone(),
        reason: format!("shape {sizes:?} for a tensor of shape {from}: {reason}"),
    };
    if let Some(bad) = sizes.iter().find(|&&s| s < -1) {
        return Err(error(format!("{bad} is not a size (only -1, for one inferred axis, may be negative)")));
    }
    let inferred: Vec<usize> = sizes.iter().enumerate().filter(|(_, s)| **s == -1).map(|(i, _)| i).collect();
    let mut dims: Vec<usize> = sizes.iter().map(|&s| s.max(0) as usize).collect();
    match inferred.as_slice() {
        [] => {}
        [axis] => {
            let known =
                dims.iter().enumerate().filter(|(i, _)| i != axis).try_fold(1usize, |n, (_, &d)| n.checked_mul(d));
            let count = from.elem_count();
            match known {
                Some(0) | None => {
                    return Err(error(
                        "the -1 axis cannot be inferred: the other sizes multiply to 0 or overflow".into(),
                    ));
                }
                Some(known) if !count.is_multiple_of(known) => {
                    return Err(error(format!("{count} elements do not split into rows of {known}")));
                }
                Some(known) => dims[*axis] = count / known,
            }
        }
        _ => return Err(error("only one axis can be -1".into())),
    }
    Ok(Shape::from(dims))
}
