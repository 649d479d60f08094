//! Gradient checkpointing (`autograd::checkpoint`): a recomputed segment
//! gives the gradients of the graph it replaces, with the same dropout
//! masks, to its inputs, its parameters and the tracked tensors it reads
//! from outside; it leaves the random stream where the plain run leaves
//! it; it composes with `create_graph`; a segment that changes between its
//! two runs is an error; `checkpoint_sequential` splits a stack of layers
//! into segments as PyTorch's does. The GPT trained with checkpointed
//! blocks is in `gpt.rs`.

use crate::common::gradcheck::{T, data};
use devtensor::autograd::{GradOptions, checkpoint, grad, try_checkpoint};
use devtensor::nn::{Dropout, Forward, LayerNorm, Linear, checkpoint_sequential, try_checkpoint_sequential};
use devtensor::{Device, Gradients, Result, Tensor, manual_seed, no_grad};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The parameters and inputs of the checked model.
struct Model<D: Device> {
    first: Linear<D, f64>,
    norm: LayerNorm<D, f64>,
    second: Linear<D, f64>,
    /// A leaf used outside the segment, and through `scale` inside it.
    shift: T<D>,
}

impl<D: Device> Model<D> {
    fn new() -> Self {
        let weight = |rows: usize, cols: usize, seed: u64| T::<D>::from_vec(data(rows * cols, seed), [rows, cols]);
        Model {
            first: Linear::from_weights(weight(6, 4, 1), Some(T::<D>::from_vec(data(6, 2), [6]))),
            norm: LayerNorm::new(&[6]),
            second: Linear::from_weights(weight(4, 6, 3), None),
            shift: T::<D>::from_vec(data(4, 4), [4]).requires_grad(),
        }
    }

    /// The segment: Linear, LayerNorm, GELU, dropout, Linear, times a
    /// tensor computed outside it.
    fn segment(
        first: &Linear<D, f64>,
        norm: &LayerNorm<D, f64>,
        second: &Linear<D, f64>,
        x: &T<D>,
        scale: &T<D>,
    ) -> T<D> {
        let h = Dropout::new(0.3).forward(&norm.forward(&first.forward(x)).gelu());
        second.forward(&h) * scale
    }

    /// The loss, with the segment checkpointed or not.
    fn loss(&self, x: &T<D>, checkpointed: bool) -> T<D> {
        let input = (x + &self.shift).tanh();
        let scale = &self.shift * 2.0 + 1.0;
        let out = if checkpointed {
            let (first, norm, second) = (self.first.clone(), self.norm.clone(), self.second.clone());
            let scale = scale.clone();
            checkpoint(&[&input], move |xs| Self::segment(&first, &norm, &second, &xs[0], &scale))
        } else {
            Self::segment(&self.first, &self.norm, &self.second, &input, &scale)
        };
        (out.square() + &input).sum()
    }

    fn leaves(&self) -> Vec<&T<D>> {
        vec![&self.first.weight, self.first.bias.as_ref().unwrap(), &self.norm.weight, &self.second.weight, &self.shift]
    }
}

#[track_caller]
fn assert_same_gradients<D: Device>(what: &str, a: &Gradients, b: &Gradients, leaves: &[&T<D>]) {
    for (i, leaf) in leaves.iter().enumerate() {
        let (a, b) = (a.get(*leaf).expect("a gradient").to_vec(), b.get(*leaf).expect("a gradient").to_vec());
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{what}, leaf {i} on {}: {a:?} against {b:?}", D::name());
        }
    }
}

fn checkpointed_segments_give_the_plain_gradients_and_random_stream<D: Device>() {
    let model = Model::<D>::new();
    let x = T::<D>::from_vec(data(3 * 4, 9), [3, 4]).requires_grad();
    let mut leaves = model.leaves();
    leaves.push(&x);
    assert!(leaves.iter().all(|t| t.is_leaf() && t.tracks_grad()), "the layers' parameters are leaves");
    let run = |checkpointed: bool| {
        manual_seed(7);
        let loss = model.loss(&x, checkpointed);
        let grads = loss.backward();
        // What the random stream gives after the backward pass.
        (loss.item(), grads, Tensor::<D>::rand([4]).to_vec())
    };
    let (plain_loss, plain, plain_after) = run(false);
    let (loss, grads, after) = run(true);
    assert_eq!(loss, plain_loss, "the first run of the segment is the plain forward");
    assert_same_gradients("checkpoint", &grads, &plain, &leaves);
    assert_eq!(after, plain_after, "the recomputation leaves the random stream where it was");
    // Under `no_grad` the segment just runs.
    manual_seed(7);
    let eval = no_grad(|| model.loss(&x, true));
    assert!(!eval.tracks_grad());
    assert_eq!(eval.item(), plain_loss);
}

/// `create_graph` through a checkpointed segment: the recomputation is
/// recorded, so the penalty on the input gradient reaches the weights as
/// in the plain graph.
fn checkpointed_segments_have_second_derivatives<D: Device>() {
    let model = Model::<D>::new();
    let x = T::<D>::from_vec(data(2 * 4, 11), [2, 4]).requires_grad();
    let penalty = |checkpointed: bool| {
        manual_seed(3);
        let [dx] = grad(&[&model.loss(&x, checkpointed)], [&x], GradOptions::new().create_graph(true));
        (dx.to_vec(), dx.square().sum().backward())
    };
    let (plain_dx, plain) = penalty(false);
    let (dx, grads) = penalty(true);
    for (a, b) in dx.iter().zip(&plain_dx) {
        assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "dx: {dx:?} against {plain_dx:?}");
    }
    assert_same_gradients("penalty", &grads, &plain, &model.leaves());
}

fn a_segment_that_changes_between_its_runs_is_an_error<D: Device>() {
    let (a, b) = (T::<D>::ones([2]).requires_grad(), T::<D>::ones([2]).requires_grad());
    let x = T::<D>::ones([2]).requires_grad();
    let runs = Arc::new(AtomicUsize::new(0));
    let (a2, b2, count) = (a.clone(), b.clone(), runs.clone());
    let y = try_checkpoint(&[&x], move |xs| {
        let w = if count.fetch_add(1, Ordering::Relaxed) == 0 { &a2 } else { &b2 };
        &xs[0] * w
    })
    .unwrap();
    let err = y.sum().try_backward().unwrap_err();
    assert!(err.to_string().contains("must compute the same function each time"), "{err}");
    let _ = (a, b);
}

/// Under `autocast`, the recomputation runs its products in the same half
/// type as the first run, though the backward pass runs outside the scope.
fn checkpointed_segments_recompute_under_the_first_runs_autocast<D: Device>() {
    let layer = Linear::<D>::new(8, 8);
    let x = Tensor::<D>::rand([4, 8]).requires_grad();
    let run = |checkpointed: bool| {
        let loss = devtensor::autocast::<devtensor::bf16, _>(|| {
            let block = layer.clone();
            let y = if checkpointed {
                checkpoint(&[&x], move |xs| block.forward(&xs[0]).tanh())
            } else {
                block.forward(&x).tanh()
            };
            y.square().sum()
        });
        let grads = loss.backward();
        [grads.get(&layer.weight).unwrap().to_vec(), grads.get(&x).unwrap().to_vec()]
    };
    assert_eq!(run(true), run(false));
}

/// A layer of a stack, counting how often it runs: Linear, then dropout.
#[derive(Clone)]
struct Counted<D: Device, E: devtensor::FloatElement> {
    linear: Linear<D, E>,
    dropout: Dropout,
    runs: Arc<AtomicUsize>,
}
devtensor::module!(Counted<E> { linear, dropout; runs });

impl<D: Device> Forward<D, f64> for Counted<D, f64> {
    fn forward_on(&self, x: &T<D>) -> Result<T<D>> {
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.dropout.forward_on(&self.linear.forward_on(x)?.try_tanh()?)
    }
}

/// `checkpoint_sequential` over five layers in every number of segments:
/// the plain loss, gradients and random stream, each checkpointed layer
/// run twice (all but the last segment, as PyTorch's), and a clear error
/// for no segments or more segments than layers.
fn checkpoint_sequential_gives_the_plain_gradients<D: Device>() {
    let runs = Arc::new(AtomicUsize::new(0));
    let layers: Vec<Counted<D, f64>> = (0..5)
        .map(|i| Counted {
            linear: Linear::from_weights(
                T::<D>::from_vec(data(16, 20 + i), [4, 4]),
                Some(T::<D>::from_vec(data(4, 30 + i), [4])),
            ),
            dropout: Dropout::new(0.25),
            runs: runs.clone(),
        })
        .collect();
    let x = T::<D>::from_vec(data(3 * 4, 40), [3, 4]).requires_grad();
    let mut leaves: Vec<&T<D>> =
        layers.iter().flat_map(|l| [&l.linear.weight, l.linear.bias.as_ref().unwrap()]).collect();
    leaves.push(&x);
    let run = |segments: Option<usize>| {
        manual_seed(11);
        runs.store(0, Ordering::Relaxed);
        let y = match segments {
            Some(segments) => checkpoint_sequential(&layers, segments, &x),
            None => layers.iter().fold(x.clone(), |h, layer| layer.forward_on(&h).unwrap()),
        };
        let loss = y.square().sum();
        let grads = loss.backward();
        (loss.item(), grads, Tensor::<D>::rand([3]).to_vec(), runs.load(Ordering::Relaxed))
    };
    let (plain_loss, plain, plain_after, plain_runs) = run(None);
    assert_eq!(plain_runs, 5);
    for segments in 1..=5 {
        let (loss, grads, after, runs) = run(Some(segments));
        assert_eq!(loss, plain_loss, "{segments} segments");
        assert_same_gradients(&format!("{segments} segments"), &grads, &plain, &leaves);
        assert_eq!(after, plain_after, "{segments} segments: the random stream after the backward pass");
        assert_eq!(runs, 5 + (5 / segments) * (segments - 1), "{segments} segments: layers run");
    }
    for segments in [0, 6] {
        let err = try_checkpoint_sequential(&layers, segments, &x).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "checkpoint_sequential on {}: {segments} segments of 5 layers: between 1 and 5 segments",
                D::name()
            )
        );
    }
}

device_tests! {
    checkpoint_sequential_gives_the_plain_gradients => checkpoint_sequential_gives_the_plain_gradients,
    checkpointed_segments_recompute_under_the_first_runs_autocast =>
        checkpointed_segments_recompute_under_the_first_runs_autocast,
    checkpointed_segments_give_the_plain_gradients_and_random_stream =>
        checkpointed_segments_give_the_plain_gradients_and_random_stream,
    checkpointed_segments_have_second_derivatives => checkpointed_segments_have_second_derivatives,
    a_segment_that_changes_between_its_runs_is_an_error => a_segment_that_changes_between_its_runs_is_an_error,
}
