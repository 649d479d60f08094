//! Reverse-mode automatic differentiation, as in PyTorch.
//!
//! Gradient tracking is a run-time property of a tensor, not part of its
//! type: the device type keeps meaning one thing, where the data is, and a
//! data batch (untracked) meets a parameter (tracked) with no conversion.
//!
//! - [`Tensor::requires_grad`](crate::Tensor::requires_grad) marks a leaf (a parameter).
//! - Every operation with a tracked operand records a node: its operands'
//!   nodes and the rule that maps its gradient to theirs. Rules are tensor
//!   expressions, so they run on every device.
//! - [`Tensor::backward`](crate::Tensor::backward) walks the graph once, in reverse order, and returns
//!   a [`Gradients`] store holding one gradient per leaf, on the leaf's device.
//! - [`grad`] returns the gradients of chosen tensors instead; with
//!   [`GradOptions::create_graph`] the backward pass is itself recorded, so
//!   gradients can be differentiated again (a gradient penalty, a
//!   Hessian-vector product), to any order.
//! - [`Tensor::register_hook`](crate::Tensor::register_hook) sees (and may
//!   replace) a tensor's gradient during the walk.
//! - A [`Function`] is an op with a forward and backward pass of its own,
//!   any number of inputs and outputs, run with [`apply`].
//! - [`checkpoint`] keeps only a segment's inputs, and runs it again in
//!   the backward pass (gradient checkpointing).
//! - [`no_grad`] records nothing (evaluation, parameter updates), and
//!   [`enable_grad`] records again inside it;
//!   [`Tensor::detach`](crate::Tensor::detach) cuts a tensor out of the graph.
//!
//! Only float tensors (`f32`, `f64`) track gradients. Untracked tensors pay
//! one branch per operand for all this.
//!
//! ```
//! use devtensor::{Cpu, Tensor};
//! let w = Tensor::<Cpu>::from_vec(vec![0.5, -1.0], [2, 1]).requires_grad();
//! let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]); // a batch
//! let loss = x.matmul(&w).square().mean();
//! let grads = loss.backward();
//! // d/dw mean((xw)^2) = x^T (2 xw) / 2
//! let xw = [1.0 * 0.5 - 2.0, 3.0 * 0.5 - 4.0];
//! let expected = [1.0 * xw[0] + 3.0 * xw[1], 2.0 * xw[0] + 4.0 * xw[1]];
//! assert_eq!(grads.get(&w).unwrap().to_vec(), expected);
//! ```

mod backward;
mod checkpoint;
mod function;
mod grad;
mod graph;
mod hooks;

pub(crate) use backward::composed_gradients;
pub use backward::{Gradients, LeafId};
pub(crate) use checkpoint::checkpoint_fallible;
pub use checkpoint::{checkpoint, try_checkpoint};
pub use function::{Context, Function, apply, try_apply};
pub use grad::{GradInputs, GradOptions, grad, try_grad};
pub(crate) use graph::{
    Backward, Needs, Node, as_float, attach, float_rule, next_id, rule, rule_across, saved_output, track,
};
pub use graph::{enable_grad, inference_mode, is_grad_enabled, no_grad};
pub use hooks::HookHandle;
pub(crate) use hooks::HookList;
