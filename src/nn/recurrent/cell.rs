//! The three recurrent cells, PyTorch's `nn.RNNCell`, `nn.LSTMCell` and
//! `nn.GRUCell`, and the one step of each recurrence, which the layers of
//! `layer.rs` run at every time step.

use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::nn::init::{default_bound, uniform};
use crate::nn::parameter::{check, parameter};
use crate::nn::{Relu, Tanh};
use crate::tensor::{Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

mod sealed {
    pub trait Sealed {}
}

/// The activation of an [`RnnCell`] or [`Rnn`](super::Rnn), given as the
/// layer type: [`Tanh`] (the default) or [`Relu`], PyTorch's
/// `nonlinearity='tanh'` or `'relu'`.
pub trait RnnNonlinearity: sealed::Sealed {
    /// PyTorch's name for it, `"tanh"` or `"relu"`.
    const NAME: &'static str;
}

impl sealed::Sealed for Tanh {}
impl sealed::Sealed for Relu {}

impl RnnNonlinearity for Tanh {
    const NAME: &'static str = "tanh";
}

impl RnnNonlinearity for Relu {
    const NAME: &'static str = "relu";
}

/// What a layer carries from one time step to the next: `h` for the RNN
/// and the GRU, `(h, c)` for the LSTM.
pub(super) trait CellState<D: Device, E: FloatElement>: Clone {
    /// The hidden state `h`, the layer's output at this step.
    fn h(&self) -> &Tensor<D, E>;
    /// `self` in the rows where `mask` ([batch, 1]) is set and `old`
    /// elsewhere: how a sequence that has ended keeps its last state.
    fn keep_where(&self, mask: &Tensor<D, u8>, old: &Self) -> Result<Self>;
}

impl<D: Device, E: FloatElement> CellState<D, E> for Tensor<D, E> {
    fn h(&self) -> &Tensor<D, E> {
        self
    }

    fn keep_where(&self, mask: &Tensor<D, u8>, old: &Self) -> Result<Self> {
        mask.try_where_cond(self, old)
    }
}

impl<D: Device, E: FloatElement> CellState<D, E> for (Tensor<D, E>, Tensor<D, E>) {
    fn h(&self) -> &Tensor<D, E> {
        &self.0
    }

    fn keep_where(&self, mask: &Tensor<D, u8>, old: &Self) -> Result<Self> {
        Ok((mask.try_where_cond(&self.0, &old.0)?, mask.try_where_cond(&self.1, &old.1)?))
    }
}

/// A cell as the layers run it: its weights made ready for the products,
/// and one step.
pub(super) trait Cell<D: Device, E: FloatElement> {
    /// `Tensor` (`h`) or `(Tensor, Tensor)` (`(h, c)`).
    type State: CellState<D, E>;

    /// The weights as the products read them, made once per layer and
    /// direction.
    fn gate_weights(&self) -> Result<GateWeights<D, E>>;

    /// The next state from the input's part of the gates,
    /// `gx = x W_ihᵀ + b` (`[batch, gates · hidden_size]`, `b` as
    /// [`GateWeights::input_parts`] says), and the state. The layers
    /// compute `gx` for every time step in one product.
    fn step(&self, weights: &GateWeights<D, E>, gx: &Tensor<D, E>, state: &Self::State) -> Result<Self::State>;

    /// The state of zeros for `batch` rows, PyTorch's default `hx`.
    fn zero_state(&self, batch: usize) -> Result<Self::State>;

    /// The whole sequence as one recorded operation, where the cell has
    /// one (`ops::recurrent`'s LSTM and GRU): from `gx` for every step
    /// (`[T, batch, gates · hidden_size]`), every step's `h` in time order
    /// (`[T, batch, hidden_size]`) and the final state; `None` runs
    /// [`step`](Self::step) by step.
    fn sequence(
        &self,
        _weights: &GateWeights<D, E>,
        _gx: &Tensor<D, E>,
        _state: &Self::State,
        _reverse: bool,
    ) -> Result<Option<(Tensor<D, E>, Self::State)>> {
        Ok(None)
    }
}

/// A cell's weights as the products read them: `weight_ih` and
/// `weight_hh` transposed, so that each step is one product for all
/// gates, `[batch, hidden] × [hidden, gates · hidden]`, whose contiguous
/// rows the fused gates read (`ops::recurrent`).
pub(super) struct GateWeights<D: Device, E: FloatElement> {
    ih: Tensor<D, E>,
    hh: Tensor<D, E>,
    /// Added to the input's part: `b_ih`, and `b_hh` too where the cell
    /// only ever adds the two parts (RNN, LSTM), so that a step adds none.
    bias_x: Option<Tensor<D, E>>,
    /// Added to the state's part: the GRU's `b_hh`, which its new gate
    /// multiplies by the reset gate with `h W_hnᵀ`.
    bias_h: Option<Tensor<D, E>>,
}

impl<D: Device, E: FloatElement> GateWeights<D, E> {
    fn new(
        op: &'static str,
        gates: usize,
        (weight_ih, weight_hh): (&Tensor<D, E>, &Tensor<D, E>),
        (bias_ih, bias_hh): (Option<&Tensor<D, E>>, Option<&Tensor<D, E>>),
        state_bias_apart: bool,
    ) -> Result<Self> {
        let hidden = weight_hh.dims()[1];
        let rows = gates * hidden;
        let fits = weight_ih.dims()[0] == rows
            && weight_hh.dims()[0] == rows
            && bias_ih.iter().chain(&bias_hh).all(|b| b.dims() == [rows]);
        if !fits {
            let mut shapes = vec![weight_ih.shape().clone(), weight_hh.shape().clone()];
            shapes.extend(bias_ih.iter().chain(&bias_hh).map(|b| b.shape().clone()));
            return Err(Error::Shape {
                op,
                device: D::name(),
                shapes,
                reason: format!("the weights must have {gates} * hidden_size rows, as the cell was made with"),
            });
        }
        let (bias_x, bias_h) = match (bias_ih, bias_hh) {
            (Some(b_ih), Some(b_hh)) if !state_bias_apart => (Some(b_ih.try_add(b_hh)?), None),
            (b_ih, b_hh) => (b_ih.cloned(), b_hh.cloned()),
        };
        Ok(GateWeights { ih: weight_ih.try_t()?, hh: weight_hh.try_t()?, bias_x, bias_h })
    }

    /// The weights copied row-major, for a layer's run over a sequence:
    /// read as transposed views, every step's product took the CPU's
    /// transposed path and a copy of its result (a tenth of an LSTM's
    /// inference). A cell's single step keeps the views.
    pub(super) fn for_sequence(self) -> Result<Self> {
        Ok(GateWeights { ih: self.ih.try_contiguous()?, hh: self.hh.try_contiguous()?, ..self })
    }

    /// The input's part of every gate for the rows of `x`
    /// (`[rows, input_size]`): `[rows, gates · hidden]`.
    pub(super) fn input_parts(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        affine(x, &self.ih, self.bias_x.as_ref())
    }

    /// The state's part of every gate, `h W_hhᵀ` (plus `b_hh` for the GRU).
    fn hidden_parts(&self, h: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        affine(h, &self.hh, self.bias_h.as_ref())
    }
}

/// `x wᵀ + b` for `w_t = wᵀ`, in one pass where the device fuses the bias
/// (as `Linear`).
fn affine<D: Device, E: FloatElement>(
    x: &Tensor<D, E>,
    w_t: &Tensor<D, E>,
    b: Option<&Tensor<D, E>>,
) -> Result<Tensor<D, E>> {
    if let Some(b) = b
        && let Some(y) = x.try_matmul_bias(w_t, b)?
    {
        return Ok(y);
    }
    let y = x.try_matmul(w_t)?;
    match b {
        Some(b) => y.try_add(b),
        None => Ok(y),
    }
}

/// The four tensors every cell has, made or checked once for all three.
struct Weights<D: Device, E: FloatElement> {
    weight_ih: Tensor<D, E>,
    weight_hh: Tensor<D, E>,
    bias_ih: Option<Tensor<D, E>>,
    bias_hh: Option<Tensor<D, E>>,
}

impl<D: Device, E: FloatElement> Weights<D, E> {
    /// PyTorch's initialisation of every recurrent weight and bias:
    /// `U(-k, k)`, `k = 1/sqrt(hidden_size)`.
    fn init(gates: usize, input_size: usize, hidden_size: usize) -> Result<Self> {
        let k = default_bound(hidden_size);
        let rows = gates * hidden_size;
        Ok(Weights {
            weight_ih: uniform::<D, E>([rows, input_size], k)?.requires_grad(),
            weight_hh: uniform::<D, E>([rows, hidden_size], k)?.requires_grad(),
            bias_ih: Some(uniform::<D, E>([rows], k)?.requires_grad()),
            bias_hh: Some(uniform::<D, E>([rows], k)?.requires_grad()),
        })
    }

    /// The given tensors as parameters, after checking that they are
    /// `[gates · H, input_size]`, `[gates · H, H]` and two biases
    /// `[gates · H]` or none.
    fn checked(
        op: &'static str,
        gates: usize,
        weight_ih: Tensor<D, E>,
        weight_hh: Tensor<D, E>,
        bias_ih: Option<Tensor<D, E>>,
        bias_hh: Option<Tensor<D, E>>,
    ) -> Result<Self> {
        let mut tensors = vec![&weight_ih, &weight_hh];
        tensors.extend(bias_ih.iter().chain(&bias_hh));
        let rows = weight_hh.dims().first().copied().unwrap_or(0);
        let hidden = weight_hh.dims().get(1).copied().unwrap_or(0);
        let fits = weight_ih.rank() == 2
            && weight_hh.rank() == 2
            && hidden > 0
            && rows == gates * hidden
            && weight_ih.dims()[0] == rows
            && bias_ih.is_some() == bias_hh.is_some()
            && bias_ih.iter().chain(&bias_hh).all(|b| b.dims() == [rows]);
        check(fits, op, &tensors, || {
            format!(
                "expected weight_ih [{gates} * hidden_size, input_size], weight_hh [{gates} * hidden_size, hidden_size] \
                 and either no biases or bias_ih and bias_hh [{gates} * hidden_size]"
            )
        })?;
        Ok(Weights {
            weight_ih: parameter(weight_ih),
            weight_hh: parameter(weight_hh),
            bias_ih: bias_ih.map(parameter),
            bias_hh: bias_hh.map(parameter),
        })
    }
}

/// The state and input of a cell's `forward`, checked and made 2-D: a
/// cell, as PyTorch's, takes a batch `[batch, input_size]` or one sample
/// `[input_size]` with states `[hidden_size]`. Returns the input as a
/// batch and whether it was one sample.
fn cell_input<D: Device, E: FloatElement>(
    op: &'static str,
    x: &Tensor<D, E>,
    states: &[&Tensor<D, E>],
    input_size: usize,
    hidden_size: usize,
) -> Result<(Tensor<D, E>, bool)> {
    let unbatched = x.rank() == 1;
    let batch = if unbatched { None } else { x.dims().first().copied() };
    let state_dims: Vec<usize> = batch.into_iter().chain([hidden_size]).collect();
    let fits = (x.rank() == 1 || x.rank() == 2)
        && x.dims().last() == Some(&input_size)
        && states.iter().all(|h| h.dims() == state_dims);
    if !fits {
        let mut shapes = vec![x.shape().clone()];
        shapes.extend(states.iter().map(|h| h.shape().clone()));
        return Err(Error::Shape {
            op,
            device: D::name(),
            shapes,
            reason: format!(
                "expected an input [batch, {input_size}] and states [batch, {hidden_size}], \
                 or one sample [{input_size}] and states [{hidden_size}]"
            ),
        });
    }
    Ok((if unbatched { x.try_unsqueeze(0)? } else { x.clone() }, unbatched))
}

/// A state given to a cell, as a batch.
fn batched<D: Device, E: FloatElement>(h: &Tensor<D, E>, unbatched: bool) -> Result<Tensor<D, E>> {
    if unbatched { h.try_unsqueeze(0) } else { Ok(h.clone()) }
}

/// A state a cell computed, in the input's form.
fn unbatched_if<D: Device, E: FloatElement>(h: Tensor<D, E>, unbatched: bool) -> Result<Tensor<D, E>> {
    if unbatched { h.try_squeeze(0) } else { Ok(h) }
}

/// Writes the parts every cell type shares: the constructors, the sizes
/// and `Cell`'s access to the weights.
macro_rules! cell_common {
    ($cell:ident, $gates:expr $(, $extra:ident: $value:expr)*) => {
        impl<D: Device, E: FloatElement> $cell<D, E> {
            /// A cell with PyTorch's initialisation (every weight and bias
            /// `U(-k, k)`, `k = 1/sqrt(hidden_size)`), drawn from the
            /// thread's generator. Fails when `D` is unavailable or out of
            /// memory.
            #[fallible]
            pub fn new(input_size: usize, hidden_size: usize) -> Self {
                Self::from_parts(Weights::init($gates, input_size, hidden_size)?)
            }

            /// The cell without its biases (PyTorch's `bias=False`).
            pub fn without_bias(mut self) -> Self {
                self.bias_ih = None;
                self.bias_hh = None;
                self
            }

            #[doc = concat!(
                "A cell with the given weights, which become its parameters (a leaf stays the same leaf): ",
                "`weight_ih` `[", stringify!($gates), " · hidden_size, input_size]`, `weight_hh` `[",
                stringify!($gates), " · hidden_size, hidden_size]`, and `bias_ih` and `bias_hh` `[",
                stringify!($gates), " · hidden_size]` or neither. Fails, naming every shape, when they do not fit."
            )]
            #[fallible]
            pub fn from_weights(
                weight_ih: Tensor<D, E>,
                weight_hh: Tensor<D, E>,
                bias_ih: Option<Tensor<D, E>>,
                bias_hh: Option<Tensor<D, E>>,
            ) -> Self {
                let op = concat!(stringify!($cell), "::from_weights");
                Self::from_parts(Weights::checked(op, $gates, weight_ih, weight_hh, bias_ih, bias_hh)?)
            }

            fn from_parts(w: Weights<D, E>) -> Result<Self> {
                Ok($cell {
                    weight_ih: w.weight_ih,
                    weight_hh: w.weight_hh,
                    bias_ih: w.bias_ih,
                    bias_hh: w.bias_hh,
                    $($extra: $value,)*
                })
            }

            /// The number of features of the input, `input_size`.
            pub fn input_size(&self) -> usize {
                self.weight_ih.dims()[1]
            }

            /// The number of features of the state, `hidden_size`.
            pub fn hidden_size(&self) -> usize {
                self.weight_hh.dims()[1]
            }

            fn zeros(&self, batch: usize) -> Result<Tensor<D, E>> {
                Tensor::try_zeros([batch, self.hidden_size()])
            }

            fn weights_for(&self, state_bias_apart: bool) -> Result<GateWeights<D, E>> {
                let weights = (&self.weight_ih, &self.weight_hh);
                let biases = (self.bias_ih.as_ref(), self.bias_hh.as_ref());
                GateWeights::new(stringify!($cell), $gates, weights, biases, state_bias_apart)
            }

            /// One step of the cell on a batch `x` from `state`.
            fn step_on(&self, x: &Tensor<D, E>, state: &<Self as Cell<D, E>>::State) -> Result<<Self as Cell<D, E>>::State> {
                let weights = self.gate_weights()?;
                self.step(&weights, &weights.input_parts(x)?, state)
            }
        }
    };
}

/// The `forward` of the RNN and GRU cells, whose state is `h` alone.
macro_rules! h_cell_forward {
    ($cell:ident) => {
        impl<D: Device, E: FloatElement> $cell<D, E> {
            /// The next state from `x` (`[batch, input_size]`, or `[input_size]`)
            /// and a state of zeros: PyTorch's `cell(x)`.
            #[fallible]
            pub fn forward<D2: Device, E2: Element>(&self, x: &Tensor<D2, E2>) -> Tensor<D, E>
            where
                D: SameDevice<D2>,
                E: SameDtype<E2>,
            {
                self.run(same_device(x), None)
            }

            /// The next state from `x` and the state `h` (`[batch, hidden_size]`,
            /// or `[hidden_size]`): PyTorch's `cell(x, h)`. Fails, naming the
            /// shapes, when they do not fit the cell.
            #[fallible]
            pub fn forward_with_state<D2: Device, D3: Device, E2: Element>(
                &self,
                x: &Tensor<D2, E2>,
                h: &Tensor<D3, E>,
            ) -> Tensor<D, E>
            where
                D: SameDevice<D2> + SameDevice<D3>,
                E: SameDtype<E2>,
            {
                self.run(same_device(x), Some(same_device(h)))
            }

            fn run(&self, x: &Tensor<D, E>, h: Option<&Tensor<D, E>>) -> Result<Tensor<D, E>> {
                let (x, unbatched) =
                    cell_input(stringify!($cell), x, h.as_slice(), self.input_size(), self.hidden_size())?;
                let h = match h {
                    Some(h) => batched(h, unbatched)?,
                    None => self.zeros(x.dims()[0])?,
                };
                unbatched_if(self.step_on(&x, &h)?, unbatched)
            }
        }
    };
}

/// PyTorch's `nn.RNNCell`: `h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)`
/// (or `relu`), with PyTorch's parameter names.
///
/// ```
/// use devtensor::nn::{Relu, RnnCell};
/// use devtensor::{Cpu, Tensor};
/// let cell = RnnCell::<Cpu>::new(3, 5).with_nonlinearity(Relu); // nonlinearity='relu'
/// assert_eq!(cell.nonlinearity(), "relu");
/// let mut h = Tensor::<Cpu>::zeros([2, 5]);
/// for _ in 0..4 {
///     h = cell.forward_with_state(&Tensor::<Cpu>::randn([2, 3]), &h);
/// }
/// assert!(h.to_vec().iter().all(|&v| v >= 0.0));
/// ```
///
/// A state on another device than the cell does not compile:
/// ```compile_fail,E0277
/// use devtensor::nn::RnnCell;
/// use devtensor::{Cpu, Cuda, Tensor};
/// fn step(cell: &RnnCell<Cuda<0>>, x: &Tensor<Cuda<0>>, h: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
///     cell.forward_with_state(x, h) // error: expected all tensors to be on the same device
/// }
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RnnCell<D: Device, E: FloatElement = f32> {
    /// `[hidden_size, input_size]`.
    pub weight_ih: Tensor<D, E>,
    /// `[hidden_size, hidden_size]`.
    pub weight_hh: Tensor<D, E>,
    /// `[hidden_size]`, unless built without biases.
    pub bias_ih: Option<Tensor<D, E>>,
    /// `[hidden_size]`, unless built without biases.
    pub bias_hh: Option<Tensor<D, E>>,
    /// `relu` instead of `tanh`.
    relu: bool,
}

cell_common!(RnnCell, 1, relu: false);

impl<D: Device, E: FloatElement> RnnCell<D, E> {
    /// The cell with the activation [`Relu`] or [`Tanh`] (PyTorch's
    /// `nonlinearity='relu'`).
    pub fn with_nonlinearity<A: RnnNonlinearity>(mut self, _: A) -> Self {
        self.relu = A::NAME == Relu::NAME;
        self
    }

    /// The activation's name, as PyTorch's `cell.nonlinearity`: `"tanh"`
    /// or `"relu"`.
    pub fn nonlinearity(&self) -> &'static str {
        if self.relu { Relu::NAME } else { Tanh::NAME }
    }
}

h_cell_forward!(RnnCell);

impl<D: Device, E: FloatElement> Cell<D, E> for RnnCell<D, E> {
    type State = Tensor<D, E>;

    fn gate_weights(&self) -> Result<GateWeights<D, E>> {
        self.weights_for(false)
    }

    fn step(&self, w: &GateWeights<D, E>, gx: &Tensor<D, E>, h: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        let pre = gx.try_add(&w.hidden_parts(h)?)?;
        if self.relu { pre.try_relu() } else { pre.try_tanh() }
    }

    fn zero_state(&self, batch: usize) -> Result<Tensor<D, E>> {
        self.zeros(batch)
    }
}

/// PyTorch's `nn.LSTMCell`, with its parameter names and gate order
/// (input, forget, cell, output):
///
/// ```text
/// i, f, g, o = chunk(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh, 4)
/// c' = σ(f) c + σ(i) tanh(g)
/// h' = σ(o) tanh(c')
/// ```
///
/// ```
/// use devtensor::nn::LstmCell;
/// use devtensor::{Cpu, Tensor};
/// let cell = LstmCell::<Cpu>::new(3, 5);
/// let (h, c) = cell.forward(&Tensor::<Cpu>::randn([2, 3]));
/// let (h, c) = cell.forward_with_state(&Tensor::<Cpu>::randn([2, 3]), (&h, &c));
/// assert_eq!((h.dims(), c.dims()), (&[2, 5][..], &[2, 5][..]));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LstmCell<D: Device, E: FloatElement = f32> {
    /// `[4 · hidden_size, input_size]`: the input, forget, cell and output gates' rows.
    pub weight_ih: Tensor<D, E>,
    /// `[4 · hidden_size, hidden_size]`.
    pub weight_hh: Tensor<D, E>,
    /// `[4 · hidden_size]`, unless built without biases.
    pub bias_ih: Option<Tensor<D, E>>,
    /// `[4 · hidden_size]`, unless built without biases.
    pub bias_hh: Option<Tensor<D, E>>,
}

cell_common!(LstmCell, 4);

impl<D: Device, E: FloatElement> LstmCell<D, E> {
    /// The next `(h, c)` from `x` (`[batch, input_size]`, or
    /// `[input_size]`) and states of zeros: PyTorch's `cell(x)`.
    #[fallible]
    pub fn forward<D2: Device, E2: Element>(&self, x: &Tensor<D2, E2>) -> (Tensor<D, E>, Tensor<D, E>)
    where
        D: SameDevice<D2>,
        E: SameDtype<E2>,
    {
        self.run(same_device(x), None)
    }

    /// The next `(h, c)` from `x` and the states `(h, c)` (each
    /// `[batch, hidden_size]`, or `[hidden_size]`): PyTorch's
    /// `cell(x, (h, c))`. Fails, naming the shapes, when they do not fit.
    #[fallible]
    pub fn forward_with_state<D2: Device, D3: Device, D4: Device, E2: Element>(
        &self,
        x: &Tensor<D2, E2>,
        state: (&Tensor<D3, E>, &Tensor<D4, E>),
    ) -> (Tensor<D, E>, Tensor<D, E>)
    where
        D: SameDevice<D2> + SameDevice<D3> + SameDevice<D4>,
        E: SameDtype<E2>,
    {
        self.run(same_device(x), Some((same_device(state.0), same_device(state.1))))
    }

    fn run(
        &self,
        x: &Tensor<D, E>,
        state: Option<(&Tensor<D, E>, &Tensor<D, E>)>,
    ) -> Result<(Tensor<D, E>, Tensor<D, E>)> {
        let given: Vec<&Tensor<D, E>> = state.iter().flat_map(|(h, c)| [*h, *c]).collect();
        let (x, unbatched) = cell_input("LstmCell", x, &given, self.input_size(), self.hidden_size())?;
        let state = match state {
            Some((h, c)) => (batched(h, unbatched)?, batched(c, unbatched)?),
            None => self.zero_state(x.dims()[0])?,
        };
        let (h, c) = self.step_on(&x, &state)?;
        Ok((unbatched_if(h, unbatched)?, unbatched_if(c, unbatched)?))
    }
}

impl<D: Device, E: FloatElement> Cell<D, E> for LstmCell<D, E> {
    type State = (Tensor<D, E>, Tensor<D, E>);

    fn gate_weights(&self) -> Result<GateWeights<D, E>> {
        self.weights_for(false)
    }

    fn step(&self, w: &GateWeights<D, E>, gx: &Tensor<D, E>, (h, c): &Self::State) -> Result<Self::State> {
        let hc = Tensor::try_lstm_gates(gx, &w.hidden_parts(h)?, c)?;
        Ok((hc.try_select(0, 0)?, hc.try_select(0, 1)?))
    }

    fn sequence(
        &self,
        w: &GateWeights<D, E>,
        gx: &Tensor<D, E>,
        (h, c): &Self::State,
        reverse: bool,
    ) -> Result<Option<(Tensor<D, E>, Self::State)>> {
        let steps = gx.dims()[0];
        let out = Tensor::try_lstm_sequence(gx, &w.hh, h, c, reverse)?;
        Ok(Some((out.try_narrow(0, 0, steps)?, (out.try_select(0, steps)?, out.try_select(0, steps + 1)?))))
    }

    fn zero_state(&self, batch: usize) -> Result<Self::State> {
        Ok((self.zeros(batch)?, self.zeros(batch)?))
    }
}

/// PyTorch's `nn.GRUCell`, with its parameter names and gate order (reset,
/// update, new):
///
/// ```text
/// r = σ(x W_irᵀ + b_ir + h W_hrᵀ + b_hr)
/// z = σ(x W_izᵀ + b_iz + h W_hzᵀ + b_hz)
/// n = tanh(x W_inᵀ + b_in + r (h W_hnᵀ + b_hn))
/// h' = (1 - z) n + z h
/// ```
///
/// ```
/// use devtensor::nn::GruCell;
/// use devtensor::{Cpu, Tensor};
/// let cell = GruCell::<Cpu>::new(3, 5);
/// let h = cell.forward(&Tensor::<Cpu>::randn([3]));
/// assert_eq!(cell.forward_with_state(&Tensor::<Cpu>::randn([3]), &h).dims(), &[5]);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GruCell<D: Device, E: FloatElement = f32> {
    /// `[3 · hidden_size, input_size]`: the reset, update and new gates' rows.
    pub weight_ih: Tensor<D, E>,
    /// `[3 · hidden_size, hidden_size]`.
    pub weight_hh: Tensor<D, E>,
    /// `[3 · hidden_size]`, unless built without biases.
    pub bias_ih: Option<Tensor<D, E>>,
    /// `[3 · hidden_size]`, unless built without biases.
    pub bias_hh: Option<Tensor<D, E>>,
}

cell_common!(GruCell, 3);

h_cell_forward!(GruCell);

impl<D: Device, E: FloatElement> Cell<D, E> for GruCell<D, E> {
    type State = Tensor<D, E>;

    fn gate_weights(&self) -> Result<GateWeights<D, E>> {
        self.weights_for(true)
    }

    fn step(&self, w: &GateWeights<D, E>, gx: &Tensor<D, E>, h: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        Tensor::try_gru_gates(gx, &w.hidden_parts(h)?, h)
    }

    fn sequence(
        &self,
        w: &GateWeights<D, E>,
        gx: &Tensor<D, E>,
        h: &Tensor<D, E>,
        reverse: bool,
    ) -> Result<Option<(Tensor<D, E>, Tensor<D, E>)>> {
        let steps = gx.dims()[0];
        let out = Tensor::try_gru_sequence(gx, &w.hh, w.bias_h.as_ref(), h, reverse)?;
        Ok(Some((out.try_narrow(0, 0, steps)?, out.try_select(0, steps)?)))
    }

    fn zero_state(&self, batch: usize) -> Result<Tensor<D, E>> {
        self.zeros(batch)
    }
}

crate::module!(RnnCell<E> { weight_ih, weight_hh, bias_ih, bias_hh; relu });
crate::module!(LstmCell<E> { weight_ih, weight_hh, bias_ih, bias_hh });
crate::module!(GruCell<E> { weight_ih, weight_hh, bias_ih, bias_hh });
