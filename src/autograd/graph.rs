//! The recorded graph: a node per tracked tensor, holding its inputs' nodes
//! and the rule that maps its gradient to theirs.
//!
//! The graph is type-erased so that one graph can span devices and element
//! types (`.to::<Cuda<0>>()` and `to_dtype` are differentiable): a node knows
//! neither its tensor's device nor its element type, and gradients travel
//! between nodes as `Box<dyn AnyGrad>`. Each rule downcasts the gradient it
//! receives back to the one type it was recorded for.

use crate::backend::cuda::current;
use crate::element::{Element, FloatElement};
use crate::error::{Error, Result};
use crate::tensor::CoreDevice;
use crate::tensor::Tensor;
use std::any::Any;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Node ids grow with creation time: every node is created after its
/// inputs' nodes, so walking ids downwards is a reverse topological order.
/// One atomic counter keeps that true across threads too, since a tensor
/// only reaches another thread through a synchronising hand-over.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// One vertex of the graph. A leaf (a tensor marked with
/// [`requires_grad`](Tensor::requires_grad)) has no `op`.
pub(crate) struct Node {
    pub(crate) id: u64,
    pub(crate) op: Option<RecordedOp>,
    /// The hooks registered on this node's gradient
    /// ([`Tensor::register_hook`]), in order of registration.
    pub(crate) hooks: Mutex<Vec<(u64, GradHook)>>,
}

/// A hook on a node's gradient, type-erased: the gradient in, and either
/// `None` (keep it) or the gradient that replaces it.
pub(crate) type GradHook = Arc<dyn Fn(&dyn AnyGrad) -> Result<Option<Box<dyn AnyGrad>>> + Send + Sync>;

/// How a non-leaf tensor was computed.
pub(crate) struct RecordedOp {
    /// The operation's name, as `Tensor::grad_fn` reports it.
    pub(crate) name: &'static str,
    /// One entry per differentiable operand: its node, or `None` when that
    /// operand tracks nothing (a data batch, say) and needs no gradient.
    pub(crate) inputs: Vec<Option<Arc<Node>>>,
    pub(crate) rule: Box<dyn Backward>,
}

impl RecordedOp {
    /// The operands' nodes, once the rule (which may hold more references
    /// to them) is dropped.
    fn into_inputs(self) -> Vec<Arc<Node>> {
        let RecordedOp { inputs, rule, .. } = self;
        drop(rule);
        inputs.into_iter().flatten().collect()
    }
}

impl Node {
    pub(crate) fn leaf() -> Arc<Node> {
        Arc::new(Node { id: next_id(), op: None, hooks: Mutex::new(Vec::new()) })
    }

    /// The node of a result of op `name` on operands with `inputs` nodes,
    /// differentiated by `rule`.
    pub(crate) fn computed(name: &'static str, inputs: Vec<Option<Arc<Node>>>, rule: Box<dyn Backward>) -> Arc<Node> {
        let op = RecordedOp { name, inputs, rule };
        Arc::new(Node { id: next_id(), op: Some(op), hooks: Mutex::new(Vec::new()) })
    }

    pub(crate) fn is_leaf(&self) -> bool {
        self.op.is_none()
    }

    /// `grad`, this node's complete gradient, passed through its hooks in
    /// order of registration, each given what the one before returned.
    pub(crate) fn run_hooks(&self, mut grad: Box<dyn AnyGrad>) -> Result<Box<dyn AnyGrad>> {
        // Copied out of the lock, so that a hook may register or remove
        // hooks on this tensor.
        let hooks: Vec<GradHook> = {
            let hooks = self.hooks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if hooks.is_empty() {
                return Ok(grad);
            }
            hooks.iter().map(|(_, hook)| hook.clone()).collect()
        };
        for hook in &hooks {
            if let Some(replaced) = hook(&*grad)? {
                grad = replaced;
            }
        }
        Ok(grad)
    }
}

impl Drop for Node {
    /// Frees the graph below this node with a loop instead of recursion, so
    /// that dropping a long chain (an RNN unrolled over many steps, a loop
    /// of 10^5 updates) cannot overflow the stack. A rule keeps its
    /// operands with their nodes (so that a gradient can be differentiated
    /// again); those nodes are nearly always among `inputs`, so dropping
    /// the rule first leaves `inputs` holding the last references, which
    /// the loop frees. (A rule holding tensors that are not among them, a
    /// checkpointed segment's unread inputs or a function's saved extras,
    /// frees those in a drop of their own, one level deeper.)
    fn drop(&mut self) {
        let Some(op) = self.op.take() else { return };
        let mut orphans: Vec<Arc<Node>> = op.into_inputs();
        while let Some(node) = orphans.pop() {
            if let Ok(mut node) = Arc::try_unwrap(node)
                && let Some(op) = node.op.take()
            {
                orphans.extend(op.into_inputs());
            }
        }
    }
}

/// A gradient of any device and float type, as it travels through the graph.
pub(crate) trait AnyGrad: Send + Sync + 'static {
    fn as_any(&self) -> &dyn Any;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    /// `self + other`; both are gradients of the same tensor, so of one type.
    fn add(&self, other: &dyn AnyGrad) -> Result<Box<dyn AnyGrad>>;
    /// The device the gradient lives on, for error messages.
    fn device(&self) -> String;
    /// The gradient's own nodes, when it was recorded (`create_graph`):
    /// one for a tensor, one per slot for a function's outputs' gradients.
    fn nodes(&self) -> Vec<Arc<Node>>;
    /// A copy (of a tensor: sharing its storage).
    fn clone_box(&self) -> Box<dyn AnyGrad>;
    /// The gradient as the result of an op named after `op` that cannot be
    /// differentiated: see [`NoDerivative`].
    fn without_derivative(self: Box<Self>, op: &'static str, inputs: Vec<Option<Arc<Node>>>) -> Box<dyn AnyGrad>;
}

impl<D: CoreDevice, E: Element> AnyGrad for Tensor<D, E> {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }

    fn add(&self, other: &dyn AnyGrad) -> Result<Box<dyn AnyGrad>> {
        let other: &Tensor<D, E> = other.as_any().downcast_ref().expect("gradients of one tensor share its type");
        // Also outside every operation (a store's `accumulate`): on the
        // gradients' own device.
        let sum = current::enter_if(D::ordinal_of(self.storage()), || self.try_add(other))?;
        Ok(Box::new(sum))
    }

    fn device(&self) -> String {
        match D::ordinal_of(self.storage()) {
            Some(ordinal) => format!("Cuda<{ordinal}>"),
            None => D::name(),
        }
    }

    fn nodes(&self) -> Vec<Arc<Node>> {
        Tensor::node(self).into_iter().cloned().collect()
    }

    fn clone_box(&self) -> Box<dyn AnyGrad> {
        Box::new(self.clone())
    }

    fn without_derivative(self: Box<Self>, op: &'static str, inputs: Vec<Option<Arc<Node>>>) -> Box<dyn AnyGrad> {
        if inputs.iter().all(Option::is_none) {
            return self;
        }
        Box::new(attach(
            self.detach(),
            op,
            inputs,
            Box::new(NoDerivative { op, device: AnyGrad::device(self.as_ref()) }),
        ))
    }
}

/// The rule of a gradient computed by a rule that is not itself recorded
/// (see `Backward::first_order_only`): differentiating it fails, naming the
/// op, rather than treating it as a constant.
struct NoDerivative {
    op: &'static str,
    device: String,
}

impl Backward for NoDerivative {
    fn backward(&self, _: &dyn AnyGrad, _: &[bool]) -> Result<Vec<Option<Box<dyn AnyGrad>>>> {
        Err(Error::Argument {
            op: "grad",
            device: self.device.clone(),
            reason: format!(
                "the derivative of `{}`'s gradient is not implemented: its backward is not recorded \
                 (a custom Function whose `twice_differentiable` is false), so a gradient computed \
                 through it with `create_graph` cannot be differentiated again",
                self.op
            ),
        })
    }
}

/// Which operands of an op need a gradient, so that a rule skips the others
/// (the input batch of a first layer, say).
#[derive(Clone, Copy)]
pub(crate) struct Needs<'a>(&'a [bool]);

impl Needs<'_> {
    /// `grad()` for operand `i` if it needs a gradient.
    pub(crate) fn then<T>(self, i: usize, grad: impl FnOnce() -> Result<T>) -> Result<Option<T>> {
        if self.0[i] { grad().map(Some) } else { Ok(None) }
    }

    /// Whether operand `i` needs a gradient.
    pub(crate) fn get(self, i: usize) -> bool {
        self.0[i]
    }
}

/// A recorded op's gradient rule.
pub(crate) trait Backward: Send + Sync {
    /// The gradients of the op's operands (in `RecordedOp::inputs` order;
    /// `None` where not needed) from the gradient of its result.
    fn backward(&self, grad: &dyn AnyGrad, needs: &[bool]) -> Result<Vec<Option<Box<dyn AnyGrad>>>>;

    /// Whether the rule computes its gradients outside the recorded ops (a
    /// custom [`Function`](super::Function) that is not
    /// `twice_differentiable`), so that recording it (`create_graph`)
    /// gives gradients that cannot be differentiated again.
    fn first_order_only(&self) -> bool {
        false
    }
}

/// A rule whose result and operands are all `Tensor<D, E>`: nearly every op.
struct Rule<D, E, F> {
    rule: F,
    /// The GPU the op ran on, when it ran on one: the rule runs there too
    /// (see [`current`]), whichever device the backward walk started on.
    ordinal: Option<usize>,
    types: PhantomData<fn() -> (D, E)>,
}

impl<D, E, F> Backward for Rule<D, E, F>
where
    D: CoreDevice,
    E: Element,
    F: Fn(&Tensor<D, E>, Needs) -> Result<Vec<Option<Tensor<D, E>>>> + Send + Sync,
{
    fn backward(&self, grad: &dyn AnyGrad, needs: &[bool]) -> Result<Vec<Option<Box<dyn AnyGrad>>>> {
        run_rule(&self.rule, self.ordinal, grad, needs)
    }
}

/// The body of every [`Rule`]'s `backward`, compiled once per device and
/// element type rather than once per rule: the gradient downcast to the
/// rule's type, the rule run on its own GPU, the results boxed.
fn run_rule<D: CoreDevice, E: Element>(
    rule: &dyn Fn(&Tensor<D, E>, Needs) -> Result<Vec<Option<Tensor<D, E>>>>,
    ordinal: Option<usize>,
    grad: &dyn AnyGrad,
    needs: &[bool],
) -> Result<Vec<Option<Box<dyn AnyGrad>>>> {
    let grad: &Tensor<D, E> = grad.as_any().downcast_ref().expect("a rule receives its own result's type");
    let grads = current::enter_if(ordinal, || rule(grad, Needs(needs)))?;
    Ok(grads.into_iter().map(|g| g.map(|g| Box::new(g) as Box<dyn AnyGrad>)).collect())
}

/// A rule whose result is a `Tensor<DOut, EOut>` and whose one operand is a
/// `Tensor<DIn, EIn>`: moves between devices and float types.
struct RuleAcross<DIn, EIn, DOut, EOut, F> {
    rule: F,
    /// As [`Rule`]'s.
    ordinal: Option<usize>,
    types: PhantomData<Types<DIn, EIn, DOut, EOut>>,
}

/// The operand and result types of a [`RuleAcross`], owned by none of its values.
type Types<DIn, EIn, DOut, EOut> = fn() -> (DIn, EIn, DOut, EOut);

impl<DIn, EIn, DOut, EOut, F> Backward for RuleAcross<DIn, EIn, DOut, EOut, F>
where
    DIn: CoreDevice,
    EIn: Element,
    DOut: CoreDevice,
    EOut: Element,
    F: Fn(&Tensor<DOut, EOut>) -> Result<Tensor<DIn, EIn>> + Send + Sync,
{
    fn backward(&self, grad: &dyn AnyGrad, _: &[bool]) -> Result<Vec<Option<Box<dyn AnyGrad>>>> {
        let grad: &Tensor<DOut, EOut> = grad.as_any().downcast_ref().expect("a rule receives its own result's type");
        Ok(vec![Some(Box::new(current::enter_if(self.ordinal, || (self.rule)(grad))?))])
    }
}

/// Boxes the gradient rule of a one-operand op whose result has another
/// device or element type than its operand.
pub(crate) fn rule_across<DIn, EIn, DOut, EOut, F>(rule: F) -> Box<dyn Backward>
where
    DIn: CoreDevice,
    EIn: Element,
    DOut: CoreDevice,
    EOut: Element,
    F: Fn(&Tensor<DOut, EOut>) -> Result<Tensor<DIn, EIn>> + Send + Sync + 'static,
{
    Box::new(RuleAcross { rule, ordinal: current::try_ordinal(), types: PhantomData })
}

/// Boxes a gradient rule over one device and element type (a float one
/// whenever it runs: only float tensors track gradients).
pub(crate) fn rule<D, E, F>(rule: F) -> Box<dyn Backward>
where
    D: CoreDevice,
    E: Element,
    F: Fn(&Tensor<D, E>, Needs) -> Result<Vec<Option<Tensor<D, E>>>> + Send + Sync + 'static,
{
    Box::new(Rule::<D, E, F>::new(rule))
}

impl<D, E, F> Rule<D, E, F> {
    /// `rule`, to run on the GPU the op runs on (if any).
    fn new(rule: F) -> Self {
        Rule { rule, ordinal: current::try_ordinal(), types: PhantomData }
    }
}

thread_local! {
    static GRAD_ENABLED: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
    /// The node whose rule is running in a walk that records its rules
    /// (`create_graph`); see [`saved_output`].
    static DIFFERENTIATING: std::cell::RefCell<Option<Arc<Node>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f`, the rule of `node`, with `node` as the one [`saved_output`]
/// attaches to; restored when `f` returns or panics.
pub(crate) fn differentiating<T>(node: &Arc<Node>, f: impl FnOnce() -> T) -> T {
    with_differentiating(Some(node.clone()), f)
}

/// Runs `f` with no node for [`saved_output`] to attach to.
pub(crate) fn not_differentiating<T>(f: impl FnOnce() -> T) -> T {
    with_differentiating(None, f)
}

fn with_differentiating<T>(node: Option<Arc<Node>>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<Node>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DIFFERENTIATING.with(|n| *n.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(DIFFERENTIATING.with(|n| std::mem::replace(&mut *n.borrow_mut(), node)));
    f()
}

/// The result a rule saved, for use in the rule's body: `out` as it is,
/// except while the rule is being recorded (`create_graph`), when it is
/// `out` as the result of the op again, so that the gradient computed from
/// it depends on it (the gradient of `exp` is `grad * out`). Rules keep
/// their result detached, because a node holding its own result would
/// hold itself.
pub(crate) fn saved_output<D: CoreDevice, E: Element>(out: &Tensor<D, E>) -> Tensor<D, E> {
    let mut out = out.clone();
    if let Some(node) = DIFFERENTIATING.with(|n| n.borrow().clone()) {
        out.set_node(Some(node));
    }
    out
}

/// Whether operations on this thread record the graph: `false` inside
/// [`no_grad`].
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Runs `f` without recording any operation, like PyTorch's
/// `with torch.no_grad():` — for evaluation, and for updating parameters in
/// place. Results computed inside track nothing. The setting is per thread
/// and is restored when `f` returns or panics.
///
/// ```
/// use devtensor::{Cpu, Tensor, no_grad};
/// let w = Tensor::<Cpu>::ones([3]).requires_grad();
/// let y = no_grad(|| &w * 2.0);
/// assert!(!y.tracks_grad());
/// assert!((&w * 2.0).tracks_grad());
/// ```
pub fn no_grad<T>(f: impl FnOnce() -> T) -> T {
    with_grad_enabled(false, f)
}

/// Runs `f` recording operations again, inside a [`no_grad`] scope, like
/// PyTorch's `with torch.enable_grad():`. Restored when `f` returns or
/// panics.
///
/// ```
/// use devtensor::{Cpu, Tensor, enable_grad, no_grad};
/// let w = Tensor::<Cpu>::ones([3]).requires_grad();
/// let y = no_grad(|| enable_grad(|| &w * 2.0));
/// assert!(y.tracks_grad());
/// ```
pub fn enable_grad<T>(f: impl FnOnce() -> T) -> T {
    with_grad_enabled(true, f)
}

/// Runs `f` without recording, like PyTorch's `with torch.inference_mode():`,
/// which is [`no_grad`] here. PyTorch's inference mode also stops
/// counting the versions that catch a tensor saved for backward being
/// changed in place; devtensor keeps no such counters, because a saved
/// tensor is never changed in place (writing to a tensor whose storage a
/// rule shares copies it first), so there is nothing more to stop.
///
/// ```
/// use devtensor::{Cpu, Tensor, inference_mode};
/// let w = Tensor::<Cpu>::ones([3]).requires_grad();
/// assert!(!inference_mode(|| &w * 2.0).tracks_grad());
/// ```
pub fn inference_mode<T>(f: impl FnOnce() -> T) -> T {
    no_grad(f)
}

/// Runs `f` with recording set to `enabled` on this thread, restoring the
/// previous setting when `f` returns or panics.
pub(crate) fn with_grad_enabled<T>(enabled: bool, f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            set_grad_enabled(self.0);
        }
    }
    let _restore = Restore(set_grad_enabled(enabled));
    f()
}

/// Sets whether this thread records, returning the previous setting: the
/// thread-local access of [`no_grad`], kept out of the generic function so
/// that it is compiled once.
fn set_grad_enabled(enabled: bool) -> bool {
    GRAD_ENABLED.with(|g| g.replace(enabled))
}

/// `forward()`, recorded as op `name` on operands with `inputs` nodes and
/// differentiated by `rule(&result)` when gradients are enabled and an operand
/// tracks. The untracked case, every inference op, costs one branch per
/// operand. When recording, `forward` runs under [`no_grad`], so that the
/// ops it is built from record nothing of their own.
#[inline(always)]
pub(crate) fn track<D: CoreDevice, T: Element>(
    name: &'static str,
    inputs: &[Option<&Arc<Node>>],
    forward: impl FnOnce() -> Result<Tensor<D, T>>,
    rule: impl FnOnce(&Tensor<D, T>) -> Box<dyn Backward>,
) -> Result<Tensor<D, T>> {
    if inputs.iter().all(Option::is_none) {
        return forward();
    }
    let (mut forward, mut rule) = (Some(forward), Some(rule));
    record(name, inputs, &mut || forward.take().expect("the forward runs once")(), &mut |out| {
        rule.take().expect("the rule is built once")(out)
    })
}

/// The recording half of [`track`], kept out of line so that the untracked
/// path of every op stays small, and taking its two steps as trait objects
/// so that it is compiled once per device and element type, not per op.
#[inline(never)]
fn record<D: CoreDevice, T: Element>(
    name: &'static str,
    inputs: &[Option<&Arc<Node>>],
    forward: &mut dyn FnMut() -> Result<Tensor<D, T>>,
    rule: &mut dyn FnMut(&Tensor<D, T>) -> Box<dyn Backward>,
) -> Result<Tensor<D, T>> {
    if !is_grad_enabled() {
        return forward();
    }
    let out = no_grad(forward)?;
    let inputs = inputs.iter().map(|n| n.cloned()).collect();
    // Detached, so that a rule that keeps the result holds no cycle.
    let rule = rule(&out.detach());
    Ok(attach(out, name, inputs, rule))
}

/// `out` as the result of op `name` on operands with `inputs` nodes,
/// differentiated by `rule`: for an op recorded in two steps (an
/// asynchronous transfer, recorded when it starts and attached when it lands).
pub(crate) fn attach<D: CoreDevice, T: Element>(
    mut out: Tensor<D, T>,
    name: &'static str,
    inputs: Vec<Option<Arc<Node>>>,
    rule: Box<dyn Backward>,
) -> Tensor<D, T> {
    out.set_node(Some(Node::computed(name, inputs, rule)));
    out
}

/// `t` as a `Tensor<D, F>`, once the caller knows that `E` is `F`: how the
/// ops that are generic over every element type reach their float-only
/// gradient rules (only float tensors track, see [`float_rule!`]).
pub(crate) fn as_float<D: CoreDevice, E: Element, F: FloatElement>(t: &Tensor<D, E>) -> Tensor<D, F> {
    let any: &dyn Any = t;
    any.downcast_ref::<Tensor<D, F>>().expect("only float tensors track gradients").clone()
}

/// Builds a gradient rule in an op that is generic over every element type:
/// `float_rule!(E, F => expr)` evaluates `expr` with `F` naming the float
/// type that `E` is. Only float tensors can be tracked, so an op that is
/// being recorded always has a float `E`.
macro_rules! float_rule {
    ($E:ty, $F:ident => $body:expr) => {
        match <$E as $crate::element::Element>::DTYPE {
            $crate::element::DType::F32 => {
                type $F = f32;
                $body
            }
            $crate::element::DType::F64 => {
                type $F = f64;
                $body
            }
            $crate::element::DType::BF16 => {
                type $F = half::bf16;
                $body
            }
            $crate::element::DType::F16 => {
                type $F = half::f16;
                $body
            }
            $crate::element::DType::I64 | $crate::element::DType::U8 => {
                unreachable!("only float tensors track gradients")
            }
        }
    };
}
pub(crate) use float_rule;
