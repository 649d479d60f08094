//! The [`Module`] trait: what optimizers, checkpoints and device moves need
//! to know about a layer or a model.

use crate::autograd::LeafId;
use crate::element::FloatElement;
use crate::error::{Result, or_panic};
use crate::tensor::Device;
use crate::tensor::Tensor;
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;

/// What a tensor held by a module is to training.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorKind {
    /// Trained by the optimizer; tracks gradients (a weight, a bias).
    Parameter,
    /// Saved and moved with the module but not trained (`BatchNorm2d`'s
    /// running statistics), PyTorch's buffers.
    Buffer,
}

/// A layer or a model whose tensors live on device `D`, with elements `E`.
///
/// A model is a plain struct of modules; [`module!`](crate::module) gives it
/// this trait in one line. Through it the model gets:
///
/// - [`to`](Module::to), which moves every parameter and buffer and returns
///   the same model on another device (`Net<Cpu>` becomes `Net<Cuda<0>>`);
///   a model generic over its dtype also gets
///   [`to_dtype`](super::ToDtype::to_dtype) (`Net<Cpu, f32>` becomes
///   `Net<Cpu, bf16>`);
/// - [`parameters`](Module::parameters) and
///   [`named_tensors`](Module::named_tensors), with dotted names
///   (`"fc.weight"`) for optimizers and checkpoints;
/// - [`train`](Module::train) and [`eval`](Module::eval) for the layers
///   that behave differently in training (`Dropout`, `BatchNorm2d`).
///
/// ```
/// use devtensor::nn::{Linear, Module, Relu};
/// use devtensor::{Cpu, Tensor};
///
/// struct Mlp<D: devtensor::Device> {
///     hidden: Linear<D>,
///     act: Relu,
///     out: Linear<D>,
/// }
/// devtensor::module!(Mlp { hidden, act, out });
///
/// let mlp = Mlp { hidden: Linear::<Cpu>::new(4, 8), act: Relu, out: Linear::new(8, 2) };
/// let names: Vec<String> = mlp.parameters().into_iter().map(|(name, _)| name).collect();
/// assert_eq!(names, ["hidden.weight", "hidden.bias", "out.weight", "out.bias"]);
/// assert_eq!(mlp.num_parameters(), 4 * 8 + 8 + 8 * 2 + 2);
/// let moved: Mlp<Cpu> = mlp.to::<Cpu>(); // or `mlp.to::<Cuda<0>>()`: an `Mlp<Cuda<0>>`
/// # let _ = moved;
/// ```
#[diagnostic::on_unimplemented(
    message = "expected all tensors to be on the same device, but `{Self}` is not a module on `{D}`",
    label = "this module's parameters are not on `{D}`",
    note = "move the model with `.to::<{D}>()`, or make the optimizer (or load the checkpoint) for the model's own device"
)]
pub trait Module<D: Device, E: FloatElement = f32>: Sized {
    /// This module with its tensors on `D2`.
    type On<D2: Device>: Module<D2, E> + 'static;

    /// This module with every parameter and buffer copied to `D2`. Moved
    /// parameters are fresh leaves that require grad. Fails when `D2` is
    /// unavailable or out of memory.
    fn try_to<D2: Device>(&self) -> Result<Self::On<D2>>;

    /// Calls `f` with the dotted name (under `prefix`), kind and tensor of
    /// every parameter and buffer, in a fixed order: the order of the fields.
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>));

    /// Like [`visit`](Self::visit), with each tensor writable: how
    /// optimizers update parameters and checkpoints load them.
    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>));

    /// Switches training behaviour on or off; layers without any ignore it.
    fn set_training(&mut self, training: bool) {
        let _ = training;
    }

    /// Calls `f` with the dotted name and tensor of every integer buffer:
    /// saved and loaded with the model but never trained, such as
    /// `BatchNorm2d`'s `num_batches_tracked` (a PyTorch `state_dict` holds
    /// it as an int64 tensor). Layers without any keep this default.
    fn visit_int_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor<D, i64>)) {
        let _ = (prefix, f);
    }

    /// Like [`visit_int_buffers`](Self::visit_int_buffers), with each
    /// tensor writable: how checkpoints load them.
    fn visit_int_buffers_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor<D, i64>)) {
        let _ = (prefix, f);
    }

    /// Panicking form of [`to`](Self::to): PyTorch's `model.to(device)`,
    /// returning the model's type on the new device.
    #[track_caller]
    fn to<D2: Device>(&self) -> Self::On<D2> {
        or_panic(moving(|| self.try_to()))
    }

    /// Every trainable parameter with its dotted name, in field order. The
    /// tensors share storage with the module's own.
    ///
    /// A parameter held under two names (tied weights, such as a language
    /// model's `lm_head.weight` set to a clone of `wte.weight`) is listed
    /// once, under its first name, as PyTorch's `parameters()` lists it:
    /// optimizers step it once and clipping counts it once.
    /// [`named_tensors`](Self::named_tensors) keeps every name, as
    /// PyTorch's `state_dict` does.
    ///
    /// ```
    /// use devtensor::nn::{Embedding, Linear, Module};
    /// use devtensor::Cpu;
    /// struct Lm<D: devtensor::Device> {
    ///     wte: Embedding<D>,
    ///     lm_head: Linear<D>,
    /// }
    /// devtensor::module!(Lm { wte, lm_head });
    ///
    /// let wte = Embedding::<Cpu>::new(65, 8);
    /// let lm_head = Linear::from_weights(wte.weight.clone(), None); // tied
    /// let lm = Lm { wte, lm_head };
    /// assert_eq!(lm.parameters().len(), 1);
    /// assert_eq!(lm.num_parameters(), 65 * 8);
    /// assert_eq!(lm.named_tensors().len(), 2);
    /// ```
    fn parameters(&self) -> Vec<(String, Tensor<D, E>)> {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        self.visit("", &mut |name, kind, t| {
            let first = t.leaf_id().is_none_or(|id| seen.insert(id));
            if kind == TensorKind::Parameter && first {
                out.push((name.to_string(), t.clone()));
            }
        });
        out
    }

    /// Every parameter and buffer with its dotted name and kind (PyTorch's
    /// `state_dict`).
    fn named_tensors(&self) -> Vec<(String, TensorKind, Tensor<D, E>)> {
        let mut out = Vec::new();
        self.visit("", &mut |name, kind, t| out.push((name.to_string(), kind, t.clone())));
        out
    }

    /// The number of trainable elements (a tied parameter counts once).
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|(_, t)| t.elem_count()).sum()
    }

    /// Training mode (PyTorch's `model.train()`).
    fn train(&mut self) {
        self.set_training(true);
    }

    /// Evaluation mode (PyTorch's `model.eval()`): `Dropout` passes its
    /// input through and `BatchNorm2d` uses its running statistics.
    fn eval(&mut self) {
        self.set_training(false);
    }
}

/// A tensor held by a model is a trainable parameter (PyTorch's
/// `nn.Parameter`), named after its field: [`module!`](crate::module)
/// accepts `Tensor<D, E>` fields beside layers, as the built-in layers use
/// it. Moving the model moves it as a fresh leaf that requires grad.
///
/// ```
/// use devtensor::nn::{Embedding, Module};
/// use devtensor::{Cpu, Device, Tensor};
/// struct Tokens<D: Device> {
///     wte: Embedding<D>,
///     wpe: Tensor<D>, // a learned position table
/// }
/// devtensor::module!(Tokens { wte, wpe });
///
/// let t = Tokens { wte: Embedding::<Cpu>::new(10, 4), wpe: Tensor::zeros([8, 4]).requires_grad() };
/// let names: Vec<String> = t.parameters().into_iter().map(|(name, _)| name).collect();
/// assert_eq!(names, ["wte.weight", "wpe"]);
/// ```
impl<D: Device, E: FloatElement> Module<D, E> for Tensor<D, E> {
    type On<D2: Device> = Tensor<D2, E>;

    fn try_to<D2: Device>(&self) -> Result<Tensor<D2, E>> {
        move_parameter(self)
    }

    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
        f(prefix, TensorKind::Parameter, self)
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
        f(prefix, TensorKind::Parameter, self)
    }
}

/// An integer buffer as a field of a model (a step counter, token ids, a
/// lookup table of positions): moved with the model and saved in its
/// checkpoints under the field's name, as PyTorch's `register_buffer` of an
/// integer tensor; never trained.
///
/// ```
/// use devtensor::io::Checkpoint;
/// use devtensor::nn::{Linear, Module};
/// use devtensor::{Cpu, Device, Tensor};
/// struct Counted<D: Device> {
///     fc: Linear<D>,
///     seen: Tensor<D, i64>,
/// }
/// devtensor::module!(Counted { fc, seen });
/// let model = Counted { fc: Linear::<Cpu>::new(2, 2), seen: Tensor::from_vec(vec![7], [1]) };
/// let ckpt = Checkpoint::try_from_model(&model)?;
/// assert_eq!(ckpt.int_tensors()[0].0, "seen");
/// assert_eq!(model.parameters().len(), 2);
/// # Ok::<(), devtensor::Error>(())
/// ```
impl<D: Device, E: FloatElement> Module<D, E> for Tensor<D, i64> {
    type On<D2: Device> = Tensor<D2, i64>;

    fn try_to<D2: Device>(&self) -> Result<Tensor<D2, i64>> {
        self.try_to::<D2>()
    }

    fn visit(&self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {}

    fn visit_mut(&mut self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {}

    fn visit_int_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor<D, i64>)) {
        f(prefix, self)
    }

    fn visit_int_buffers_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor<D, i64>)) {
        f(prefix, self)
    }
}

/// A mask as a field of a model (a causal mask built once): moved with the
/// model but not saved in its checkpoints, as PyTorch's
/// `register_buffer("mask", .., persistent=False)`.
///
/// ```
/// use devtensor::io::Checkpoint;
/// use devtensor::nn::{Linear, Module};
/// use devtensor::{Cpu, Device, Tensor};
/// struct Masked<D: Device> {
///     fc: Linear<D>,
///     mask: Tensor<D, u8>,
/// }
/// devtensor::module!(Masked { fc, mask });
/// let model = Masked { fc: Linear::<Cpu>::new(4, 4), mask: Tensor::<Cpu, u8>::ones([4, 4]).tril(0) };
/// let moved = model.to::<Cpu>(); // or Cuda<0>: the mask moves too
/// assert_eq!(moved.mask.to_vec(), model.mask.to_vec());
/// assert!(Checkpoint::try_from_model(&model)?.int_tensors().is_empty());
/// # Ok::<(), devtensor::Error>(())
/// ```
impl<D: Device, E: FloatElement> Module<D, E> for Tensor<D, u8> {
    type On<D2: Device> = Tensor<D2, u8>;

    fn try_to<D2: Device>(&self) -> Result<Tensor<D2, u8>> {
        self.try_to::<D2>()
    }

    fn visit(&self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {}

    fn visit_mut(&mut self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {}
}

/// An optional part of a model (`Linear`'s bias): visited and moved when
/// present, absent from names and checkpoints when `None`.
impl<D: Device, E: FloatElement, M: Module<D, E>> Module<D, E> for Option<M> {
    type On<D2: Device> = Option<M::On<D2>>;

    fn try_to<D2: Device>(&self) -> Result<Self::On<D2>> {
        self.as_ref().map(M::try_to).transpose()
    }

    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
        if let Some(m) = self {
            m.visit(prefix, f)
        }
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
        if let Some(m) = self {
            m.visit_mut(prefix, f)
        }
    }

    fn set_training(&mut self, training: bool) {
        if let Some(m) = self {
            m.set_training(training)
        }
    }

    fn visit_int_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor<D, i64>)) {
        if let Some(m) = self {
            m.visit_int_buffers(prefix, f)
        }
    }

    fn visit_int_buffers_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor<D, i64>)) {
        if let Some(m) = self {
            m.visit_int_buffers_mut(prefix, f)
        }
    }
}

/// A list of modules, PyTorch's `nn.ModuleList`: the transformer's stack of
/// blocks. Its parameters are named by index (`h.0.attn.in_proj_weight`,
/// `h.1...`), as PyTorch names them, so checkpoints load across; moving
/// the list moves every module.
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::{Cpu, Device, Tensor};
///
/// struct Stack<D: Device> {
///     h: Vec<Linear<D>>,
/// }
/// devtensor::module!(Stack { h });
///
/// let stack = Stack { h: (0..3).map(|_| Linear::<Cpu>::new(4, 4)).collect() };
/// let names: Vec<String> = stack.parameters().into_iter().map(|(name, _)| name).collect();
/// assert_eq!(names[..3], ["h.0.weight", "h.0.bias", "h.1.weight"]);
/// let x = stack.h.iter().fold(Tensor::<Cpu>::ones([2, 4]), |x, layer| layer.forward(&x));
/// assert_eq!(x.dims(), &[2, 4]);
/// assert_eq!(stack.to::<Cpu>().h.len(), 3);
/// ```
impl<D: Device, E: FloatElement, M: Module<D, E>> Module<D, E> for Vec<M> {
    type On<D2: Device> = Vec<M::On<D2>>;

    fn try_to<D2: Device>(&self) -> Result<Self::On<D2>> {
        moving(|| self.iter().map(M::try_to).collect())
    }

    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
        for (i, m) in self.iter().enumerate() {
            m.visit(&child_name(prefix, &i.to_string()), f)
        }
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
        for (i, m) in self.iter_mut().enumerate() {
            m.visit_mut(&child_name(prefix, &i.to_string()), f)
        }
    }

    fn set_training(&mut self, training: bool) {
        self.iter_mut().for_each(|m| m.set_training(training))
    }

    fn visit_int_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor<D, i64>)) {
        for (i, m) in self.iter().enumerate() {
            m.visit_int_buffers(&child_name(prefix, &i.to_string()), f)
        }
    }

    fn visit_int_buffers_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor<D, i64>)) {
        for (i, m) in self.iter_mut().enumerate() {
            m.visit_int_buffers_mut(&child_name(prefix, &i.to_string()), f)
        }
    }
}

/// `prefix.name`, or `name` at the top.
pub fn child_name(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") }
}

thread_local! {
    /// The parameters moved or converted so far by the model move (or
    /// dtype conversion) under way on this thread, by leaf, so that a tied
    /// parameter is moved once.
    static MOVED: RefCell<Option<HashMap<LeafId, Box<dyn Any>>>> = const { RefCell::new(None) };
}

/// Runs `move_all`, a whole module's move, so that a parameter held under
/// several names (tied weights) is moved once and stays one tensor on the
/// new device, as PyTorch's `model.to(device)` keeps it; the same for a
/// conversion to another dtype. The [`module!`](crate::module) macro,
/// [`Module::to`] and [`ToDtype::to_dtype`](super::ToDtype::to_dtype) call
/// it; nested calls share the outermost one's record.
#[doc(hidden)]
pub fn moving<T>(move_all: impl FnOnce() -> T) -> T {
    struct Forget;
    impl Drop for Forget {
        fn drop(&mut self) {
            MOVED.with(|m| *m.borrow_mut() = None);
        }
    }
    if MOVED.with(|m| m.borrow().is_some()) {
        return move_all();
    }
    MOVED.with(|m| *m.borrow_mut() = Some(HashMap::new()));
    let _forget = Forget; // also when `move_all` panics
    move_all()
}

/// A parameter copied to `D2` as a fresh leaf (the same one for every name
/// of a tied parameter, within [`moving`]).
pub(crate) fn move_parameter<D: Device, D2: Device, E: FloatElement>(p: &Tensor<D, E>) -> Result<Tensor<D2, E>> {
    new_parameter(p, |p| p.try_to::<D2>())
}

/// A parameter converted to `T` as a fresh leaf (the same one for every
/// name of a tied parameter, within [`moving`]).
pub(crate) fn convert_parameter<D: Device, E: FloatElement, T: FloatElement>(p: &Tensor<D, E>) -> Result<Tensor<D, T>> {
    new_parameter(p, |p| p.try_to_dtype::<T>())
}

/// `convert(p)` as a fresh leaf that tracks gradients if `p` does: the
/// same one for every name of a tied parameter, within [`moving`].
fn new_parameter<D: Device, E: FloatElement, D2: Device, T: FloatElement>(
    p: &Tensor<D, E>,
    convert: impl FnOnce(&Tensor<D, E>) -> Result<Tensor<D2, T>>,
) -> Result<Tensor<D2, T>> {
    let id = p.leaf_id();
    let earlier = MOVED.with(|m| {
        let memo = m.borrow();
        let moved = memo.as_ref()?.get(&id?)?;
        moved.downcast_ref::<Tensor<D2, T>>().cloned()
    });
    if let Some(moved) = earlier {
        return Ok(moved);
    }
    let mut moved = convert(&p.detach())?;
    // A frozen parameter (`Embedding::from_pretrained`) stays frozen.
    moved.set_requires_grad(p.tracks_grad());
    if let Some(id) = id {
        MOVED.with(|m| {
            if let Some(memo) = m.borrow_mut().as_mut() {
                memo.insert(id, Box::new(moved.clone()));
            }
        });
    }
    Ok(moved)
}

/// Gives a struct of modules the [`Module`] trait: `module!(Net { conv, fc })`
/// lists the fields that are modules, parameter tensors (`Tensor<D>`),
/// float buffers ([`Buffer<D>`](super::Buffer)) or `Option`s of them (all of them, in the order names and checkpoints
/// should use). The built-in layers are written with it. The struct must be generic over its device as
/// `Net<D: Device>`; its element type is `f32`, or the struct's second
/// parameter with `module!(Net<E> { .. })`, which also gives the model
/// [`ToDtype`](super::ToDtype): `net.to_dtype::<bf16>()` is a `Net<D, bf16>`.
/// Fields that are not modules
/// (sizes, flags) follow a semicolon and are cloned as they are:
/// `module!(Net { conv, fc; classes })`.
///
/// A field on another device than the model's (`bn: BatchNorm2d<Cpu>` in a
/// `Net<D>`) is one compile error that names the field: "the field `bn`
/// holds a `BatchNorm2d<Cpu>`, which is not on the model's device `D`".
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::{Cpu, Device, FloatElement, Tensor};
///
/// struct Head<D: Device, E: FloatElement> {
///     fc: Linear<D, E>,
///     classes: usize,
/// }
/// devtensor::module!(Head<E> { fc; classes });
///
/// let head = Head { fc: Linear::<Cpu, f64>::new(3, 2), classes: 2 };
/// assert_eq!(head.to::<Cpu>().classes, 2);
/// assert_eq!(head.parameters().len(), 2);
/// ```
#[macro_export]
macro_rules! module {
    ($name:ident { $($field:ident),* $(,)? $(; $($plain:ident),* $(,)?)? }) => {
        $crate::module!(@impl $name [$name<D>] [$name<D2>] [D: $crate::Device] field f32
            { $($field),* } { $($($plain),*)? } {});
    };
    ($name:ident<E> { $($field:ident),* $(,)? $(; $($plain:ident),* $(,)?)? }) => {
        $crate::module!(@impl $name [$name<D, E>] [$name<D2, E>] [D: $crate::Device, E: $crate::FloatElement]
            field_of_dtype E { $($field),* } { $($($plain),*)? } {
            impl<D: $crate::Device, E: $crate::FloatElement> $crate::nn::ToDtype<D, E> for $name<D, E> {
                type Of<T: $crate::FloatElement> = $name<D, T>;

                fn try_to_dtype<T: $crate::FloatElement>(&self) -> $crate::Result<$name<D, T>> {
                    $crate::nn::moving(|| {
                        let mut converted = $crate::nn::ConvertTo::<T>::new();
                        each_field(&mut converted, self);
                        converted.finish()?;
                        Ok($name {
                            $($field: converted.take(),)*
                            $($($plain: ::core::clone::Clone::clone(&self.$plain),)*)?
                        })
                    })
                }
            }
        });
    };
    // `$visit` is how `each_field` hands over each field: `field`, or
    // `field_of_dtype` for a model generic over its dtype, whose fields
    // must convert with it; `$extra` is more code that calls `each_field`.
    (@impl $name:ident [$($this:tt)*] [$($moved:tt)*] [$($generics:tt)*] $visit:ident $E:ty
        { $($field:ident),* } { $($plain:ident),* } { $($extra:tt)* }) => {
        // One marker type per field, named as the field, and one function
        // that reaches every field: so a field on another device is one
        // error naming it (see `nn::module_fields`).
        #[allow(non_camel_case_types, dead_code)]
        const _: () = {
            $(struct $field;)*

            #[allow(unused_mut, unused_variables)]
            fn each_field<$($generics)*, V: $crate::nn::FieldVisitor<D, $E>>(
                visitor: &mut V,
                mut model: <V::Access as $crate::nn::Access>::Ref<'_, $($this)*>,
            ) {
                $(visitor.$visit::<$field, _, _>(
                    stringify!($field),
                    <V::Access as $crate::nn::Access>::project(
                        <V::Access as $crate::nn::Access>::reborrow(&mut model),
                        |m| &m.$field,
                        |m| &mut m.$field,
                    ),
                    || (),
                );)*
            }

            impl<$($generics)*> $crate::nn::Module<D, $E> for $($this)* {
                type On<D2: $crate::Device> = $($moved)*;

                fn try_to<D2: $crate::Device>(&self) -> $crate::Result<Self::On<D2>> {
                    $crate::nn::moving(|| {
                        let mut moved = $crate::nn::MoveTo::<D2>::new();
                        each_field(&mut moved, self);
                        moved.finish()?;
                        Ok($name {
                            $($field: moved.take(),)*
                            $($plain: ::core::clone::Clone::clone(&self.$plain),)*
                        })
                    })
                }

                fn visit(
                    &self,
                    prefix: &str,
                    f: &mut dyn FnMut(&str, $crate::nn::TensorKind, &$crate::Tensor<D, $E>),
                ) {
                    each_field(&mut $crate::nn::Visit { prefix, f }, self)
                }

                fn visit_mut(
                    &mut self,
                    prefix: &str,
                    f: &mut dyn FnMut(&str, $crate::nn::TensorKind, &mut $crate::Tensor<D, $E>),
                ) {
                    each_field(&mut $crate::nn::VisitMut { prefix, f }, self)
                }

                fn set_training(&mut self, training: bool) {
                    each_field(&mut $crate::nn::SetTraining(training), self)
                }

                fn visit_int_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &$crate::Tensor<D, i64>)) {
                    each_field(&mut $crate::nn::VisitInts { prefix, f }, self)
                }

                fn visit_int_buffers_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut $crate::Tensor<D, i64>)) {
                    each_field(&mut $crate::nn::VisitIntsMut { prefix, f }, self)
                }
            }

            $($extra)*
        };
    };
}

/// Implements [`Module`] for a layer with no tensors, usable on any device.
macro_rules! stateless_module {
    ($($layer:ty),*) => {$(
        impl<D: Device, E: FloatElement> Module<D, E> for $layer {
            type On<D2: Device> = $layer;

            fn try_to<D2: Device>(&self) -> Result<Self> {
                Ok(self.clone())
            }

            fn visit(&self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {}

            fn visit_mut(&mut self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {}
        }

        impl<D: Device, E: FloatElement> $crate::nn::ToDtype<D, E> for $layer {
            type Of<T: FloatElement> = $layer;

            fn try_to_dtype<T: FloatElement>(&self) -> Result<Self> {
                Ok(self.clone())
            }
        }
    )*};
}
pub(crate) use stateless_module;
