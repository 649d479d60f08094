//! A float's special values: the masks `isnan`, `isinf`, `isposinf`,
//! `isneginf` and `isfinite`, and `nan_to_num`, which replaces them. Masks
//! are `u8` tensors, as every comparison's (1 where the test holds).

use crate::element::FloatElement;
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device, F: FloatElement> Tensor<D, F> {
    /// `torch.isnan`: 1 where an element is NaN (the one value not equal
    /// to itself).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, f32::NAN, f32::INFINITY], [3]);
    /// assert_eq!(x.isnan().to_vec(), vec![0, 1, 0]);
    /// ```
    #[fallible]
    pub fn isnan(&self) -> Tensor<D, u8> {
        self.try_ne(self)
    }

    /// `torch.isinf`: 1 where an element is `inf` or `-inf`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY], [4]);
    /// assert_eq!(x.isinf().to_vec(), vec![0, 0, 1, 1]);
    /// ```
    #[fallible]
    pub fn isinf(&self) -> Tensor<D, u8> {
        self.try_abs()?.try_eq_scalar(F::infinity())
    }

    /// `torch.isposinf`: 1 where an element is `inf`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![f32::INFINITY, f32::NEG_INFINITY], [2]);
    /// assert_eq!(x.isposinf().to_vec(), vec![1, 0]);
    /// ```
    #[fallible]
    pub fn isposinf(&self) -> Tensor<D, u8> {
        self.try_eq_scalar(F::infinity())
    }

    /// `torch.isneginf`: 1 where an element is `-inf`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![f32::INFINITY, f32::NEG_INFINITY], [2]);
    /// assert_eq!(x.isneginf().to_vec(), vec![0, 1]);
    /// ```
    #[fallible]
    pub fn isneginf(&self) -> Tensor<D, u8> {
        self.try_eq_scalar(F::neg_infinity())
    }

    /// `torch.isfinite`: 1 where an element is neither infinite nor NaN;
    /// `x.isfinite().logical_not()` marks what `nan_to_num` replaces.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, f32::NAN, f32::INFINITY], [3]);
    /// assert_eq!(x.isfinite().to_vec(), vec![1, 0, 0]);
    /// ```
    #[fallible]
    pub fn isfinite(&self) -> Tensor<D, u8> {
        // NaN fails the comparison.
        self.try_abs()?.try_lt_scalar(F::infinity())
    }

    /// `torch.nan_to_num(x, nan, posinf, neginf)`: NaN replaced by `nan`,
    /// `inf` by `posinf` and `-inf` by `neginf`; `None` stands for
    /// PyTorch's default, the largest finite value of the element type
    /// (the smallest for `neginf`). `x.nan_to_num(0.0, None, None)` is
    /// PyTorch's `x.nan_to_num()`. The gradient reaches the finite
    /// elements only, as PyTorch's.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.5, f32::NAN, f32::INFINITY, f32::NEG_INFINITY], [4]);
    /// assert_eq!(x.nan_to_num(0.0, None, None).to_vec(), vec![1.5, 0.0, f32::MAX, f32::MIN]);
    /// assert_eq!(x.nan_to_num(-1.0, Some(9.0), Some(-9.0)).to_vec(), vec![1.5, -1.0, 9.0, -9.0]);
    /// ```
    #[fallible]
    pub fn nan_to_num(&self, nan: F, posinf: Option<F>, neginf: Option<F>) -> Self {
        let posinf = posinf.unwrap_or_else(F::max_value);
        let neginf = neginf.unwrap_or_else(F::min_value);
        self.try_masked_fill(&self.try_isnan()?, nan)?
            .try_masked_fill(&self.try_isposinf()?, posinf)?
            .try_masked_fill(&self.try_isneginf()?, neginf)
    }
}
