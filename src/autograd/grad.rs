//! [`grad`]: the gradients of chosen tensors, returned rather than stored,
//! and with `create_graph` themselves tensors of the graph, so that they
//! can be differentiated again (PyTorch's `torch.autograd.grad`).

use super::backward::{Walk, walk};
use super::graph::{AnyGrad, Node, with_grad_enabled};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::tensor::shell::{core_call, core_table};
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;
use std::collections::HashSet;
use std::sync::Arc;

/// The keyword arguments of [`grad`], PyTorch's, built from
/// [`GradOptions::new`] (all off, as PyTorch's defaults are).
///
/// There is no `retain_graph`: a graph here lives as long as the tensors
/// that reach it, so it can always be walked again.
pub struct GradOptions<'a, D: Device, E: FloatElement> {
    grad_outputs: Option<&'a [&'a Tensor<D, E>]>,
    create_graph: bool,
    materialize_grads: bool,
}

impl<'a, D: Device, E: FloatElement> GradOptions<'a, D, E> {
    /// No `grad_outputs` (each output must then have one element), no
    /// `create_graph`, no `materialize_grads`.
    pub fn new() -> Self {
        GradOptions { grad_outputs: None, create_graph: false, materialize_grads: false }
    }

    /// The gradient of some scalar with respect to each output, one per
    /// output and of its shape (PyTorch's `grad_outputs`, the vector of a
    /// vector-Jacobian product). It may itself track gradients.
    pub fn grad_outputs(mut self, grad_outputs: &'a [&'a Tensor<D, E>]) -> Self {
        self.grad_outputs = Some(grad_outputs);
        self
    }

    /// Whether the backward pass is recorded, so that the gradients track
    /// and can be differentiated again: a gradient penalty, a
    /// Hessian-vector product (PyTorch's `create_graph`).
    pub fn create_graph(mut self, create_graph: bool) -> Self {
        self.create_graph = create_graph;
        self
    }

    /// Whether an input that the outputs do not depend on gets a gradient
    /// of zeros rather than an error (PyTorch's `materialize_grads`; with
    /// `allow_unused` alone PyTorch returns `None`, which an array of
    /// tensors cannot hold).
    pub fn materialize_grads(mut self, materialize_grads: bool) -> Self {
        self.materialize_grads = materialize_grads;
        self
    }
}

impl<D: Device, E: FloatElement> Default for GradOptions<'_, D, E> {
    fn default() -> Self {
        Self::new()
    }
}

/// The gradients of the sum of `outputs` (weighted by `grad_outputs` when
/// given) with respect to each of `inputs`, like PyTorch's
/// `torch.autograd.grad(outputs, inputs)`. Inputs may be leaves or
/// computed tensors. Nothing else is computed or stored: the rules on no
/// path to an input do not run, and no [`Gradients`](super::Gradients)
/// store is filled.
///
/// With [`create_graph`](GradOptions::create_graph) the gradients track,
/// so a loss built from them can be differentiated again, to any order.
/// A gradient that went through an op whose backward is a fused kernel
/// without a backward of its own can be used, but differentiating it again
/// fails with an error naming that op.
///
/// Fails when an output tracks nothing or has more than one element
/// without a `grad_outputs` entry, when a `grad_outputs` entry's shape is
/// not its output's, when an input tracks nothing, or when the outputs do
/// not depend on an input (unless
/// [`materialize_grads`](GradOptions::materialize_grads)).
///
/// A gradient penalty (WGAN-GP's), whose gradient reaches the weights
/// through the input gradient:
///
/// ```
/// use devtensor::autograd::{GradOptions, grad};
/// use devtensor::{Cpu, Tensor};
/// let w = Tensor::<Cpu, f64>::from_vec(vec![0.5, -2.0], [2, 1]).requires_grad();
/// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 3.0], [1, 2]).requires_grad();
/// let critic = x.matmul(&w).tanh().sum();
/// let [dx] = grad(&[&critic], [&x], GradOptions::new().create_graph(true));
/// // d critic / dx = (1 - tanh(xw)^2) w^T, itself a function of w.
/// let penalty = (dx.square().sum().sqrt() - 1.0).square();
/// let grads = penalty.backward();
/// assert!(grads.get(&w).is_some());
/// ```
///
/// A list of any length (the parameters of a model, say) gives a `Vec`:
///
/// ```
/// use devtensor::autograd::{GradOptions, grad};
/// use devtensor::{Cpu, Tensor};
/// let params = [Tensor::<Cpu>::ones([2]).requires_grad(), Tensor::<Cpu>::ones([3]).requires_grad()];
/// let loss = params[0].sum() * params[1].square().sum();
/// let inputs: Vec<&Tensor<Cpu>> = params.iter().collect();
/// let grads = grad(&[&loss], &inputs[..], GradOptions::new());
/// assert_eq!(grads[0].to_vec(), [3.0, 3.0]);
/// assert_eq!(grads[1].to_vec(), [4.0, 4.0, 4.0]);
/// ```
#[fallible(free)]
pub fn grad<'a, D: Device, E: FloatElement, I: GradInputs<'a, D, E>>(
    outputs: &[&Tensor<D, E>],
    inputs: I,
    options: GradOptions<'_, D, E>,
) -> I::Grads {
    let outputs: Vec<&Tensor<D::Core, E>> = outputs.iter().map(|t| t.core()).collect();
    let inputs: Vec<&Tensor<D::Core, E>> = inputs.tensors().iter().map(|t| t.core()).collect();
    let seeds: Option<Vec<&Tensor<D::Core, E>>> = options.grad_outputs.map(|g| g.iter().map(|t| t.core()).collect());
    let how = How { create_graph: options.create_graph, materialize_grads: options.materialize_grads };
    let grads: Result<Vec<Tensor<D, E>>> = core_call!(D, Fns<E>.grad(&outputs, &inputs, seeds.as_deref(), how));
    Ok(I::grads(grads?))
}

/// The `inputs` of [`grad`]: an array, whose gradients come back as an
/// array of the same length (`let [dx, dw] = grad(.., [&x, &w], ..)`), or
/// a slice, whose gradients come back as a `Vec`.
pub trait GradInputs<'a, D: Device, E: FloatElement> {
    /// The gradients, one per input, in order.
    type Grads;
    /// The inputs, in order.
    fn tensors(&self) -> &[&'a Tensor<D, E>];
    /// The gradients as returned, from one per input.
    fn grads(grads: Vec<Tensor<D, E>>) -> Self::Grads;
}

impl<'a, D: Device, E: FloatElement, const N: usize> GradInputs<'a, D, E> for [&'a Tensor<D, E>; N] {
    type Grads = [Tensor<D, E>; N];
    fn tensors(&self) -> &[&'a Tensor<D, E>] {
        self
    }
    fn grads(grads: Vec<Tensor<D, E>>) -> Self::Grads {
        grads.try_into().unwrap_or_else(|_| unreachable!("one gradient per input"))
    }
}

impl<'a, D: Device, E: FloatElement> GradInputs<'a, D, E> for &[&'a Tensor<D, E>] {
    type Grads = Vec<Tensor<D, E>>;
    fn tensors(&self) -> &[&'a Tensor<D, E>] {
        self
    }
    fn grads(grads: Vec<Tensor<D, E>>) -> Self::Grads {
        grads
    }
}

/// The flags of [`GradOptions`], as the core takes them.
#[derive(Clone, Copy)]
pub(crate) struct How {
    create_graph: bool,
    materialize_grads: bool,
}

core_table! {
    /// The core of [`grad`].
    pub(crate) struct Fns<C, F: FloatElement> {
        grad: fn(&[&Tensor<C, F>], &[&Tensor<C, F>], Option<&[&Tensor<C, F>]>, How) -> Result<Vec<Tensor<C, F>>> = core_grad,
    }
}

fn argument_error<D: CoreDevice>(reason: String) -> Error {
    Error::Argument { op: "grad", device: D::name(), reason }
}

fn core_grad<D: CoreDevice, E: FloatElement>(
    outputs: &[&Tensor<D, E>],
    inputs: &[&Tensor<D, E>],
    grad_outputs: Option<&[&Tensor<D, E>]>,
    how: How,
) -> Result<Vec<Tensor<D, E>>> {
    if let Some(seeds) = grad_outputs
        && seeds.len() != outputs.len()
    {
        return Err(argument_error::<D>(format!(
            "{} grad_outputs were given for {} outputs: one per output",
            seeds.len(),
            outputs.len()
        )));
    }
    let mut roots: Vec<(&Arc<Node>, Box<dyn AnyGrad>)> = Vec::with_capacity(outputs.len());
    for (i, output) in outputs.iter().enumerate() {
        let Some(node) = output.node() else {
            return Err(argument_error::<D>(format!(
                "output {i} tracks no gradient: no operand of the operations that made it was \
                 marked with `requires_grad`, or it was computed under `no_grad`"
            )));
        };
        let seed = match grad_outputs.map(|seeds| seeds[i]) {
            Some(seed) if seed.shape() != output.shape() => {
                return Err(Error::Shape {
                    op: "grad",
                    device: D::name(),
                    shapes: vec![output.shape().clone(), seed.shape().clone()],
                    reason: format!("grad_outputs[{i}] must have the shape of output {i}"),
                });
            }
            Some(seed) if how.create_graph => seed.clone(),
            Some(seed) => seed.detach(),
            None if output.elem_count() != 1 => {
                return Err(Error::Shape {
                    op: "grad",
                    device: D::name(),
                    shapes: vec![output.shape().clone()],
                    reason: format!(
                        "a gradient can be created implicitly only for a one-element output; \
                         give output {i} its gradient in `grad_outputs`"
                    ),
                });
            }
            None => output.try_ones_like()?,
        };
        roots.push((node, Box::new(seed)));
    }
    let mut targets = HashSet::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        let Some(node) = input.node() else {
            return Err(argument_error::<D>(format!(
                "input {i} tracks no gradient: mark it with `requires_grad`, or compute it from a \
                 tensor that is"
            )));
        };
        targets.insert(node.id);
    }
    let how_walk = Walk { targets: Some(&targets), create_graph: how.create_graph, ready: None, frontier_below: 0 };
    let found = with_grad_enabled(how.create_graph, || walk(roots, how_walk))?;
    inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            let id = input.node().expect("checked above").id;
            match found.by_node::<D, E>(id) {
                Some(grad) => Ok(grad),
                None if how.materialize_grads => input.try_zeros_like(),
                None => Err(argument_error::<D>(format!(
                    "input {i} was not used in computing the outputs; pass \
                     `GradOptions::materialize_grads(true)` for a gradient of zeros"
                ))),
            }
        })
        .collect()
}
