//! The recurrent layers and cells against PyTorch
//! (`tests/fixtures/pytorch/make_fixtures.py recurrent`, float64): each
//! case's `state_dict` loads by PyTorch's names, and the outputs, the final
//! states and the gradients of every input, initial state and parameter
//! match; with packed (variable-length) batches too. Then the layers
//! against a plain loop on random shapes, and the packing utilities.

use devtensor::io::Checkpoint;
use devtensor::nn::{
    Gru, GruCell, Lstm, LstmCell, Module, RecurrentConfig, Relu, Rnn, RnnCell, pack_padded_sequence,
    pad_packed_sequence, pad_sequence, try_pack_padded_sequence, try_pad_packed_sequence,
};
use devtensor::{Cpu, Device, Tensor};
use proptest::prelude::*;

type T<D> = Tensor<D, f64>;

fn fixture() -> Checkpoint<Cpu, f64> {
    crate::fixture::load("recurrent.safetensors")
}

/// A case of the fixture, whose `state_dict` entries are the `weight_*` and
/// `bias_*` tensors.
type Case<'a, D> = crate::fixture::Case<'a, D>;

fn fixture_case<'a, D: Device>(file: &'a Checkpoint<Cpu, f64>, name: &'a str) -> Case<'a, D> {
    Case::new(file, name, |n| n.starts_with("weight_") || n.starts_with("bias_"))
}

/// Runs an RNN or a GRU on a case's input: packed if the case has lengths,
/// from `h0` if it has one.
macro_rules! run_with_h {
    ($layer:expr, $case:expr, $x:expr, $h0:expr) => {{
        let (layer, case, x, h0) = (&$layer, &$case, $x, $h0);
        let batch_first = layer.config().batch_first;
        match case.lengths() {
            None => match h0 {
                None => layer.forward(x),
                Some(h0) => layer.forward_with_state(x, h0),
            },
            Some(lengths) => {
                let packed = pack_padded_sequence(x, &lengths, batch_first, false);
                let (output, h_n) = match h0 {
                    None => layer.forward(&packed),
                    Some(h0) => layer.forward_with_state(&packed, h0),
                };
                (pad_packed_sequence(&output, batch_first, 0.0, None).0, h_n)
            }
        }
    }};
}

fn config(num_layers: usize, bidirectional: bool, batch_first: bool, bias: bool) -> RecurrentConfig {
    RecurrentConfig { num_layers, bidirectional, batch_first, bias, ..Default::default() }
}

fn recurrent_layers_match_pytorch<D: Device>() {
    let file = fixture();
    // (case, layer settings): the settings of RECURRENT_CASES.
    let rnns = [
        ("rnn_tanh", config(2, false, false, true), false),
        ("rnn_relu_bi", config(1, true, true, false), true),
        ("rnn_packed", config(1, true, false, true), false),
    ];
    for (name, config, relu) in rnns {
        let case = fixture_case::<D>(&file, name);
        let rnn = Rnn::<D, f64>::with_config(3, 4, config);
        let mut rnn = if relu { rnn.with_nonlinearity(Relu) } else { rnn };
        assert_eq!(rnn.nonlinearity(), if relu { "relu" } else { "tanh" });
        case.load(&mut rnn);
        let (x, h0) = (case.get("x").requires_grad(), case.find("h0").map(T::requires_grad));
        let (output, h_n) = run_with_h!(rnn, case, &x, h0.as_ref());
        let mut inputs = vec![("x", &x)];
        inputs.extend(h0.as_ref().map(|h| ("h0", h)));
        case.check(&rnn, &inputs, &[("output", output), ("h_n", h_n)]);
    }
    let grus = [("gru", config(2, true, true, true)), ("gru_packed", config(2, false, false, true))];
    for (name, config) in grus {
        let case = fixture_case::<D>(&file, name);
        let mut gru = Gru::<D, f64>::with_config(3, 4, config);
        case.load(&mut gru);
        let (x, h0) = (case.get("x").requires_grad(), case.find("h0").map(T::requires_grad));
        let (output, h_n) = run_with_h!(gru, case, &x, h0.as_ref());
        let mut inputs = vec![("x", &x)];
        inputs.extend(h0.as_ref().map(|h| ("h0", h)));
        case.check(&gru, &inputs, &[("output", output), ("h_n", h_n)]);
    }
    let lstms = [
        ("lstm", config(2, true, false, true)),
        ("lstm_unbatched", config(1, false, true, true)),
        ("lstm_packed", config(1, true, true, true)),
    ];
    for (name, config) in lstms {
        let case = fixture_case::<D>(&file, name);
        let mut lstm = Lstm::<D, f64>::with_config(3, 4, config);
        case.load(&mut lstm);
        let x = case.get("x").requires_grad();
        let state = case.find("h0").map(|h0| (h0.requires_grad(), case.get("c0").requires_grad()));
        let state_refs = state.as_ref().map(|(h, c)| (h, c));
        let (output, (h_n, c_n)) = match case.lengths() {
            None => match state_refs {
                None => lstm.forward(&x),
                Some(state) => lstm.forward_with_state(&x, state),
            },
            Some(lengths) => {
                let packed = pack_padded_sequence(&x, &lengths, config.batch_first, false);
                let (output, state) = match state_refs {
                    None => lstm.forward(&packed),
                    Some(state) => lstm.forward_with_state(&packed, state),
                };
                (pad_packed_sequence(&output, config.batch_first, 0.0, None).0, state)
            }
        };
        let mut inputs = vec![("x", &x)];
        if let Some((h0, c0)) = &state {
            inputs.extend([("h0", h0), ("c0", c0)]);
        }
        case.check(&lstm, &inputs, &[("output", output), ("h_n", h_n), ("c_n", c_n)]);
    }
}

fn recurrent_cells_match_pytorch<D: Device>() {
    let file = fixture();
    for (name, relu, bias) in [("rnn_cell", false, true), ("rnn_cell_relu", true, false)] {
        let case = fixture_case::<D>(&file, name);
        let cell = RnnCell::<D, f64>::new(3, 4);
        let cell = if relu { cell.with_nonlinearity(Relu) } else { cell };
        let mut cell = if bias { cell } else { cell.without_bias() };
        case.load(&mut cell);
        let (x, h0) = (case.get("x").requires_grad(), case.get("h0").requires_grad());
        let h = cell.forward_with_state(&x, &h0);
        case.check(&cell, &[("x", &x), ("h0", &h0)], &[("h_n", h)]);
    }
    let case = fixture_case::<D>(&file, "gru_cell");
    let mut cell = GruCell::<D, f64>::new(3, 4);
    case.load(&mut cell);
    let (x, h0) = (case.get("x").requires_grad(), case.get("h0").requires_grad());
    let h = cell.forward_with_state(&x, &h0);
    case.check(&cell, &[("x", &x), ("h0", &h0)], &[("h_n", h)]);

    let case = fixture_case::<D>(&file, "lstm_cell");
    let mut cell = LstmCell::<D, f64>::new(3, 4);
    case.load(&mut cell);
    let (x, h0, c0) = (case.get("x").requires_grad(), case.get("h0").requires_grad(), case.get("c0").requires_grad());
    let (h, c) = cell.forward_with_state(&x, (&h0, &c0));
    case.check(&cell, &[("x", &x), ("h0", &h0), ("c0", &c0)], &[("h_n", h), ("c_n", c)]);
}

device_tests! {
    recurrent_layers_match_pytorchs => recurrent_layers_match_pytorch,
    recurrent_cells_match_pytorchs => recurrent_cells_match_pytorch,
}

/// The three recurrences, for the plain-loop reference.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Rnn,
    Lstm,
    Gru,
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `W v + b` for `W` `[rows, v.len()]`, row-major.
fn affine(w: &[f64], v: &[f64], b: &[f64]) -> Vec<f64> {
    (0..b.len()).map(|r| b[r] + v.iter().enumerate().map(|(k, x)| w[r * v.len() + k] * x).sum::<f64>()).collect()
}

/// One layer of `kind` over `x` (`[steps, batch, input]`, row-major),
/// each sequence `b` for its `lengths[b]` steps, by plain loops from zero
/// states: the outputs `[steps, batch, directions · hidden]` (zero past a
/// sequence's end) and the final `h` `[directions, batch, hidden]`. `cells`
/// holds `(weight_ih, weight_hh, bias_ih, bias_hh)` per direction.
fn reference(
    kind: Kind,
    x: &[f64],
    (steps, batch, input): (usize, usize, usize),
    hidden: usize,
    cells: &[[Vec<f64>; 4]],
    lengths: &[usize],
) -> (Vec<f64>, Vec<f64>) {
    let directions = cells.len();
    let mut output = vec![0.0; steps * batch * directions * hidden];
    let mut h_n = vec![0.0; directions * batch * hidden];
    for (d, [w_ih, w_hh, b_ih, b_hh]) in cells.iter().enumerate() {
        for b in 0..batch {
            let (mut h, mut c) = (vec![0.0; hidden], vec![0.0; hidden]);
            let order: Vec<usize> = if d == 0 { (0..lengths[b]).collect() } else { (0..lengths[b]).rev().collect() };
            for t in order {
                let xt = &x[(t * batch + b) * input..][..input];
                let (gi, gh) = (affine(w_ih, xt, b_ih), affine(w_hh, &h, b_hh));
                h = match kind {
                    Kind::Rnn => (0..hidden).map(|j| (gi[j] + gh[j]).tanh()).collect(),
                    Kind::Lstm => {
                        let gate = |g: usize, j: usize| gi[g * hidden + j] + gh[g * hidden + j];
                        c = (0..hidden)
                            .map(|j| sigmoid(gate(1, j)) * c[j] + sigmoid(gate(0, j)) * gate(2, j).tanh())
                            .collect();
                        (0..hidden).map(|j| sigmoid(gate(3, j)) * c[j].tanh()).collect()
                    }
                    Kind::Gru => (0..hidden)
                        .map(|j| {
                            let r = sigmoid(gi[j] + gh[j]);
                            let z = sigmoid(gi[hidden + j] + gh[hidden + j]);
                            let n = (gi[2 * hidden + j] + r * gh[2 * hidden + j]).tanh();
                            (1.0 - z) * n + z * h[j]
                        })
                        .collect(),
                };
                output[((t * batch + b) * directions + d) * hidden..][..hidden].copy_from_slice(&h);
            }
            h_n[(d * batch + b) * hidden..][..hidden].copy_from_slice(&h);
        }
    }
    (output, h_n)
}

fn lengths_strategy() -> impl Strategy<Value = (usize, Vec<usize>)> {
    (1..5usize, 1..4usize).prop_flat_map(|(steps, batch)| (Just(steps), proptest::collection::vec(1..=steps, batch)))
}

device_proptests! {
    cases = 16;
    /// Every layer, in one or both directions, with or without packing,
    /// against the plain loop; the LSTM's and GRU's gradients against
    /// finite differences of the whole layer, packed (run step by step) or
    /// not (run as one operation over the sequence).
    fn recurrent_layers_match_a_loop<D>(
        (steps, lengths) in lengths_strategy(), input in 1..4usize, hidden in 1..4usize,
        bidirectional in any::<bool>(), packed in any::<bool>(), seed in any::<u64>(), v in crate::common::variant(),
    ) {
        let batch = lengths.len();
        let lengths = if packed { lengths } else { vec![steps; batch] };
        let x = crate::common::tensor_with::<D, f64>(
            &crate::gradcheck::data(steps * batch * input, seed), &[steps, batch, input], v,
        );
        let config = RecurrentConfig { bidirectional, ..Default::default() };
        let weights = |cells: Vec<[&T<D>; 4]>| -> Vec<[Vec<f64>; 4]> {
            cells.into_iter().map(|ts| ts.map(|t| t.to_vec())).collect()
        };
        let run = |kind: Kind, cells: Vec<[Vec<f64>; 4]>, got: (T<D>, T<D>)| {
            let want = reference(kind, &x.to_vec(), (steps, batch, input), hidden, &cells, &lengths);
            let what = format!("{kind:?} {steps}x{batch}x{input} hidden {hidden} lengths {lengths:?}");
            crate::fixture::assert_close(&format!("{what} output"), &got.0, &T::<D>::from_vec(want.0, got.0.dims()));
            crate::fixture::assert_close(&format!("{what} h_n"), &got.1, &T::<D>::from_vec(want.1, got.1.dims()));
        };
        let forward_packed = |out: devtensor::nn::PackedSequence<D, f64>| pad_packed_sequence(&out, false, 0.0, Some(steps)).0;

        let rnn = Rnn::<D, f64>::with_config(input, hidden, config);
        let cells = weights(rnn.cells.iter().map(|c| [&c.weight_ih, &c.weight_hh, c.bias_ih.as_ref().unwrap(), c.bias_hh.as_ref().unwrap()]).collect());
        let (out, h_n) = rnn.forward(&pack_padded_sequence(&x, &lengths, false, false));
        run(Kind::Rnn, cells, (forward_packed(out), h_n));

        let gru = Gru::<D, f64>::with_config(input, hidden, config);
        let cells = weights(gru.cells.iter().map(|c| [&c.weight_ih, &c.weight_hh, c.bias_ih.as_ref().unwrap(), c.bias_hh.as_ref().unwrap()]).collect());
        let got = if packed {
            let (out, h_n) = gru.forward(&pack_padded_sequence(&x, &lengths, false, false));
            (forward_packed(out), h_n)
        } else {
            gru.forward(&x)
        };
        run(Kind::Gru, cells, got);

        let lstm = Lstm::<D, f64>::with_config(input, hidden, config);
        let cells = weights(lstm.cells.iter().map(|c| [&c.weight_ih, &c.weight_hh, c.bias_ih.as_ref().unwrap(), c.bias_hh.as_ref().unwrap()]).collect());
        let got = if packed {
            let (out, (h_n, _)) = lstm.forward(&pack_padded_sequence(&x, &lengths, false, false));
            (forward_packed(out), h_n)
        } else {
            let (out, (h_n, _)) = lstm.forward(&x);
            (out, h_n)
        };
        run(Kind::Lstm, cells, got);

        // Finite differences of the whole layers on the CPU only: on the
        // GPUs the layers' gradients are checked against PyTorch's above,
        // and every op they are made of has its own gradient check there.
        if <D as devtensor::Backend>::cuda_ordinal().is_some() {
            return Ok(());
        }
        let cell = &lstm.cells[0];
        let h0 = T::<D>::from_vec(crate::gradcheck::data(batch * hidden, seed ^ 1), [1, batch, hidden]);
        let params = [x.clone(), cell.weight_ih.detach(), cell.weight_hh.detach(), h0];
        crate::gradcheck::gradcheck("Lstm", &params, |t| {
            let mut layer = Lstm::<D, f64>::with_config(input, hidden, RecurrentConfig::default());
            layer.cells[0] = LstmCell::from_weights(t[1].clone(), t[2].clone(), None, None);
            // Packed, step by step; otherwise the whole sequence as one operation.
            let state = (&t[3], &c0::<D>(batch, hidden));
            let (out, (h_n, c_n)) = if packed {
                let (out, state) = layer.forward_with_state(&pack_padded_sequence(&t[0], &lengths, false, false), state);
                (pad_packed_sequence(&out, false, 0.0, None).0, state)
            } else {
                layer.forward_with_state(&t[0], state)
            };
            Tensor::cat(&[&out.flatten_all(), &h_n.flatten_all(), &c_n.flatten_all()], 0)
        });
        let cell = &gru.cells[0];
        let h0 = T::<D>::from_vec(crate::gradcheck::data(batch * hidden, seed ^ 2), [1, batch, hidden]);
        let params = [x.clone(), cell.weight_ih.detach(), cell.weight_hh.detach(), cell.bias_hh.clone().unwrap().detach(), h0];
        crate::gradcheck::gradcheck("Gru", &params, |t| {
            let mut layer = Gru::<D, f64>::with_config(input, hidden, RecurrentConfig::default());
            let bias_ih = T::<D>::zeros([3 * hidden]);
            layer.cells[0] = GruCell::from_weights(t[1].clone(), t[2].clone(), Some(bias_ih), Some(t[3].clone()));
            let (out, h_n) = if packed {
                let (out, h_n) = layer.forward_with_state(&pack_padded_sequence(&t[0], &lengths, false, false), &t[4]);
                (pad_packed_sequence(&out, false, 0.0, None).0, h_n)
            } else {
                layer.forward_with_state(&t[0], &t[4])
            };
            Tensor::cat(&[&out.flatten_all(), &h_n.flatten_all()], 0)
        });
    }
}

/// A fixed initial cell state for the gradient check.
fn c0<D: Device>(batch: usize, hidden: usize) -> T<D> {
    T::<D>::from_vec(crate::gradcheck::data(batch * hidden, 7), [1, batch, hidden])
}

/// The packing utilities: PyTorch's padding, lengths, errors and order.
fn packing_follows_pytorch<D: Device>() {
    let a = T::<D>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [3, 2]);
    let b = T::<D>::from_vec(vec![7.0, 8.0], [1, 2]);
    let padded = pad_sequence(&[&b, &a], false, -1.0);
    assert_eq!(padded.dims(), &[3, 2, 2]);
    assert_eq!(padded.to_vec(), vec![7.0, 8.0, 1.0, 2.0, -1.0, -1.0, 3.0, 4.0, -1.0, -1.0, 5.0, 6.0]);
    assert_eq!(pad_sequence(&[&b, &a], true, 0.0).dims(), &[2, 3, 2]);

    // Unsorted lengths pack only without enforce_sorted, and keep the
    // batch's order; padding past the ends is replaced on the way out.
    let err = try_pack_padded_sequence(&padded, &[1, 3], false, true).unwrap_err().to_string();
    assert!(err.contains("decreasing order"), "{err}");
    let packed = pack_padded_sequence(&padded, &[1, 3], false, false);
    assert_eq!(packed.lengths(), &[1, 3]);
    let (back, lengths) = pad_packed_sequence(&packed, true, 9.0, Some(4));
    assert_eq!(lengths, vec![1, 3]);
    assert_eq!(back.dims(), &[2, 4, 2]);
    assert_eq!(back.to_vec(), vec![7.0, 8.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 9.0, 9.0]);
    // The longest length sets the time axis, as in PyTorch.
    assert_eq!(pack_padded_sequence(&padded, &[1, 2], false, false).padded().dims(), &[2, 2, 2]);

    for (lengths, needle) in
        [(&[0, 3][..], "between 1 and 3"), (&[4, 3][..], "between 1 and 3"), (&[3][..], "1 lengths")]
    {
        let err = try_pack_padded_sequence(&padded, lengths, false, false).unwrap_err().to_string();
        assert!(err.contains(needle) && err.contains("pack_padded_sequence"), "{err}");
    }
    let err = try_pad_packed_sequence(&packed, false, 0.0, Some(2)).unwrap_err().to_string();
    assert!(err.contains("total_length 2"), "{err}");

    // A layer refuses a state of the wrong shape and an input of the wrong
    // width, naming them.
    let lstm = Lstm::<D, f64>::new(2, 3);
    let h = T::<D>::zeros([1, 5, 3]);
    let err = lstm.try_forward_with_state(&padded, (&h, &h)).unwrap_err().to_string();
    assert!(err.contains("[1, 2, 3]") && err.contains("Lstm"), "{err}");
    let err = Gru::<D, f64>::new(4, 3).try_forward(&padded).unwrap_err().to_string();
    assert!(err.contains("input_size = 4"), "{err}");
    let err = RnnCell::<D, f64>::new(4, 3).try_forward(&a).unwrap_err().to_string();
    assert!(err.contains("RnnCell") && err.contains("[batch, 4]"), "{err}");
}

/// Dropout between layers acts only in training, on every layer but the
/// last; moving and converting keep PyTorch's names.
fn recurrent_layers_train_move_and_convert<D: Device>() {
    let config = RecurrentConfig { num_layers: 2, dropout: 1.0, ..Default::default() };
    let mut lstm = Lstm::<D, f64>::with_config(2, 3, config);
    let x = T::<D>::randn([4, 2, 2]);
    // With p = 1 the second layer sees zeros: its output is that of a
    // zero input, the same for every step's input.
    let (train, _) = lstm.forward(&x);
    let (other, _) = lstm.forward(&T::<D>::randn([4, 2, 2]));
    assert_eq!(train.to_vec(), other.to_vec());
    lstm.eval();
    let (eval, _) = lstm.forward(&x);
    assert_ne!(eval.to_vec(), train.to_vec());
    let names: Vec<String> = lstm.named_tensors().into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names[..5], ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l1"]);
    let moved = lstm.to::<Cpu>();
    assert_eq!(moved.named_tensors().len(), 8);
    let single = devtensor::nn::ToDtype::to_dtype::<f32>(&lstm);
    assert_eq!(single.forward(&x.to_dtype::<f32>()).0.dims(), &[4, 2, 3]);
    // In bf16 (the fused gates widen to f32 and round once): PyTorch's
    // values within bf16's rounding of the f32 ones, and a gradient.
    let mut single = single;
    single.eval();
    let half = devtensor::nn::ToDtype::to_dtype::<devtensor::bf16>(&single);
    let xh = x.to_dtype::<devtensor::bf16>().requires_grad();
    let (out, (h_n, c_n)) = half.forward(&xh);
    let (want, _) = single.forward(&xh.to_dtype::<f32>());
    for (g, w) in out.to_dtype::<f32>().to_vec().iter().zip(want.to_vec()) {
        assert!((g - w).abs() <= 2e-2 * (1.0 + w.abs()), "bf16 LSTM: {g} against {w}");
    }
    let grads = (&out.sum() + &(&h_n.sum() + &c_n.sum())).backward();
    assert_eq!(grads.get(&xh).expect("the input's gradient").dims(), &[4, 2, 2]);
    let gru = Gru::<D>::new(2, 3);
    let (out, _) = devtensor::nn::ToDtype::to_dtype::<devtensor::f16>(&gru).forward(&x.to_dtype::<devtensor::f16>());
    let (want, _) = gru.forward(&x.to_dtype::<f32>());
    for (g, w) in out.to_dtype::<f32>().to_vec().iter().zip(want.to_vec()) {
        assert!((g - w).abs() <= 5e-3 * (1.0 + w.abs()), "f16 GRU: {g} against {w}");
    }
    // from_weights refuses weights of another shape, naming them all.
    let w = |dims: &[usize]| T::<D>::zeros(dims);
    let err = LstmCell::<D, f64>::try_from_weights(w(&[12, 3]), w(&[12, 4]), None, None).unwrap_err().to_string();
    assert!(
        err.contains("LstmCell::from_weights") && err.contains("[12, 3]") && err.contains("[4 * hidden_size"),
        "{err}"
    );
    let err = GruCell::<D, f64>::try_from_weights(w(&[12, 3]), w(&[12, 4]), Some(w(&[12])), None).unwrap_err();
    assert!(err.to_string().contains("either no biases"), "{err}");
    let bad = RecurrentConfig { num_layers: 0, ..Default::default() };
    assert!(Rnn::<D, f64>::try_with_config(2, 3, bad).unwrap_err().to_string().contains("num_layers"));
    let bi = Gru::<D>::with_config(2, 3, RecurrentConfig { bidirectional: true, bias: false, ..Default::default() });
    let names: Vec<String> = bi.named_tensors().into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, ["weight_ih_l0", "weight_hh_l0", "weight_ih_l0_reverse", "weight_hh_l0_reverse"]);
}

device_tests! {
    packing_follows_pytorchs => packing_follows_pytorch,
    recurrent_layers_train_move_and_converts => recurrent_layers_train_move_and_convert,
}
