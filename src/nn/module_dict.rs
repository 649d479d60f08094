//! [`ModuleDict`]: named sub-modules, PyTorch's `nn.ModuleDict`.

use super::module::{Module, TensorKind, child_name, moving};
use super::to_dtype::ToDtype;
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;

/// Modules by name, in the order they were inserted: PyTorch's
/// `nn.ModuleDict`. Parameters are named `key.<the module's names>`
/// (`heads.digits.weight`), as PyTorch names them, so checkpoints load
/// across; moving, converting or switching the dictionary to eval mode does
/// the same to every module in it.
///
/// The modules have one type `M`. For modules of several kinds, as a
/// PyTorch `ModuleDict` may hold, give each its own field, or hold an
/// `Option` of each kind in a struct of yours with [`module!`](crate::module).
///
/// ```
/// use devtensor::nn::{Linear, Module, ModuleDict};
/// use devtensor::{Cpu, Device, Tensor};
///
/// struct MultiTask<D: Device> {
///     body: Linear<D>,
///     heads: ModuleDict<Linear<D>>,
/// }
/// devtensor::module!(MultiTask { body, heads });
///
/// let mut heads = ModuleDict::new();
/// heads.insert("digits", Linear::<Cpu>::new(8, 10));
/// heads.insert("parity", Linear::<Cpu>::new(8, 2));
/// let model = MultiTask { body: Linear::new(4, 8), heads };
/// let names: Vec<String> = model.parameters().into_iter().map(|(name, _)| name).collect();
/// assert_eq!(names[2..4], ["heads.digits.weight", "heads.digits.bias"]);
/// let features = model.body.forward(&Tensor::<Cpu>::ones([3, 4]));
/// assert_eq!(model.heads["parity"].forward(&features).dims(), &[3, 2]);
/// assert_eq!(model.heads.keys().collect::<Vec<_>>(), ["digits", "parity"]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleDict<M> {
    entries: Vec<(String, M)>,
}

impl<M> Default for ModuleDict<M> {
    fn default() -> Self {
        ModuleDict { entries: Vec::new() }
    }
}

impl<M> ModuleDict<M> {
    /// An empty dictionary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts `module` under `key`, PyTorch's `dict[key] = module`: a new key
    /// goes last, an existing one keeps its place and gives back the module
    /// it held. Fails, as PyTorch does, when `key` is empty or holds a `.`
    /// (which would make its parameters' names ambiguous). PyTorch also
    /// refuses the names of its `Module` attributes (`"training"`,
    /// `"forward"`); a Rust dictionary has no attributes to clash with, so
    /// those are accepted.
    #[fallible]
    pub fn insert(&mut self, key: impl Into<String>, module: M) -> Option<M> {
        let key = key.into();
        if key.is_empty() || key.contains('.') {
            return Err(Error::Argument {
                op: "ModuleDict::insert",
                device: "any device".into(),
                reason: format!("a module's name must be non-empty and hold no \".\", got {key:?}"),
            });
        }
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some((_, old)) => Ok(Some(std::mem::replace(old, module))),
            None => {
                self.entries.push((key, module));
                Ok(None)
            }
        }
    }

    /// The module under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&M> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, m)| m)
    }

    /// The module under `key`, writable, if any.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut M> {
        self.entries.iter_mut().find(|(k, _)| k == key).map(|(_, m)| m)
    }

    /// Takes the module under `key` out, PyTorch's `pop`; the others keep
    /// their order.
    pub fn remove(&mut self, key: &str) -> Option<M> {
        let at = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(at).1)
    }

    /// Whether a module is under `key` (`key in dict`).
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The number of modules.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The names, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// The modules, in order.
    pub fn values(&self) -> impl Iterator<Item = &M> {
        self.entries.iter().map(|(_, m)| m)
    }

    /// The names and modules, in order (PyTorch's `items()`).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &M)> {
        self.entries.iter().map(|(k, m)| (k.as_str(), m))
    }

    /// The modules, writable, in order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut M> {
        self.entries.iter_mut().map(|(_, m)| m)
    }

    /// The names and modules, the modules writable, in order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&str, &mut M)> {
        self.entries.iter_mut().map(|(k, m)| (k.as_str(), m))
    }

    /// A dictionary of `pairs`, in their order, as [`insert`](Self::insert)
    /// puts each. Fails on a name `insert` refuses.
    #[fallible]
    pub fn from_pairs<K: Into<String>>(pairs: impl IntoIterator<Item = (K, M)>) -> Self {
        let mut dict = ModuleDict::new();
        for (key, module) in pairs {
            dict.try_insert(key, module)?;
        }
        Ok(dict)
    }
}

/// `dict["key"]`; panics, naming the key and the keys there are, where it
/// is absent (use [`get`](ModuleDict::get) to ask).
impl<M> std::ops::Index<&str> for ModuleDict<M> {
    type Output = M;

    #[track_caller]
    fn index(&self, key: &str) -> &M {
        self.get(key).unwrap_or_else(|| {
            let keys: Vec<&str> = self.keys().collect();
            panic!("ModuleDict has no module {key:?} (its keys: {keys:?})")
        })
    }
}

/// A dictionary from `(name, module)` pairs, in their order. Panics on a
/// name [`insert`](ModuleDict::insert) refuses
/// ([`try_from_pairs`](ModuleDict::try_from_pairs) returns the error).
impl<K: Into<String>, M> FromIterator<(K, M)> for ModuleDict<M> {
    #[track_caller]
    fn from_iter<I: IntoIterator<Item = (K, M)>>(pairs: I) -> Self {
        ModuleDict::from_pairs(pairs)
    }
}

impl<D: Device, E: FloatElement, M: Module<D, E>> Module<D, E> for ModuleDict<M> {
    type On<D2: Device> = ModuleDict<M::On<D2>>;

    fn try_to<D2: Device>(&self) -> Result<Self::On<D2>> {
        let moved: Result<Vec<_>> = moving(|| self.entries.iter().map(|(k, m)| Ok((k.clone(), m.try_to()?))).collect());
        Ok(ModuleDict { entries: moved? })
    }

    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
        for (key, m) in &self.entries {
            m.visit(&child_name(prefix, key), f)
        }
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
        for (key, m) in &mut self.entries {
            m.visit_mut(&child_name(prefix, key), f)
        }
    }

    fn set_training(&mut self, training: bool) {
        self.entries.iter_mut().for_each(|(_, m)| m.set_training(training))
    }

    fn visit_int_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor<D, i64>)) {
        for (key, m) in &self.entries {
            m.visit_int_buffers(&child_name(prefix, key), f)
        }
    }

    fn visit_int_buffers_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor<D, i64>)) {
        for (key, m) in &mut self.entries {
            m.visit_int_buffers_mut(&child_name(prefix, key), f)
        }
    }
}

impl<D: Device, E: FloatElement, M: ToDtype<D, E>> ToDtype<D, E> for ModuleDict<M> {
    type Of<T: FloatElement> = ModuleDict<M::Of<T>>;

    fn try_to_dtype<T: FloatElement>(&self) -> Result<Self::Of<T>> {
        let converted: Result<Vec<_>> =
            moving(|| self.entries.iter().map(|(k, m)| Ok((k.clone(), m.try_to_dtype()?))).collect());
        Ok(ModuleDict { entries: converted? })
    }
}
