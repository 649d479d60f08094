//! A whole sequence through one LSTM or GRU layer and direction, recorded
//! as one operation, as cuDNN's and oneDNN's RNN primitives run it.
//!
//! Recorded step by step, every step's `gx.select(0, t)` got in the
//! backward pass a gradient the size of the whole `[T, batch, gates · H]`
//! input projection, zero-filled and added to the others: a cost growing
//! with the square of the sequence length, three quarters of a char-LSTM's
//! training step. Here the forward runs the steps untracked, keeping each
//! step's saved gates; the backward walks them in reverse, writes the
//! input projection's gradient once and computes the recurrent weight's
//! as one product over all steps, `[H, T · batch] × [T · batch, gates · H]`.

use super::{Gates, at, dense, saved_len};
use crate::autograd::{self, Node, no_grad, rule};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::tensor::{CoreDevice, Tensor};
use std::sync::Arc;

/// What the backward pass keeps of one step.
struct Step<D: CoreDevice, E: FloatElement> {
    /// The time step.
    t: usize,
    /// The gate kernel's saved values.
    saved: Tensor<D, E>,
    /// The state the step read: `h`, and `c` for the LSTM.
    h: Tensor<D, E>,
    c: Option<Tensor<D, E>>,
}

/// The operands of a sequence, as the core receives them.
pub(super) struct SequenceInputs<'a, D: CoreDevice, E: FloatElement> {
    /// The input's part of the gates, `[T, batch, gates · H]`.
    pub(super) gx: &'a Tensor<D, E>,
    /// `weight_hhᵀ`, `[H, gates · H]`.
    pub(super) w: &'a Tensor<D, E>,
    /// The GRU's `b_hh`, `[gates · H]`.
    pub(super) bias: Option<&'a Tensor<D, E>>,
    /// The initial `h`, `[batch, H]`.
    pub(super) h0: &'a Tensor<D, E>,
    /// The LSTM's initial `c`, `[batch, H]`.
    pub(super) c0: Option<&'a Tensor<D, E>>,
    /// Whether the steps run from the last to the first.
    pub(super) reverse: bool,
}

/// The sequence's result: every step's `h` in time order, then the final
/// `h` and, for the LSTM, the final `c`: `[T + 1 (+ 1), batch, H]`.
pub(super) fn run<D: CoreDevice, E: FloatElement>(gates: Gates, x: SequenceInputs<'_, D, E>) -> Result<Tensor<D, E>> {
    let op = gates.sequence_op();
    let (steps, batch, hidden) = (x.gx.dims().first().copied(), x.h0.dims().first().copied(), x.w.dims().first());
    let (steps, batch, hidden) = (steps.unwrap_or(0), batch.unwrap_or(0), hidden.copied().unwrap_or(0));
    let width = gates.count() * hidden;
    let state = [batch, hidden];
    let fits = x.gx.dims() == [steps, batch, width]
        && x.w.dims() == [hidden, width]
        && x.bias.is_none_or(|b| b.dims() == [width])
        && x.h0.dims() == state
        && x.c0.is_none_or(|c| c.dims() == state)
        && x.c0.is_some() == matches!(gates, Gates::Lstm);
    if !fits {
        let mut shapes = vec![x.gx.shape().clone(), x.w.shape().clone()];
        shapes.extend(x.bias.iter().chain([&x.h0]).chain(&x.c0).map(|t| t.shape().clone()));
        return Err(Error::Shape {
            op,
            device: D::name(),
            shapes,
            reason: format!(
                "expected gx [seq, batch, {g} * hidden], weight_hh transposed [hidden, {g} * hidden] and states \
                 [batch, hidden]",
                g = gates.count()
            ),
        });
    }
    let states = if x.c0.is_some() { 2 } else { 1 };
    if steps == 0 || batch == 0 || hidden == 0 {
        return Tensor::try_zeros([steps + states, batch, hidden]);
    }
    let mut inputs: Vec<Option<&Arc<Node>>> = vec![x.gx.node(), x.w.node(), x.h0.node()];
    inputs.extend(x.bias.map(Tensor::node));
    inputs.extend(x.c0.map(Tensor::node));
    let save = autograd::is_grad_enabled() && inputs.iter().any(Option::is_some);
    let (gx, w) = (dense(x.gx)?, dense(x.w)?);
    let bias = x.bias.map(dense).transpose()?;
    let order: Vec<usize> = if x.reverse { (0..steps).rev().collect() } else { (0..steps).collect() };

    // The forward pass, untracked: the steps' results are views of the
    // kernels' outputs.
    let mut h = dense(x.h0)?;
    let mut c = x.c0.map(dense).transpose()?;
    let mut outputs: Vec<Option<Tensor<D, E>>> = vec![None; steps];
    let mut kept = Vec::with_capacity(if save { steps } else { 0 });
    no_grad(|| -> Result<()> {
        for &t in &order {
            let gx_t = gx.try_select(0, t)?;
            let gh = match &bias {
                Some(b) => h.try_matmul_bias(&w, b)?.map_or_else(|| h.try_matmul(&w)?.try_add(b), Ok)?,
                None => h.try_matmul(&w)?,
            };
            let (next_h, next_c, saved) = match &c {
                Some(c) => {
                    let (out, saved) = D::lstm_gates(at(&gx_t), at(&gh), at(c), batch, hidden, save)?;
                    let hc = Tensor::<D, E>::from_storage(out, [2, batch, hidden].into());
                    (hc.try_select(0, 0)?, Some(hc.try_select(0, 1)?), saved)
                }
                None => {
                    let (out, saved) = D::gru_gates(at(&gx_t), at(&gh), at(&h), batch, hidden, save)?;
                    (Tensor::from_storage(out, [batch, hidden].into()), None, saved)
                }
            };
            if let Some(saved) = saved {
                let saved = Tensor::from_storage(saved, Shape::from(saved_len(gates, batch, hidden)));
                kept.push(Step { t, saved, h: h.clone(), c: c.clone() });
            }
            outputs[t] = Some(next_h.clone());
            (h, c) = (next_h, next_c);
        }
        Ok(())
    })?;
    let mut parts: Vec<&Tensor<D, E>> = outputs.iter().flatten().collect();
    parts.push(&h);
    parts.extend(&c);
    let out = no_grad(|| Tensor::try_stack(&parts, 0))?;
    if !save {
        return Ok(out);
    }
    let backward = Backward { gates, steps, batch, hidden, w, has_bias: bias.is_some(), kept };
    // The operands with their nodes, for a recorded backward, in the order
    // of `inputs`.
    let mut operands = vec![x.gx.clone(), x.w.clone(), x.h0.clone()];
    operands.extend(x.bias.cloned());
    operands.extend(x.c0.cloned());
    let reverse = x.reverse;
    autograd::track(
        op,
        &inputs,
        || Ok(out),
        |_| {
            rule(move |g: &Tensor<D, E>, needs| {
                if autograd::is_grad_enabled() {
                    // Recorded (`create_graph`): the gradients of the same
                    // steps composed of recorded ops, which can be
                    // differentiated again.
                    let read: Vec<&Tensor<D, E>> = operands.iter().collect();
                    return autograd::composed_gradients(&read, g, || composed(gates, &operands, reverse));
                }
                backward.grads(g, needs)
            })
        },
    )
}

/// The sequence written out with recorded ops, step by step as `run`
/// computes it (`operands`: `gx`, `w`, `h0`, then the GRU's bias or the
/// LSTM's `c0`).
fn composed<D: CoreDevice, E: FloatElement>(
    gates: Gates,
    operands: &[Tensor<D, E>],
    reverse: bool,
) -> Result<Tensor<D, E>> {
    let (gx, w, mut h) = (&operands[0], &operands[1], operands[2].clone());
    let (bias, mut c) = match gates {
        Gates::Gru => (operands.get(3), None),
        Gates::Lstm => (None, operands.get(3).cloned()),
    };
    let steps = gx.dims()[0];
    let order: Vec<usize> = if reverse { (0..steps).rev().collect() } else { (0..steps).collect() };
    let mut outputs: Vec<Option<Tensor<D, E>>> = vec![None; steps];
    for &t in &order {
        let gx_t = gx.try_select(0, t)?;
        let gh = match bias {
            Some(b) => h.try_matmul(w)?.try_add(b)?,
            None => h.try_matmul(w)?,
        };
        match &c {
            Some(state) => {
                let hc = super::composed_gates(gates, &gx_t, &gh, state)?;
                (h, c) = (hc.try_select(0, 0)?, Some(hc.try_select(0, 1)?));
            }
            None => h = super::composed_gates(gates, &gx_t, &gh, &h)?,
        }
        outputs[t] = Some(h.clone());
    }
    let mut parts: Vec<&Tensor<D, E>> = outputs.iter().flatten().collect();
    parts.push(&h);
    parts.extend(&c);
    Tensor::try_stack(&parts, 0)
}

/// The backward pass of one recorded sequence.
struct Backward<D: CoreDevice, E: FloatElement> {
    gates: Gates,
    steps: usize,
    batch: usize,
    hidden: usize,
    /// `weight_hhᵀ`, `[H, gates · H]`.
    w: Tensor<D, E>,
    has_bias: bool,
    /// Every step, in the order they ran.
    kept: Vec<Step<D, E>>,
}

impl<D: CoreDevice, E: FloatElement> Backward<D, E> {
    /// The gradients of `gx`, `w`, `h0`, then the bias and `c0` where
    /// the sequence has them, from the gradient of its result.
    fn grads(&self, g: &Tensor<D, E>, needs: autograd::Needs) -> Result<Vec<Option<Tensor<D, E>>>> {
        let (steps, batch, hidden) = (self.steps, self.batch, self.hidden);
        let width = self.gates.count() * hidden;
        let g = dense(g)?;
        // `w` as the products of the state's gradient read it, row-major.
        let w_t = self.w.try_t()?.try_contiguous()?;
        let mut dh = g.try_select(0, steps)?;
        let mut dc = match self.gates {
            Gates::Lstm => Some(g.try_select(0, steps + 1)?),
            Gates::Gru => None,
        };
        // The input part's gradient of each step, in time order, and the
        // state part's, in the order the steps ran (as `kept`).
        let mut dgx: Vec<Option<Tensor<D, E>>> = vec![None; steps];
        let mut dgh: Vec<Tensor<D, E>> = Vec::with_capacity(steps);
        for step in self.kept.iter().rev() {
            let dh_t = dh.try_add(&g.try_select(0, step.t)?)?;
            let s = step.saved.storage();
            match (&step.c, &dc) {
                (Some(c), Some(dc_t)) => {
                    let (dgates, dc_prev) = D::lstm_gates_backward(at(&dh_t), at(dc_t), s, at(c), batch, hidden)?;
                    let dgates = Tensor::<D, E>::from_storage(dgates, [batch, width].into());
                    dh = dgates.try_matmul(&w_t)?;
                    dc = Some(Tensor::from_storage(dc_prev, [batch, hidden].into()));
                    dgx[step.t] = Some(dgates.clone());
                    dgh.push(dgates);
                }
                _ => {
                    let [dx, dhh, dh_direct] = D::gru_gates_backward(at(&dh_t), s, at(&step.h), batch, hidden)?;
                    let dhh = Tensor::<D, E>::from_storage(dhh, [batch, width].into());
                    let dh_direct = Tensor::<D, E>::from_storage(dh_direct, [batch, hidden].into());
                    dh = dhh.try_matmul(&w_t)?.try_add(&dh_direct)?;
                    dgx[step.t] = Some(Tensor::from_storage(dx, [batch, width].into()));
                    dgh.push(dhh);
                }
            }
        }
        dgh.reverse();
        let dgx: Vec<&Tensor<D, E>> = dgx.iter().flatten().collect();
        let dgx = needs.then(0, || Tensor::try_stack(&dgx, 0))?;
        // Over every step at once: dW = Σ_t h_tᵀ · dgh_t.
        let dgh =
            (needs.get(1) || self.has_bias).then(|| Tensor::try_cat(&dgh.iter().collect::<Vec<_>>(), 0)).transpose()?;
        let dw = match &dgh {
            Some(dgh) if needs.get(1) => {
                let h: Vec<&Tensor<D, E>> = self.kept.iter().map(|s| &s.h).collect();
                Some(Tensor::try_cat(&h, 0)?.try_t()?.try_matmul(dgh)?)
            }
            _ => None,
        };
        let mut grads = vec![dgx, dw, Some(dh)];
        if self.has_bias {
            // The bias's gradient, the rows of `dgh` summed: a product with
            // ones, in the element type itself.
            let bias_grad = match &dgh {
                Some(dgh) if needs.get(3) => {
                    let ones = Tensor::<D, E>::try_ones([1, steps * batch])?;
                    Some(ones.try_matmul(dgh)?.try_reshape([width])?)
                }
                _ => None,
            };
            grads.push(bias_grad);
        }
        if matches!(self.gates, Gates::Lstm) {
            grads.push(dc);
        }
        Ok(grads)
    }
}
