//! `Sequential`: layers applied one after another.

use super::module::child_name;
use super::{Forward, Module, TensorKind, ToDtype};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// Layers applied in order, PyTorch's `nn.Sequential`, held as a tuple (of
/// up to 16 layers; nest a `Sequential` for more) so that every layer keeps
/// its type (and its device in its type). Parameters are named by
/// position, as in PyTorch: `"0.weight"`, `"2.bias"`.
///
/// ```
/// use devtensor::nn::{Linear, Module, Relu, Sequential};
/// use devtensor::{Cpu, Tensor};
/// let mlp = Sequential::new((Linear::<Cpu>::new(4, 8), Relu, Linear::new(8, 3)));
/// assert_eq!(mlp.forward(&Tensor::<Cpu>::ones([2, 4])).dims(), &[2, 3]);
/// assert_eq!(mlp.parameters()[2].0, "2.weight");
/// ```
#[derive(Clone, Debug)]
pub struct Sequential<T>(pub T);

impl<T> Sequential<T> {
    /// The layers of the tuple `layers`, applied first to last.
    pub fn new(layers: T) -> Self {
        Sequential(layers)
    }

    /// Every layer applied to `x` in turn. `x` must be on the layers' device
    /// (checked at compile time).
    #[fallible]
    pub fn forward<D: Device, D2: Device, E: FloatElement, EX: Element>(&self, x: &Tensor<D2, EX>) -> Tensor<D, E>
    where
        T: Forward<D, E>,
        D: SameDevice<D2>,
        E: SameDtype<EX>,
    {
        self.0.forward_on(same_device(x))
    }
}

impl<D: Device, E: FloatElement, T: Forward<D, E>> Forward<D, E> for Sequential<T> {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.0.forward_on(x)
    }
}

impl<D: Device, E: FloatElement, T: ToDtype<D, E>> ToDtype<D, E> for Sequential<T> {
    type Of<T2: FloatElement> = Sequential<T::Of<T2>>;

    fn try_to_dtype<T2: FloatElement>(&self) -> Result<Self::Of<T2>> {
        super::moving(|| Ok(Sequential(self.0.try_to_dtype()?)))
    }
}

impl<D: Device, E: FloatElement, T: Module<D, E>> Module<D, E> for Sequential<T> {
    type On<D2: Device> = Sequential<T::On<D2>>;

    fn try_to<D2: Device>(&self) -> Result<Self::On<D2>> {
        super::moving(|| Ok(Sequential(self.0.try_to()?)))
    }

    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
        self.0.visit(prefix, f)
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
        self.0.visit_mut(prefix, f)
    }

    fn set_training(&mut self, training: bool) {
        self.0.set_training(training)
    }

    fn visit_int_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor<D, i64>)) {
        self.0.visit_int_buffers(prefix, f)
    }

    fn visit_int_buffers_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor<D, i64>)) {
        self.0.visit_int_buffers_mut(prefix, f)
    }
}

/// `Module` and `Forward` for tuples of layers, named by position.
macro_rules! tuple_layers {
    ($(($($layer:ident $index:tt),+))*) => {$(
        impl<D: Device, E: FloatElement, $($layer: Module<D, E>),+> Module<D, E> for ($($layer,)+) {
            type On<D2: Device> = ($($layer::On<D2>,)+);

            fn try_to<D2: Device>(&self) -> Result<Self::On<D2>> {
                super::moving(|| Ok(($(self.$index.try_to()?,)+)))
            }

            fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
                $(self.$index.visit(&child_name(prefix, stringify!($index)), f);)+
            }

            fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
                $(self.$index.visit_mut(&child_name(prefix, stringify!($index)), f);)+
            }

            fn set_training(&mut self, training: bool) {
                $(self.$index.set_training(training);)+
            }

            fn visit_int_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor<D, i64>)) {
                $(self.$index.visit_int_buffers(&child_name(prefix, stringify!($index)), f);)+
            }

            fn visit_int_buffers_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor<D, i64>)) {
                $(self.$index.visit_int_buffers_mut(&child_name(prefix, stringify!($index)), f);)+
            }
        }

        impl<D: Device, E: FloatElement, $($layer: ToDtype<D, E>),+> ToDtype<D, E> for ($($layer,)+) {
            type Of<T: FloatElement> = ($($layer::Of<T>,)+);

            fn try_to_dtype<T: FloatElement>(&self) -> Result<Self::Of<T>> {
                super::moving(|| Ok(($(self.$index.try_to_dtype()?,)+)))
            }
        }

        impl<D: Device, E: FloatElement, $($layer: Forward<D, E>),+> Forward<D, E> for ($($layer,)+) {
            fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
                let x = x.clone();
                $(let x = super::forward::call(&self.$index, &x)?;)+
                Ok(x)
            }
        }
    )*};
}

tuple_layers! {
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, F 3)
    (A 0, B 1, C 2, F 3, G 4)
    (A 0, B 1, C 2, F 3, G 4, H 5)
    (A 0, B 1, C 2, F 3, G 4, H 5, I 6)
    (A 0, B 1, C 2, F 3, G 4, H 5, I 6, J 7)
    (A 0, B 1, C 2, F 3, G 4, H 5, I 6, J 7, K 8)
    (A 0, B 1, C 2, F 3, G 4, H 5, I 6, J 7, K 8, L 9)
    (A 0, B 1, C 2, F 3, G 4, H 5, I 6, J 7, K 8, L 9, M 10)
    (A 0, B 1, C 2, F 3, G 4, H 5, I 6, J 7, K 8, L 9, M 10, N 11)
    (A 0, B 1, C 2, F 3, G 4, H 5, I 6, J 7, K 8, L 9, M 10, N 11, O 12)
    (A 0, B 1, C 2, F 3, G 4, H 5, I 6, J 7, K 8, L 9, M 10, N 11, O 12, P 13)
    (A 0, B 1, C 2, F 3, G 4, H 5, I 6, J 7, K 8, L 9, M 10, N 11, O 12, P 13, Q 14)
    (A 0, B 1, C 2, F 3, G 4, H 5, I 6, J 7, K 8, L 9, M 10, N 11, O 12, P 13, Q 14, R 15)
}
