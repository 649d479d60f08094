//! nanoGPT's training loop under DDP (Karpathy's `train.py` with
//! `torchrun`), the companion of `examples/ddp.rs`: the character-level
//! GPT of `examples/train_gpt.rs`, one process per GPU, each step
//! accumulating gradients over micro-batches with no synchronisation
//! ([`DistributedDataParallel::accumulate`], PyTorch's `no_sync`) and
//! summing them across the processes on the last
//! ([`DistributedDataParallel::step`], whose buckets go out while its
//! backward runs), the summed gradient clipped at 1.0 before AdamW steps.
//! The losses it prints are means over every rank
//! ([`ProcessGroup::all_reduce`] with [`ReduceOp::Avg`]), and at the end
//! each rank's last loss is gathered ([`ProcessGroup::all_gather`]).
//!
//! ```text
//! cargo build --release --example ddp_gpt --bin devtensor-run
//! target/release/devtensor-run --nproc-per-node 2 target/release/examples/ddp_gpt
//! ```
//!
//! `--iters N` (200), `--accum N` (micro-batches per rank and step, 4),
//! `--tiny` (a model and batches small enough for the emulated GPUs, as CI
//! runs it: `bash scripts/with-emu.sh target/debug/devtensor-run
//! --nproc-per-node 2 target/debug/examples/ddp_gpt --tiny --compare`).
//! `--compare` has rank 0 train the same model on one device, one step
//! per iteration over every rank's micro-batches together, and fail unless
//! both end with the same parameters, within rounding.

use devtensor::nn::Module;
use devtensor::optim::{
    AdamConfig, AdamW, CosineAnnealingLr, LinearLr, LrSchedule, Optimizer, OptimizerConfig, ParamGroup, SequentialLr,
    clip_grad_norm,
};
use devtensor::parallel::{DistributedDataParallel, Job, Loss, ProcessGroup, ReduceOp};
use devtensor::{Device, Error, Result, Tensor, no_grad};

#[path = "gpt/data.rs"]
mod data;
use data::{Split, Vocabulary, load_text};

#[allow(dead_code)] // parts used only by the single-process example
#[path = "gpt/model.rs"]
mod model;
use model::{Gpt, GptConfig};

const SEED: u64 = 1337;
const LR: f64 = 1e-3;
const MIN_LR: f64 = 1e-4;
const EVAL_BATCHES: u64 = 4;

/// Command-line settings.
struct Settings {
    iters: usize,
    accum: usize,
    tiny: bool,
    compare: bool,
}

fn settings() -> Result<Settings> {
    let mut settings = Settings { iters: 200, accum: 4, tiny: false, compare: false };
    let mut args = std::env::args().skip(1);
    let bad = |reason: String| Error::Distributed { rank: None, reason };
    let number = |flag: &str, text: Option<String>| -> Result<usize> {
        let text = text.ok_or_else(|| bad(format!("{flag} needs a number")))?;
        text.parse().ok().filter(|&n| n > 0).ok_or_else(|| bad(format!("{flag} {text:?} is not a positive number")))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--iters" => settings.iters = number("--iters", args.next())?,
            "--accum" => settings.accum = number("--accum", args.next())?,
            "--tiny" => settings.tiny = true,
            "--compare" => settings.compare = true,
            other => return Err(bad(format!("unknown argument {other} (--iters N, --accum N, --tiny, --compare)"))),
        }
    }
    Ok(settings)
}

/// The model's sizes and the micro-batch's rows.
fn sizes(settings: &Settings, vocab_size: usize) -> (GptConfig, usize) {
    if settings.tiny {
        (GptConfig { block_size: 16, vocab_size, n_layer: 2, n_head: 2, n_embd: 32 }, 4)
    } else {
        (GptConfig { block_size: 64, vocab_size, n_layer: 4, n_head: 4, n_embd: 128 }, 12)
    }
}

/// What DDP trains: the GPT's mean cross-entropy on a batch of windows
/// and their next tokens.
impl<D: Device> Loss<D> for Gpt<D> {
    type Batch = (Tensor<D, i64>, Tensor<D, i64>);

    fn loss(&self, (x, y): &Self::Batch) -> Result<Tensor<D>> {
        Gpt::loss(self, x, y)
    }
}

/// nanoGPT's optimizer as a DDP optimizer setting: AdamW with weight decay
/// on the matrices only.
#[derive(Clone, Copy)]
struct NanoGptAdamW;

impl OptimizerConfig for NanoGptAdamW {
    type For<D: Device> = AdamW<D>;

    fn build<D: Device, M: Module<D>>(&self, model: &M) -> AdamW<D> {
        let decay = AdamConfig { lr: LR, betas: (0.9, 0.99), weight_decay: 0.1, ..AdamConfig::adamw() };
        let no_decay = ParamGroup::new("no_decay", AdamConfig { weight_decay: 0.0, ..decay }, |_, dims| dims.len() < 2);
        AdamW::new(model, decay).with_group(no_decay)
    }
}

/// nanoGPT's schedule: linear warm-up, then cosine decay to `MIN_LR`.
fn schedule(iters: usize) -> SequentialLr<LinearLr, CosineAnnealingLr> {
    let warmup = (iters / 20).max(1);
    SequentialLr {
        first: LinearLr { base_lr: LR, start_factor: 1.0 / warmup as f64, end_factor: 1.0, total_iters: warmup },
        second: CosineAnnealingLr { base_lr: LR, t_max: iters - warmup, eta_min: MIN_LR },
        milestone: warmup,
    }
}

/// The batch that micro-step `micro` of iteration `iter` gives `rank`:
/// every rank and micro-step its own, as nanoGPT's `get_batch` draws them.
fn micro_batch(iter: usize, micro: usize, rank: usize, accum: usize, world: usize) -> u64 {
    ((iter * accum + micro) * world + rank) as u64
}

/// This rank's mean loss over `EVAL_BATCHES` batches of `split` (its own
/// ones), averaged over every rank.
fn mean_loss<D: Device>(group: &ProcessGroup<D>, model: &Gpt<D>, split: &Split<D>, rank: usize) -> Result<f32> {
    let mine = no_grad(|| -> Result<f32> {
        let mut total = 0.0;
        for i in 0..EVAL_BATCHES {
            let (x, y) = split.batch((1 << 40) + rank as u64 * EVAL_BATCHES + i);
            total += model.loss(&x, &y)?.try_item()?;
        }
        Ok(total / EVAL_BATCHES as f32)
    })?;
    group.try_all_reduce(&Tensor::<D>::try_from_slice(&[mine], [1])?, ReduceOp::Avg)?.try_item()
}

/// This rank's part of the job, typed on its GPU `D`.
fn train<D: Device>(job: &Job, settings: &Settings) -> Result<()> {
    let (rank, world, accum, iters) = (job.rank, job.world_size, settings.accum, settings.iters);
    let main = job.is_main();
    let group = ProcessGroup::<D>::try_new(job)?;
    let text = load_text();
    let vocab = Vocabulary::of(&text);
    let (config, rows) = sizes(settings, vocab.chars.len());
    let (train, val) = Split::<D>::train_and_validation(&vocab.encode(&text), rows, config.block_size);
    devtensor::manual_seed(SEED);
    let model = Gpt::<D>::new(config)?;
    // Rank 0's starting weights, for `--compare` (DDP gives every rank these).
    let initial =
        if settings.compare && main { Some(devtensor::io::Checkpoint::try_from_model(&model)?) } else { None };
    let ddp = DistributedDataParallel::try_new(group, model, NanoGptAdamW)?.clip_grad_norm(1.0);
    // The tiny model fits one bucket of PyTorch's 25 MiB: smaller ones, so
    // that they go out while the last micro-batch's backward runs.
    let mut ddp = if settings.tiny { ddp.bucket_bytes(32 * 1024) } else { ddp };
    if main {
        println!(
            "{} parameters on {world} processes, {accum} micro-batches of {rows}x{} tokens per rank and step \
             ({} tokens a step), {} buckets",
            ddp.model().num_parameters(),
            config.block_size,
            world * accum * rows * config.block_size,
            ddp.bucket_count()
        );
    }
    let schedule = schedule(iters);
    let eval_every = (iters / 4).max(1);
    let mut last_loss = 0.0;
    let started = std::time::Instant::now();
    for iter in 0..=iters {
        if iter % eval_every == 0 || iter == iters {
            let (train_loss, val_loss) =
                (mean_loss(ddp.group(), ddp.model(), &train, rank)?, mean_loss(ddp.group(), ddp.model(), &val, rank)?);
            if main {
                println!(
                    "iter {iter:4}: train loss {train_loss:.4}, val loss {val_loss:.4} (means over {world} ranks)"
                );
            }
        }
        if iter == iters {
            break;
        }
        ddp.set_lr(schedule.lr(iter));
        for micro in 0..accum {
            let batch = train.batch(micro_batch(iter, micro, rank, accum, world));
            // nanoGPT: `model.require_backward_grad_sync = (micro_step == gradient_accumulation_steps - 1)`.
            last_loss = if micro + 1 < accum { ddp.try_accumulate(&batch)? } else { ddp.try_step(&batch)? };
        }
    }
    let mine = Tensor::<D>::try_from_slice(&[last_loss], [1])?;
    let losses = ddp.group().try_all_gather(&mine)?.iter().map(Tensor::try_item).collect::<Result<Vec<_>>>()?;
    if main {
        println!(
            "trained {iters} iterations in {:.1} s, {} of {} buckets sent during the last backward; \
             each rank's last loss: {losses:.4?}",
            started.elapsed().as_secs_f64(),
            ddp.buckets_sent_during_backward(),
            ddp.bucket_count()
        );
    }
    if let Some(initial) = initial {
        compare(ddp.model(), initial, &train, settings, world)?;
    }
    Ok(())
}

/// Trains the same model on this GPU alone, one step per iteration on
/// every rank's micro-batches together, and fails unless it ends where the
/// job did.
fn compare<D: Device>(
    trained: &Gpt<D>,
    initial: devtensor::io::Checkpoint<D>,
    train: &Split<D>,
    settings: &Settings,
    world: usize,
) -> Result<()> {
    let mut model = Gpt::<D>::new(trained.config)?;
    initial.try_load_into(&mut model)?;
    let mut opt = NanoGptAdamW.build(&model);
    let schedule = schedule(settings.iters);
    for iter in 0..settings.iters {
        opt.set_lr(schedule.lr(iter));
        let batches: Vec<_> = (0..settings.accum)
            .flat_map(|micro| (0..world).map(move |rank| micro_batch(iter, micro, rank, settings.accum, world)))
            .map(|index| train.batch(index))
            .collect();
        let x = Tensor::try_cat(&batches.iter().map(|(x, _)| x).collect::<Vec<_>>(), 0)?;
        let y = Tensor::try_cat(&batches.iter().map(|(_, y)| y).collect::<Vec<_>>(), 0)?;
        let mut grads = model.loss(&x, &y)?.try_backward()?;
        clip_grad_norm(&model, &mut grads, 1.0, 2.0);
        opt.try_step(&mut model, &grads)?;
    }
    let mut largest = 0f32;
    for ((_, a), (_, b)) in trained.parameters().into_iter().zip(model.parameters()) {
        for (a, b) in a.try_to_vec()?.into_iter().zip(b.try_to_vec()?) {
            largest = largest.max((a - b).abs());
        }
    }
    println!("one device, the same batches: parameters within {largest:.2e} of the job's");
    if largest > 1e-4 {
        return Err(Error::Distributed {
            rank: Some(0),
            reason: format!("the job's parameters differ from one device's by up to {largest}"),
        });
    }
    Ok(())
}

fn main() -> Result<()> {
    let settings = settings()?;
    let job = Job::from_env()?;
    devtensor::on_local_gpu!(job, D => train::<D>(&job, &settings))?
}
