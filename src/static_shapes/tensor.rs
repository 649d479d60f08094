//! [`STensor`]: a tensor whose shape is (partly) in its type.

use super::dim::{Const, Dim, Prod, StaticDim};
use super::message::Message;
use super::shape::{RemoveAxis, StaticShape, SwapAxes};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result, or_panic};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;
use std::marker::PhantomData;

/// A [`Tensor`] whose shape `S` is in its type, e.g.
/// `STensor<Cpu, (usize, Const<3>, Const<64>, Const<64>)>` for a batch of
/// any size of 3x64x64 images. It is the dynamic tensor plus the shape's
/// dynamic sizes: every operation runs the same kernels.
///
/// Static sizes are checked by the compiler. Two shapes that differ in a
/// static size do not add up (a compile error naming both shapes), and a
/// layer or a product whose sizes do not fit fails at `cargo build` with a
/// message that gives both sizes in decimal. Dynamic sizes (`usize`) are
/// checked at run time, as on [`Tensor`].
///
/// ```
/// use devtensor::static_shapes::{Const, STensor};
/// use devtensor::{Cpu, Tensor};
/// type Batch = (usize, Const<4>);
/// let x: STensor<Cpu, Batch> = Tensor::<Cpu>::ones([2, 4]).try_static()?;
/// let y = &x + &x;
/// assert_eq!(y.dynamic().to_vec(), vec![2.0; 8]);
/// assert!(Tensor::<Cpu>::ones([2, 5]).try_static::<Batch>().is_err());
/// # Ok::<(), devtensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct STensor<D: Device, S: StaticShape, E: Element = f32> {
    tensor: Tensor<D, E>,
    shape: S,
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// This tensor with its shape in the type `S`: static sizes must match,
    /// dynamic ones are taken from the tensor. Shares storage; copies
    /// nothing. Fails, naming the expected and the actual shape, when they
    /// differ.
    pub fn try_static<S: StaticShape>(&self) -> Result<STensor<D, S, E>> {
        let shape = S::from_dims(self.dims()).ok_or_else(|| {
            let expected: Vec<String> =
                S::static_dims().iter().map(|d| d.map_or_else(|| "_".to_string(), |n| n.to_string())).collect();
            Error::Shape {
                op: "try_static",
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: format!("expected a shape [{}] (`_`: any size)", expected.join(", ")),
            }
        })?;
        Ok(STensor { tensor: self.clone(), shape })
    }
}

impl<D: Device, S: StaticShape, E: Element> STensor<D, S, E> {
    /// The tensor, with its shape at run time only.
    pub fn dynamic(&self) -> &Tensor<D, E> {
        &self.tensor
    }

    /// The tensor, with its shape at run time only.
    pub fn into_dynamic(self) -> Tensor<D, E> {
        self.tensor
    }

    /// The shape, dynamic sizes included.
    pub fn shape(&self) -> S {
        self.shape
    }

    /// A result of an operation that gives shape `S2` by construction.
    pub(super) fn wrap<S2: StaticShape, E2: Element>(tensor: Tensor<D, E2>) -> STensor<D, S2, E2> {
        let shape = S2::from_dims(tensor.dims()).expect("the operation gives the shape its type says");
        STensor { tensor, shape }
    }

    /// This tensor on `D2`, shape unchanged.
    #[fallible]
    pub fn to<D2: Device>(&self) -> STensor<D2, S, E> {
        Ok(STensor { tensor: self.tensor.try_to()?, shape: self.shape })
    }

    /// This tensor's elements converted to `T`, shape unchanged (see
    /// [`Tensor::to_dtype`]): the explicit form that a dtype mismatch
    /// between static tensors asks for.
    ///
    /// ```
    /// use devtensor::static_shapes::{Const, STensor};
    /// use devtensor::{Cpu, Tensor, bf16};
    /// let x: STensor<Cpu, (usize, Const<2>)> = Tensor::<Cpu>::ones([3, 2]).try_static()?;
    /// let h: STensor<Cpu, (Const<2>,), bf16> = Tensor::<Cpu>::ones([2]).to_dtype::<bf16>().try_static()?;
    /// assert_eq!((&x + &h.to_dtype::<f32>()).dynamic().to_vec(), vec![2.0; 6]);
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    #[fallible]
    pub fn to_dtype<T: Element>(&self) -> STensor<D, S, T> {
        Ok(STensor { tensor: self.tensor.try_to_dtype()?, shape: self.shape })
    }

    /// The same elements with shape `S2`. When both shapes are fully static,
    /// a different element count fails to build, with both counts in the
    /// message; otherwise it is checked at run time.
    pub fn try_reshape<S2: StaticShape>(&self, shape: S2) -> Result<STensor<D, S2, E>> {
        let () = SameCount::<S, S2>::OK;
        Ok(STensor { tensor: self.tensor.try_reshape(shape.dims())?, shape })
    }
}

/// Fails to build when two fully static shapes have different counts.
struct SameCount<A, B>(PhantomData<(A, B)>);

impl<A: StaticShape, B: StaticShape> SameCount<A, B> {
    const OK: () = if let (Some(a), Some(b)) = (A::STATIC_COUNT, B::STATIC_COUNT)
        && a != b
    {
        Message::new().text("reshape: ").num(a).text(" elements cannot be viewed as ").num(b).fail()
    };
}

/// Defines shape-preserving float operations on [`STensor`].
macro_rules! same_shape {
    ($($method:ident, $try_method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        #[doc = concat!("`", stringify!($method), "` of the dynamic tensor; the shape is unchanged.")]
        #[fallible($try_method)]
        pub fn $method(&self, $($arg: $ty),*) -> Self {
            Ok(STensor { tensor: self.tensor.$try_method($($arg),*)?, shape: self.shape })
        }
    )*};
}

impl<D: Device, S: StaticShape, E: FloatElement> STensor<D, S, E> {
    same_shape! {
        relu, try_relu();
        sigmoid, try_sigmoid();
        tanh, try_tanh();
        exp, try_exp();
        log, try_log();
        sqrt, try_sqrt();
        rsqrt, try_rsqrt();
        abs, try_abs();
        square, try_square();
        softmax, try_softmax(axis: isize);
        log_softmax, try_log_softmax(axis: isize);
    }
}

impl<D: Device, S: StaticShape, E: FloatElement> STensor<D, S, E> {
    /// The sums along axis `A`, which is removed from the shape type:
    /// `x.sum_axis::<1>()` of `[B, 10]` is `[B]`.
    ///
    /// ```
    /// use devtensor::static_shapes::{Const, STensor};
    /// use devtensor::{Cpu, Tensor};
    /// let x: STensor<Cpu, (usize, Const<3>)> = Tensor::<Cpu>::ones([2, 3]).try_static()?;
    /// let s: STensor<Cpu, (usize,)> = x.sum_axis::<1>();
    /// assert_eq!(s.dynamic().to_vec(), vec![3.0, 3.0]);
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    #[fallible]
    pub fn sum_axis<const A: usize>(&self) -> STensor<D, <S as RemoveAxis<A>>::Out, E>
    where
        S: RemoveAxis<A>,
    {
        Ok(Self::wrap(self.tensor.try_sum_axis(A as isize)?))
    }

    /// The means along axis `A`, which is removed from the shape type.
    #[fallible]
    pub fn mean_axis<const A: usize>(&self) -> STensor<D, <S as RemoveAxis<A>>::Out, E>
    where
        S: RemoveAxis<A>,
    {
        Ok(Self::wrap(self.tensor.try_mean_axis(A as isize)?))
    }
}

/// Fails to build when two static inner dimensions of a product differ.
struct InnerDims<K1, K2>(PhantomData<(K1, K2)>);

impl<K1: Dim, K2: Dim> InnerDims<K1, K2> {
    const OK: () = if let (Some(a), Some(b)) = (K1::STATIC, K2::STATIC)
        && a != b
    {
        Message::new().text("matmul: the inner dimensions differ (").num(a).text(" vs ").num(b).text(")").fail()
    };
}

impl<D: Device, M: Dim, K: Dim, E: FloatElement> STensor<D, (M, K), E> {
    /// The matrix product `[M, K] · [K, N] -> [M, N]`. Static inner sizes
    /// that differ fail to build, with both in the message.
    ///
    /// ```
    /// use devtensor::static_shapes::{Const, STensor};
    /// use devtensor::{Cpu, Tensor};
    /// let a: STensor<Cpu, (usize, Const<3>)> = Tensor::<Cpu>::ones([2, 3]).try_static()?;
    /// let b: STensor<Cpu, (Const<3>, Const<4>)> = Tensor::<Cpu>::ones([3, 4]).try_static()?;
    /// assert_eq!(a.matmul(&b).dynamic().dims(), &[2, 4]);
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    #[track_caller]
    pub fn matmul<D2: Device, K2: Dim, N: Dim, E2: Element>(
        &self,
        rhs: &STensor<D2, (K2, N), E2>,
    ) -> STensor<D, (M, N), E>
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        let () = InnerDims::<K, K2>::OK;
        let rhs: &Tensor<D, E> = same_device(&rhs.tensor);
        Self::wrap(or_panic(self.tensor.try_matmul::<D, E>(rhs)))
    }
}

impl<D: Device, S: StaticShape, E: Element> STensor<D, S, E> {
    /// This tensor with axes `A` and `B` exchanged, in the shape type too
    /// (a view; nothing is copied): `[B, N, F]` with `transpose::<1, 2>()`
    /// is `[B, F, N]`.
    ///
    /// ```
    /// use devtensor::static_shapes::{Const, STensor};
    /// use devtensor::{Cpu, Tensor};
    /// let x: STensor<Cpu, (usize, Const<3>)> = Tensor::<Cpu>::from_vec(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [2, 3]).try_static()?;
    /// let t: STensor<Cpu, (Const<3>, usize)> = x.transpose::<0, 1>();
    /// assert_eq!(t.dynamic().to_vec(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    #[fallible]
    pub fn transpose<const A: usize, const B: usize>(&self) -> STensor<D, <S as SwapAxes<A, B>>::Out, E>
    where
        S: SwapAxes<A, B>,
    {
        Ok(Self::wrap(self.tensor.try_transpose(A as isize, B as isize)?))
    }
}

impl<D: Device, M: Dim, N: Dim, E: Element> STensor<D, (M, N), E> {
    /// The transpose of a matrix, `[M, N] -> [N, M]`.
    pub fn t(&self) -> STensor<D, (N, M), E> {
        self.transpose::<0, 1>()
    }
}

impl<D: Device, B: Dim, C: StaticDim, L: StaticDim, E: FloatElement> STensor<D, (B, C, L), E> {
    /// Every axis after the batch merged: `[B, C, L] -> [B, C * L]`.
    #[fallible]
    pub fn flatten(&self) -> STensor<D, (B, Prod<C, L>), E> {
        Ok(Self::wrap(self.tensor.try_flatten(1, -1)?))
    }
}

impl<D: Device, B: Dim, C: StaticDim, H: StaticDim, W: StaticDim, E: FloatElement> STensor<D, (B, C, H, W), E> {
    /// Every axis after the batch merged: `[B, C, H, W] -> [B, C * H * W]`,
    /// with the product computed by the compiler.
    #[fallible]
    pub fn flatten(&self) -> STensor<D, (B, Prod<C, Prod<H, W>>), E> {
        Ok(Self::wrap(self.tensor.try_flatten(1, -1)?))
    }
}

impl<D: Device, B: Dim, const N: usize, E: FloatElement> STensor<D, (B, Const<N>), E> {
    /// The cross-entropy of these logits (`[B, classes]`) for `labels`
    /// (`[B]`, on the same device), with PyTorch's defaults; see
    /// [`try_cross_entropy`](crate::nn::try_cross_entropy).
    #[fallible]
    pub fn cross_entropy<D2: Device, B2: Dim>(&self, labels: &STensor<D2, (B2,), i64>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
    {
        let labels: &Tensor<D, i64> = same_device(&labels.tensor);
        crate::nn::try_cross_entropy::<D, D, E, i64>(&self.tensor, labels)
    }
}
