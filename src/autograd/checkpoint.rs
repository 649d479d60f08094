//! Gradient checkpointing (PyTorch's `torch.utils.checkpoint`): a segment
//! of the forward pass whose activations are not kept, and which the
//! backward pass runs again to differentiate.

use super::backward::walk_down_to;
use super::graph::{AnyGrad, Backward, Node, attach, enable_grad, is_grad_enabled, next_id};
use crate::element::{DType, FloatElement};
use crate::error::{Error, Result};
use crate::ops::autocast::{autocast_as, autocast_dtype};
use crate::random::{Generator, replace_thread_generator, thread_generator};
use crate::tensor::shell::{core_call, core_table};
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;
use std::collections::HashSet;
use std::sync::Arc;

/// `segment(inputs)`, without keeping what the backward pass needs of it:
/// only the inputs (and the parameters and other tensors the segment
/// reads) are kept, and the backward pass runs `segment` again, with
/// recording on, to differentiate it (PyTorch's
/// `torch.utils.checkpoint.checkpoint(segment, *inputs, use_reentrant=False)`).
/// The memory of a model's activations then grows with the inputs of its
/// checkpointed blocks instead of with everything inside them, for about
/// one more forward pass of compute.
///
/// The recomputation draws the same random numbers as the first run
/// (dropout masks included) and computes its products in the same type:
/// this thread's generator is set back to where it stood when the segment
/// first ran, and its [`autocast`](crate::autocast) setting to the one the
/// segment ran under (the backward pass usually runs outside that scope),
/// both restored afterwards. The
/// segment must compute the same function both times (the same ops on
/// the same tensors); it is kept with the graph, so it owns what it uses
/// (`let block = block.clone()`: a module's clone shares its parameters).
///
/// Fails when the recomputed segment reads other tracked tensors than the
/// first run did.
///
/// ```
/// use devtensor::autograd::checkpoint;
/// use devtensor::nn::{Linear, Module};
/// use devtensor::{Cpu, Tensor};
/// let layer = Linear::<Cpu>::new(3, 3);
/// let x = Tensor::<Cpu>::ones([2, 3]).requires_grad();
/// let block = layer.clone();
/// let y = checkpoint(&[&x], move |xs| block.forward(&xs[0]).tanh());
/// let grads = y.sum().backward();
/// let plain = layer.forward(&x).tanh().sum().backward();
/// assert_eq!(grads.get(&layer.weight).unwrap().to_vec(), plain.get(&layer.weight).unwrap().to_vec());
/// assert_eq!(grads.get(&x).unwrap().to_vec(), plain.get(&x).unwrap().to_vec());
/// ```
#[fallible(free)]
pub fn checkpoint<D, E, F>(inputs: &[&Tensor<D, E>], segment: F) -> Tensor<D, E>
where
    D: Device,
    E: FloatElement,
    F: Fn(&[Tensor<D, E>]) -> Tensor<D, E> + Send + Sync + 'static,
{
    checkpoint_fallible(inputs, move |xs| Ok(segment(xs)))
}

/// [`checkpoint`] of a segment that may fail: its error is the result of
/// the forward pass, or of the backward pass when the recomputation fails.
pub(crate) fn checkpoint_fallible<D, E, F>(inputs: &[&Tensor<D, E>], segment: F) -> Result<Tensor<D, E>>
where
    D: Device,
    E: FloatElement,
    F: Fn(&[Tensor<D, E>]) -> Result<Tensor<D, E>> + Send + Sync + 'static,
{
    let inputs: Vec<Tensor<D::Core, E>> = inputs.iter().map(|t| t.core().clone()).collect();
    let segment: Segment<D::Core, E> = Arc::new(move |xs: &[Tensor<D::Core, E>]| {
        let xs: Vec<Tensor<D, E>> = xs.iter().map(|x| Tensor::from_core(x.clone())).collect();
        segment(&xs).map(Tensor::into_core)
    });
    core_call!(D, Fns<E>.checkpoint(inputs, segment))
}

/// A checkpointed segment as the core keeps it.
type Segment<C, F> = Arc<dyn Fn(&[Tensor<C, F>]) -> Result<Tensor<C, F>> + Send + Sync>;

core_table! {
    /// The core of [`checkpoint`].
    pub(crate) struct Fns<C, F: FloatElement> {
        checkpoint: fn(Vec<Tensor<C, F>>, Segment<C, F>) -> Result<Tensor<C, F>> = core_checkpoint,
    }
}

fn core_checkpoint<D: CoreDevice, E: FloatElement>(
    inputs: Vec<Tensor<D, E>>,
    segment: Segment<D, E>,
) -> Result<Tensor<D, E>> {
    if !is_grad_enabled() {
        return segment(&inputs);
    }
    let (generator, autocast) = (thread_generator(), autocast_dtype());
    // Run once with recording on, to find the tensors of the graph that
    // the segment reads (its frontier: every node older than the segment),
    // then keep only those and drop the segment's own graph.
    let start = next_id();
    let out = segment(&inputs)?;
    let Some(root) = out.node() else { return Ok(out) };
    let frontier = frontier_of(root, start);
    let rule = Recompute { segment, inputs, generator, autocast, frontier: frontier.iter().map(|n| n.id).collect() };
    let frontier = frontier.into_iter().map(Some).collect();
    Ok(attach(out.detach(), "checkpoint", frontier, Box::new(rule)))
}

/// The nodes older than `start` that the graph below `root` reaches
/// without passing through another such node, oldest first.
fn frontier_of(root: &Arc<Node>, start: u64) -> Vec<Arc<Node>> {
    let (mut frontier, mut seen, mut stack) = (Vec::new(), HashSet::new(), vec![root]);
    while let Some(node) = stack.pop() {
        if !seen.insert(node.id) {
            continue;
        }
        match &node.op {
            _ if node.id < start => frontier.push(node.clone()),
            Some(op) => stack.extend(op.inputs.iter().flatten()),
            None => {}
        }
    }
    frontier.sort_unstable_by_key(|n| n.id);
    frontier
}

/// `f` with this thread's generator set to `generator` and products in
/// `autocast`'s type, as when the segment first ran; both restored when
/// `f` returns or panics.
fn as_first_run<T>(generator: &Generator, autocast: Option<DType>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Generator>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(generator) = self.0.take() {
                replace_thread_generator(generator);
            }
        }
    }
    let _restore = Restore(Some(replace_thread_generator(generator.clone())));
    autocast_as(autocast, f)
}

/// The rule of a checkpointed segment: run it again, recorded, and walk
/// its graph down to the frontier.
struct Recompute<D: CoreDevice, E: FloatElement> {
    segment: Segment<D, E>,
    inputs: Vec<Tensor<D, E>>,
    /// This thread's generator when the segment first ran.
    generator: Generator,
    /// The autocast setting the segment first ran under.
    autocast: Option<DType>,
    /// The frontier's node ids, in the order of the recorded op's inputs.
    frontier: Vec<u64>,
}

impl<D: CoreDevice, E: FloatElement> Backward for Recompute<D, E> {
    fn backward(&self, grad: &dyn AnyGrad, needs: &[bool]) -> Result<Vec<Option<Box<dyn AnyGrad>>>> {
        let grad: &Tensor<D, E> = grad.as_any().downcast_ref().expect("a rule receives its own result's type");
        // Recorded in a walk that records (`create_graph`): then the
        // recomputation's gradients are recorded too.
        let create_graph = is_grad_enabled();
        let start = next_id();
        let out = as_first_run(&self.generator, self.autocast, || enable_grad(|| (self.segment)(&self.inputs)))?;
        let Some(root) = out.node() else {
            return Err(Error::Argument {
                op: "checkpoint",
                device: D::name(),
                reason: "the recomputed segment tracks no gradient, though its first run did".into(),
            });
        };
        let reached: Vec<u64> = frontier_of(root, start).iter().map(|n| n.id).collect();
        if reached != self.frontier {
            let (new, unread) =
                (reached.iter().any(|id| !self.frontier.contains(id)), reached.len() < self.frontier.len());
            return Err(Error::Argument {
                op: "checkpoint",
                device: D::name(),
                reason: format!(
                    "the recomputed segment read {} tracked tensors than its first run ({} against {}{}): \
                     a checkpointed segment must compute the same function each time",
                    if unread && !new { "fewer" } else { "other" },
                    reached.len(),
                    self.frontier.len(),
                    if new { ", some new" } else { "" }
                ),
            });
        }
        let targets: Vec<Option<u64>> =
            self.frontier.iter().zip(needs).map(|(&id, &need)| need.then_some(id)).collect();
        let seed: Box<dyn AnyGrad> = Box::new(if create_graph { grad.clone() } else { grad.detach() });
        walk_down_to(root, seed, start, &targets)
    }
}
