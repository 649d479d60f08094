//! What [`module!`](crate::module) expands to. Every field of a model is
//! reached through one generated function, `each_field`, which the
//! model's `try_to`, `visit`, `visit_mut`, `set_training`, integer-buffer
//! visits and (for a model generic over its dtype) `to_dtype` all call
//! with a visitor. So the question "is this field a module on the model's
//! device?" is asked once per field, and a field on another
//! device (`bn: BatchNorm2d<Cpu>` in a `Net<D>`) is one error that names the
//! field, not one error per generated method inside the macro.
//!
//! Nothing here is meant to be used by hand.

use super::{Module, TensorKind, ToDtype};
use crate::element::FloatElement;
use crate::error::Result;
use crate::tensor::Device;
use crate::tensor::Tensor;
use std::any::Any;
use std::collections::VecDeque;

/// The field named `Self` (a marker type `module!` makes for each field)
/// holds an `F`: true when `F` is a module on `D` (`Site` is ignored, see
/// [`FieldVisitor::field`]). Its methods are the module's, so that the
/// generated code needs no other bound on `F`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "the field `{Self}` holds a `{F}`, which is not on the model's device `{D}`",
    label = "this field is not on `{D}`",
    note = "a model generic over its device keeps every layer on that device: declare the field with `{D}` \
            as its device (`Linear<{D}>`, not `Linear<Cpu>`)"
)]
pub trait Field<D: Device, E: FloatElement, F, Site> {
    /// `Module::try_to`, the result boxed.
    fn move_to<D2: Device>(field: &F) -> Result<Box<dyn Any>>;
    /// `Module::visit`.
    fn visit(field: &F, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>));
    /// `Module::visit_mut`.
    fn visit_mut(field: &mut F, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>));
    /// `Module::set_training`.
    fn set_training(field: &mut F, training: bool);
    /// `Module::visit_int_buffers`.
    fn visit_int_buffers(field: &F, prefix: &str, f: &mut dyn FnMut(&str, &Tensor<D, i64>));
    /// `Module::visit_int_buffers_mut`.
    fn visit_int_buffers_mut(field: &mut F, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor<D, i64>));
}

#[diagnostic::do_not_recommend]
impl<D: Device, E: FloatElement, Name, F: Module<D, E>, Site> Field<D, E, F, Site> for Name {
    fn move_to<D2: Device>(field: &F) -> Result<Box<dyn Any>> {
        Ok(Box::new(field.try_to::<D2>()?))
    }

    fn visit(field: &F, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
        field.visit(prefix, f)
    }

    fn visit_mut(field: &mut F, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
        field.visit_mut(prefix, f)
    }

    fn set_training(field: &mut F, training: bool) {
        field.set_training(training)
    }

    fn visit_int_buffers(field: &F, prefix: &str, f: &mut dyn FnMut(&str, &Tensor<D, i64>)) {
        field.visit_int_buffers(prefix, f)
    }

    fn visit_int_buffers_mut(field: &mut F, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor<D, i64>)) {
        field.visit_int_buffers_mut(prefix, f)
    }
}

/// The field named `Self` of a model generic over its dtype
/// (`module!(Net<E> { .. })`) holds an `F`: true when `F` is a module on
/// `D` of dtype `E` that converts to other dtypes with the model. It asks
/// the device question of [`Field`] too, so that a field that fails both
/// is still one error.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "the field `{Self}` holds a `{F}`, which is not a module on the model's device `{D}` with the \
               model's dtype `{E}`",
    label = "this field is not on `{D}` with dtype `{E}`",
    note = "a model generic over its device and dtype keeps every layer on both: declare the field with `{D}` \
            and `{E}` (`Linear<{D}, {E}>`, not `Linear<Cpu>` or `Linear<{D}>`)",
    note = "a layer written by hand, not with `module!`, implements `devtensor::nn::ToDtype` beside `Module`, \
            so that the model converts with `.to_dtype::<..>()`"
)]
pub trait FieldOfDtype<D: Device, E: FloatElement, F, Site>: Field<D, E, F, Site> {
    /// `ToDtype::try_to_dtype`, the result boxed.
    fn to_dtype<T: FloatElement>(field: &F) -> Result<Box<dyn Any>>;
}

#[diagnostic::do_not_recommend]
impl<D: Device, E: FloatElement, Name, F: ToDtype<D, E>, Site> FieldOfDtype<D, E, F, Site> for Name {
    fn to_dtype<T: FloatElement>(field: &F) -> Result<Box<dyn Any>> {
        Ok(Box::new(field.try_to_dtype::<T>()?))
    }
}

/// Shared (`&`) or exclusive (`&mut`) access to the model, so that one
/// generated function serves the visits of both kinds.
#[doc(hidden)]
pub trait Access {
    /// `&'a T` or `&'a mut T`.
    type Ref<'a, T: 'a>;
    /// A shorter borrow of `r`, leaving `r` usable afterwards.
    fn reborrow<'a, 'b, T>(r: &'b mut Self::Ref<'a, T>) -> Self::Ref<'b, T>;
    /// One field of the model, through the projection that fits.
    fn project<'a, S: 'a, T: 'a>(
        r: Self::Ref<'a, S>,
        shared: fn(&S) -> &T,
        exclusive: fn(&mut S) -> &mut T,
    ) -> Self::Ref<'a, T>;
}

/// `&` access.
#[doc(hidden)]
pub struct Shared;

impl Access for Shared {
    type Ref<'a, T: 'a> = &'a T;

    fn reborrow<'b, T>(r: &'b mut &T) -> &'b T {
        r
    }

    fn project<'a, S: 'a, T: 'a>(r: &'a S, shared: fn(&S) -> &T, _: fn(&mut S) -> &mut T) -> &'a T {
        shared(r)
    }
}

/// `&mut` access.
#[doc(hidden)]
pub struct Exclusive;

impl Access for Exclusive {
    type Ref<'a, T: 'a> = &'a mut T;

    fn reborrow<'b, T>(r: &'b mut &mut T) -> &'b mut T {
        r
    }

    fn project<'a, S: 'a, T: 'a>(r: &'a mut S, _: fn(&S) -> &T, exclusive: fn(&mut S) -> &mut T) -> &'a mut T {
        exclusive(r)
    }
}

/// What the generated `each_field` hands every field to.
#[doc(hidden)]
pub trait FieldVisitor<D: Device, E: FloatElement> {
    /// How the visitor reaches the fields.
    type Access: Access;
    /// The field `name`, a module on `D` as `Name: Field` proves.
    ///
    /// `Site` is the type of a closure made where the field is visited:
    /// a type no one can write keeps rustc from proposing a `where` clause
    /// inside the macro when the field is on another device.
    fn field<Name: Field<D, E, F, Site>, F, Site>(
        &mut self,
        name: &'static str,
        field: <Self::Access as Access>::Ref<'_, F>,
        site: Site,
    );

    /// The field `name` of a model generic over its dtype, which converts
    /// with the model as `Name: FieldOfDtype` proves. Visitors other than
    /// the conversion treat it as any field.
    fn field_of_dtype<Name: FieldOfDtype<D, E, F, Site>, F, Site>(
        &mut self,
        name: &'static str,
        field: <Self::Access as Access>::Ref<'_, F>,
        site: Site,
    ) {
        self.field::<Name, F, Site>(name, field, site)
    }
}

/// The fields of a model rebuilt one by one, in order, each boxed as the
/// type the new model declares for it; the first error stops the rest.
/// `Change` says what changes: [`OnDevice`] or [`OfDtype`].
#[doc(hidden)]
pub struct Rebuild<Change> {
    parts: VecDeque<Box<dyn Any>>,
    error: Option<crate::Error>,
    change: std::marker::PhantomData<Change>,
}

/// A model's fields moved to device `D2`.
#[doc(hidden)]
pub struct OnDevice<D2>(std::marker::PhantomData<D2>);

/// A model's fields converted to dtype `T`.
#[doc(hidden)]
pub struct OfDtype<T>(std::marker::PhantomData<T>);

/// Each field moved to `D2` (`Module::try_to`).
#[doc(hidden)]
pub type MoveTo<D2> = Rebuild<OnDevice<D2>>;

/// Each field converted to `T` (`ToDtype::try_to_dtype`).
#[doc(hidden)]
pub type ConvertTo<T> = Rebuild<OfDtype<T>>;

impl<Change> Rebuild<Change> {
    /// Nothing rebuilt yet.
    pub fn new() -> Self {
        Rebuild { parts: VecDeque::new(), error: None, change: std::marker::PhantomData }
    }

    /// The error of the first field that failed, if one did.
    pub fn finish(&mut self) -> Result<()> {
        self.error.take().map_or(Ok(()), Err)
    }

    /// The next field rebuilt, as the type the new model declares for it
    /// (which is the field's `Module::On<D2>` or `ToDtype::Of<T>`).
    pub fn take<T: 'static>(&mut self) -> T {
        let next = self.parts.pop_front().expect("`module!` rebuilds every field before it takes them");
        *next.downcast().expect("a field's `Module::On<D2>` or `ToDtype::Of<T>` is the type its new model declares")
    }

    fn push(&mut self, part: impl FnOnce() -> Result<Box<dyn Any>>) {
        if self.error.is_none() {
            match part() {
                Ok(part) => self.parts.push_back(part),
                Err(e) => self.error = Some(e),
            }
        }
    }
}

impl<Change> Default for Rebuild<Change> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Device, E: FloatElement, D2: Device> FieldVisitor<D, E> for MoveTo<D2> {
    type Access = Shared;

    fn field<Name: Field<D, E, F, Site>, F, Site>(&mut self, _: &'static str, field: &F, _: Site) {
        self.push(|| <Name as Field<D, E, F, Site>>::move_to::<D2>(field))
    }
}

impl<D: Device, E: FloatElement, T: FloatElement> FieldVisitor<D, E> for ConvertTo<T> {
    type Access = Shared;

    fn field<Name: Field<D, E, F, Site>, F, Site>(&mut self, _: &'static str, _: &F, _: Site) {
        unreachable!("`module!` converts only models generic over their dtype, whose fields it visits as such")
    }

    fn field_of_dtype<Name: FieldOfDtype<D, E, F, Site>, F, Site>(&mut self, _: &'static str, field: &F, _: Site) {
        self.push(|| <Name as FieldOfDtype<D, E, F, Site>>::to_dtype::<T>(field))
    }
}

/// `visit` over the fields, each under its dotted name.
#[doc(hidden)]
pub struct Visit<'p, 'f, D: Device, E: FloatElement> {
    /// The model's own prefix.
    pub prefix: &'p str,
    /// The caller's closure.
    pub f: &'f mut dyn FnMut(&str, TensorKind, &Tensor<D, E>),
}

impl<D: Device, E: FloatElement> FieldVisitor<D, E> for Visit<'_, '_, D, E> {
    type Access = Shared;

    fn field<Name: Field<D, E, F, Site>, F, Site>(&mut self, name: &'static str, field: &F, _: Site) {
        <Name as Field<D, E, F, Site>>::visit(field, &super::child_name(self.prefix, name), self.f)
    }
}

/// `visit_mut` over the fields.
#[doc(hidden)]
pub struct VisitMut<'p, 'f, D: Device, E: FloatElement> {
    /// The model's own prefix.
    pub prefix: &'p str,
    /// The caller's closure.
    pub f: &'f mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>),
}

impl<D: Device, E: FloatElement> FieldVisitor<D, E> for VisitMut<'_, '_, D, E> {
    type Access = Exclusive;

    fn field<Name: Field<D, E, F, Site>, F, Site>(&mut self, name: &'static str, field: &mut F, _: Site) {
        <Name as Field<D, E, F, Site>>::visit_mut(field, &super::child_name(self.prefix, name), self.f)
    }
}

/// `set_training` on every field.
#[doc(hidden)]
pub struct SetTraining(pub bool);

impl<D: Device, E: FloatElement> FieldVisitor<D, E> for SetTraining {
    type Access = Exclusive;

    fn field<Name: Field<D, E, F, Site>, F, Site>(&mut self, _: &'static str, field: &mut F, _: Site) {
        <Name as Field<D, E, F, Site>>::set_training(field, self.0)
    }
}

/// `visit_int_buffers` over the fields.
#[doc(hidden)]
pub struct VisitInts<'p, 'f, D: Device> {
    /// The model's own prefix.
    pub prefix: &'p str,
    /// The caller's closure.
    pub f: &'f mut dyn FnMut(&str, &Tensor<D, i64>),
}

impl<D: Device, E: FloatElement> FieldVisitor<D, E> for VisitInts<'_, '_, D> {
    type Access = Shared;

    fn field<Name: Field<D, E, F, Site>, F, Site>(&mut self, name: &'static str, field: &F, _: Site) {
        <Name as Field<D, E, F, Site>>::visit_int_buffers(field, &super::child_name(self.prefix, name), self.f)
    }
}

/// `visit_int_buffers_mut` over the fields.
#[doc(hidden)]
pub struct VisitIntsMut<'p, 'f, D: Device> {
    /// The model's own prefix.
    pub prefix: &'p str,
    /// The caller's closure.
    pub f: &'f mut dyn FnMut(&str, &mut Tensor<D, i64>),
}

impl<D: Device, E: FloatElement> FieldVisitor<D, E> for VisitIntsMut<'_, '_, D> {
    type Access = Exclusive;

    fn field<Name: Field<D, E, F, Site>, F, Site>(&mut self, name: &'static str, field: &mut F, _: Site) {
        <Name as Field<D, E, F, Site>>::visit_int_buffers_mut(field, &super::child_name(self.prefix, name), self.f)
    }
}
