//! Hooks on a module's calls (PyTorch's `register_forward_pre_hook`,
//! `register_forward_hook`, `register_full_backward_pre_hook` and
//! `register_full_backward_hook`): functions that look at, or replace, what
//! goes into and comes out of a layer, in the forward and backward passes,
//! without changing the model's code. Feature extraction, activation
//! statistics and Grad-CAM are written with them.
//!
//! A module keeps its hooks in a [`ModuleHooks`] field; [`Hooks`] registers
//! them, and [`Forward::forward`] runs them around
//! [`forward_on`](Forward::forward_on).

use super::{Forward, Module, TensorKind, ToDtype};
use crate::autograd::{HookHandle, HookList, is_grad_enabled, next_id};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::tensor::shell::core_table;
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;
use std::any::{Any, TypeId};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

/// Called with a module's input before its forward; may return the input to use instead.
type ForwardPreHook<C, E> = Arc<dyn Fn(&Tensor<C, E>) -> Option<Tensor<C, E>> + Send + Sync>;
/// Called with a module's input and output after its forward; may return the output to use instead.
type ForwardHook<C, E> = Arc<dyn Fn(&Tensor<C, E>, &Tensor<C, E>) -> Option<Tensor<C, E>> + Send + Sync>;
/// Called with the gradient of a module's output; may return the one to use instead.
type BackwardPreHook<C, E> = Arc<dyn Fn(&Tensor<C, E>) -> Option<Tensor<C, E>> + Send + Sync>;
/// Called with the gradients of a module's input (`None` when it needs
/// none) and output; may return the input's gradient to use instead.
type BackwardHook<C, E> = Arc<dyn Fn(Option<&Tensor<C, E>>, &Tensor<C, E>) -> Option<Tensor<C, E>> + Send + Sync>;

/// The hooks of one module, of each kind in order of registration, on
/// the core's tensors (`C` is `Cpu` or every GPU's `AnyCuda`).
struct Kinds<C: Device, E: FloatElement> {
    forward_pre: Vec<(u64, ForwardPreHook<C, E>)>,
    forward: Vec<(u64, ForwardHook<C, E>)>,
    backward_pre: Vec<(u64, BackwardPreHook<C, E>)>,
    backward: Vec<(u64, BackwardHook<C, E>)>,
}

impl<C: Device, E: FloatElement> Kinds<C, E> {
    fn count(&self) -> usize {
        self.forward_pre.len() + self.forward.len() + self.backward_pre.len() + self.backward.len()
    }
}

// By hand: derived, these would ask `C: Clone` and `E: Clone` and `Default`.
impl<C: Device, E: FloatElement> Clone for Kinds<C, E> {
    fn clone(&self) -> Self {
        Kinds {
            forward_pre: self.forward_pre.clone(),
            forward: self.forward.clone(),
            backward_pre: self.backward_pre.clone(),
            backward: self.backward.clone(),
        }
    }
}

impl<C: Device, E: FloatElement> Default for Kinds<C, E> {
    fn default() -> Self {
        Kinds { forward_pre: Vec::new(), forward: Vec::new(), backward_pre: Vec::new(), backward: Vec::new() }
    }
}

/// Shared with the handles, which remove from it.
struct Lists<C: Device, E: FloatElement>(Mutex<Kinds<C, E>>);

impl<C: Device, E: FloatElement> HookList for Lists<C, E> {
    fn remove(&self, id: u64) {
        let mut kinds = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        kinds.forward_pre.retain(|(hook, _)| *hook != id);
        kinds.forward.retain(|(hook, _)| *hook != id);
        kinds.backward_pre.retain(|(hook, _)| *hook != id);
        kinds.backward.retain(|(hook, _)| *hook != id);
    }
}

/// The hooks a module keeps, registered through [`Hooks`]: the field a
/// module needs to be hooked. Every library layer with parameters has one;
/// a model of your own adds one as a field listed in
/// [`module!`](crate::module) (see [`Hooks`]).
///
/// Cloning a module copies its hooks (as `copy.deepcopy` does in
/// PyTorch); a hook registered or removed later changes only the module it
/// was registered on. The hooks take tensors of the module's device and
/// dtype, so moving a module that has any ([`Module::to`],
/// [`ToDtype::to_dtype`]) to another device or dtype fails, naming how
/// many: remove them, move the model, and register them on the moved one.
pub struct ModuleHooks<D: Device, E: FloatElement = f32> {
    /// Kept as hooks of the core's tensors, so that running them
    /// ([`run_core`]) is compiled once, inside devtensor: each hook is
    /// wrapped at registration to see the tensors as `D`'s.
    lists: Arc<Lists<D::Core, E>>,
    device: PhantomData<fn() -> D>,
}

impl<D: Device, E: FloatElement> ModuleHooks<D, E> {
    /// No hooks.
    pub fn new() -> Self {
        ModuleHooks { lists: (HookFns::<D::Core, E>::get().empty)(), device: PhantomData }
    }

    fn of(kinds: Kinds<D::Core, E>) -> Self {
        ModuleHooks { lists: Arc::new(Lists(Mutex::new(kinds))), device: PhantomData }
    }

    fn lock(&self) -> MutexGuard<'_, Kinds<D::Core, E>> {
        self.lists.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many hooks of all kinds are registered.
    pub fn len(&self) -> usize {
        self.lock().count()
    }

    /// Whether no hook is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a hook to the list `kind` picks, returning its handle.
    fn add<H>(&self, kind: impl FnOnce(&mut Kinds<D::Core, E>) -> &mut Vec<(u64, H)>, hook: H) -> HookHandle {
        let id = next_id();
        kind(&mut self.lock()).push((id, hook));
        let lists: Arc<dyn HookList> = self.lists.clone();
        HookHandle::new(Arc::downgrade(&lists), id)
    }

    /// These hooks for a module moved to `D2` or converted to `T`: none
    /// when there are none, the same ones when neither changes, an error
    /// naming `op` otherwise.
    fn carried<D2: Device, T: FloatElement>(&self, op: &'static str) -> Result<ModuleHooks<D2, T>> {
        let kinds = self.lock();
        if kinds.count() == 0 {
            return Ok(ModuleHooks::new());
        }
        let same = (TypeId::of::<D>(), TypeId::of::<E>()) == (TypeId::of::<D2>(), TypeId::of::<T>());
        if same && let Some(kinds) = (&*kinds as &dyn Any).downcast_ref::<Kinds<D2::Core, T>>() {
            return Ok(ModuleHooks::of(kinds.clone()));
        }
        Err(Error::Argument {
            op,
            device: D::name(),
            reason: format!(
                "the module has {} hook(s), which take tensors of {} with {} elements; remove them \
                 (their handles' `remove`), move the model, and register them on the moved one",
                kinds.count(),
                D::name(),
                E::DTYPE.name()
            ),
        })
    }

    /// `forward(x)` with these hooks around it (see [`run_core`]): the
    /// shell, which hands the core's tensors to the table's `run`.
    pub(crate) fn run(
        &self,
        x: &Tensor<D, E>,
        forward: &dyn Fn(&Tensor<D, E>) -> Result<Tensor<D, E>>,
    ) -> Result<Tensor<D, E>> {
        let core_forward = |x: &Tensor<D::Core, E>| forward(Tensor::from_core_ref(x)).map(Tensor::into_core);
        // No scope of `D` around it: the core's part runs no GPU work of its
        // own, and the forward and hooks it calls enter their own.
        (HookFns::<D::Core, E>::get().run)(&self.lists, x.core(), &core_forward).map(Tensor::from_core)
    }
}

core_table! {
    /// Running a module's hooks, compiled once per core device and dtype.
    struct HookFns<C, E: FloatElement> {
        run: fn(
            &Lists<C, E>,
            &Tensor<C, E>,
            &dyn Fn(&Tensor<C, E>) -> Result<Tensor<C, E>>,
        ) -> Result<Tensor<C, E>> = run_core::<C, E>,
        /// Empty lists, for every layer a program makes.
        empty: fn() -> Arc<Lists<C, E>> = || Arc::new(Lists(Mutex::new(Kinds::default()))),
    }
}

/// `forward(x)` with these hooks around it, as PyTorch's
/// `Module.__call__` runs them: the forward-pre hooks on the input, the
/// forward, the forward hooks on the output; with backward hooks, the
/// input and output pass through identity ops of their own, whose
/// gradients are this call's gradients of the module's input and output.
fn run_core<C: CoreDevice, E: FloatElement>(
    lists: &Lists<C, E>,
    x: &Tensor<C, E>,
    forward: &dyn Fn(&Tensor<C, E>) -> Result<Tensor<C, E>>,
) -> Result<Tensor<C, E>> {
    let hooks = {
        let kinds = lists.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if kinds.count() == 0 {
            drop(kinds);
            return forward(x);
        }
        kinds.clone()
    };
    let mut input = x.clone();
    for (_, hook) in &hooks.forward_pre {
        if let Some(replaced) = hook(&input) {
            input = replaced;
        }
    }
    let backward = !(hooks.backward.is_empty() && hooks.backward_pre.is_empty()) && is_grad_enabled();
    // This call's gradient of the output, from the output's hook to the input's.
    let grad_output: Arc<Mutex<Option<Tensor<C, E>>>> = Arc::default();
    // Only full backward hooks need the input's gradient.
    let input_hooked = backward && !hooks.backward.is_empty() && input.tracks_grad();
    if input_hooked {
        input = input.hook_point("BackwardHookFunction")?;
        let (grad_output, backward) = (grad_output.clone(), hooks.backward.clone());
        // The hook lives with this call's node; its handle is not needed.
        let _ = input.on_gradient("register_full_backward_hook", move |grad_input| {
            let taken = grad_output.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
            let Some(grad_output) = taken else { return Ok(None) };
            let mut replaced = None;
            for (_, hook) in &backward {
                if let Some(new) = hook(Some(replaced.as_ref().unwrap_or(grad_input)), &grad_output) {
                    replaced = Some(new);
                }
            }
            Ok(replaced)
        })?;
    }
    let mut output = forward(&input)?;
    for (_, hook) in &hooks.forward {
        if let Some(replaced) = hook(&input, &output) {
            output = replaced;
        }
    }
    if backward && output.tracks_grad() {
        output = output.hook_point("BackwardHookFunction")?;
        let (backward_pre, backward) = (hooks.backward_pre, hooks.backward);
        let _ = output.on_gradient("register_full_backward_pre_hook", move |grad| {
            let mut replaced: Option<Tensor<C, E>> = None;
            for (_, hook) in &backward_pre {
                if let Some(new) = hook(replaced.as_ref().unwrap_or(grad)) {
                    if new.shape() != grad.shape() {
                        return Err(Error::Shape {
                            op: "register_full_backward_pre_hook",
                            device: C::name(),
                            shapes: vec![grad.shape().clone(), new.shape().clone()],
                            reason: "a hook must return a gradient of the module output's shape".into(),
                        });
                    }
                    replaced = Some(new);
                }
            }
            let grad = replaced.as_ref().unwrap_or(grad);
            if input_hooked {
                // Detached: held until the input's gradient arrives, which
                // a walk for other inputs never brings; with its graph it
                // would keep this call's graph alive through this hook.
                *grad_output.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(grad.detach());
            } else {
                // No input needs a gradient: the hooks see `None` for it
                // now, as in PyTorch, and have nothing to replace.
                for (_, hook) in &backward {
                    if hook(None, grad).is_some() {
                        return Err(Error::Argument {
                            op: "register_full_backward_hook",
                            device: C::name(),
                            reason: "no input of this module call requires a gradient, so a full backward \
                                     hook must return `None`"
                                .into(),
                        });
                    }
                }
            }
            Ok(replaced)
        })?;
    }
    Ok(output)
}

impl<D: Device, E: FloatElement> Default for ModuleHooks<D, E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Device, E: FloatElement> Clone for ModuleHooks<D, E> {
    /// A copy of the hooks, registered and removed apart from these.
    fn clone(&self) -> Self {
        Self::of(self.lock().clone())
    }
}

impl<D: Device, E: FloatElement> std::fmt::Debug for ModuleHooks<D, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds = self.lock();
        f.debug_struct("ModuleHooks")
            .field("forward_pre", &kinds.forward_pre.len())
            .field("forward", &kinds.forward.len())
            .field("backward_pre", &kinds.backward_pre.len())
            .field("backward", &kinds.backward.len())
            .finish()
    }
}

/// A field of hooks holds no tensors: it is a module so that
/// [`module!`](crate::module) moves and converts it with the model.
impl<D: Device, E: FloatElement> Module<D, E> for ModuleHooks<D, E> {
    type On<D2: Device> = ModuleHooks<D2, E>;

    fn try_to<D2: Device>(&self) -> Result<ModuleHooks<D2, E>> {
        self.carried("Module::to")
    }

    fn visit(&self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {}

    fn visit_mut(&mut self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {}
}

impl<D: Device, E: FloatElement> ToDtype<D, E> for ModuleHooks<D, E> {
    type Of<T: FloatElement> = ModuleHooks<D, T>;

    fn try_to_dtype<T: FloatElement>(&self) -> Result<ModuleHooks<D, T>> {
        self.carried("ToDtype::to_dtype")
    }
}

/// Registers hooks on a module (PyTorch's `register_forward_pre_hook`,
/// `register_forward_hook`, `register_full_backward_pre_hook` and
/// `register_full_backward_hook`); each returns a [`HookHandle`] whose
/// `remove` takes the hook off. A hook may only look (and return `None`)
/// or return a tensor to use instead. It runs whenever the module is
/// called through [`forward`](Forward::forward) or `try_forward`, also
/// inside a [`Sequential`](super::Sequential) or a model of your own;
/// [`forward_on`](Forward::forward_on) is the module alone, without hooks
/// (PyTorch's `module.forward(x)` beside `module(x)`).
///
/// The hooks are typed: each takes and returns tensors of the module's
/// device and dtype, so a hook written for another device does not
/// compile. Unlike PyTorch's, they are not passed the module (capture what
/// you need of it), and only a module of one tensor in and one out (a
/// [`Forward`]) has them.
///
/// ```
/// use devtensor::nn::{Conv2d, Flatten, Forward, Hooks, Linear, Module, Relu, Sequential};
/// use devtensor::{Cpu, Tensor};
/// use std::sync::{Arc, Mutex};
///
/// let net = Sequential::new((Conv2d::<Cpu>::new(1, 4, 3), Relu, Flatten::new(1, -1), Linear::new(4 * 6 * 6, 3)));
/// // Grad-CAM's two ingredients: the last conv's activation and its gradient.
/// let activation = Arc::new(Mutex::new(None));
/// let gradient = Arc::new(Mutex::new(None));
/// let keep = activation.clone();
/// let on_forward = net.0.0.register_forward_hook(move |_input, output| {
///     *keep.lock().unwrap() = Some(output.detach());
///     None // keep the output as it is
/// });
/// let keep = gradient.clone();
/// let on_backward = net.0.0.register_full_backward_hook(move |_grad_input, grad_output| {
///     *keep.lock().unwrap() = Some(grad_output.clone());
///     None
/// });
/// let image = Tensor::<Cpu>::randn([1, 1, 8, 8]).requires_grad();
/// let scores = net.forward(&image);
/// scores.narrow(1, 2, 1).sum().backward(); // the score of class 2
/// assert_eq!(activation.lock().unwrap().as_ref().unwrap().dims(), &[1, 4, 6, 6]);
/// assert_eq!(gradient.lock().unwrap().as_ref().unwrap().dims(), &[1, 4, 6, 6]);
/// on_forward.remove();
/// on_backward.remove();
/// ```
///
/// A model of your own keeps hooks in a [`ModuleHooks`] field listed in
/// [`module!`](crate::module), returns it from
/// [`Forward::hooks`], and declares itself [`Hookable`]:
///
/// ```
/// use devtensor::nn::{Forward, Hookable, Hooks, Linear, ModuleHooks};
/// use devtensor::{Cpu, Device, Result, Tensor};
///
/// struct Block<D: Device> {
///     fc: Linear<D>,
///     hooks: ModuleHooks<D>,
/// }
/// devtensor::module!(Block { fc, hooks });
///
/// impl<D: Device> Forward<D> for Block<D> {
///     fn forward_on(&self, x: &Tensor<D>) -> Result<Tensor<D>> {
///         self.fc.try_forward(x)?.try_relu()
///     }
///     fn hooks(&self) -> Option<&ModuleHooks<D>> {
///         Some(&self.hooks)
///     }
/// }
/// impl<D: Device> Hookable<D> for Block<D> {}
///
/// let block = Block { fc: Linear::<Cpu>::new(2, 2), hooks: ModuleHooks::new() };
/// let _clamp = block.register_forward_hook(|_, y| Some(y.clamp(0.0, 1.0)));
/// let y = block.forward(&Tensor::<Cpu>::from_vec(vec![100.0, -100.0], [1, 2]));
/// assert!(y.to_vec().iter().all(|v| (0.0..=1.0).contains(v)));
/// ```
pub trait Hooks<D: Device, E: FloatElement = f32>: Forward<D, E> {
    /// Calls `hook` with the module's input before each forward; `Some(x)`
    /// is the input to use instead (PyTorch's `register_forward_pre_hook`).
    /// Hooks of each kind run in order of registration, each given what
    /// the one before returned.
    ///
    /// Fails when the module's [`Forward::hooks`] returns `None`, which a
    /// library layer's never does. A module that is not [`Hookable`]
    /// (an activation, which works on every device and so cannot keep
    /// hooks typed for one) does not compile.
    #[fallible]
    fn register_forward_pre_hook<H>(&self, hook: H) -> HookHandle
    where
        Self: Hookable<D, E>,
        H: Fn(&Tensor<D, E>) -> Option<Tensor<D, E>> + Send + Sync + 'static,
    {
        Ok(kept_hooks(self, "register_forward_pre_hook")?.add(
            |k| &mut k.forward_pre,
            Arc::new(move |x: &Tensor<D::Core, E>| hook(Tensor::from_core_ref(x)).map(Tensor::into_core))
                as ForwardPreHook<D::Core, E>,
        ))
    }

    /// Calls `hook` with the module's input and output after each forward;
    /// `Some(y)` is the output to use instead (PyTorch's
    /// `register_forward_hook`).
    #[fallible]
    fn register_forward_hook<H>(&self, hook: H) -> HookHandle
    where
        Self: Hookable<D, E>,
        H: Fn(&Tensor<D, E>, &Tensor<D, E>) -> Option<Tensor<D, E>> + Send + Sync + 'static,
    {
        Ok(kept_hooks(self, "register_forward_hook")?.add(
            |k| &mut k.forward,
            Arc::new(move |x: &Tensor<D::Core, E>, y: &Tensor<D::Core, E>| {
                hook(Tensor::from_core_ref(x), Tensor::from_core_ref(y)).map(Tensor::into_core)
            }) as ForwardHook<D::Core, E>,
        ))
    }

    /// Calls `hook` in the backward pass with the gradient of the module's
    /// output, before it flows into the module; `Some(g)` (of the output's
    /// shape) is the gradient to use instead (PyTorch's
    /// `register_full_backward_pre_hook`). Unlike PyTorch, it runs before
    /// a hook that [`register_hook`](Tensor::register_hook) put on the
    /// returned output tensor, which then sees the replaced gradient.
    #[fallible]
    fn register_full_backward_pre_hook<H>(&self, hook: H) -> HookHandle
    where
        Self: Hookable<D, E>,
        H: Fn(&Tensor<D, E>) -> Option<Tensor<D, E>> + Send + Sync + 'static,
    {
        Ok(kept_hooks(self, "register_full_backward_pre_hook")?.add(
            |k| &mut k.backward_pre,
            Arc::new(move |g: &Tensor<D::Core, E>| hook(Tensor::from_core_ref(g)).map(Tensor::into_core))
                as BackwardPreHook<D::Core, E>,
        ))
    }

    /// Calls `hook` in the backward pass with the gradients of the module's
    /// input and output, once the input's is computed; `Some(g)` (of the
    /// input's shape) is the input's gradient to use instead (PyTorch's
    /// `register_full_backward_hook`). The input is the one the module ran
    /// on, after the forward-pre hooks. When it needs no gradient (a batch
    /// of data into a first layer), the hook is called with `None` for it
    /// as soon as the output's gradient is known, and must return `None`.
    ///
    /// The gradients are this call's: a module called twice in one forward
    /// has its hook called twice, each time with that call's gradients.
    /// The output's gradient is given detached (under `create_graph` too);
    /// the input's keeps its graph.
    #[fallible]
    fn register_full_backward_hook<H>(&self, hook: H) -> HookHandle
    where
        Self: Hookable<D, E>,
        H: Fn(Option<&Tensor<D, E>>, &Tensor<D, E>) -> Option<Tensor<D, E>> + Send + Sync + 'static,
    {
        Ok(kept_hooks(self, "register_full_backward_hook")?.add(
            |k| &mut k.backward,
            Arc::new(move |gi: Option<&Tensor<D::Core, E>>, go: &Tensor<D::Core, E>| {
                hook(gi.map(Tensor::from_core_ref), Tensor::from_core_ref(go)).map(Tensor::into_core)
            }) as BackwardHook<D::Core, E>,
        ))
    }
}

impl<D: Device, E: FloatElement, M: Forward<D, E>> Hooks<D, E> for M {}

/// A module that keeps hooks in a [`ModuleHooks`] field, which it returns
/// from [`Forward::hooks`]: what [`Hooks`]'s methods ask of it. `Linear`,
/// the convolutions, the norm layers and `Prelu` are, and any module
/// wrapped in [`Hooked`] (the transformer layers, say); a model of your own
/// declares `impl Hookable` (see [`Hooks`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` keeps no hooks",
    label = "this module has no `ModuleHooks`",
    note = "layers without parameters (activations, pooling, dropout) and `Sequential` keep no hooks of their own: \
            wrap the module in `Hooked::new(..)` where the model declares it to give it hooks, or give a model \
            of your own a `ModuleHooks` field (see `devtensor::nn::Hooks`)"
)]
pub trait Hookable<D: Device, E: FloatElement = f32>: Forward<D, E> {}

/// `module`'s hooks, or an error naming `op` when it keeps none.
fn kept_hooks<'m, D: Device, E: FloatElement, M: Forward<D, E>>(
    module: &'m M,
    op: &'static str,
) -> Result<&'m ModuleHooks<D, E>> {
    module.hooks().ok_or_else(|| Error::Argument {
        op,
        device: D::name(),
        reason: format!(
            "`{}` is `Hookable`, but its `Forward::hooks` returns `None`: return `Some(&self.hooks)`, \
             its `ModuleHooks` field",
            std::any::type_name::<M>()
        ),
    })
}

/// Any module with hooks of its own: an activation, a pooling layer, a
/// [`Sequential`](super::Sequential) block, a model of yours without a
/// [`ModuleHooks`] field. Declare the wrapped type where the model
/// declares the module (`Hooked<Sequential<(..)>>` for torchvision's
/// `layer4`); it is transparent otherwise: its parameters keep their
/// names, it derefs to the module, and its forward runs the module's own
/// hooks inside its own.
///
/// ```
/// use devtensor::nn::{Hooked, Hooks, Linear, Module, Relu, Sequential};
/// use devtensor::{Cpu, Tensor};
/// use std::sync::{Arc, Mutex};
///
/// let net = Sequential::new((Linear::<Cpu>::new(4, 8), Hooked::new(Relu), Linear::new(8, 3)));
/// // The fraction of the ReLU's outputs that are zero, at each call.
/// let dead = Arc::new(Mutex::new(Vec::new()));
/// let seen = dead.clone();
/// let _handle = net.0.1.register_forward_hook(move |_input, output| {
///     seen.lock().unwrap().push(output.eq_scalar(0.0).to_dtype::<f32>().mean().item());
///     None
/// });
/// net.forward(&Tensor::<Cpu>::randn([16, 4]));
/// assert_eq!(dead.lock().unwrap().len(), 1);
/// assert_eq!(net.parameters()[2].0, "2.weight"); // names as without the wrapper
/// ```
pub struct Hooked<M, D: Device, E: FloatElement = f32> {
    module: M,
    hooks: ModuleHooks<D, E>,
}

impl<M, D: Device, E: FloatElement> Hooked<M, D, E> {
    /// `module`, with no hooks yet.
    pub fn new(module: M) -> Self {
        Hooked { module, hooks: ModuleHooks::new() }
    }

    /// The module, without its hooks.
    pub fn into_inner(self) -> M {
        self.module
    }

    /// The module applied to `x`, which must be on the module's device
    /// (checked at compile time), with its hooks around it; what
    /// [`Forward::forward`] does, here so that `hooked.forward(x)` never
    /// reaches the module's own `forward` through `Deref`.
    #[fallible]
    pub fn forward<DX: Device, EX: Element>(&self, x: &Tensor<DX, EX>) -> Tensor<D, E>
    where
        M: Forward<D, E>,
        D: SameDevice<DX>,
        E: SameDtype<EX>,
    {
        super::forward::call(self, same_device(x))
    }
}

impl<M, D: Device, E: FloatElement> Deref for Hooked<M, D, E> {
    type Target = M;

    fn deref(&self) -> &M {
        &self.module
    }
}

impl<M, D: Device, E: FloatElement> DerefMut for Hooked<M, D, E> {
    fn deref_mut(&mut self) -> &mut M {
        &mut self.module
    }
}

impl<M: Clone, D: Device, E: FloatElement> Clone for Hooked<M, D, E> {
    fn clone(&self) -> Self {
        Hooked { module: self.module.clone(), hooks: self.hooks.clone() }
    }
}

impl<M: std::fmt::Debug, D: Device, E: FloatElement> std::fmt::Debug for Hooked<M, D, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooked").field("module", &self.module).field("hooks", &self.hooks).finish()
    }
}

impl<M: Forward<D, E>, D: Device, E: FloatElement> Forward<D, E> for Hooked<M, D, E> {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        // The module's own hooks, if it has any, inside these.
        super::forward::call(&self.module, x)
    }

    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        Some(&self.hooks)
    }
}

impl<M: Forward<D, E>, D: Device, E: FloatElement> Hookable<D, E> for Hooked<M, D, E> {}

/// The module's tensors under the module's own names; the hooks move with
/// it as [`ModuleHooks`] do.
impl<M: Module<D, E>, D: Device, E: FloatElement> Module<D, E> for Hooked<M, D, E> {
    type On<D2: Device> = Hooked<M::On<D2>, D2, E>;

    fn try_to<D2: Device>(&self) -> Result<Self::On<D2>> {
        Ok(Hooked { module: self.module.try_to()?, hooks: self.hooks.try_to()? })
    }

    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
        self.module.visit(prefix, f)
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
        self.module.visit_mut(prefix, f)
    }

    fn set_training(&mut self, training: bool) {
        self.module.set_training(training)
    }

    fn visit_int_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor<D, i64>)) {
        self.module.visit_int_buffers(prefix, f)
    }

    fn visit_int_buffers_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor<D, i64>)) {
        self.module.visit_int_buffers_mut(prefix, f)
    }
}

impl<M: ToDtype<D, E>, D: Device, E: FloatElement> ToDtype<D, E> for Hooked<M, D, E> {
    type Of<T: FloatElement> = Hooked<M::Of<T>, D, T>;

    fn try_to_dtype<T: FloatElement>(&self) -> Result<Self::Of<T>> {
        Ok(Hooked { module: self.module.try_to_dtype()?, hooks: self.hooks.try_to_dtype()? })
    }
}
