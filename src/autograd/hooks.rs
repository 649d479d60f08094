//! Hooks on a tensor's gradient (PyTorch's `Tensor.register_hook`): a
//! function called with the gradient once it is complete, during the
//! backward walk, that may return another gradient to use instead.

use super::graph::{AnyGrad, GradHook, Node, next_id, rule, track};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;
use std::sync::{Arc, Weak};

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// Calls `hook` with this tensor's gradient whenever a backward walk
    /// (`backward`, [`grad`](super::grad)) has computed it in full,
    /// before it flows on to the ops that made this tensor (or, for a
    /// leaf, before it is stored); `Some(g)` replaces the gradient with
    /// `g`, which must have this tensor's shape (PyTorch's
    /// `register_hook`). Hooks run in order of registration, each given
    /// what the one before returned. The gradient is a tensor of this
    /// tensor's device and element type, and a hook that returns a tensor
    /// of another device or type does not compile (a hook that only looks
    /// returns `None`). The returned handle removes the hook.
    ///
    /// A hook lives as long as the tensor's graph node: a hook that owns a
    /// clone of the tensor it is registered on keeps both alive for good
    /// (there is no garbage collector to break the cycle); capture what it
    /// needs of the tensor (its shape, say) instead.
    ///
    /// Fails when this tensor tracks no gradient, as PyTorch does. A hook
    /// that returns a gradient of another shape makes the walk fail with an
    /// error naming both shapes.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, -4.0], [2]).requires_grad();
    /// let h = &x * 3.0;
    /// // Clip the gradient flowing through `h` to [-1, 1].
    /// let handle = h.register_hook(|g| Some(g.clamp(-1.0, 1.0)));
    /// let grads = (&h * &h).sum().backward(); // d/dh = 2h = [6, -24]
    /// assert_eq!(grads.get(&x).unwrap().to_vec(), [3.0, -3.0]);
    /// handle.remove();
    /// let grads = (&h * &h).sum().backward();
    /// assert_eq!(grads.get(&x).unwrap().to_vec(), [18.0, -72.0]);
    /// ```
    #[fallible]
    pub fn register_hook<H>(&self, hook: H) -> HookHandle
    where
        H: Fn(&Tensor<D, E>) -> Option<Tensor<D, E>> + Send + Sync + 'static,
    {
        self.on_gradient("register_hook", move |grad| Ok(hook(grad)))
    }

    /// [`register_hook`](Self::register_hook) for hooks of devtensor's own
    /// (a module's backward hooks): `op` names the caller in errors, and
    /// the hook may fail, which fails the backward walk.
    pub(crate) fn on_gradient<H>(&self, op: &'static str, hook: H) -> Result<HookHandle>
    where
        H: Fn(&Tensor<D, E>) -> Result<Option<Tensor<D, E>>> + Send + Sync + 'static,
    {
        let Some(node) = self.node() else {
            return Err(Error::Argument {
                op,
                device: D::name(),
                reason: "cannot register a hook on a tensor that does not track gradients".into(),
            });
        };
        let shape = self.shape().clone();
        let erased: GradHook = Arc::new(move |grad: &dyn AnyGrad| {
            let grad: &Tensor<D::Core, E> = grad.as_any().downcast_ref().expect("a hook receives its tensor's type");
            let Some(replaced) = hook(Tensor::from_core_ref(grad))? else { return Ok(None) };
            if replaced.shape() != &shape {
                return Err(Error::Shape {
                    op,
                    device: D::name(),
                    shapes: vec![shape.clone(), replaced.shape().clone()],
                    reason: "a hook must return a gradient of its tensor's shape".into(),
                });
            }
            Ok(Some(Box::new(replaced.into_core()) as Box<dyn AnyGrad>))
        });
        Ok(HookHandle::register(node, erased))
    }

    /// `self` as the result of an identity op named `op`: a node of its
    /// own, whose gradient is this use's alone, for hooks that must see the
    /// gradient through one module call and not the tensor's total (a
    /// module's backward hooks, as PyTorch's `BackwardHookFunction`).
    /// Untracked, or with gradients disabled, it is `self`.
    pub(crate) fn hook_point(&self, op: &'static str) -> Result<Tensor<D, E>> {
        let core = self.core();
        let point = track(
            op,
            &[core.node()],
            || Ok(core.clone()),
            |_| rule(|grad: &Tensor<D::Core, E>, _| Ok(vec![Some(grad.clone())])),
        )?;
        Ok(Tensor::from_core(point))
    }
}

/// What [`Tensor::register_hook`] and a module's hooks
/// ([`nn::Hooks`](crate::nn::Hooks)) return: [`remove`](Self::remove)
/// takes the hook off (PyTorch's `RemovableHandle`). Dropping the handle
/// keeps the hook, as in PyTorch.
#[must_use = "dropping the handle keeps the hook; call `remove` to take it off"]
pub struct HookHandle {
    /// Where the hook is kept: a tensor's graph node or a module's hooks.
    list: Weak<dyn HookList>,
    id: u64,
}

/// A place that keeps hooks by id, which a [`HookHandle`] removes from.
pub(crate) trait HookList: Send + Sync {
    /// Takes off the hook with `id`, if it is still there.
    fn remove(&self, id: u64);
}

impl HookList for Node {
    fn remove(&self, id: u64) {
        self.hooks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).retain(|(hook, _)| *hook != id);
    }
}

impl HookHandle {
    /// The handle of the hook `id` kept in `list`.
    pub(crate) fn new(list: Weak<dyn HookList>, id: u64) -> HookHandle {
        HookHandle { list, id }
    }

    /// Adds `hook` to `node`'s hooks, compiled once here rather than per hook.
    fn register(node: &Arc<Node>, hook: GradHook) -> HookHandle {
        let id = next_id();
        node.hooks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push((id, hook));
        let node: Arc<dyn HookList> = node.clone();
        HookHandle::new(Arc::downgrade(&node), id)
    }

    /// Takes the hook off its tensor or module; nothing happens when that
    /// is gone.
    pub fn remove(self) {
        if let Some(list) = self.list.upgrade() {
            list.remove(self.id);
        }
    }
}

impl std::fmt::Debug for HookHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HookHandle({})", self.id)
    }
}
