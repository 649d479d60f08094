//! A character-level LSTM trained on Shakespeare, the recurrent model of
//! PyTorch's char-RNN tutorials: an embedding of 64, a 2-layer LSTM of
//! width 256 (`batch_first`, dropout 0.2 between the layers) and a linear
//! head over the characters; batch 16, sequence 32, Adam at 2e-3 with
//! gradients clipped at 1.0, 1500 steps, on `Cuda<0>` when a GPU is
//! present and the CPU otherwise.
//!
//! The text is the ten plays of `examples/data/shakespeare.txt.gz`, the
//! last 10% for validation, the batches cut at the same positions as
//! `scripts/train_char_lstm_torch.py` cuts them (PyTorch's version of this
//! program, for comparison). Every 250 steps it prints the train and
//! validation loss (each the mean of 20 batches). At the end the model
//! writes 400 characters (temperature 0.8), one at a time, carrying the
//! LSTM's state from each character to the next as PyTorch code passes
//! `(h, c)` back in.
//!
//! Run with `cargo run --release --example train_char_lstm`; `-- --steps N`
//! trains for fewer steps.

use devtensor::nn::{Embedding, Linear, Lstm, Module, RecurrentConfig, cross_entropy};
use devtensor::optim::{Adam, AdamConfig, Optimizer, clip_grad_norm};
use devtensor::{Device, Tensor, no_grad};
use std::time::Instant;

const BATCH: usize = 16;
const SEQ: usize = 32;
const EMBED: usize = 64;
const HIDDEN: usize = 256;
const LAYERS: usize = 2;
const EVAL_EVERY: usize = 250;
const EVAL_BATCHES: usize = 20;
const SEED: u64 = 1337;

#[path = "gpt/data.rs"]
mod data;
use data::{Split, Vocabulary, load_text};

/// The model, as the PyTorch script's `CharLstm(nn.Module)`.
struct CharLstm<D: Device> {
    embed: Embedding<D>,
    lstm: Lstm<D>,
    head: Linear<D>,
}
devtensor::module!(CharLstm { embed, lstm, head });

impl<D: Device> CharLstm<D> {
    fn new(vocab: usize) -> Self {
        let config = RecurrentConfig { num_layers: LAYERS, batch_first: true, dropout: 0.2, ..Default::default() };
        CharLstm {
            embed: Embedding::new(vocab, EMBED),
            lstm: Lstm::with_config(EMBED, HIDDEN, config),
            head: Linear::new(HIDDEN, vocab),
        }
    }

    /// The logits `[batch, seq, vocab]` of `x` `[batch, seq]` from the
    /// state `(h, c)` (zeros when `None`), and the state after it.
    fn forward(
        &self,
        x: &Tensor<D, i64>,
        state: Option<(&Tensor<D>, &Tensor<D>)>,
    ) -> (Tensor<D>, (Tensor<D>, Tensor<D>)) {
        let embedded = self.embed.forward(x);
        let (out, state) = match state {
            Some(state) => self.lstm.forward_with_state(&embedded, state),
            None => self.lstm.forward(&embedded),
        };
        (self.head.forward(&out), state)
    }

    /// The mean cross-entropy of predicting `y` from `x`.
    fn loss(&self, x: &Tensor<D, i64>, y: &Tensor<D, i64>) -> Tensor<D> {
        let (logits, _) = self.forward(x, None);
        let vocab = logits.dims()[2];
        cross_entropy(&logits.reshape([BATCH * SEQ, vocab]), &y.reshape([BATCH * SEQ]))
    }
}

/// The mean loss of `EVAL_BATCHES` batches of `split` from `first`, in eval mode.
fn split_loss<D: Device>(split: &Split<D>, model: &CharLstm<D>, first: u64) -> f32 {
    let total: f32 = no_grad(|| {
        (0..EVAL_BATCHES as u64)
            .map(|i| {
                let (x, y) = split.batch(first + i);
                model.loss(&x, &y).item()
            })
            .sum()
    });
    total / EVAL_BATCHES as f32
}

fn train<D: Device>(text: &[u8], steps: usize) {
    // The characters, in byte order, are the vocabulary.
    let vocab = Vocabulary::of(text);
    let (train, val) = Split::<D>::train_and_validation(&vocab.encode(text), BATCH, SEQ);

    devtensor::manual_seed(SEED);
    let mut model = CharLstm::<D>::new(vocab.chars.len());
    println!(
        "{} characters ({} distinct), an LSTM of {} parameters ({LAYERS} layers of {HIDDEN}), on {}",
        text.len(),
        vocab.chars.len(),
        model.num_parameters(),
        D::name()
    );
    let mut opt = Adam::new(&model, AdamConfig { lr: 2e-3, ..Default::default() });
    let started = Instant::now();
    for step in 0..=steps {
        if step.is_multiple_of(EVAL_EVERY) || step == steps {
            model.eval();
            // The same evaluation batches every time, so the figures compare.
            let (train_loss, val_loss) = (split_loss(&train, &model, 1 << 40), split_loss(&val, &model, 0));
            model.train();
            let seconds = started.elapsed().as_secs_f64();
            println!("step {step:5}: train loss {train_loss:.4}, val loss {val_loss:.4} ({seconds:.1} s)");
        }
        if step == steps {
            break;
        }
        let (x, y) = train.batch(step as u64);
        let mut grads = model.loss(&x, &y).backward();
        clip_grad_norm(&model, &mut grads, 1.0, 2.0);
        opt.step(&mut model, &grads);
    }
    println!("trained {steps} steps in {:.1} s", started.elapsed().as_secs_f64());

    // Generation: one character at a time, the state carried along.
    model.eval();
    let mut token = Tensor::<D, i64>::from_vec(vec![vocab.index[b'\n' as usize]], [1, 1]);
    let mut state: Option<(Tensor<D>, Tensor<D>)> = None;
    let mut sample = Vec::new();
    no_grad(|| {
        for _ in 0..400 {
            let (logits, next) = model.forward(&token, state.as_ref().map(|(h, c)| (h, c)));
            token = (logits.reshape([1, vocab.chars.len()]) / 0.8).softmax(1).multinomial(1, true);
            sample.push(vocab.chars[token.to_vec()[0] as usize]);
            state = Some(next);
        }
    });
    println!("a sample (temperature 0.8):\n\n{}", String::from_utf8_lossy(&sample));
}

fn main() {
    let mut steps = 1500;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next().and_then(|n| n.parse().ok())) {
            ("--steps", Some(n)) if n > 0 => steps = n,
            _ => {
                eprintln!("usage: train_char_lstm [--steps N]");
                std::process::exit(2);
            }
        }
    }
    let text = load_text();
    devtensor::on_best_device!(D => train::<D>(&text, steps));
}
