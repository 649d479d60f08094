//! Marking leaves, and the backward walk that fills a [`Gradients`] store.

use super::graph::{AnyGrad, Node, no_grad};
use crate::element::{Element, FloatElement};
use crate::error::{Error, Result};
use crate::tensor::shell::{core_call, core_table};
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

impl<D: Device, E: Element> Tensor<D, E> {
    /// Whether this tensor is part of a recorded graph: a leaf marked with
    /// [`requires_grad`](Self::requires_grad), or computed from one while
    /// gradients were enabled (PyTorch's `x.requires_grad`).
    pub fn tracks_grad(&self) -> bool {
        self.node().is_some()
    }

    /// Whether this tensor is a leaf of the graph: marked with
    /// [`requires_grad`](Self::requires_grad) rather than computed from a
    /// tracked tensor. Untracked tensors count as leaves, as in PyTorch.
    pub fn is_leaf(&self) -> bool {
        self.node().is_none_or(|n| n.is_leaf())
    }

    /// The name of the operation that computed this tensor, when it was
    /// recorded (PyTorch's `grad_fn`); `None` for leaves and untracked tensors.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let w = Tensor::<Cpu>::ones([2]).requires_grad();
    /// assert_eq!((&w * 3.0).grad_fn(), Some("mul_scalar"));
    /// assert_eq!(w.grad_fn(), None);
    /// ```
    pub fn grad_fn(&self) -> Option<&'static str> {
        Some(self.node()?.op.as_ref()?.name)
    }

    /// The same data, cut out of the graph: operations on the result record
    /// nothing, and no gradient flows back through it (PyTorch's `detach()`).
    /// Shares storage; copies nothing.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let w = Tensor::<Cpu>::ones([2]).requires_grad();
    /// let y = (&w * 3.0).detach();
    /// assert!(!y.tracks_grad());
    /// ```
    pub fn detach(&self) -> Self {
        let mut t = self.clone();
        t.set_node(None);
        t
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// This tensor as a leaf whose gradient [`backward`](Self::backward)
    /// computes: a parameter, or an input to differentiate by (PyTorch's
    /// `requires_grad_()`). A tensor that already tracks is returned as it is.
    /// Only float tensors can track gradients.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0], [3]).requires_grad();
    /// let y = (&x * &x).sum(); // y = sum(x^2)
    /// let grads = y.backward();
    /// assert_eq!(grads.get(&x).unwrap().to_vec(), vec![2.0, 4.0, 6.0]);
    /// ```
    pub fn requires_grad(mut self) -> Self {
        self.set_requires_grad(true);
        self
    }

    /// Marks this tensor as a leaf (`true`, see
    /// [`requires_grad`](Self::requires_grad)) or cuts it out of the graph
    /// (`false`, see [`detach`](Self::detach)). PyTorch refuses `false` on a
    /// computed tensor; here it detaches.
    pub fn set_requires_grad(&mut self, requires_grad: bool) {
        match (requires_grad, self.tracks_grad()) {
            (true, false) => self.set_node(Some(Node::leaf())),
            (false, true) => self.set_node(None),
            _ => {}
        }
    }

    /// The gradients of this one-element tensor (a loss) with respect to
    /// every leaf it was computed from, like PyTorch's `loss.backward()`.
    ///
    /// The graph is walked once, in reverse order of recording; gradients of
    /// tensors used several times are summed; each gradient lives on its
    /// leaf's device, also when the graph crossed devices with
    /// [`to`](Self::to). The graph is kept, so `backward` may run again.
    ///
    /// Fails when this tensor tracks nothing (computed under
    /// [`no_grad`], or from tensors that do not require
    /// gradients), when it has more than one element (use
    /// [`backward_with`](Self::backward_with)), or when a gradient
    /// rule fails on the device.
    ///
    /// ```
    /// use devtensor::{Cpu, Error, Tensor, no_grad};
    /// let w = Tensor::<Cpu>::ones([2]).requires_grad();
    /// let err = no_grad(|| (&w * 2.0).sum()).try_backward().unwrap_err();
    /// assert!(matches!(err, Error::Argument { op: "backward", .. }));
    /// ```
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let w = Tensor::<Cpu, f64>::from_vec(vec![1.0, -2.0], [2]).requires_grad();
    /// let b = Tensor::<Cpu, f64>::scalar(0.5).requires_grad();
    /// let loss = (&w * 3.0 + &b).square().mean();
    /// let grads = loss.backward();
    /// // d/dw mean((3w + b)^2) = 3 (3w + b), d/db = sum(3w + b)
    /// assert_eq!(grads.get(&w).unwrap().to_vec(), vec![10.5, -16.5]);
    /// assert_eq!(grads.get(&b).unwrap().item(), -2.0);
    /// ```
    #[fallible]
    pub fn backward(&self) -> Gradients {
        core_call!(D, Fns<E>.backward(self.core(), None, None))
    }

    /// Like [`backward`](Self::backward), calling `ready` with each
    /// leaf as soon as its gradient is final, while the walk goes on (the
    /// gradient is in the store `ready` gets). This is how data-parallel
    /// training starts reducing a bucket of gradients while backward is
    /// still running (PyTorch's `register_post_accumulate_grad_hook`). An
    /// error from `ready` stops the walk and is returned.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let first = Tensor::<Cpu>::ones([2]).requires_grad();
    /// let second = Tensor::<Cpu>::ones([2]).requires_grad();
    /// let loss = ((&first * 2.0).exp() * &second).sum();
    /// let mut order = Vec::new();
    /// loss.try_backward_with_hook(&mut |leaf, grads| {
    ///     assert!(grads.get_by_id(leaf).is_some());
    ///     order.push(leaf);
    ///     Ok(())
    /// })?;
    /// // Leaves are final in reverse order of creation.
    /// assert_eq!(order, [second.leaf_id().unwrap(), first.leaf_id().unwrap()]);
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    pub fn try_backward_with_hook(&self, ready: &mut dyn FnMut(LeafId, &Gradients) -> Result<()>) -> Result<Gradients> {
        core_call!(D, Fns<E>.backward(self.core(), None, Some(ready)))
    }

    /// The identity of this tensor as a leaf of the graph, `None` when it
    /// is not a leaf that tracks gradients: what [`Gradients`] is keyed by,
    /// and what [`try_backward_with_hook`](Self::try_backward_with_hook)
    /// reports.
    pub fn leaf_id(&self) -> Option<LeafId> {
        let node = self.node()?;
        node.op.is_none().then_some(LeafId(node.id))
    }

    /// The gradients of every leaf given `grad`, the gradient of some scalar
    /// with respect to this tensor (PyTorch's `y.backward(gradient=grad)`).
    /// Fails when `grad`'s shape differs from this tensor's, and as
    /// [`backward`](Self::backward) does otherwise.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2]).requires_grad();
    /// let y = &x * 5.0;
    /// let grads = y.backward_with(&Tensor::from_vec(vec![1.0, 0.1], [2]));
    /// assert_eq!(grads.get(&x).unwrap().to_vec(), vec![5.0, 0.5]);
    /// ```
    #[fallible]
    pub fn backward_with(&self, grad: &Self) -> Gradients {
        core_call!(D, Fns<E>.backward(self.core(), Some(grad.core()), None))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    /// The checks and the walk behind every `backward`: seeded with `grad`,
    /// or with ones for a one-element tensor.
    fn backward_from(
        &self,
        grad: Option<&Self>,
        ready: Option<&mut dyn FnMut(LeafId, &Gradients) -> Result<()>>,
    ) -> Result<Gradients> {
        if grad.is_none() && self.elem_count() != 1 {
            return Err(Error::Shape {
                op: "backward",
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: "a gradient can be created implicitly only for a one-element tensor; \
                         pass the result's gradient to `backward_with`"
                    .into(),
            });
        }
        let Some(root) = self.node() else {
            return Err(Error::Argument {
                op: "backward",
                device: D::name(),
                reason: "the tensor tracks no gradient: no operand of the operations that made it \
                         was marked with `requires_grad`, or it was computed under `no_grad`"
                    .into(),
            });
        };
        let seed = match grad {
            Some(grad) if grad.shape() != self.shape() => {
                return Err(Error::Shape {
                    op: "backward",
                    device: D::name(),
                    shapes: vec![self.shape().clone(), grad.shape().clone()],
                    reason: "the gradient must have the tensor's shape".into(),
                });
            }
            Some(grad) => grad.detach(),
            None => self.try_ones_like()?,
        };
        no_grad(|| walk(root, Box::new(seed), ready))
    }
}

core_table! {
    /// The core's backward walk.
    pub(crate) struct Fns<C, F: FloatElement> {
        backward: for<'a> fn(
            &Tensor<C, F>,
            Option<&Tensor<C, F>>,
            Option<&'a mut dyn FnMut(LeafId, &Gradients) -> Result<()>>,
        ) -> Result<Gradients> = Tensor::backward_from,
    }
}

/// Walks the graph below `root` in reverse order of recording, which is a
/// reverse topological order (see `graph::NEXT_ID`), so each node's gradient
/// is complete before its rule runs. A non-leaf gradient is dropped once
/// its rule has run.
fn walk(
    root: &Arc<Node>,
    seed: Box<dyn AnyGrad>,
    mut ready: Option<&mut dyn FnMut(LeafId, &Gradients) -> Result<()>>,
) -> Result<Gradients> {
    let mut nodes: Vec<&Arc<Node>> = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if !seen.insert(node.id) {
            continue;
        }
        nodes.push(node);
        if let Some(op) = &node.op {
            stack.extend(op.inputs.iter().flatten());
        }
    }
    nodes.sort_unstable_by_key(|n| std::cmp::Reverse(n.id));

    let mut pending: HashMap<u64, Box<dyn AnyGrad>> = HashMap::from([(root.id, seed)]);
    let mut gradients = Gradients::new();
    for node in nodes {
        let Some(grad) = pending.remove(&node.id) else { continue };
        let Some(op) = &node.op else {
            // Every node that uses a leaf was recorded after it, so has run.
            gradients.leaves.insert(node.id, grad);
            if let Some(ready) = ready.as_mut() {
                ready(LeafId(node.id), &gradients)?;
            }
            continue;
        };
        let needs: Vec<bool> = op.inputs.iter().map(Option::is_some).collect();
        let grads = op.rule.backward(&*grad, &needs)?;
        for (input, g) in op.inputs.iter().zip(grads) {
            let (Some(input), Some(g)) = (input, g) else { continue };
            let sum = match pending.remove(&input.id) {
                Some(prev) => prev.add(&*g)?,
                None => g,
            };
            pending.insert(input.id, sum);
        }
    }
    Ok(gradients)
}

/// A leaf of the graph, as [`Gradients`] knows it; see [`Tensor::leaf_id`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeafId(u64);

/// The gradients computed by [`Tensor::backward`], one per leaf that the
/// result depends on (candle's `GradStore`). Look one up with the leaf
/// itself; it comes back with the leaf's device and element type.
///
/// ```
/// use devtensor::{Cpu, Tensor};
/// let a = Tensor::<Cpu>::from_vec(vec![2.0], [1]).requires_grad();
/// let b = Tensor::<Cpu>::from_vec(vec![3.0], [1]).requires_grad();
/// let unused = Tensor::<Cpu>::zeros([1]).requires_grad();
/// let grads = (&a * &b).sum().backward();
/// assert_eq!(grads.get(&a).unwrap().to_vec(), vec![3.0]);
/// assert_eq!(grads.get(&b).unwrap().to_vec(), vec![2.0]);
/// assert!(grads.get(&unused).is_none());
/// assert_eq!(grads.len(), 2);
/// ```
pub struct Gradients {
    leaves: HashMap<u64, Box<dyn AnyGrad>>,
}

impl Gradients {
    /// An empty store, to be filled with [`insert`](Self::insert) (after
    /// gradients were reduced across devices, say).
    pub fn new() -> Self {
        Gradients { leaves: HashMap::new() }
    }

    /// The gradient of `leaf`, or `None` when the result did not depend on
    /// it or `leaf` is not a leaf (PyTorch keeps only leaves' gradients too).
    pub fn get<D: Device, E: FloatElement>(&self, leaf: &Tensor<D, E>) -> Option<&Tensor<D, E>> {
        self.get_by_id_as(leaf.leaf_id()?)
    }

    /// The gradient of the leaf `id` as a `Tensor<D, E>`, or `None` when
    /// there is none or it is not one of `D` and `E` (a gradient on another
    /// GPU, say).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    ///
    /// let w = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2]).requires_grad();
    /// let grads = (&w * &w).sum().backward();
    /// let id = w.leaf_id().unwrap();
    /// assert_eq!(grads.get_by_id_as::<Cpu, f32>(id).unwrap().to_vec(), [2.0, 4.0]);
    /// assert!(grads.get_by_id_as::<Cpu, f64>(id).is_none());
    /// ```
    pub fn get_by_id_as<D: Device, E: FloatElement>(&self, id: LeafId) -> Option<&Tensor<D, E>> {
        let grad: &Tensor<D::Core, E> = self.get_by_id(id)?.downcast_ref()?;
        Tensor::<D, E>::fits(grad).then(|| Tensor::from_core_ref(grad))
    }

    /// The gradient of the leaf `id`, as `Any`: what the store holds, which
    /// is a `Tensor<Cpu, E>` for a CPU leaf and a tensor of the GPUs' shared
    /// core device for a GPU leaf, so [`get_by_id_as`](Self::get_by_id_as)
    /// is the way to the typed tensor. Enough to ask whether there is one.
    pub fn get_by_id(&self, id: LeafId) -> Option<&dyn std::any::Any> {
        Some(self.leaves.get(&id.0)?.as_any())
    }

    /// Sets the gradient of `leaf` to `grad`, replacing any. Fails when
    /// `leaf` is not a leaf that tracks gradients, or when the shapes differ.
    pub fn insert<D: Device, E: FloatElement>(&mut self, leaf: &Tensor<D, E>, grad: Tensor<D, E>) -> Result<()> {
        let Some(id) = leaf.leaf_id() else {
            return Err(Error::Argument {
                op: "Gradients::insert",
                device: D::name(),
                reason: "the tensor is not a leaf that requires grad".into(),
            });
        };
        if grad.shape() != leaf.shape() {
            return Err(Error::Shape {
                op: "Gradients::insert",
                device: D::name(),
                shapes: vec![leaf.shape().clone(), grad.shape().clone()],
                reason: "the gradient must have the leaf's shape".into(),
            });
        }
        self.leaves.insert(id.0, Box::new(grad.detach().into_core()));
        Ok(())
    }

    /// Takes the gradient of `leaf` out of the store; see [`get`](Self::get).
    pub fn remove<D: Device, E: FloatElement>(&mut self, leaf: &Tensor<D, E>) -> Option<Tensor<D, E>> {
        let id = leaf.leaf_id()?.0;
        if !self.leaves.get(&id)?.as_any().is::<Tensor<D::Core, E>>() {
            return None;
        }
        let grad = self.leaves.remove(&id)?.into_any();
        grad.downcast::<Tensor<D::Core, E>>().ok().map(|g| Tensor::from_core(*g))
    }

    /// Adds `other`'s gradients to these, leaf by leaf (a leaf only in
    /// `other` gets its gradient as it is): gradient accumulation over
    /// several `backward` calls, as PyTorch's `.grad` accumulates when
    /// `zero_grad` is not called in between.
    ///
    /// ```
    /// use devtensor::{Cpu, Gradients, Tensor};
    /// let w = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2]).requires_grad();
    /// let mut grads = Gradients::new();
    /// for x in [[1.0, 0.0], [3.0, 4.0]] {
    ///     let micro_batch = Tensor::<Cpu>::from_vec(x.to_vec(), [2]);
    ///     grads.accumulate((&w * &micro_batch).sum().backward());
    /// }
    /// assert_eq!(grads.get(&w).unwrap().to_vec(), vec![4.0, 4.0]);
    /// ```
    ///
    /// Fails only when a device operation fails (out of memory), with the
    /// leaves before the failing one already accumulated.
    #[fallible]
    pub fn accumulate(&mut self, other: Gradients) {
        for (id, grad) in other.leaves {
            let sum = match self.leaves.get(&id) {
                Some(prev) => prev.add(&*grad)?,
                None => grad,
            };
            self.leaves.insert(id, sum);
        }
        Ok(())
    }

    /// How many leaves have a gradient.
    pub fn len(&self) -> usize {
        self.leaves.len()
    }

    /// Whether no leaf has a gradient.
    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }

    /// The devices the gradients live on, sorted and once each: what an
    /// error about gradients applied to the wrong model names.
    pub(crate) fn devices(&self) -> Vec<String> {
        let devices: std::collections::BTreeSet<String> = self.leaves.values().map(|g| g.device()).collect();
        devices.into_iter().collect()
    }
}

impl Default for Gradients {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Gradients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gradients({} leaves)", self.leaves.len())
    }
}
