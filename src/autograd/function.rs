//! Operations whose forward and backward passes users write themselves,
//! with any number of inputs and outputs (PyTorch's
//! `torch.autograd.Function`).
//!
//! In the graph, a function is one node holding its rule, and each output
//! that can be differentiated a node of its own that hands its gradient to
//! that one, in the output's slot of a [`Slots`] gradient; the function's
//! rule runs once, when every output's gradient has arrived.

use super::graph::{AnyGrad, Backward, Node, attach, is_grad_enabled, no_grad};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;
use std::any::Any;
use std::sync::Arc;

/// An operation with a forward and a backward pass of its own (PyTorch's
/// `torch.autograd.Function`): a straight-through estimator, a kernel
/// whose gradient is known in closed form, a gradient that must be
/// clipped or reversed on its way back. Run it with [`apply`].
///
/// `forward` runs with recording off, so the ops inside it are not
/// recorded: the function is recorded as one op whose gradient rule is
/// `backward`. `backward` gets one gradient per output (zeros for an output
/// that received none, as PyTorch's default `materialize_grads`) and
/// returns one per input (`None`: that input gets no gradient, as
/// PyTorch's returning `None`).
///
/// ```
/// use devtensor::autograd::{Context, Function, apply};
/// use devtensor::{Cpu, Device, Result, Tensor};
///
/// /// PyTorch's documented example: `exp`, saving its result.
/// struct Exp;
///
/// impl<D: Device> Function<D, f32> for Exp {
///     fn name(&self) -> &'static str {
///         "Exp"
///     }
///     fn forward(&self, ctx: &mut Context<D, f32>, inputs: &[&Tensor<D, f32>]) -> Result<Vec<Tensor<D, f32>>> {
///         let y = inputs[0].try_exp()?;
///         ctx.save_for_backward(&[&y]);
///         Ok(vec![y])
///     }
///     fn backward(&self, ctx: &Context<D, f32>, grads: &[Tensor<D, f32>]) -> Result<Vec<Option<Tensor<D, f32>>>> {
///         Ok(vec![Some(grads[0].try_mul(&ctx.saved_tensors()[0])?)])
///     }
/// }
///
/// let x = Tensor::<Cpu>::from_vec(vec![0.0, 1.0], [2]).requires_grad();
/// let y = apply(Exp, &[&x]).remove(0);
/// assert_eq!(y.grad_fn(), Some("Exp"));
/// let grads = y.sum().backward();
/// assert_eq!(grads.get(&x).unwrap().to_vec(), y.to_vec());
/// ```
pub trait Function<D: Device, E: FloatElement>: Send + Sync + 'static {
    /// The op's name, as [`Tensor::grad_fn`] and errors report it.
    fn name(&self) -> &'static str;

    /// The outputs from the inputs. Keep what `backward` needs in `ctx`.
    fn forward(&self, ctx: &mut Context<D, E>, inputs: &[&Tensor<D, E>]) -> Result<Vec<Tensor<D, E>>>;

    /// The gradient of each input from the gradient of each output (of its
    /// output's shape); a returned gradient must have its input's shape.
    fn backward(&self, ctx: &Context<D, E>, grads: &[Tensor<D, E>]) -> Result<Vec<Option<Tensor<D, E>>>>;

    /// Whether `backward` computes with ops on `grads` and on saved
    /// *inputs* only, so that a backward pass with `create_graph` can
    /// record it and differentiate it again. Saved outputs are the
    /// forward's results, which know nothing of the graph, so a backward
    /// that reads them is not; `false` (the default) makes differentiating
    /// this function's gradients again an error naming it rather than a
    /// wrong number.
    fn twice_differentiable(&self) -> bool {
        false
    }
}

/// What a [`Function`]'s forward pass keeps for its backward pass (PyTorch's
/// `ctx`).
pub struct Context<D: Device, E: FloatElement> {
    saved: Vec<Tensor<D, E>>,
    non_differentiable: Vec<usize>,
}

impl<D: Device, E: FloatElement> Context<D, E> {
    /// Keeps `tensors` for the backward pass, after those kept before
    /// (PyTorch's `ctx.save_for_backward`). They share storage: nothing is
    /// copied.
    pub fn save_for_backward(&mut self, tensors: &[&Tensor<D, E>]) {
        self.saved.extend(tensors.iter().map(|t| (*t).clone()));
    }

    /// The tensors kept by [`save_for_backward`](Self::save_for_backward),
    /// in order (PyTorch's `ctx.saved_tensors`).
    pub fn saved_tensors(&self) -> &[Tensor<D, E>] {
        &self.saved
    }

    /// Marks output `index` as not differentiable: it tracks no gradient,
    /// and `backward` gets zeros for it (PyTorch's
    /// `ctx.mark_non_differentiable`, for an index or a mask among the
    /// outputs).
    pub fn mark_non_differentiable(&mut self, index: usize) {
        self.non_differentiable.push(index);
    }
}

/// Runs `function` on `inputs` and records it as one op whose gradient
/// rule is its [`backward`](Function::backward) (PyTorch's
/// `Function.apply`). Nothing is recorded when no input tracks gradients
/// or under [`no_grad`](crate::no_grad).
///
/// Fails when `forward` fails, or marks an output that does not exist as
/// not differentiable; `backward` failing, or returning the wrong number of
/// gradients or one of the wrong shape, makes the backward walk fail with
/// an error naming the function.
#[fallible(free)]
pub fn apply<D: Device, E: FloatElement, F: Function<D, E>>(
    function: F,
    inputs: &[&Tensor<D, E>],
) -> Vec<Tensor<D, E>> {
    let mut ctx = Context { saved: Vec::new(), non_differentiable: Vec::new() };
    let outputs = no_grad(|| function.forward(&mut ctx, inputs))?;
    if let Some(&index) = ctx.non_differentiable.iter().find(|&&i| i >= outputs.len()) {
        return Err(Error::Argument {
            op: function.name(),
            device: D::name(),
            reason: format!("output {index} was marked not differentiable, but there are {} outputs", outputs.len()),
        });
    }
    let tracked: Vec<Option<Arc<Node>>> = inputs.iter().map(|t| t.node().cloned()).collect();
    if !is_grad_enabled() || tracked.iter().all(Option::is_none) {
        return Ok(outputs);
    }
    let name = function.name();
    let rule = Apply {
        function,
        ctx,
        inputs: inputs.iter().map(|t| t.shape().clone()).collect(),
        outputs: outputs.iter().map(|t| t.shape().clone()).collect(),
    };
    let non_differentiable = rule.ctx.non_differentiable.clone();
    let node = Node::computed(name, tracked, Box::new(rule));
    let count = outputs.len();
    Ok(outputs
        .into_iter()
        .enumerate()
        .map(|(slot, out)| match non_differentiable.contains(&slot) {
            true => out.detach(),
            false => {
                let out =
                    attach(out.detach().into_core(), name, vec![Some(node.clone())], Box::new(Slot { slot, count }));
                Tensor::from_core(out)
            }
        })
        .collect())
}

/// The gradients of a function's outputs, one slot each, as they travel
/// to the function's node: each output adds its own slot, and the slots
/// add up.
struct Slots(Vec<Option<Box<dyn AnyGrad>>>);

impl AnyGrad for Slots {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }

    fn add(&self, other: &dyn AnyGrad) -> Result<Box<dyn AnyGrad>> {
        let other: &Slots = other.as_any().downcast_ref().expect("the gradients of one function's outputs");
        let sum = self.0.iter().zip(&other.0).map(|pair| match pair {
            (Some(a), Some(b)) => a.add(&**b).map(Some),
            (Some(a), None) => Ok(Some(a.clone_box())),
            (None, Some(b)) => Ok(Some(b.clone_box())),
            (None, None) => Ok(None),
        });
        Ok(Box::new(Slots(sum.collect::<Result<_>>()?)))
    }

    fn device(&self) -> String {
        self.0.iter().flatten().next().map_or_else(String::new, |g| g.device())
    }

    fn nodes(&self) -> Vec<Arc<Node>> {
        self.0.iter().flatten().flat_map(|g| g.nodes()).collect()
    }

    fn without_derivative(self: Box<Self>, _: &'static str, _: Vec<Option<Arc<Node>>>) -> Box<dyn AnyGrad> {
        self
    }

    fn clone_box(&self) -> Box<dyn AnyGrad> {
        Box::new(Slots(self.0.iter().map(|g| g.as_ref().map(|g| g.clone_box())).collect()))
    }
}

/// The rule of output `slot` of `count`: its gradient, in its slot.
struct Slot {
    slot: usize,
    count: usize,
}

impl Backward for Slot {
    fn backward(&self, grad: &dyn AnyGrad, _: &[bool]) -> Result<Vec<Option<Box<dyn AnyGrad>>>> {
        let mut slots: Vec<Option<Box<dyn AnyGrad>>> = (0..self.count).map(|_| None).collect();
        slots[self.slot] = Some(grad.clone_box());
        Ok(vec![Some(Box::new(Slots(slots)))])
    }
}

/// The rule of the function's own node: its `backward`, on the outputs'
/// gradients (zeros where none came), checked.
struct Apply<D: Device, E: FloatElement, F> {
    function: F,
    ctx: Context<D, E>,
    inputs: Vec<Shape>,
    outputs: Vec<Shape>,
}

impl<D: Device, E: FloatElement, F: Function<D, E>> Backward for Apply<D, E, F> {
    fn backward(&self, grad: &dyn AnyGrad, needs: &[bool]) -> Result<Vec<Option<Box<dyn AnyGrad>>>> {
        let Slots(slots) = grad.as_any().downcast_ref().expect("a function's node receives its outputs' slots");
        let grads = slots
            .iter()
            .zip(&self.outputs)
            .map(|(slot, shape)| match slot {
                Some(g) => {
                    let g: &Tensor<D::Core, E> = g.as_any().downcast_ref().expect("an output's own type");
                    Ok(Tensor::from_core(g.clone()))
                }
                None => Tensor::<D, E>::try_zeros(shape.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        let name = self.function.name();
        let error = |reason: String| Error::Shape { op: name, device: D::name(), shapes: self.inputs.clone(), reason };
        let returned = self.function.backward(&self.ctx, &grads)?;
        if returned.len() != self.inputs.len() {
            return Err(error(format!(
                "backward returned {} gradients for {} inputs",
                returned.len(),
                self.inputs.len()
            )));
        }
        returned
            .into_iter()
            .zip(&self.inputs)
            .zip(needs)
            .enumerate()
            .map(|(i, ((g, shape), &need))| match g {
                Some(g) if g.shape() != shape => {
                    Err(error(format!("backward returned a gradient of shape {} for input {i}", g.shape())))
                }
                Some(g) if need => Ok(Some(Box::new(g.into_core()) as Box<dyn AnyGrad>)),
                _ => Ok(None),
            })
            .collect()
    }

    fn first_order_only(&self) -> bool {
        !self.function.twice_differentiable()
    }
}
