//! Marking leaves, and the backward walk that fills a [`Gradients`] store.

use super::graph::{AnyGrad, Node, RecordedOp, differentiating, no_grad, not_differentiating};
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

    /// This tensor's elements with `original`'s place in the graph: for a
    /// rule that keeps a dense copy of an operand, the operand as a
    /// recorded backward reads it (same values, same node) without
    /// keeping the original's storage as well.
    pub(crate) fn with_node_of(&self, original: &Self) -> Self {
        let mut t = self.clone();
        t.set_node(original.node().cloned());
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
        let how = Walk { targets: None, create_graph: false, ready, frontier_below: 0 };
        no_grad(|| walk(vec![(root, Box::new(seed))], how))
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

/// What one walk of the graph computes.
pub(super) struct Walk<'a> {
    /// The nodes whose gradients are wanted ([`grad`](super::grad)'s
    /// inputs), or `None` for every leaf's ([`Tensor::backward`]). Only the
    /// rules on a path to one of them run.
    pub(super) targets: Option<&'a HashSet<u64>>,
    /// Whether the rules are recorded, so that the gradients are tensors of
    /// the graph themselves and can be differentiated again.
    pub(super) create_graph: bool,
    /// Called with each leaf as soon as its gradient is final.
    pub(super) ready: Option<&'a mut dyn FnMut(LeafId, &Gradients) -> Result<()>>,
    /// Nodes older than this id are the walk's frontier: their gradients
    /// are computed (they must be targets) but their rules do not run (a
    /// checkpointed segment's recomputation, whose gradients flow on in the
    /// walk outside it). `0`: no frontier.
    pub(super) frontier_below: u64,
}

impl Walk<'_> {
    /// `node`'s op, when this walk runs its rule.
    fn op_of<'n>(&self, node: &'n Node) -> Option<&'n RecordedOp> {
        if node.id < self.frontier_below { None } else { node.op.as_ref() }
    }
}

/// Walks the graph below `roots` (each seeded with its gradient) in reverse
/// order of recording, which is a reverse topological order (see
/// `graph::NEXT_ID`), so each node's gradient is complete before its rule
/// runs, and returns the gradients of the targets (or of every leaf). A
/// non-target gradient is dropped once its rule has run.
pub(super) fn walk(roots: Vec<(&Arc<Node>, Box<dyn AnyGrad>)>, how: Walk) -> Result<Gradients> {
    // A walk that records nothing (one inside a hook or a user's backward,
    // say) must not attach saved results to the node of a walk around it.
    match how.create_graph {
        true => walk_graph(roots, how),
        false => not_differentiating(|| walk_graph(roots, how)),
    }
}

fn walk_graph(roots: Vec<(&Arc<Node>, Box<dyn AnyGrad>)>, mut how: Walk) -> Result<Gradients> {
    let mut nodes: Vec<&Arc<Node>> = Vec::new();
    let mut seen = HashSet::new();
    let mut stack: Vec<&Arc<Node>> = roots.iter().map(|(root, _)| *root).collect();
    while let Some(node) = stack.pop() {
        if !seen.insert(node.id) {
            continue;
        }
        nodes.push(node);
        if let Some(op) = how.op_of(node) {
            stack.extend(op.inputs.iter().flatten());
        }
    }
    nodes.sort_unstable_by_key(|n| n.id);
    // With targets, which nodes lead to one, in creation order, so that an
    // op's operands are decided before it: a rule computes only the
    // gradients that reach a target. Without, every node leads to a leaf.
    let leads: Option<HashSet<u64>> = how.targets.map(|targets| {
        let mut leads = HashSet::new();
        for node in &nodes {
            let wanted = targets.contains(&node.id)
                || how.op_of(node).is_some_and(|op| op.inputs.iter().flatten().any(|i| leads.contains(&i.id)));
            if wanted {
                leads.insert(node.id);
            }
        }
        leads
    });
    let leads_on = |id: u64| leads.as_ref().is_none_or(|leads| leads.contains(&id));

    let mut pending: HashMap<u64, Box<dyn AnyGrad>> = HashMap::new();
    for (root, seed) in roots {
        add_into(&mut pending, root.id, seed)?;
    }
    let mut gradients = Gradients::new();
    for node in nodes.into_iter().rev() {
        if !leads_on(node.id) {
            continue;
        }
        let Some(grad) = pending.remove(&node.id) else { continue };
        // A frontier node's gradient is partial here: its hooks run in the
        // walk outside, on the whole of it.
        let grad = if node.id >= how.frontier_below { node.run_hooks(grad)? } else { grad };
        // A computed tensor's gradient is kept only when asked for.
        let wanted = how.targets.is_some_and(|targets| targets.contains(&node.id));
        let Some(op) = how.op_of(node) else {
            // Every node that uses a leaf was recorded after it, so has run.
            gradients.leaves.insert(node.id, grad);
            if let Some(ready) = how.ready.as_mut() {
                ready(LeafId(node.id), &gradients)?;
            }
            continue;
        };
        let needs: Vec<bool> = op.inputs.iter().map(|input| input.as_ref().is_some_and(|i| leads_on(i.id))).collect();
        if needs.iter().any(|&n| n) {
            let grads = match how.create_graph {
                false => op.rule.backward(&*grad, &needs)?,
                true => recorded(node, op, &*grad, &needs)?,
            };
            for (input, g) in op.inputs.iter().zip(grads) {
                if let (Some(input), Some(g)) = (input, g) {
                    add_into(&mut pending, input.id, g)?;
                }
            }
        }
        if wanted {
            gradients.leaves.insert(node.id, grad);
        }
    }
    Ok(gradients)
}

/// The gradients of the nodes `targets`, all older than `start`, given
/// `grad`, the gradient of `root`, a graph recorded since `start` on top
/// of them (a recomputed segment or op): a walk of the new nodes alone,
/// which records itself when gradients are enabled (inside a walk with
/// `create_graph`). `None` for a target that `root` does not reach, and
/// for a target given as `None` (one that needs no gradient).
pub(crate) fn walk_down_to(
    root: &Arc<Node>,
    grad: Box<dyn AnyGrad>,
    start: u64,
    targets: &[Option<u64>],
) -> Result<Vec<Option<Box<dyn AnyGrad>>>> {
    let wanted: HashSet<u64> = targets.iter().flatten().copied().collect();
    let create_graph = super::is_grad_enabled();
    let how = Walk { targets: Some(&wanted), create_graph, ready: None, frontier_below: start };
    let run = || walk(vec![(root, grad)], how);
    let mut found = if create_graph { run()? } else { no_grad(run)? };
    Ok(targets.iter().map(|id| found.leaves.remove(id.as_ref()?)).collect())
}

/// The gradients of `inputs` from `grad`, the gradient of what `compose`
/// computes from them with recorded ops: how a rule whose fused kernel
/// has no derivative of its own gives gradients that do, inside a walk
/// with `create_graph` (`compose` being the op written out, and `inputs`
/// the operands it read, with their nodes). `None` for an input that does
/// not track.
pub(crate) fn composed_gradients<D: CoreDevice, E: FloatElement>(
    inputs: &[&Tensor<D, E>],
    grad: &Tensor<D, E>,
    compose: impl FnOnce() -> Result<Tensor<D, E>>,
) -> Result<Vec<Option<Tensor<D, E>>>> {
    let start = super::graph::next_id();
    let out = super::enable_grad(compose)?;
    let Some(root) = out.node() else { return Ok(inputs.iter().map(|_| None).collect()) };
    let targets: Vec<Option<u64>> = inputs.iter().map(|t| t.node().map(|n| n.id)).collect();
    let grads = walk_down_to(root, Box::new(grad.clone()), start, &targets)?;
    Ok(grads
        .into_iter()
        .map(|g| g.map(|g| *g.into_any().downcast::<Tensor<D, E>>().expect("an input's own type")))
        .collect())
}

/// Adds `grad` to the gradient `grads` holds for `id`, or makes it that
/// gradient. On failure the held gradient stays as it was.
fn add_into(grads: &mut HashMap<u64, Box<dyn AnyGrad>>, id: u64, grad: Box<dyn AnyGrad>) -> Result<()> {
    let sum = match grads.get(&id) {
        Some(prev) => prev.add(&*grad)?,
        None => grad,
    };
    grads.insert(id, sum);
    Ok(())
}

/// `op`'s rule run so that what it computes is recorded: with its saved
/// result attached to `node` again ([`saved_output`](super::graph::saved_output)).
/// A rule that computes its gradients outside the recorded ops (a custom
/// `Function` that is not `twice_differentiable`) gives gradients that
/// record nothing: they are
/// made results of an op whose rule is an error naming `op`, so that
/// differentiating them again fails, as PyTorch's "derivative not
/// implemented" does, instead of giving a silent zero.
fn recorded(
    node: &Arc<Node>,
    op: &RecordedOp,
    grad: &dyn AnyGrad,
    needs: &[bool],
) -> Result<Vec<Option<Box<dyn AnyGrad>>>> {
    if !op.rule.first_order_only() {
        return differentiating(node, || op.rule.backward(grad, needs));
    }
    // Nothing it computes would be kept: no need to record it.
    let grads = no_grad(|| op.rule.backward(grad, needs))?;
    let inputs: Vec<Option<Arc<Node>>> = op.inputs.iter().cloned().chain(grad.nodes().into_iter().map(Some)).collect();
    Ok(grads.into_iter().map(|g| g.map(|g| g.without_derivative(op.name, inputs.clone()))).collect())
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
            add_into(&mut self.leaves, id, grad)?;
        }
        Ok(())
    }

    /// The gradient held for the node `id` (a leaf's, or a computed
    /// target's of [`grad`](super::grad)), in the core's types.
    pub(super) fn by_node<D: CoreDevice, E: FloatElement>(&self, id: u64) -> Option<Tensor<D, E>> {
        self.leaves.get(&id)?.as_any().downcast_ref::<Tensor<D, E>>().cloned()
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
