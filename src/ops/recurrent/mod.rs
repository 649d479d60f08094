//! The fused gates of the recurrent cells: one pass, one kernel on CUDA,
//! for every element-wise step an LSTM or GRU cell takes between its two
//! products, and one for its gradient, as PyTorch's own fused cells
//! (`_thnn_fused_lstm_cell`, `_thnn_fused_gru_cell`) do.
//!
//! A step of `nn::Lstm` is then two products and one gate kernel, where the
//! gates written as tensor ops take fourteen element-wise passes, each
//! allocating its result and recording a node. The gates read the input's
//! and the state's parts of all gates as two `[batch, gates · hidden]`
//! tensors, each from one product; the half types compute in `f32` and
//! round each result once. `sequence.rs` runs a whole sequence through one
//! layer and direction as one recorded operation on the same kernels.

mod cpu;
mod cuda;
mod sequence;

use crate::autograd::{self, rule};
use crate::backend::Backend;
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::tensor::shell::{core_call, core_table};
use crate::tensor::{CoreDevice, Device, Tensor};
use sequence::SequenceInputs;

/// A contiguous `[batch, width]` operand of a gate kernel: the storage and
/// the offset of its first element.
pub type GateInput<'a, B, E> = (&'a <B as Backend>::Storage<E>, usize);

/// Device kernels for the recurrent cells' gates. Implemented by the core
/// devices ([`CoreDevice`]): `Cpu`, and one for every GPU. Every operand is
/// contiguous, `hidden` and `batch` at least 1; `H` below is `hidden`.
pub trait RecurrentKernel: Backend {
    /// The LSTM cell's step from the gates' pre-activations
    /// `gx + gh` (each `[batch, 4H]`, gates in PyTorch's order input,
    /// forget, cell, output) and the cell state `c` (`[batch, H]`): the
    /// new `[2, batch, H]`, `h'` then `c'`, and, with `save`, what the
    /// gradient reads, `[batch, 5H]`: the four activated gates and
    /// `tanh(c')`.
    fn lstm_gates<E: FloatElement>(
        gx: GateInput<'_, Self, E>,
        gh: GateInput<'_, Self, E>,
        c: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
        save: bool,
    ) -> Result<(Self::Storage<E>, Option<Self::Storage<E>>)>;

    /// The gradient of [`lstm_gates`](Self::lstm_gates) from the gradients
    /// of `h'` and `c'` (`[batch, H]` each), the saved `[batch, 5H]` and
    /// `c`: the gradient of the pre-activations, `[batch, 4H]` (the same
    /// for `gx` and `gh`), and of `c`, `[batch, H]`.
    fn lstm_gates_backward<E: FloatElement>(
        dh: GateInput<'_, Self, E>,
        dc: GateInput<'_, Self, E>,
        saved: &Self::Storage<E>,
        c: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
    ) -> Result<(Self::Storage<E>, Self::Storage<E>)>;

    /// The GRU cell's step from the input's and the state's parts of the
    /// gates, `gx = x W_ihᵀ + b_ih` and `gh = h W_hhᵀ + b_hh` (each
    /// `[batch, 3H]`, gates in PyTorch's order reset, update, new), and
    /// the state `h` (`[batch, H]`): the new state `[batch, H]`, and, with
    /// `save`, what the gradient reads, `[batch, 4H]`: the three activated
    /// gates and the state's part of the new gate.
    fn gru_gates<E: FloatElement>(
        gx: GateInput<'_, Self, E>,
        gh: GateInput<'_, Self, E>,
        h: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
        save: bool,
    ) -> Result<(Self::Storage<E>, Option<Self::Storage<E>>)>;

    /// The gradient of [`gru_gates`](Self::gru_gates) from the gradient of
    /// its result (`[batch, H]`), the saved `[batch, 4H]` and `h`: the
    /// gradients of `gx` and `gh` (`[batch, 3H]` each) and of `h`.
    fn gru_gates_backward<E: FloatElement>(
        grad: GateInput<'_, Self, E>,
        saved: &Self::Storage<E>,
        h: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
    ) -> Result<[Self::Storage<E>; 3]>;
}

/// Which cell a fused step is for.
#[derive(Clone, Copy)]
enum Gates {
    Lstm,
    Gru,
}

impl Gates {
    fn op(self) -> &'static str {
        match self {
            Gates::Lstm => "lstm_gates",
            Gates::Gru => "gru_gates",
        }
    }

    /// The name of a whole sequence's operation.
    fn sequence_op(self) -> &'static str {
        match self {
            Gates::Lstm => "lstm_sequence",
            Gates::Gru => "gru_sequence",
        }
    }

    /// Gates per cell.
    fn count(self) -> usize {
        match self {
            Gates::Lstm => 4,
            Gates::Gru => 3,
        }
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// The LSTM cell's gates: `h'` and `c'` stacked, `[2, batch, H]`, from
    /// the input's and the state's parts of the pre-activations
    /// (`[batch, 4H]` each) and the cell state `c` (`[batch, H]`).
    pub(crate) fn try_lstm_gates(gx: &Self, gh: &Self, c: &Self) -> Result<Self> {
        core_call!(D, Fns<E>.lstm_gates(gx.core(), gh.core(), c.core()))
    }

    /// The GRU cell's gates: the new state `[batch, H]` from
    /// `gx = x W_ihᵀ + b_ih`, `gh = h W_hhᵀ + b_hh` (`[batch, 3H]` each)
    /// and the state `h`.
    pub(crate) fn try_gru_gates(gx: &Self, gh: &Self, h: &Self) -> Result<Self> {
        core_call!(D, Fns<E>.gru_gates(gx.core(), gh.core(), h.core()))
    }

    /// One LSTM layer and direction over a whole sequence, recorded as one
    /// operation: from the input's part of the gates for every step
    /// (`[T, batch, 4H]`, both biases in it), `weight_hhᵀ` (`[H, 4H]`) and
    /// the initial `h` and `c` (`[batch, H]`), every step's `h` in time
    /// order, then the final `h` and `c`: `[T + 2, batch, H]`.
    pub(crate) fn try_lstm_sequence(gx: &Self, w: &Self, h0: &Self, c0: &Self, reverse: bool) -> Result<Self> {
        core_call!(D, Fns<E>.lstm_sequence(gx.core(), w.core(), h0.core(), c0.core(), reverse))
    }

    /// One GRU layer and direction over a whole sequence, as
    /// [`try_lstm_sequence`](Self::try_lstm_sequence) with `gx` holding
    /// `b_ih` and `bias` the GRU's `b_hh`: `[T + 1, batch, H]`.
    pub(crate) fn try_gru_sequence(gx: &Self, w: &Self, bias: Option<&Self>, h0: &Self, reverse: bool) -> Result<Self> {
        core_call!(D, Fns<E>.gru_sequence(gx.core(), w.core(), bias.map(Tensor::core), h0.core(), reverse))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    fn core_lstm_sequence(gx: &Self, w: &Self, h0: &Self, c0: &Self, reverse: bool) -> Result<Self> {
        sequence::run(Gates::Lstm, SequenceInputs { gx, w, bias: None, h0, c0: Some(c0), reverse })
    }

    fn core_gru_sequence(gx: &Self, w: &Self, bias: Option<&Self>, h0: &Self, reverse: bool) -> Result<Self> {
        sequence::run(Gates::Gru, SequenceInputs { gx, w, bias, h0, c0: None, reverse })
    }

    fn core_lstm_gates(gx: &Self, gh: &Self, c: &Self) -> Result<Self> {
        Self::fused_gates(Gates::Lstm, gx, gh, c)
    }

    fn core_gru_gates(gx: &Self, gh: &Self, h: &Self) -> Result<Self> {
        Self::fused_gates(Gates::Gru, gx, gh, h)
    }

    /// Either cell's gates, recorded as one operation of three operands.
    fn fused_gates(gates: Gates, gx: &Self, gh: &Self, state: &Self) -> Result<Self> {
        let op = gates.op();
        let (batch, hidden) = match state.dims() {
            &[batch, hidden] => (batch, hidden),
            _ => (0, 0),
        };
        let width = gates.count() * hidden;
        if state.rank() != 2 || gx.dims() != [batch, width] || gh.dims() != [batch, width] {
            return Err(Error::Shape {
                op,
                device: D::name(),
                shapes: vec![gx.shape().clone(), gh.shape().clone(), state.shape().clone()],
                reason: format!(
                    "expected the gates' two parts [batch, {} * hidden] and the state [batch, hidden]",
                    gates.count()
                ),
            });
        }
        let out_dims: Shape = match gates {
            Gates::Lstm => [2, batch, hidden].into(),
            Gates::Gru => [batch, hidden].into(),
        };
        if batch == 0 || hidden == 0 {
            return Tensor::try_zeros(out_dims);
        }
        let (gx_d, gh_d, state_d) = (dense(gx)?, dense(gh)?, dense(state)?);
        let inputs = [gx.node(), gh.node(), state.node()];
        let save = autograd::is_grad_enabled() && inputs.iter().any(Option::is_some);
        let (out, saved) = match gates {
            Gates::Lstm => D::lstm_gates(at(&gx_d), at(&gh_d), at(&state_d), batch, hidden, save)?,
            Gates::Gru => D::gru_gates(at(&gx_d), at(&gh_d), at(&state_d), batch, hidden, save)?,
        };
        let out = Tensor::from_storage(out, out_dims);
        let Some(saved) = saved else { return Ok(out) };
        let saved = Tensor::<D, E>::from_storage(saved, Shape::from(saved_len(gates, batch, hidden)));
        autograd::track(
            op,
            &inputs,
            || Ok(out),
            |_| {
                // The operands with their nodes, for a recorded backward.
                let operands = [gx_d.with_node_of(gx), gh_d.with_node_of(gh), state_d.with_node_of(state)];
                rule(move |g: &Tensor<D, E>, needs| {
                    if autograd::is_grad_enabled() {
                        // Recorded (`create_graph`): the gradients of the
                        // same gates composed of recorded ops, which can be
                        // differentiated again.
                        let [gx, gh, state] = &operands;
                        return autograd::composed_gradients(&[gx, gh, state], g, || {
                            composed_gates(gates, gx, gh, state)
                        });
                    }
                    let g = dense(g)?;
                    let s = saved.storage();
                    match gates {
                        Gates::Lstm => {
                            let dc_at = (g.storage(), g.layout().offset() + batch * hidden);
                            let (dgates, dc) = D::lstm_gates_backward(at(&g), dc_at, s, at(&state_d), batch, hidden)?;
                            let dgates = Tensor::from_storage(dgates, [batch, width].into());
                            let dc = Tensor::from_storage(dc, [batch, hidden].into());
                            Ok(vec![needs.get(0).then(|| dgates.clone()), needs.get(1).then_some(dgates), Some(dc)])
                        }
                        Gates::Gru => {
                            let [dgx, dgh, dh] = D::gru_gates_backward(at(&g), s, at(&state_d), batch, hidden)?;
                            Ok(vec![
                                Some(Tensor::from_storage(dgx, [batch, width].into())),
                                Some(Tensor::from_storage(dgh, [batch, width].into())),
                                Some(Tensor::from_storage(dh, [batch, hidden].into())),
                            ])
                        }
                    }
                })
            },
        )
    }
}

/// Either cell's gates written out with recorded ops, as the kernels
/// compute them (PyTorch's formulas): for the LSTM `[h', c']` stacked,
/// with `c' = σ(f) c + σ(i) tanh(g)` and `h' = σ(o) tanh(c')` from the
/// pre-activations `gx + gh` in the order `i, f, g, o`; for the GRU
/// `h' = n + z (h - n)` with `r, z = σ(gx + gh)` and
/// `n = tanh(gx_n + r gh_n)`. What a recorded backward differentiates.
fn composed_gates<D: CoreDevice, E: FloatElement>(
    gates: Gates,
    gx: &Tensor<D, E>,
    gh: &Tensor<D, E>,
    state: &Tensor<D, E>,
) -> Result<Tensor<D, E>> {
    let hidden = state.dims()[1];
    let part = |t: &Tensor<D, E>, k: usize| t.try_narrow(1, k * hidden, hidden);
    match gates {
        Gates::Lstm => {
            let pre = gx.try_add(gh)?;
            let (i, f) = (part(&pre, 0)?.try_sigmoid()?, part(&pre, 1)?.try_sigmoid()?);
            let (g, o) = (part(&pre, 2)?.try_tanh()?, part(&pre, 3)?.try_sigmoid()?);
            let c = f.try_mul(state)?.try_add(&i.try_mul(&g)?)?;
            let h = o.try_mul(&c.try_tanh()?)?;
            Tensor::try_stack(&[&h, &c], 0)
        }
        Gates::Gru => {
            let r = part(gx, 0)?.try_add(&part(gh, 0)?)?.try_sigmoid()?;
            let z = part(gx, 1)?.try_add(&part(gh, 1)?)?.try_sigmoid()?;
            let n = part(gx, 2)?.try_add(&r.try_mul(&part(gh, 2)?)?)?.try_tanh()?;
            n.try_add(&z.try_mul(&state.try_sub(&n)?)?)
        }
    }
}

/// A tensor detached (a gradient rule keeps it, not its graph) and copied
/// where it is not contiguous, as the gate kernels read their operands.
fn dense<D: CoreDevice, E: FloatElement>(t: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    if t.is_contiguous() { Ok(t.detach()) } else { t.detach().try_contiguous() }
}

/// A contiguous tensor as a gate kernel's operand.
fn at<D: CoreDevice, E: FloatElement>(t: &Tensor<D, E>) -> GateInput<'_, D, E> {
    (t.storage(), t.layout().offset())
}

/// The elements a gate kernel saves for the gradient: five per hidden
/// unit for the LSTM, four for the GRU.
fn saved_len(gates: Gates, batch: usize, hidden: usize) -> usize {
    batch * hidden * (gates.count() + 1)
}

core_table! {
    /// The core's fused recurrent gates.
    pub(crate) struct Fns<C, F: FloatElement> {
        lstm_gates: fn(&Tensor<C, F>, &Tensor<C, F>, &Tensor<C, F>) -> Result<Tensor<C, F>> = Tensor::core_lstm_gates,
        gru_gates: fn(&Tensor<C, F>, &Tensor<C, F>, &Tensor<C, F>) -> Result<Tensor<C, F>> = Tensor::core_gru_gates,
        lstm_sequence: fn(&Tensor<C, F>, &Tensor<C, F>, &Tensor<C, F>, &Tensor<C, F>, bool) -> Result<Tensor<C, F>> =
            Tensor::core_lstm_sequence,
        gru_sequence: for<'a> fn(&Tensor<C, F>, &Tensor<C, F>, Option<&'a Tensor<C, F>>, &Tensor<C, F>, bool) -> Result<Tensor<C, F>> =
            Tensor::core_gru_sequence,
    }
}
