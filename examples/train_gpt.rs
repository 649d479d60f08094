//! A character-level GPT trained on Shakespeare: nanoGPT's model and its
//! "baby GPT" settings for a laptop CPU (4 layers, 4 heads, width 128,
//! context 64, batch 12, AdamW at 1e-3 with 100 warm-up steps and cosine
//! decay to 1e-4, weight decay 0.1 on matrices only, gradients clipped at
//! 1.0, 2000 steps), on `Cuda<0>` when a GPU is present and the CPU
//! otherwise.
//!
//! The text is ten plays (1.4 MB, `examples/data/shakespeare.txt.gz`, see
//! the README beside it); the last 10% is the validation split. Training
//! prints a progress bar and, every 250 steps, the train and validation
//! loss (each the mean of 20 batches) and the speed. At the end the model
//! and optimizer are saved as a safetensors checkpoint, the model is
//! reloaded from it onto the CPU, and the reloaded model writes 600
//! characters (temperature 0.8, top-k 20) with `Gpt::generate`, which keeps
//! a key/value cache so that each new character runs through the model
//! alone.
//!
//! Run with `cargo run --release --example train_gpt`; `-- --steps N`
//! trains for fewer steps (the schedule is then N long). `-- --bf16` runs
//! the products (the linear layers and attention) in `bf16` under
//! [`autocast`](devtensor::autocast), the parameters, the optimizer and
//! everything else staying `f32`; `-- --f16` runs them in `f16`, with the
//! loss scaled by a [`GradScaler`](devtensor::optim::GradScaler).
//! `-- --checkpoint` recomputes each block in the backward pass instead of
//! keeping its activations ([`devtensor::autograd::checkpoint`]): the same
//! losses, less memory, more compute. The run ends with the peak of the
//! host's heap during training, counted by this program's allocator.
//! `scripts/train_gpt_torch.py` trains PyTorch's version of the same model
//! on the same batches, for comparison.

use devtensor::io::Checkpoint;
use devtensor::nn::Module;
use devtensor::optim::{CosineAnnealingLr, GradScaler, LinearLr, LrSchedule, Optimizer, SequentialLr, clip_grad_norm};
use devtensor::{Cpu, Device, Tensor, autocast, bf16, f16, no_grad};
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The system allocator, counting the bytes it has handed out and their
/// peak, so that the run can report what `--checkpoint` saves.
struct CountingAllocator;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static PEAK_BYTES: AtomicUsize = AtomicUsize::new(0);

impl CountingAllocator {
    fn grew(by: usize) {
        let live = LIVE_BYTES.fetch_add(by, Ordering::Relaxed) + by;
        PEAK_BYTES.fetch_max(live, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to `System` with the caller's own
// pointer and layout, which satisfy `System`'s contract as they satisfy
// this one's; the counting touches only atomics.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            Self::grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            Self::grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
            Self::grew(new_size);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Megabytes of `bytes`, for the report.
fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

#[path = "gpt/data.rs"]
mod data;
use data::{Split, Vocabulary, load_text};

#[allow(dead_code)] // parts used only by the tests and benchmarks
#[path = "gpt/model.rs"]
mod model;
use model::{Gpt, GptConfig, Sampling};

const BATCH: usize = 12;
const BLOCK: usize = 64;
const EVAL_EVERY: usize = 250;
const EVAL_BATCHES: usize = 20;
const SEED: u64 = 1337;

/// What the products compute in.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Precision {
    F32,
    Bf16,
    F16,
}

impl Precision {
    /// `f()` with the products in this precision.
    fn run<T>(self, f: impl FnOnce() -> T) -> T {
        match self {
            Precision::F32 => f(),
            Precision::Bf16 => autocast::<bf16, _>(f),
            Precision::F16 => autocast::<f16, _>(f),
        }
    }
}

/// The mean loss of `EVAL_BATCHES` batches of `split` from `first`.
fn split_loss<D: Device>(split: &Split<D>, model: &Gpt<D>, first: u64, precision: Precision) -> f32 {
    no_grad(|| {
        let total: f32 = (0..EVAL_BATCHES as u64)
            .map(|i| {
                let (x, y) = split.batch(first + i);
                precision.run(|| model.loss(&x, &y)).expect("the model runs").item()
            })
            .sum();
        total / EVAL_BATCHES as f32
    })
}

/// One line of progress: a bar, the step, the last loss and the speed,
/// redrawn in place on a terminal and printed every 100 steps elsewhere.
fn progress(step: usize, steps: usize, loss: f32, tokens_per_second: f64, started: Instant) {
    let terminal = std::io::stderr().is_terminal();
    if !terminal && !step.is_multiple_of(100) && step != steps {
        return;
    }
    const WIDTH: usize = 30;
    let filled = WIDTH * step / steps;
    let elapsed = started.elapsed().as_secs_f64();
    let eta = elapsed / step.max(1) as f64 * (steps - step) as f64;
    let line = format!(
        "[{}{}] {step:5}/{steps} loss {loss:.3} | {:6.0} tokens/s | {:4.0} s left",
        "#".repeat(filled),
        ".".repeat(WIDTH - filled),
        tokens_per_second,
        eta
    );
    let mut err = std::io::stderr();
    if terminal {
        let _ = write!(err, "\r{line}");
        let _ = err.flush();
    } else {
        let _ = writeln!(err, "{line}");
    }
}

fn train<D: Device>(text: &[u8], steps: usize, precision: Precision, checkpoint_blocks: bool) {
    // The characters, in byte order, are the vocabulary.
    let vocab = Vocabulary::of(text);
    let encoded = vocab.encode(text);
    let (train, val) = Split::<D>::train_and_validation(&encoded, BATCH, BLOCK);
    let cut = train.tokens.elem_count();

    devtensor::manual_seed(SEED);
    let config = GptConfig { block_size: BLOCK, vocab_size: vocab.chars.len(), n_layer: 4, n_head: 4, n_embd: 128 };
    let mut model = Gpt::<D>::new(config).expect("the model fits");
    model.checkpoint_blocks = checkpoint_blocks;
    println!(
        "{} characters ({} distinct; {} to train on, {} to validate), {} parameters, on {}, products in {precision:?}{}",
        text.len(),
        vocab.chars.len(),
        cut,
        encoded.len() - cut,
        model.num_parameters(),
        D::name(),
        if checkpoint_blocks { ", blocks checkpointed" } else { "" }
    );
    let mut opt = model.optimizer(1e-3, 0.1, (0.9, 0.99));
    let mut scaler = GradScaler::new();
    let warmup = (steps / 20).min(100);
    let schedule = SequentialLr {
        first: LinearLr {
            base_lr: 1e-3,
            start_factor: 1.0 / warmup.max(1) as f64,
            end_factor: 1.0,
            total_iters: warmup,
        },
        second: CosineAnnealingLr { base_lr: 1e-3, t_max: steps - warmup, eta_min: 1e-4 },
        milestone: warmup,
    };

    let started = Instant::now();
    let before_training = LIVE_BYTES.load(Ordering::Relaxed);
    PEAK_BYTES.store(before_training, Ordering::Relaxed);
    let (mut window_start, mut window_tokens) = (Instant::now(), 0usize);
    let mut tokens_per_second = 0.0;
    for step in 0..=steps {
        if step.is_multiple_of(EVAL_EVERY) || step == steps {
            if std::io::stderr().is_terminal() {
                eprintln!();
            }
            // The same evaluation batches every time, so the figures compare.
            let (train_loss, val_loss) =
                (split_loss(&train, &model, 1 << 40, precision), split_loss(&val, &model, 0, precision));
            println!(
                "step {step:5}: train loss {train_loss:.4}, val loss {val_loss:.4}, {tokens_per_second:.0} tokens/s"
            );
            window_start = Instant::now();
            window_tokens = 0;
        }
        if step == steps {
            break;
        }
        schedule.apply(&mut opt, step);
        let (x, y) = train.batch(step as u64);
        let loss = precision.run(|| model.loss(&x, &y)).expect("the model runs");
        if precision == Precision::F16 {
            // Unscaled before clipping, which needs the true gradients.
            let mut grads = scaler.scale_loss(&loss).backward();
            scaler.unscale(&model, &mut grads);
            clip_grad_norm(&model, &mut grads, 1.0, 2.0);
            scaler.step(&mut opt, &mut model, &mut grads);
            scaler.update();
        } else {
            let mut grads = loss.backward();
            clip_grad_norm(&model, &mut grads, 1.0, 2.0);
            opt.step(&mut model, &grads);
        }
        window_tokens += BATCH * BLOCK;
        tokens_per_second = window_tokens as f64 / window_start.elapsed().as_secs_f64();
        progress(step + 1, steps, loss.item(), tokens_per_second, started);
    }
    println!("trained {steps} steps in {:.1} s", started.elapsed().as_secs_f64());
    let peak = PEAK_BYTES.load(Ordering::Relaxed);
    println!(
        "peak host heap while training: {:.1} MiB, {:.1} MiB above the {:.1} MiB before the first step",
        mib(peak),
        mib(peak - before_training),
        mib(before_training)
    );

    let path = std::env::temp_dir().join(format!("devtensor-train-gpt-{}.safetensors", std::process::id()));
    let checkpoint = Checkpoint::try_from_model(&model).expect("the model's tensors").with_optimizer(&opt);
    let checkpoint = if precision == Precision::F16 { checkpoint.with_scaler(&scaler) } else { checkpoint };
    checkpoint.save(&path);
    let mut reloaded = Gpt::<Cpu>::new(config).expect("the model fits");
    Checkpoint::<Cpu>::load(&path).load_into(&mut reloaded);
    // The file has served its purpose; don't leave one behind per run.
    let _ = std::fs::remove_file(&path);
    println!("checkpoint {} reloaded on Cpu; a sample (temperature 0.8, top-k 20):\n", path.display());
    let prompt = Tensor::<Cpu, i64>::from_vec(vec![vocab.index[b'\n' as usize]], [1, 1]);
    let sampling = Sampling { temperature: 0.8, top_k: Some(20) };
    let started = Instant::now();
    let tokens = reloaded.generate(&prompt, 600, sampling).expect("the model runs").to_vec();
    let seconds = started.elapsed().as_secs_f64();
    let text: Vec<u8> = tokens.into_iter().map(|t| vocab.chars[t as usize]).collect();
    println!("{}", String::from_utf8_lossy(&text));
    println!("\n(600 characters in {seconds:.2} s, {:.0} tokens/s, with a key/value cache)", 600.0 / seconds);
}

fn main() {
    let mut steps = 2000;
    let mut precision = Precision::F32;
    let mut checkpoint_blocks = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bf16" => precision = Precision::Bf16,
            "--f16" => precision = Precision::F16,
            "--checkpoint" => checkpoint_blocks = true,
            "--steps" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => steps = n,
                _ => usage(),
            },
            _ => usage(),
        }
    }
    let text = load_text();
    devtensor::on_best_device!(D => train::<D>(&text, steps, precision, checkpoint_blocks));
}

fn usage() -> ! {
    eprintln!("usage: train_gpt [--steps N] [--bf16 | --f16] [--checkpoint]");
    std::process::exit(2);
}
