//! Matrix products with the semantics of `torch.matmul`: dot products,
//! matrix-vector, matrix-matrix and batched products with broadcast batch axes.

mod blas;
mod cpu;
mod cuda;
mod einsum;
mod grad;
mod precision;

pub use precision::{MatmulPrecision, float32_matmul_precision, set_float32_matmul_precision};

use super::autocast::{self, autocast_in};
use crate::autograd;
use crate::backend::Backend;
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::layout::{Dims, Layout, Shape, count_of};
use crate::tensor::shell::{core_call, core_table};
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use blas::AddProduct;
use devtensor_macros::fallible;

/// Device kernels for [`Tensor::matmul`]. Implemented by the core
/// devices ([`CoreDevice`]): `Cpu`, and one for every GPU.
pub trait MatmulKernel: Backend {
    /// The batched product `out[b] = lhs[b] · rhs[b]` into a new contiguous
    /// storage of shape `[batch.., m, n]`.
    ///
    /// `lhs_layout` has shape `[batch.., m, k]` and `rhs_layout` shape
    /// `[batch.., k, n]`, with the same (already broadcast) batch axes; a
    /// broadcast axis has stride 0. Any of the sizes may be 0, and when `k`
    /// is 0 every output element is 0.
    fn matmul<E: FloatElement>(
        lhs: &Self::Storage<E>,
        lhs_layout: &Layout,
        rhs: &Self::Storage<E>,
        rhs_layout: &Layout,
    ) -> Result<Self::Storage<E>>;

    /// `bias + lhs · rhs` for one product (no batch axes), with the dense
    /// `bias` of `n` elements added to every row, in one pass where the
    /// device's product can start from a filled output (PyTorch's
    /// `addmm`); `None` where it cannot, and the caller adds the bias
    /// itself. The default is `None`.
    fn matmul_bias<E: FloatElement>(
        lhs: &Self::Storage<E>,
        lhs_layout: &Layout,
        rhs: &Self::Storage<E>,
        rhs_layout: &Layout,
        bias: &Self::Storage<E>,
        bias_layout: &Layout,
    ) -> Result<Option<Self::Storage<E>>> {
        let _ = (lhs, lhs_layout, rhs, rhs_layout, bias, bias_layout);
        Ok(None)
    }
}

/// The name in messages.
const OP: &str = "matmul";

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    /// `self · rhs + bias` (`bias` of `rhs`'s column count, added to every
    /// row) in one pass where the device can ([`MatmulKernel::matmul_bias`]),
    /// recorded for autograd as one op; `None` where it does not apply (a
    /// batch of products, a strided bias, or a device without it). `Linear`
    /// uses it: PyTorch's `addmm`, whose gradient node it is named after.
    fn core_matmul_bias(&self, rhs: &Self, bias: &Self) -> Result<Option<Self>> {
        if self.rank() < 2 || rhs.rank() != 2 || bias.rank() != 1 {
            return Ok(None);
        }
        let plan = plan(self.layout(), rhs.layout(), D::name)?;
        let n = rhs.dims()[1];
        if plan.lhs.dims().len() != 2 || bias.dims()[0] != n || !bias.layout().is_contiguous() {
            return Ok(None);
        }
        if let Some(half) = autocast::lowered::<E>() {
            return autocast_in!(half, H => {
                let [lhs, rhs, bias] = [self.try_to_dtype::<H>()?, rhs.try_to_dtype::<H>()?, bias.try_to_dtype::<H>()?];
                lhs.core_matmul_bias(&rhs, &bias)?.map(|out| out.try_to_dtype::<E>()).transpose()
            });
        }
        let storage =
            D::matmul_bias(self.storage(), &plan.lhs, rhs.storage(), &plan.rhs, bias.storage(), bias.layout())?;
        let Some(storage) = storage else { return Ok(None) };
        let out = Tensor::from_storage(storage, plan.out);
        let inputs = [self.node(), rhs.node(), bias.node()];
        autograd::track("addmm", &inputs, || Ok(out), |_| grad::matmul_bias(self.clone(), rhs.clone(), bias.clone()))
            .map(Some)
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// The matrix product of `self` and `rhs`, with the semantics of
    /// `torch.matmul`:
    ///
    /// - 1-D · 1-D is the dot product, a rank-0 tensor;
    /// - 2-D · 2-D is the matrix product `[m, k] · [k, n] -> [m, n]`;
    /// - a 1-D left operand is treated as a row `[1, k]` and a 1-D right
    ///   operand as a column `[k, 1]`, and the added axis is removed from the
    ///   result;
    /// - operands of rank 3 or more are stacks of matrices: all axes but the
    ///   last two are batch axes, which broadcast as in NumPy.
    ///
    /// Transposed, permuted and narrowed views are multiplied in place, with
    /// no copy. Fails when an operand is rank 0, when the inner dimensions
    /// differ, or when the batch axes do not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let a = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    /// let b = Tensor::<Cpu>::from_vec(vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0], [3, 2]);
    /// assert_eq!(a.try_matmul(&b)?.to_vec(), vec![4.0, 5.0, 10.0, 11.0]);
    ///
    /// // Vectors: a dot product, and a matrix-vector product.
    /// let v = Tensor::<Cpu>::from_vec(vec![1.0, 1.0, 1.0], [3]);
    /// assert_eq!(v.try_matmul(&v)?.dims(), &[] as &[usize]);
    /// assert_eq!(a.try_matmul(&v)?.to_vec(), vec![6.0, 15.0]);
    ///
    /// // A stack of 4 matrices times one matrix: the batch axis broadcasts.
    /// let stack = Tensor::<Cpu>::ones([4, 2, 3]);
    /// assert_eq!(stack.try_matmul(&b)?.dims(), &[4, 2, 2]);
    ///
    /// let err = a.try_matmul(&a).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "matmul on Cpu: shapes [2, 3] and [2, 3]: the inner dimensions differ (3 vs 2)"
    /// );
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    /// // x · xᵀ, with the transpose a view.
    /// assert_eq!(x.matmul(&x.t()).to_vec(), vec![5.0, 11.0, 11.0, 25.0]);
    /// ```
    ///
    /// Mismatched shapes panic with the message of `try_matmul`:
    /// ```should_panic
    /// use devtensor::{Cpu, Tensor};
    /// // panics: "matmul on Cpu: shapes [2, 3] and [4, 5]: the inner dimensions differ (3 vs 4)"
    /// let _ = Tensor::<Cpu>::zeros([2, 3]).matmul(&Tensor::<Cpu>::zeros([4, 5]));
    /// ```
    #[fallible]
    pub fn matmul<D2: Device, E2: Element>(&self, rhs: &Tensor<D2, E2>) -> Self
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let rhs: &Self = same_device(rhs);
        core_call!(D, Fns<E>.matmul(self.core(), rhs.core()))
    }

    /// `self · rhs + bias` as one product when the shapes allow (`None`
    /// otherwise): a linear layer's forward.
    pub(crate) fn try_matmul_bias(&self, rhs: &Self, bias: &Self) -> Result<Option<Self>> {
        core_call!(D, Fns<E>.matmul_bias(self.core(), rhs.core(), bias.core()))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    /// The core of [`matmul`](Self::matmul).
    fn core_matmul(&self, rhs: &Self) -> Result<Self> {
        if let Some(half) = autocast::lowered::<E>() {
            return autocast_in!(half, H => {
                self.try_to_dtype::<H>()?.core_matmul(&rhs.try_to_dtype::<H>()?)?.try_to_dtype::<E>()
            });
        }
        let forward = || {
            let plan = plan(self.layout(), rhs.layout(), D::name)?;
            let storage = D::matmul(self.storage(), &plan.lhs, rhs.storage(), &plan.rhs)?;
            Ok(Tensor::from_storage(storage, plan.out))
        };
        autograd::track(OP, &[self.node(), rhs.node()], forward, |_| grad::matmul(self.clone(), rhs.clone()))
    }
}

core_table! {
    /// The core's matrix products.
    pub(crate) struct Fns<C, F: FloatElement> {
        matmul: fn(&Tensor<C, F>, &Tensor<C, F>) -> Result<Tensor<C, F>> = |a, b| a.core_matmul(b),
        matmul_bias: fn(&Tensor<C, F>, &Tensor<C, F>, &Tensor<C, F>) -> Result<Option<Tensor<C, F>>> =
            |a, b, bias| a.core_matmul_bias(b, bias),
        outer: fn(&Tensor<C, F>, &Tensor<C, F>) -> Result<Tensor<C, F>> = |a, b| a.core_outer(b),
        einsum: fn(&str, &[&Tensor<C, F>]) -> Result<Tensor<C, F>> = Tensor::core_einsum,
        dot: fn(&Tensor<C, F>, &Tensor<C, F>) -> Result<Tensor<C, F>> = |a, b| a.core_dot(b),
        add_product: fn(&Tensor<C, F>, AddProduct, &Tensor<C, F>, &Tensor<C, F>, f64, f64) -> Result<Tensor<C, F>> =
            |x, kind, a, b, beta, alpha| x.core_add_product(kind, a, b, beta, alpha),
    }
}

/// The kernel's view of one product: both operands as `[batch.., m, k]` and
/// `[batch.., k, n]` layouts, and the user-visible output shape.
struct Plan {
    lhs: Layout,
    rhs: Layout,
    out: Shape,
}

/// Checks the operands of `lhs · rhs` and lays them out for the kernel.
fn plan(lhs: &Layout, rhs: &Layout, device: impl Fn() -> String) -> Result<Plan> {
    let error = |reason: String| Error::Shape {
        op: OP,
        device: device(),
        shapes: vec![lhs.shape().clone(), rhs.shape().clone()],
        reason,
    };
    if lhs.shape().rank() == 0 || rhs.shape().rank() == 0 {
        return Err(error("both operands need at least one dimension (use `*` to scale by a scalar)".into()));
    }
    // Promote vectors to matrices: a row on the left, a column on the right.
    // The added axis has size 1, so its stride is never used.
    let (lhs_vector, rhs_vector) = (lhs.shape().rank() == 1, rhs.shape().rank() == 1);
    let lhs_m = if lhs_vector { insert_unit_axis(lhs, 0) } else { lhs.clone() };
    let rhs_m = if rhs_vector { insert_unit_axis(rhs, 1) } else { rhs.clone() };
    let (lr, rr) = (lhs_m.shape().rank(), rhs_m.shape().rank());
    let (m, k) = (lhs_m.dims()[lr - 2], lhs_m.dims()[lr - 1]);
    let (k2, n) = (rhs_m.dims()[rr - 2], rhs_m.dims()[rr - 1]);
    if k != k2 {
        return Err(error(format!("the inner dimensions differ ({k} vs {k2})")));
    }
    let lhs_batch = Shape::from(&lhs_m.dims()[..lr - 2]);
    let rhs_batch = Shape::from(&rhs_m.dims()[..rr - 2]);
    let batch = lhs_batch.broadcast_with(&rhs_batch).ok_or_else(|| {
        error(format!("the batch dimensions {lhs_batch} and {rhs_batch} cannot be broadcast together"))
    })?;
    let with_batch = |tail: [usize; 2]| -> Shape {
        let mut dims: Dims = batch.dims().iter().copied().collect();
        dims.extend(tail);
        Shape::from_dims(dims)
    };
    let lhs_full = lhs_m.broadcast_to(&with_batch([m, k])).expect("the batch shape is a broadcast of lhs's");
    let rhs_full = rhs_m.broadcast_to(&with_batch([k, n])).expect("the batch shape is a broadcast of rhs's");
    let (lhs_full, rhs_full) = stack_as_rows(&lhs_full, &rhs_full).unwrap_or((lhs_full, rhs_full));
    let mut out: Dims = batch.dims().iter().copied().collect();
    if !lhs_vector {
        out.push(m);
    }
    if !rhs_vector {
        out.push(n);
    }
    // The product of the output's dimensions: each factor comes from a
    // different operand, so it can overflow even when both inputs fit.
    let out = Shape::from_dims(out);
    let full = with_batch([m, n]);
    if full.checked_elem_count().is_none() {
        return Err(error(format!("the result {full} would have more than 2^63 - 1 elements")));
    }
    Ok(Plan { lhs: lhs_full, rhs: rhs_full, out })
}

/// A stack of matrices times one matrix, `[batch.., m, k] · [k, n]` (a
/// `Linear` layer on a `[batch, seq, features]` input): when the stack's
/// batch axes and rows lie in storage as one run of rows, it is one
/// `[batch·m, k]` matrix, and one large product replaces `batch` small
/// ones. The output, `[batch·m, n]` row-major, is the `[batch.., m, n]`
/// result as it is. `None` when the right operand varies over the batch or
/// the rows do not merge (a permuted stack).
fn stack_as_rows(lhs: &Layout, rhs: &Layout) -> Option<(Layout, Layout)> {
    let rank = lhs.dims().len();
    let batch = rank.checked_sub(2).filter(|&b| b > 0)?;
    let varies = |layout: &Layout, axis: usize| layout.dims()[axis] > 1 && layout.strides()[axis] != 0;
    if (0..batch).any(|axis| varies(rhs, axis)) {
        return None;
    }
    // The batch axes and the row axis, size-1 axes left out (their stride is
    // never used): each must step over whole runs of the next.
    let rows: Vec<(usize, usize)> =
        (0..=batch).filter(|&axis| lhs.dims()[axis] != 1).map(|axis| (lhs.dims()[axis], lhs.strides()[axis])).collect();
    // Checked: an empty stack may have axes whose strides overflow when multiplied.
    if rows.windows(2).any(|pair| pair[1].0.checked_mul(pair[1].1) != Some(pair[0].1)) {
        return None;
    }
    let count = count_of(&lhs.dims()[..=batch]);
    let row_stride = rows.last().map_or(lhs.strides()[batch], |&(_, stride)| stride);
    let (k, k_stride) = (lhs.dims()[rank - 1], lhs.strides()[rank - 1]);
    let lhs_rows = Layout::new(Shape::from([count, k]), [row_stride, k_stride].into_iter().collect(), lhs.offset());
    let tail = |layout: &Layout| -> (Shape, Dims) {
        let r = layout.dims().len();
        (Shape::from(&layout.dims()[r - 2..]), layout.strides()[r - 2..].iter().copied().collect())
    };
    let (rhs_shape, rhs_strides) = tail(rhs);
    Some((lhs_rows, Layout::new(rhs_shape, rhs_strides, rhs.offset())))
}

/// `layout` with a new axis of size 1 at `axis`.
fn insert_unit_axis(layout: &Layout, axis: usize) -> Layout {
    let mut dims: Dims = layout.dims().iter().copied().collect();
    let mut strides: Dims = layout.strides().iter().copied().collect();
    dims.insert(axis, 1);
    strides.insert(axis, 0);
    Layout::new(Shape::from_dims(dims), strides, layout.offset())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims_of(lhs: &[usize], rhs: &[usize]) -> Result<(Vec<usize>, Vec<usize>, Vec<usize>)> {
        let p = plan(&Layout::contiguous(lhs.into()), &Layout::contiguous(rhs.into()), || "Cpu".into())?;
        Ok((p.lhs.dims().to_vec(), p.rhs.dims().to_vec(), p.out.dims().to_vec()))
    }

    #[test]
    fn plans_follow_torch_matmul_shapes() {
        assert_eq!(dims_of(&[3], &[3]).unwrap(), (vec![1, 3], vec![3, 1], vec![]));
        assert_eq!(dims_of(&[3], &[3, 4]).unwrap(), (vec![1, 3], vec![3, 4], vec![4]));
        assert_eq!(dims_of(&[2, 3], &[3]).unwrap(), (vec![2, 3], vec![3, 1], vec![2]));
        assert_eq!(dims_of(&[5, 1, 2, 3], &[4, 3, 6]).unwrap().2, vec![5, 4, 2, 6]);
        assert_eq!(dims_of(&[3], &[7, 3, 2]).unwrap().2, vec![7, 2]);
        assert_eq!(dims_of(&[7, 2, 3], &[3]).unwrap().2, vec![7, 2]);
    }

    #[test]
    fn a_stack_times_one_matrix_is_one_product() {
        let plan_of =
            |lhs: Layout, rhs: &[usize]| plan(&lhs, &Layout::contiguous(rhs.into()), || "Cpu".into()).unwrap();
        let p = plan_of(Layout::contiguous([4, 5, 2, 3].into()), &[3, 6]);
        assert_eq!((p.lhs.dims(), p.lhs.strides()), (&[40, 3][..], &[3, 1][..]));
        assert_eq!((p.rhs.dims(), p.out.dims()), (&[3, 6][..], &[4, 5, 2, 6][..]));
        // A permuted stack does not merge; it stays a batch.
        let permuted = Layout::new([4, 2, 3].into(), [3, 12, 1].into_iter().collect(), 0);
        assert_eq!(plan_of(permuted, &[3, 6]).lhs.dims(), &[4, 2, 3]);
        // Nor does a right operand that varies over the batch.
        assert_eq!(
            plan(&Layout::contiguous([4, 2, 3].into()), &Layout::contiguous([4, 3, 6].into()), || "Cpu".into())
                .unwrap()
                .lhs
                .dims(),
            &[4, 2, 3]
        );
    }

    #[test]
    fn broadcast_batch_axes_get_stride_zero() {
        let p =
            plan(&Layout::contiguous([2, 3].into()), &Layout::contiguous([4, 3, 5].into()), || "Cpu".into()).unwrap();
        assert_eq!(p.lhs.strides(), &[0, 3, 1]);
        assert_eq!(p.rhs.strides(), &[15, 5, 1]);
    }
}
