//! The recurrent layers, PyTorch's `nn.RNN`, `nn.LSTM` and `nn.GRU`: a
//! stack of cells run over time, in one or both directions.
//!
//! Each layer and direction computes the input's part of every gate for
//! all time steps in one product (`[T · batch, input] × [input, gates · H]`),
//! then runs the recurrent product and the fused gates step by step, as
//! PyTorch's CPU path does.

use super::cell::{Cell, CellState, GruCell, LstmCell, RnnCell, RnnNonlinearity};
use super::packed::PackedSequence;
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::nn::module::child_name;
use crate::nn::{Dropout, Module, TensorKind, ToDtype, moving};
use crate::tensor::{Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// The settings of [`Rnn`], [`Lstm`] and [`Gru`], PyTorch's keyword
/// arguments with its defaults:
///
/// ```
/// use devtensor::nn::{Lstm, RecurrentConfig};
/// use devtensor::Cpu;
/// // nn.LSTM(10, 20, num_layers=2, batch_first=True, dropout=0.1)
/// let config = RecurrentConfig { num_layers: 2, batch_first: true, dropout: 0.1, ..Default::default() };
/// let lstm = Lstm::<Cpu>::with_config(10, 20, config);
/// assert_eq!(lstm.cells.len(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecurrentConfig {
    /// Cells stacked on one another, each reading the outputs of the one
    /// below (1).
    pub num_layers: usize,
    /// Whether the cells have biases (`true`).
    pub bias: bool,
    /// Inputs and outputs `[batch, seq, feature]` instead of
    /// `[seq, batch, feature]` (`false`). The states are
    /// `[layers · directions, batch, hidden]` either way, as in PyTorch.
    pub batch_first: bool,
    /// The probability of dropout on the outputs of every layer but the
    /// last, in training (0).
    pub dropout: f64,
    /// A second cell per layer that reads the sequence backwards; the
    /// outputs of both are concatenated on the feature axis (`false`).
    pub bidirectional: bool,
}

impl Default for RecurrentConfig {
    fn default() -> Self {
        RecurrentConfig { num_layers: 1, bias: true, batch_first: false, dropout: 0.0, bidirectional: false }
    }
}

impl RecurrentConfig {
    fn directions(&self) -> usize {
        if self.bidirectional { 2 } else { 1 }
    }

    fn validate(&self, op: &'static str, hidden_size: usize) -> Result<()> {
        let reason = if hidden_size == 0 {
            "hidden_size must be greater than zero".to_string()
        } else if self.num_layers == 0 {
            "num_layers must be at least 1".to_string()
        } else if !(0.0..=1.0).contains(&self.dropout) {
            format!("dropout must be a probability between 0 and 1, got {}", self.dropout)
        } else {
            return Ok(());
        };
        Err(Error::Argument { op, device: String::new(), reason })
    }
}

mod sealed {
    pub trait Sealed {}
}

/// What a recurrent layer reads: a padded batch as a [`Tensor`]
/// (`[seq, batch, input_size]`, `[batch, seq, input_size]` with
/// `batch_first`, or one sequence `[seq, input_size]`), or a
/// [`PackedSequence`] of sequences of different lengths. The layer's output
/// is of the same kind: a tensor for a tensor, a packed sequence for a
/// packed one, as in PyTorch.
pub trait RecurrentInput: sealed::Sealed {
    /// The input's device.
    type Device: Device;
    /// The input's element type.
    type Elem: FloatElement;
    /// The layer's output for this input, on the layer's device `D`.
    type Output<D: Device, E: FloatElement>;

    /// The input as `[seq, batch, features]`, whether it was one sequence,
    /// and each sequence's length, if they differ.
    #[doc(hidden)]
    fn time_major(
        &self,
        op: &'static str,
        batch_first: bool,
    ) -> Result<(Tensor<Self::Device, Self::Elem>, bool, Option<&[usize]>)>;

    /// The layer's output `[seq, batch, features]` in the input's form.
    #[doc(hidden)]
    fn output<D: Device, E: FloatElement>(
        &self,
        output: Tensor<D, E>,
        batch_first: bool,
        unbatched: bool,
    ) -> Result<Self::Output<D, E>>;
}

impl<D: Device, E: FloatElement> sealed::Sealed for Tensor<D, E> {}
impl<D: Device, E: FloatElement> sealed::Sealed for PackedSequence<D, E> {}

impl<D2: Device, E2: FloatElement> RecurrentInput for Tensor<D2, E2> {
    type Device = D2;
    type Elem = E2;
    type Output<D: Device, E: FloatElement> = Tensor<D, E>;

    fn time_major(&self, op: &'static str, batch_first: bool) -> Result<(Tensor<D2, E2>, bool, Option<&[usize]>)> {
        match self.rank() {
            2 => Ok((self.try_unsqueeze(1)?, true, None)),
            3 if batch_first => Ok((self.try_transpose(0, 1)?, false, None)),
            3 => Ok((self.clone(), false, None)),
            _ => Err(Error::Shape {
                op,
                device: D2::name(),
                shapes: vec![self.shape().clone()],
                reason: "expected an input [seq, batch, input_size] ([batch, seq, input_size] with batch_first), \
                         or one sequence [seq, input_size]"
                    .into(),
            }),
        }
    }

    fn output<D: Device, E: FloatElement>(
        &self,
        output: Tensor<D, E>,
        batch_first: bool,
        unbatched: bool,
    ) -> Result<Tensor<D, E>> {
        if unbatched {
            output.try_squeeze(1)
        } else if batch_first {
            output.try_transpose(0, 1)
        } else {
            Ok(output)
        }
    }
}

impl<D2: Device, E2: FloatElement> RecurrentInput for PackedSequence<D2, E2> {
    type Device = D2;
    type Elem = E2;
    type Output<D: Device, E: FloatElement> = PackedSequence<D, E>;

    fn time_major(&self, _: &'static str, _: bool) -> Result<(Tensor<D2, E2>, bool, Option<&[usize]>)> {
        Ok((self.padded().clone(), false, Some(self.lengths())))
    }

    fn output<D: Device, E: FloatElement>(
        &self,
        output: Tensor<D, E>,
        _: bool,
        _: bool,
    ) -> Result<PackedSequence<D, E>> {
        Ok(PackedSequence::from_parts(output, self.lengths().to_vec()))
    }
}

/// The stack of cells under each of the three layers, run over a
/// time-major sequence from the given states (one per cell): the outputs
/// `[seq, batch, directions · hidden]` and the final state of every cell.
fn run_stack<D: Device, E: FloatElement, C: Cell<D, E>>(
    cells: &[C],
    config: &RecurrentConfig,
    training: bool,
    x: &Tensor<D, E>,
    lengths: Option<&[usize]>,
    initial: Vec<C::State>,
) -> Result<(Tensor<D, E>, Vec<C::State>)> {
    let directions = config.directions();
    let (steps, batch) = (x.dims()[0], x.dims()[1]);
    // Where a sequence has ended, its state stays and its output is zero
    // (PyTorch's packed sequences): a [seq, batch, 1] mask of the steps
    // that are inside each sequence.
    let mask = match lengths {
        Some(lengths) => {
            let inside = (0..steps).flat_map(|t| lengths.iter().map(move |&len| u8::from(t < len))).collect();
            Some(Tensor::<D, u8>::try_from_vec(inside, [steps, batch, 1])?)
        }
        None => None,
    };
    let zero = Tensor::<D, E>::try_scalar(E::ZERO)?;
    let mut input = x.clone();
    let mut finals = Vec::with_capacity(cells.len());
    let mut initial = initial.into_iter();
    for layer in 0..config.num_layers {
        let mut outputs = Vec::with_capacity(directions);
        for direction in 0..directions {
            let cell = &cells[layer * directions + direction];
            let features = input.dims()[2];
            let weights = cell.gate_weights()?.for_sequence()?;
            let gx = weights.input_parts(&input.try_reshape([steps * batch, features])?)?;
            let gx = gx.try_reshape([steps, batch, gx.dims()[1]])?;
            let mut state = initial.next().ok_or_else(|| missing_state(x))?;
            // Sequences of one length run as one operation where the cell
            // has it; packed ones step by step, keeping ended sequences'
            // states.
            if mask.is_none()
                && let Some((out, last)) = cell.sequence(&weights, &gx, &state, direction == 1)?
            {
                finals.push(last);
                outputs.push(out);
                continue;
            }
            let mut out: Vec<Option<Tensor<D, E>>> = vec![None; steps];
            let order: Box<dyn Iterator<Item = usize>> =
                if direction == 0 { Box::new(0..steps) } else { Box::new((0..steps).rev()) };
            for t in order {
                let next = cell.step(&weights, &gx.try_select(0, t)?, &state)?;
                let (next, h) = match &mask {
                    Some(mask) => {
                        let inside = mask.try_select(0, t)?;
                        let next = next.keep_where(&inside, &state)?;
                        let h = inside.try_where_cond(next.h(), &zero)?;
                        (next, h)
                    }
                    None => {
                        let h = next.h().clone();
                        (next, h)
                    }
                };
                out[t] = Some(h);
                state = next;
            }
            finals.push(state);
            let out: Vec<&Tensor<D, E>> = out.iter().flatten().collect();
            outputs.push(Tensor::try_stack(&out, 0)?);
        }
        input = if directions == 1 { outputs.swap_remove(0) } else { Tensor::try_cat(&[&outputs[0], &outputs[1]], 2)? };
        if training && config.dropout > 0.0 && layer + 1 < config.num_layers {
            input = Dropout::try_new(config.dropout)?.try_forward(&input)?;
        }
    }
    Ok((input, finals))
}

fn missing_state<D: Device, E: FloatElement>(x: &Tensor<D, E>) -> Error {
    Error::Shape {
        op: "recurrent layer",
        device: D::name(),
        shapes: vec![x.shape().clone()],
        reason: "fewer initial states than cells".into(),
    }
}

/// The shape checks every layer makes on its time-major input and its
/// given states (`[layers · directions, batch, hidden]`).
fn check_input<D: Device, E: FloatElement>(
    op: &'static str,
    x: &Tensor<D, E>,
    states: &[&Tensor<D, E>],
    input_size: usize,
    hidden_size: usize,
    cells: usize,
    unbatched: bool,
) -> Result<()> {
    let (steps, batch, features) = (x.dims()[0], x.dims()[1], x.dims()[2]);
    let state_dims: Vec<usize> = if unbatched { vec![cells, hidden_size] } else { vec![cells, batch, hidden_size] };
    let reason = if features != input_size {
        format!("the input's last axis must have input_size = {input_size} elements")
    } else if steps == 0 {
        "the sequence must have at least one step".to_string()
    } else if let Some(h) = states.iter().find(|h| h.dims() != state_dims) {
        format!("expected each initial state {state_dims:?}, got {:?}", h.dims())
    } else {
        return Ok(());
    };
    let mut shapes = vec![x.shape().clone()];
    shapes.extend(states.iter().map(|h| h.shape().clone()));
    Err(Error::Shape { op, device: D::name(), shapes, reason })
}

/// A given initial state `[cells, batch, hidden]` (or `[cells, hidden]`),
/// split into one `[batch, hidden]` per cell.
fn split_state<D: Device, E: FloatElement>(h: &Tensor<D, E>, unbatched: bool) -> Result<Vec<Tensor<D, E>>> {
    let h = if unbatched { h.try_unsqueeze(1)? } else { h.clone() };
    h.try_unbind(0)
}

/// The final states of the cells stacked into `[cells, batch, hidden]`
/// (or `[cells, hidden]` for one sequence).
fn stack_states<D: Device, E: FloatElement>(states: &[&Tensor<D, E>], unbatched: bool) -> Result<Tensor<D, E>> {
    let h = Tensor::try_stack(states, 0)?;
    if unbatched { h.try_squeeze(1) } else { Ok(h) }
}

/// Writes what the three layers share: the struct, its constructors,
/// `Module` with PyTorch's parameter names (`weight_ih_l0`,
/// `bias_hh_l1_reverse`) and `ToDtype`.
macro_rules! recurrent_layer {
    ($(#[$doc:meta])* $layer:ident, $cell:ident, $cell_doc:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        #[non_exhaustive]
        pub struct $layer<D: Device, E: FloatElement = f32> {
            #[doc = concat!(
                "The ", $cell_doc, " of layer `l` and direction `d` (0 forward, 1 backward) at ",
                "`cells[l * directions + d]`; PyTorch's `weight_ih_l{l}` is `cells[l * directions].weight_ih`, ",
                "`weight_hh_l{l}_reverse` is `cells[l * 2 + 1].weight_hh`."
            )]
            pub cells: Vec<$cell<D, E>>,
            config: RecurrentConfig,
            training: bool,
        }

        impl<D: Device, E: FloatElement> $layer<D, E> {
            /// One layer, one direction, with biases, `[seq, batch, feature]`
            /// inputs: PyTorch's defaults, and its initialisation (every
            /// weight and bias `U(-k, k)`, `k = 1/sqrt(hidden_size)`).
            #[fallible]
            pub fn new(input_size: usize, hidden_size: usize) -> Self {
                Self::try_with_config(input_size, hidden_size, RecurrentConfig::default())
            }

            /// The layer with `config`'s settings. Fails when
            /// `hidden_size` or `num_layers` is 0 or `dropout` is not a
            /// probability.
            #[fallible]
            pub fn with_config(input_size: usize, hidden_size: usize, config: RecurrentConfig) -> Self {
                config.validate(stringify!($layer), hidden_size)?;
                let directions = config.directions();
                let mut cells = Vec::with_capacity(config.num_layers * directions);
                for layer in 0..config.num_layers {
                    let input_size = if layer == 0 { input_size } else { hidden_size * directions };
                    for _ in 0..directions {
                        let cell = $cell::try_new(input_size, hidden_size)?;
                        cells.push(if config.bias { cell } else { cell.without_bias() });
                    }
                }
                Ok($layer { cells, config, training: true })
            }

            /// The settings the layer was made with.
            pub fn config(&self) -> &RecurrentConfig {
                &self.config
            }

            /// The number of features of the input, `input_size`.
            pub fn input_size(&self) -> usize {
                self.cells[0].input_size()
            }

            /// The number of features of each direction's state, `hidden_size`.
            pub fn hidden_size(&self) -> usize {
                self.cells[0].hidden_size()
            }

            /// What PyTorch appends to the parameter names of cell
            /// `index`: `l1` for layer 1 forward, `l1_reverse` backward.
            fn cell_name(&self, index: usize) -> String {
                let directions = self.config.directions();
                let suffix = if index % directions == 1 { "_reverse" } else { "" };
                format!("l{}{suffix}", index / directions)
            }
        }

        impl<D: Device, E: FloatElement> Module<D, E> for $layer<D, E> {
            type On<D2: Device> = $layer<D2, E>;

            fn try_to<D2: Device>(&self) -> Result<$layer<D2, E>> {
                moving(|| {
                    let cells = self.cells.iter().map(|c| c.try_to::<D2>()).collect::<Result<_>>()?;
                    Ok($layer { cells, config: self.config, training: self.training })
                })
            }

            fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
                for (index, cell) in self.cells.iter().enumerate() {
                    let suffix = self.cell_name(index);
                    cell.visit("", &mut |name, kind, t| f(&child_name(prefix, &format!("{name}_{suffix}")), kind, t));
                }
            }

            fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
                let names: Vec<String> = (0..self.cells.len()).map(|index| self.cell_name(index)).collect();
                for (cell, suffix) in self.cells.iter_mut().zip(names) {
                    cell.visit_mut("", &mut |name, kind, t| {
                        f(&child_name(prefix, &format!("{name}_{suffix}")), kind, t)
                    });
                }
            }

            fn set_training(&mut self, training: bool) {
                self.training = training;
            }
        }

        impl<D: Device, E: FloatElement> ToDtype<D, E> for $layer<D, E> {
            type Of<T: FloatElement> = $layer<D, T>;

            fn try_to_dtype<T: FloatElement>(&self) -> Result<$layer<D, T>> {
                moving(|| {
                    let cells = self.cells.iter().map(|c| c.try_to_dtype::<T>()).collect::<Result<_>>()?;
                    Ok($layer { cells, config: self.config, training: self.training })
                })
            }
        }
    };
}

recurrent_layer! {
    /// PyTorch's `nn.RNN`: a stack of [`RnnCell`]s (`tanh`, or `relu`
    /// with [`with_nonlinearity`](Self::with_nonlinearity)`(Relu)`) run over a
    /// sequence, with PyTorch's settings ([`RecurrentConfig`]) and
    /// parameter names, so that its `state_dict` loads as it is.
    ///
    /// ```
    /// use devtensor::nn::{Module, RecurrentConfig, Rnn};
    /// use devtensor::{Cpu, Tensor};
    /// let rnn = Rnn::<Cpu>::with_config(3, 8, RecurrentConfig { num_layers: 2, ..Default::default() });
    /// let (output, h_n) = rnn.forward(&Tensor::<Cpu>::randn([5, 4, 3])); // [seq, batch, input]
    /// assert_eq!((output.dims(), h_n.dims()), (&[5, 4, 8][..], &[2, 4, 8][..]));
    /// assert_eq!(rnn.parameters()[4].0, "weight_ih_l1");
    /// ```
    ///
    /// An initial state on another device than the layer does not compile:
    /// ```compile_fail,E0277
    /// use devtensor::nn::Rnn;
    /// use devtensor::{Cpu, Cuda, Tensor};
    /// fn run(rnn: &Rnn<Cuda<0>>, x: &Tensor<Cuda<0>>, h0: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
    ///     rnn.forward_with_state(x, h0).0 // error: expected all tensors to be on the same device
    /// }
    /// ```
    Rnn, RnnCell, "`RnnCell`"
}

recurrent_layer! {
    /// PyTorch's `nn.LSTM`: a stack of [`LstmCell`]s run over a sequence,
    /// with PyTorch's settings ([`RecurrentConfig`]) and parameter names
    /// (`weight_ih_l0`, `bias_hh_l1_reverse`, ...), so that its
    /// `state_dict` loads as it is. `proj_size` is not supported.
    ///
    /// ```
    /// use devtensor::nn::{Lstm, RecurrentConfig};
    /// use devtensor::{Cpu, Tensor};
    /// // nn.LSTM(3, 8, bidirectional=True, batch_first=True)
    /// let config = RecurrentConfig { bidirectional: true, batch_first: true, ..Default::default() };
    /// let lstm = Lstm::<Cpu>::with_config(3, 8, config);
    /// let x = Tensor::<Cpu>::randn([4, 5, 3]); // [batch, seq, input]
    /// let (output, (h_n, c_n)) = lstm.forward(&x);
    /// assert_eq!(output.dims(), &[4, 5, 16]);
    /// assert_eq!((h_n.dims(), c_n.dims()), (&[2, 4, 8][..], &[2, 4, 8][..]));
    /// let (_, (h, c)) = lstm.forward_with_state(&x, (&h_n, &c_n)); // carry the state on
    /// # let _ = (h, c);
    /// ```
    Lstm, LstmCell, "`LstmCell`"
}

recurrent_layer! {
    /// PyTorch's `nn.GRU`: a stack of [`GruCell`]s run over a sequence,
    /// with PyTorch's settings ([`RecurrentConfig`]) and parameter names,
    /// so that its `state_dict` loads as it is.
    ///
    /// ```
    /// use devtensor::nn::{Gru, pack_padded_sequence, pad_packed_sequence};
    /// use devtensor::{Cpu, Tensor};
    /// let gru = Gru::<Cpu>::new(3, 8);
    /// // Three sequences of lengths 5, 2 and 4, padded to 5: [seq, batch, input].
    /// let packed = pack_padded_sequence(&Tensor::<Cpu>::randn([5, 3, 3]), &[5, 2, 4], false, false);
    /// let (output, h_n) = gru.forward(&packed);
    /// let (output, lengths) = pad_packed_sequence(&output, false, 0.0, None);
    /// assert_eq!((output.dims(), lengths), (&[5, 3, 8][..], vec![5, 2, 4]));
    /// assert_eq!(output.select(1, 1).narrow(0, 2, 3).to_vec(), vec![0.0; 24]); // past its length
    /// assert_eq!(h_n.dims(), &[1, 3, 8]);
    /// ```
    Gru, GruCell, "`GruCell`"
}

/// The `forward` of the RNN and the GRU, whose state is `h` alone.
macro_rules! forward_with_h {
    ($layer:ident, $op:literal) => {
        impl<D: Device, E: FloatElement> $layer<D, E> {
            /// The layer run over `x` from states of zeros: PyTorch's
            /// `output, h_n = layer(x)`. `x` is a padded batch
            /// (`[seq, batch, input_size]`, `[batch, seq, input_size]` with
            /// `batch_first`, or one sequence `[seq, input_size]`) or a
            /// [`PackedSequence`], and `output` is of the same kind, with
            /// `directions · hidden_size` features; `h_n` is each cell's
            /// final state, `[num_layers · directions, batch, hidden_size]`
            /// (taken at each sequence's last step for a packed input).
            #[fallible]
            pub fn forward<X: RecurrentInput>(&self, x: &X) -> (X::Output<D, E>, Tensor<D, E>)
            where
                D: SameDevice<X::Device>,
                E: crate::element::SameDtype<X::Elem>,
            {
                self.run(x, None)
            }

            /// The layer run over `x` from the initial state `h0`
            /// (`[num_layers · directions, batch, hidden_size]`, or without
            /// the batch axis for one sequence): PyTorch's `layer(x, h0)`.
            /// Fails, naming the shapes, when they do not fit the layer.
            #[fallible]
            pub fn forward_with_state<X: RecurrentInput, D3: Device>(
                &self,
                x: &X,
                h0: &Tensor<D3, E>,
            ) -> (X::Output<D, E>, Tensor<D, E>)
            where
                D: SameDevice<X::Device> + SameDevice<D3>,
                E: crate::element::SameDtype<X::Elem>,
            {
                self.run(x, Some(same_device(h0)))
            }

            fn run<X: RecurrentInput>(
                &self,
                x: &X,
                h0: Option<&Tensor<D, E>>,
            ) -> Result<(X::Output<D, E>, Tensor<D, E>)> {
                let batch_first = self.config.batch_first;
                let (seq, unbatched, lengths) = x.time_major($op, batch_first)?;
                let seq: &Tensor<D, E> = same_device(&seq);
                let cells = self.cells.len();
                check_input($op, seq, h0.as_slice(), self.input_size(), self.hidden_size(), cells, unbatched)?;
                let initial = match h0 {
                    Some(h0) => split_state(h0, unbatched)?,
                    None => self.cells.iter().map(|c| c.zero_state(seq.dims()[1])).collect::<Result<_>>()?,
                };
                let (output, finals) = run_stack(&self.cells, &self.config, self.training, seq, lengths, initial)?;
                let h_n = stack_states(&finals.iter().collect::<Vec<_>>(), unbatched)?;
                Ok((x.output(output, batch_first, unbatched)?, h_n))
            }
        }
    };
}

forward_with_h!(Rnn, "Rnn");
forward_with_h!(Gru, "Gru");

impl<D: Device, E: FloatElement> Rnn<D, E> {
    /// The layer with the activation [`Relu`](crate::nn::Relu) or
    /// [`Tanh`](crate::nn::Tanh) in every cell (PyTorch's
    /// `nonlinearity='relu'`).
    pub fn with_nonlinearity<A: RnnNonlinearity + Copy>(mut self, activation: A) -> Self {
        self.cells = self.cells.into_iter().map(|cell| cell.with_nonlinearity(activation)).collect();
        self
    }

    /// The activation's name, as PyTorch's `rnn.nonlinearity`: `"tanh"` or
    /// `"relu"`.
    pub fn nonlinearity(&self) -> &'static str {
        self.cells[0].nonlinearity()
    }
}

impl<D: Device, E: FloatElement> Lstm<D, E> {
    /// The layer run over `x` from states of zeros: PyTorch's
    /// `output, (h_n, c_n) = lstm(x)`. `x` is a padded batch
    /// (`[seq, batch, input_size]`, `[batch, seq, input_size]` with
    /// `batch_first`, or one sequence `[seq, input_size]`) or a
    /// [`PackedSequence`], and `output` is of the same kind, with
    /// `directions · hidden_size` features; `h_n` and `c_n` are each cell's
    /// final states, `[num_layers · directions, batch, hidden_size]` (taken
    /// at each sequence's last step for a packed input).
    #[fallible]
    pub fn forward<X: RecurrentInput>(&self, x: &X) -> (X::Output<D, E>, (Tensor<D, E>, Tensor<D, E>))
    where
        D: SameDevice<X::Device>,
        E: crate::element::SameDtype<X::Elem>,
    {
        self.run(x, None)
    }

    /// The layer run over `x` from the initial states `(h0, c0)` (each
    /// `[num_layers · directions, batch, hidden_size]`, or without the
    /// batch axis for one sequence): PyTorch's `lstm(x, (h0, c0))`. Fails,
    /// naming the shapes, when they do not fit the layer.
    #[fallible]
    pub fn forward_with_state<X: RecurrentInput, D3: Device, D4: Device>(
        &self,
        x: &X,
        state: (&Tensor<D3, E>, &Tensor<D4, E>),
    ) -> (X::Output<D, E>, (Tensor<D, E>, Tensor<D, E>))
    where
        D: SameDevice<X::Device> + SameDevice<D3> + SameDevice<D4>,
        E: crate::element::SameDtype<X::Elem>,
    {
        self.run(x, Some((same_device(state.0), same_device(state.1))))
    }

    #[allow(clippy::type_complexity)]
    fn run<X: RecurrentInput>(
        &self,
        x: &X,
        state: Option<(&Tensor<D, E>, &Tensor<D, E>)>,
    ) -> Result<(X::Output<D, E>, (Tensor<D, E>, Tensor<D, E>))> {
        let batch_first = self.config.batch_first;
        let (seq, unbatched, lengths) = x.time_major("Lstm", batch_first)?;
        let seq: &Tensor<D, E> = same_device(&seq);
        let given: Vec<&Tensor<D, E>> = state.iter().flat_map(|(h, c)| [*h, *c]).collect();
        check_input("Lstm", seq, &given, self.input_size(), self.hidden_size(), self.cells.len(), unbatched)?;
        let initial = match state {
            Some((h0, c0)) => split_state(h0, unbatched)?.into_iter().zip(split_state(c0, unbatched)?).collect(),
            None => self.cells.iter().map(|c| c.zero_state(seq.dims()[1])).collect::<Result<_>>()?,
        };
        let (output, finals) = run_stack(&self.cells, &self.config, self.training, seq, lengths, initial)?;
        let h_n = stack_states(&finals.iter().map(|(h, _)| h).collect::<Vec<_>>(), unbatched)?;
        let c_n = stack_states(&finals.iter().map(|(_, c)| c).collect::<Vec<_>>(), unbatched)?;
        Ok((x.output(output, batch_first, unbatched)?, (h_n, c_n)))
    }
}
