//! Recurrent rows: the char-level language model of PyTorch's tutorials
//! and of issue 59 (an embedding, a 2-layer LSTM or GRU with
//! `batch_first`, a linear head over the characters), its Adam training
//! step and its inference, in devtensor and PyTorch from the same weights
//! and batch. candle-nn's LSTM and GRU have no multi-layer, batch form to
//! compare with.

use super::{Contest, data};
use devtensor::nn::{Embedding, Gru, Linear, Lstm, RecurrentConfig, cross_entropy};
use devtensor::optim::{Adam, AdamConfig, Optimizer};
use devtensor::{Cpu, Device, Tensor, no_grad};
use serde_json::json;
use std::hint::black_box;

const BATCH: usize = 16;
const STEPS: usize = 32;
const VOCAB: usize = 65;
const EMBEDDING: usize = 64;
const LAYERS: usize = 2;

/// A char-level model over `$layer`: `head(rnn(embed(idx)).0)`.
macro_rules! char_model {
    ($name:ident, $layer:ident) => {
        struct $name<D: Device> {
            embed: Embedding<D>,
            rnn: $layer<D>,
            head: Linear<D>,
        }
        devtensor::module!($name { embed, rnn, head });

        impl $name<Cpu> {
            fn new(hidden: usize) -> Self {
                let config = RecurrentConfig { num_layers: LAYERS, batch_first: true, ..Default::default() };
                $name {
                    embed: Embedding::new(VOCAB, EMBEDDING),
                    rnn: $layer::with_config(EMBEDDING, hidden, config),
                    head: Linear::new(hidden, VOCAB),
                }
            }

            fn logits(&self, idx: &Tensor<Cpu, i64>) -> Tensor<Cpu> {
                let (out, _) = self.rnn.forward(&self.embed.forward(idx));
                self.head.forward(&out)
            }
        }
    };
}

char_model!(CharLstm, Lstm);
char_model!(CharGru, Gru);

/// The rows of one model: `kind` names it for PyTorch (`lstm`, `gru`),
/// `gates` is its number of gates.
macro_rules! model_rows {
    ($contest:expr, $wanted:expr, $peak:expr, $model:ident, $kind:literal, $gates:expr) => {
        for hidden in [64, 256] {
            let name = if $kind == "lstm" { "LSTM" } else { "GRU" };
            let (infer, train) = (
                format!("infer char-{name} {LAYERS}x{hidden} ({BATCH}x{STEPS})"),
                format!("train step char-{name} {LAYERS}x{hidden} ({BATCH}x{STEPS}, adam)"),
            );
            if !$wanted(&infer) && !$wanted(&train) {
                continue;
            }
            let tokens = |seed| {
                let ids = data(BATCH * STEPS, seed).iter().map(|v| ((v + 1.0) * 32.5) as i64 % VOCAB as i64).collect();
                Tensor::<Cpu, i64>::from_vec(ids, [BATCH, STEPS])
            };
            let (idx, y) = (tokens(71), tokens(72));
            devtensor::manual_seed(9);
            let mut model = $model::new(hidden);
            // Multiply-adds of the forward: every layer's gates over the
            // input and the state at each step, then the head.
            let per_token: usize = (0..LAYERS)
                .map(|l| $gates * hidden * (if l == 0 { EMBEDDING } else { hidden } + hidden))
                .sum::<usize>()
                + hidden * VOCAB;
            let forward = 2.0 * (BATCH * STEPS * per_token) as f64;
            let args = json!({"model": {"kind": $kind, "vocab": VOCAB, "embedding": EMBEDDING,
                                        "hidden": hidden, "layers": LAYERS}, "lr": 2e-3});
            let logits = no_grad(|| model.logits(&idx)).to_vec();
            if $wanted(&infer) {
                $contest.torch.model(&model);
                $contest.torch.labels("idx", &idx);
                let torch = $contest.torch.setup(&infer, "char_rnn_inference", args.clone(), &logits, 1e-4);
                let run = &mut || drop(black_box(no_grad(|| model.logits(&idx))));
                $contest.row(&infer, forward, Some($peak), "GFLOP/s", torch, run, None);
            }
            if $wanted(&train) {
                $contest.torch.model(&model);
                $contest.torch.labels("idx", &idx);
                $contest.torch.labels("y", &y);
                let torch = $contest.torch.setup(&train, "char_rnn_train_step", args.clone(), &logits, 1e-4);
                let mut opt = Adam::new(&model, AdamConfig { lr: 2e-3, ..Default::default() });
                let model = &mut model;
                let step = &mut || {
                    let loss = cross_entropy(&model.logits(&idx).flatten(0, 1), &y.flatten_all());
                    opt.step(model, &loss.backward());
                };
                $contest.row(&train, 3.0 * forward, Some($peak), "GFLOP/s", torch, step, None);
            }
        }
    };
}

/// The char-LSTM's and char-GRU's rows, at hidden sizes 64 and 256.
pub fn rows(contest: &mut Contest, wanted: &impl Fn(&str) -> bool, peak: f64) {
    model_rows!(contest, wanted, peak, CharLstm, "lstm", 4);
    model_rows!(contest, wanted, peak, CharGru, "gru", 3);
}
