//! The products PyTorch lists beside `matmul` ("BLAS and LAPACK
//! operations"): `outer`, `dot`, and the scaled sums of an input and a
//! product, `addmm`, `addmv`, `baddbmm` and `addbmm`. Each is built from
//! `matmul` and element-wise ops, so its gradient comes from theirs; the
//! shapes are checked first, so that an error names the op the user called.
//! Half types add the input to the product in `f32`, rounding once.

use super::Fns;
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// The outer product of two vectors, `[n]` and `[m]` into `[n, m]`,
    /// like `torch.outer(a, b)` (`torch.ger`). Fails unless both are 1-D.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2]);
    /// let b = Tensor::<Cpu>::from_vec(vec![1.0, 10.0, 100.0], [3]);
    /// assert_eq!(a.outer(&b).to_vec2(), vec![vec![1.0, 10.0, 100.0], vec![2.0, 20.0, 200.0]]);
    /// ```
    #[fallible]
    pub fn outer<D2: Device, E2: Element>(&self, other: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let other: &Self = same_device(other);
        core_call!(D, Fns<E>.outer(self.core(), other.core()))
    }

    /// The dot product of two vectors of one length, as a rank-0 tensor,
    /// like `torch.dot(a, b)`. Fails unless both are 1-D of the same
    /// length (PyTorch does not broadcast here either).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0], [3]);
    /// assert_eq!(a.dot(&a).item(), 14.0);
    /// assert!(a.try_dot(&a.narrow(0, 0, 2)).is_err());
    /// ```
    #[fallible]
    pub fn dot<D2: Device, E2: Element>(&self, other: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let other: &Self = same_device(other);
        core_call!(D, Fns<E>.dot(self.core(), other.core()))
    }

    /// `beta · self + alpha · (mat1 · mat2)`, like
    /// `torch.addmm(self, mat1, mat2, beta=beta, alpha=alpha)` (PyTorch's
    /// defaults are `1.0, 1.0`): `mat1` `[n, m]`, `mat2` `[m, p]`, and
    /// `self` broadcast to `[n, p]`. With `beta = 0` the input is not read,
    /// so NaN and infinities in it do not reach the result, as in PyTorch.
    /// Fails unless the matrices are 2-D with matching inner sizes and
    /// `self` broadcasts to the product's shape.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let bias = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2]);
    /// let a = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    /// let eye = Tensor::<Cpu>::from_vec(vec![1.0, 0.0, 0.0, 1.0], [2, 2]);
    /// assert_eq!(bias.addmm(&a, &eye, 1.0, 1.0).to_vec(), vec![2.0, 4.0, 4.0, 6.0]);
    /// assert_eq!(bias.addmm(&a, &eye, 0.5, 2.0).to_vec(), vec![2.5, 5.0, 6.5, 9.0]);
    /// ```
    #[fallible]
    pub fn addmm<D2: Device, E2: Element, D3: Device, E3: Element>(
        &self,
        mat1: &Tensor<D2, E2>,
        mat2: &Tensor<D3, E3>,
        beta: f64,
        alpha: f64,
    ) -> Self
    where
        D: SameDevice<D2> + SameDevice<D3>,
        E: SameDtype<E2> + SameDtype<E3>,
    {
        let (mat1, mat2): (&Self, &Self) = (same_device(mat1), same_device(mat2));
        core_call!(D, Fns<E>.add_product(self.core(), AddProduct::Mm, mat1.core(), mat2.core(), beta, alpha))
    }

    /// `beta · self + alpha · (mat · vec)`, like
    /// `torch.addmv(self, mat, vec, beta=beta, alpha=alpha)`: `mat`
    /// `[n, m]`, `vec` `[m]`, `self` broadcast to `[n]`; `beta = 0` does not
    /// read `self`. Fails on other shapes.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let mat = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    /// let v = Tensor::<Cpu>::from_vec(vec![1.0, 1.0], [2]);
    /// let y = Tensor::<Cpu>::scalar(10.0).addmv(&mat, &v, 1.0, 1.0);
    /// assert_eq!(y.to_vec(), vec![13.0, 17.0]);
    /// ```
    #[fallible]
    pub fn addmv<D2: Device, E2: Element, D3: Device, E3: Element>(
        &self,
        mat: &Tensor<D2, E2>,
        vec: &Tensor<D3, E3>,
        beta: f64,
        alpha: f64,
    ) -> Self
    where
        D: SameDevice<D2> + SameDevice<D3>,
        E: SameDtype<E2> + SameDtype<E3>,
    {
        let (mat, vec): (&Self, &Self) = (same_device(mat), same_device(vec));
        core_call!(D, Fns<E>.add_product(self.core(), AddProduct::Mv, mat.core(), vec.core(), beta, alpha))
    }

    /// `beta · self + alpha · (batch1 · batch2)`, one product per batch,
    /// like `torch.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)`:
    /// `batch1` `[b, n, m]`, `batch2` `[b, m, p]`, `self` broadcast to
    /// `[b, n, p]`; `beta = 0` does not read `self`. Fails unless both
    /// batches are 3-D with the same batch count and matching inner sizes.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let b1 = Tensor::<Cpu>::ones([2, 1, 3]);
    /// let b2 = Tensor::<Cpu>::ones([2, 3, 1]);
    /// let y = Tensor::<Cpu>::zeros([2, 1, 1]).baddbmm(&b1, &b2, 0.0, 0.5);
    /// assert_eq!(y.to_vec(), vec![1.5, 1.5]);
    /// ```
    #[fallible]
    pub fn baddbmm<D2: Device, E2: Element, D3: Device, E3: Element>(
        &self,
        batch1: &Tensor<D2, E2>,
        batch2: &Tensor<D3, E3>,
        beta: f64,
        alpha: f64,
    ) -> Self
    where
        D: SameDevice<D2> + SameDevice<D3>,
        E: SameDtype<E2> + SameDtype<E3>,
    {
        let (batch1, batch2): (&Self, &Self) = (same_device(batch1), same_device(batch2));
        core_call!(D, Fns<E>.add_product(self.core(), AddProduct::Bmm, batch1.core(), batch2.core(), beta, alpha))
    }

    /// `beta · self + alpha · Σ_i batch1[i] · batch2[i]`, the batch of
    /// products summed, like
    /// `torch.addbmm(self, batch1, batch2, beta=beta, alpha=alpha)`:
    /// `batch1` `[b, n, m]`, `batch2` `[b, m, p]`, `self` broadcast to
    /// `[n, p]`; computed as one product of `[n, b · m]` and `[b · m, p]`.
    /// `beta = 0` does not read `self`. Fails on the shapes `baddbmm`
    /// refuses.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let b1 = Tensor::<Cpu>::ones([4, 2, 3]);
    /// let b2 = Tensor::<Cpu>::ones([4, 3, 2]);
    /// let y = Tensor::<Cpu>::ones([2, 2]).addbmm(&b1, &b2, 1.0, 1.0);
    /// assert_eq!(y.to_vec(), vec![13.0; 4]);
    /// ```
    #[fallible]
    pub fn addbmm<D2: Device, E2: Element, D3: Device, E3: Element>(
        &self,
        batch1: &Tensor<D2, E2>,
        batch2: &Tensor<D3, E3>,
        beta: f64,
        alpha: f64,
    ) -> Self
    where
        D: SameDevice<D2> + SameDevice<D3>,
        E: SameDtype<E2> + SameDtype<E3>,
    {
        let (batch1, batch2): (&Self, &Self) = (same_device(batch1), same_device(batch2));
        core_call!(D, Fns<E>.add_product(self.core(), AddProduct::SummedBmm, batch1.core(), batch2.core(), beta, alpha))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    pub(super) fn core_outer(&self, other: &Self) -> Result<Self> {
        check(self.rank() == 1 && other.rank() == 1, "outer", &[self, other], || "expected two 1-D tensors".into())?;
        self.try_unsqueeze(1)?.try_mul(&other.try_unsqueeze(0)?)
    }

    pub(super) fn core_dot(&self, other: &Self) -> Result<Self> {
        let fits = self.rank() == 1 && other.rank() == 1 && self.dims() == other.dims();
        check(fits, "dot", &[self, other], || "expected two 1-D tensors of the same length".into())?;
        self.try_matmul(other)
    }

    /// The core of the four add-products: `beta · self + alpha · product`
    /// of `a` and `b` as `kind` multiplies them, the shapes checked first.
    pub(super) fn core_add_product(&self, kind: AddProduct, a: &Self, b: &Self, beta: f64, alpha: f64) -> Result<Self> {
        // A half type adds in f32 and rounds once, as PyTorch's kernels
        // round `beta · input + alpha · product` from f32 sums (rounding
        // the product first, then the sum, would round twice).
        if E::DTYPE.is_half() && beta != 0.0 {
            let (a, b) = (a.try_to_dtype::<f32>()?, b.try_to_dtype::<f32>()?);
            return self.try_to_dtype::<f32>()?.core_add_product(kind, &a, &b, beta, alpha)?.try_to_dtype::<E>();
        }
        kind.check(self, a, b)?;
        let product = match kind {
            // A bias row with unit factors is a linear layer's forward: one
            // pass where the device's product starts from the bias.
            AddProduct::Mm if beta == 1.0 && alpha == 1.0 && self.rank() == 1 && self.dims()[0] == b.dims()[1] => {
                match a.try_matmul_bias(b, self)? {
                    Some(out) => return Ok(out),
                    None => a.try_matmul(b)?,
                }
            }
            AddProduct::Mm | AddProduct::Mv | AddProduct::Bmm => a.try_matmul(b)?,
            AddProduct::SummedBmm => {
                let (&[batch, n, m], &[_, _, p]) = (a.dims(), b.dims()) else { unreachable!("checked 3-D") };
                // Σ_i A_i B_i = [A_0 .. A_b-1] (side by side) · [B_0; ..; B_b-1] (stacked).
                let side_by_side = a.try_permute([1, 0, 2])?.try_reshape([n, batch * m])?;
                side_by_side.try_matmul(&b.try_reshape([batch * m, p])?)?
            }
        };
        self.scaled_sum(kind.name(), product, beta, alpha)
    }

    /// `beta · self + alpha · product`, `self` broadcast to the product's
    /// shape and not read when `beta` is 0 (PyTorch's rule for the
    /// add-products); a factor of 1 is no multiplication.
    fn scaled_sum(&self, op: &'static str, product: Self, beta: f64, alpha: f64) -> Result<Self> {
        let broadcasts = self.shape().broadcast_with(product.shape()).as_ref() == Some(product.shape());
        check(broadcasts, op, &[self, &product], || {
            format!("the input {} does not broadcast to the product's shape {}", self.shape(), product.shape())
        })?;
        let product = if alpha == 1.0 { product } else { product.try_mul_scalar(E::from_f64(alpha))? };
        match beta {
            0.0 => Ok(product),
            1.0 => product.try_add(self),
            _ => product.try_add(&self.try_mul_scalar(E::from_f64(beta))?),
        }
    }
}

/// Fails with `reason()` naming `op` and the operands' shapes unless `fits`.
fn check<D: CoreDevice, E: Element>(
    fits: bool,
    op: &'static str,
    operands: &[&Tensor<D, E>],
    reason: impl FnOnce() -> String,
) -> Result<()> {
    if fits {
        return Ok(());
    }
    Err(Error::Shape {
        op,
        device: D::name(),
        shapes: operands.iter().map(|t| t.shape().clone()).collect(),
        reason: reason(),
    })
}

/// Which add-product a core call computes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AddProduct {
    /// `addmm`: matrix times matrix.
    Mm,
    /// `addmv`: matrix times vector.
    Mv,
    /// `baddbmm`: one product per batch.
    Bmm,
    /// `addbmm`: the batch's products summed.
    SummedBmm,
}

impl AddProduct {
    fn name(self) -> &'static str {
        match self {
            AddProduct::Mm => "addmm",
            AddProduct::Mv => "addmv",
            AddProduct::Bmm => "baddbmm",
            AddProduct::SummedBmm => "addbmm",
        }
    }

    /// Fails unless `a` and `b` multiply as this product takes them.
    fn check<D: CoreDevice, E: Element>(self, input: &Tensor<D, E>, a: &Tensor<D, E>, b: &Tensor<D, E>) -> Result<()> {
        let (op, operands) = (self.name(), [input, a, b]);
        let (x, y) = (a.dims(), b.dims());
        match self {
            AddProduct::Mm => check(a.rank() == 2 && b.rank() == 2 && x[1] == y[0], op, &operands, || {
                format!("mat1 and mat2 shapes cannot be multiplied ({} and {})", a.shape(), b.shape())
            }),
            AddProduct::Mv => check(a.rank() == 2 && b.rank() == 1 && x[1] == y[0], op, &operands, || {
                format!("expected a matrix [n, m] and a vector [m], got {} and {}", a.shape(), b.shape())
            }),
            AddProduct::Bmm | AddProduct::SummedBmm => {
                check(a.rank() == 3 && b.rank() == 3, op, &operands, || "batch1 and batch2 must be 3-D".into())?;
                check(x[0] == y[0], op, &operands, || {
                    format!("batch1 and batch2 must have the same number of batches, got {} and {}", x[0], y[0])
                })?;
                check(x[2] == y[1], op, &operands, || {
                    format!(
                        "batch1's matrices [{}, {}] and batch2's [{}, {}] cannot be multiplied",
                        x[1], x[2], y[1], y[2]
                    )
                })
            }
        }
    }
}
