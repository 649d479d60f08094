//! The gradient check shared by the suites (training and the unary op
//! table), and the inputs it is run on.
//!
//! # Choosing a tolerance
//!
//! A comparison's tolerance has to follow the numbers it compares, not
//! assume that they are near 1: property tests draw new shapes and values on
//! every run, so a bound that holds for the usual draw and not for the
//! largest one makes CI fail by chance (issue 38: `pad` of the values
//! `1..=64`, edge-padded to 567 elements, gave a loss near 27 000, and the
//! differences' rounding error alone broke a fixed `1e-6`).
//!
//! - Gradients go through [`gradcheck`]; `scripts/check-tests.py` (run by
//!   CI) refuses a divided difference written anywhere else under `tests/`.
//!   Its bound has three parts: an absolute floor, a relative part, and the
//!   rounding error of the differences, which grows with the terms the loss
//!   sums (see [`rounding_bound`]).
//! - Results compared with a plain-loop reference in `f32` or `f64`: bound
//!   the difference by a multiple of the unit roundoff times the sum of the
//!   absolute values of the terms (`sum |a_i b_i|` for a dot product, not
//!   `|sum a_i b_i|`, which cancellation can make small), as
//!   `tests/ops/matmul.rs` does; never a bare `1e-6`.
//! - Exact equality wherever the result is exact: copies, indexing, integer
//!   arithmetic, and sums of small integers in floating point.

use super::shape;
use devtensor::autograd::{GradOptions, grad};
use devtensor::{Device, Tensor, enable_grad, no_grad};
use proptest::prelude::*;

/// The element type of gradient checks: `f64`, for accurate differences.
pub type T<D> = Tensor<D, f64>;

/// Step of the central differences: with `f64` and inputs of magnitude
/// about 1, truncation (`EPS^2`) and rounding (`1e-16 / EPS`) errors both
/// stay near `1e-10`. Larger losses raise the rounding part: see
/// [`rounding_bound`].
const EPS: f64 = 1e-6;

/// How many unit roundoffs of the loss's terms one evaluation of the loss
/// may be off by, with margin: the loss is a sum of `y * w` over the
/// result, whose rounding error grows with the number of terms and with the
/// rounding inside the op itself. Measured (issue 38) over the 100 996
/// gradient checks of both suites at ten times their case count, on `Cpu`
/// and both emulated GPUs: the worst difference was 2.25 roundoffs of the
/// terms (`pad`), and the worst check used 1.7% of its whole bound.
const ROUNDOFFS: f64 = 16.0;

/// The largest error that rounding alone can put into a central difference
/// `(loss(x + EPS) - loss(x - EPS)) / 2 EPS` whose two losses sum terms of
/// total magnitude `terms` (`sum |y_i w_i|`): each loss may be off by
/// [`ROUNDOFFS`] unit roundoffs of `terms`, and the difference divides two
/// such errors by `2 EPS`.
fn rounding_bound(terms: f64) -> f64 {
    ROUNDOFFS * (f64::EPSILON / 2.0) * terms / EPS
}

/// Weights that make a scalar of a result, so that every element of the
/// result gets its own gradient: never 0, never all equal.
fn weights(n: usize) -> Vec<f64> {
    (0..n).map(|k| 1.0 + 0.5 * ((k * 7 % 5) as f64) - 0.9 * ((k % 3) as f64)).collect()
}

/// Checks the gradients that `backward` gives for each of `inputs` (made
/// leaves, keeping their layouts) against central differences of
/// `sum(f(inputs) * weights)`.
///
/// The bound is `1e-6 + 1e-5 |numeric| + `[`rounding_bound`]: a floor, a
/// relative part, and what rounding can add to the differences when the
/// loss sums large terms, so that the check holds for inputs and results of
/// any magnitude and stays as tight as before near 1.
#[track_caller]
pub fn gradcheck<D: Device>(name: &str, inputs: &[T<D>], f: impl Fn(&[T<D>]) -> T<D>) {
    let leaves: Vec<T<D>> = inputs.iter().map(|t| t.detach().requires_grad()).collect();
    let y = f(&leaves);
    assert!(y.tracks_grad(), "{name}: the result does not track");
    let weights = weights(y.elem_count());
    let terms: f64 = y.to_vec().iter().zip(&weights).map(|(y, w)| (y * w).abs()).sum();
    let w = T::<D>::from_vec(weights, y.dims());
    let loss = |y: &T<D>| (y * &w).sum();
    let grads = loss(&y).backward();
    for (i, leaf) in leaves.iter().enumerate() {
        let analytic = match grads.get(leaf) {
            Some(g) => {
                assert_eq!(g.dims(), leaf.dims(), "{name}: gradient {i} has the wrong shape");
                g.to_vec()
            }
            None => vec![0.0; leaf.elem_count()],
        };
        let base = leaf.to_vec();
        let loss_at = |j: usize, value: f64| {
            let mut data = base.clone();
            data[j] = value;
            let mut xs: Vec<T<D>> = leaves.iter().map(|l| l.detach()).collect();
            xs[i] = T::<D>::from_vec(data, leaf.dims());
            no_grad(|| loss(&f(&xs)).item())
        };
        let numeric: Vec<f64> = (0..base.len())
            .map(|j| {
                // The steps actually taken: `x + EPS` rounds, and for large
                // `x` the rounded step differs from `EPS` (both differences
                // below are exact).
                let (up, down) = (base[j] + EPS, base[j] - EPS);
                (loss_at(j, up) - loss_at(j, down)) / (up - down)
            })
            .collect();
        let bound = |n: f64| 1e-6 + 1e-5 * n.abs() + rounding_bound(terms);
        let ok = analytic.iter().zip(&numeric).all(|(a, n)| (a - n).abs() <= bound(*n));
        assert!(
            ok,
            "{name} on {}: gradient of input {i} (shape {:?}; the loss sums terms of magnitude {terms:.3e}, \
             so rounding may add {:.1e})\nbackward: {analytic:?}\nnumeric:  {numeric:?}",
            D::name(),
            leaf.dims(),
            rounding_bound(terms)
        );
    }
}

/// Checks the second derivatives that `autograd::grad` with `create_graph`
/// gives (PyTorch's `gradgradcheck`, in its fast mode): with
/// `g(inputs) = sum_i sum(grad_i(sum(f(inputs) * weights)) * u_i)`, the
/// first derivatives contracted with fixed weights `u_i`, the gradient of
/// `g` that the recorded backward pass gives, taken along a fixed
/// direction `d`, against the central difference of `g` along `d`, whose
/// two values come from plain `backward` passes. One difference instead
/// of one per element keeps the check cheap enough to run on every row of
/// the op tables, on every device; the random shapes and values of the
/// property tests vary what it sees.
#[track_caller]
pub fn gradgradcheck<D: Device>(name: &str, inputs: &[T<D>], f: impl Fn(&[T<D>]) -> T<D>) {
    let first_derivatives = |xs: &[T<D>]| {
        enable_grad(|| {
            // The differences call this on untracked copies, under `no_grad`.
            let leaves: Vec<T<D>> =
                xs.iter().map(|x| if x.tracks_grad() { x.clone() } else { x.detach().requires_grad() }).collect();
            let y = f(&leaves);
            let w = T::<D>::from_vec(weights(y.elem_count()), y.dims());
            let inputs: Vec<&T<D>> = leaves.iter().collect();
            let options = GradOptions::new().create_graph(true).materialize_grads(true);
            let grads = grad(&[&(&y * &w).sum()], &inputs[..], options);
            // `+ 0 * x`: a first derivative that is constant in every input
            // (a linear op's) still gives a result that tracks, whose
            // gradient must then be zero.
            let mut g = T::<D>::scalar(0.0);
            let mut terms = 0.0;
            for (i, (gi, x)) in grads.iter().zip(&leaves).enumerate() {
                let u = T::<D>::from_vec(weights(gi.elem_count() + i + 1)[i + 1..].to_vec(), gi.dims());
                let products = gi * &u;
                terms += no_grad(|| products.abs().sum().item());
                g = g + products.sum() + (x * 0.0).sum();
            }
            (g, terms)
        })
    };
    let leaves: Vec<T<D>> = inputs.iter().map(|t| t.detach().requires_grad()).collect();
    let (g, terms) = first_derivatives(&leaves);
    assert!(g.tracks_grad(), "{name}: the first derivatives do not track");
    let grads = g.backward();
    // The direction: fixed, never zero, different for each input.
    let direction: Vec<Vec<f64>> =
        leaves.iter().enumerate().map(|(i, l)| weights(l.elem_count() + 2 * i + 3)[2 * i + 3..].to_vec()).collect();
    let analytic: f64 = leaves
        .iter()
        .zip(&direction)
        .map(|(leaf, d)| match grads.get(leaf) {
            Some(gl) => gl.to_vec().iter().zip(d).map(|(a, b)| a * b).sum(),
            None => 0.0,
        })
        .sum();
    let g_at = |step: f64| {
        let moved: Vec<T<D>> = leaves
            .iter()
            .zip(&direction)
            .map(|(leaf, d)| {
                let data = leaf.to_vec().iter().zip(d).map(|(x, d)| x + step * d).collect();
                T::<D>::from_vec(data, leaf.dims())
            })
            .collect();
        no_grad(|| first_derivatives(&moved).0.item())
    };
    let numeric = (g_at(EPS) - g_at(-EPS)) / (2.0 * EPS);
    let bound = 1e-6 + 1e-5 * numeric.abs() + rounding_bound(terms);
    assert!(
        (analytic - numeric).abs() <= bound,
        "{name} on {}: second derivative along a direction (inputs {:?}; the first derivatives sum terms of \
         magnitude {terms:.3e}): recorded backward {analytic}, difference of first derivatives {numeric}",
        D::name(),
        leaves.iter().map(|l| l.dims().to_vec()).collect::<Vec<_>>()
    );
}

/// `n` deterministic values in `-2..2` from `seed` (xorshift).
pub fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
        })
        .collect()
}

/// What values a rule needs to be differentiable at every point.
#[derive(Clone, Copy, Debug)]
pub enum Values {
    /// Magnitudes in `0.2..0.9` and `1.1..2`, either sign: away from the
    /// kinks of `abs` and `relu` (0) and of `clamp(-1, 1)` (±1), and the
    /// poles of `recip` and `/`. Drawn from continuous ranges, so two draws
    /// can (rarely) come within a step of each other: an op that jumps where
    /// two operands meet (`maximum`, `where_cond`) needs operands from
    /// separate grids instead (`tests/training/autograd.rs`).
    AwayFromZero,
    /// `0.2..2`: inside the domain of `log`, `sqrt` and non-integer powers.
    Positive,
    /// Distinct multiples of 0.25 in random order: `max`, `min` and their
    /// arg positions stay put under a perturbation of `EPS`.
    Distinct,
    /// Magnitudes in `0.2..0.9`, either sign: inside the domain of `asin`,
    /// `acos` and `atanh`, and away from `tan`'s poles.
    InsideUnit,
    /// `1.1..2`: inside the domain of `acosh`.
    AboveOne,
    /// `n + f` for an integer `n` in `-3..3` and `f` in `0.1..0.4` or
    /// `0.6..0.9`: away from the steps of `floor`, `ceil`, `trunc`, `frac`
    /// (integers) and `round` (halves).
    BetweenSteps,
}

/// `n` values of `kind`.
pub fn values(n: usize, kind: Values) -> BoxedStrategy<Vec<f64>> {
    match kind {
        Values::AwayFromZero => {
            let magnitude = prop_oneof![0.2..0.9f64, 1.1..2.0f64];
            prop::collection::vec((magnitude, any::<bool>()).prop_map(|(m, neg)| if neg { -m } else { m }), n).boxed()
        }
        Values::Positive => prop::collection::vec(0.2..2.0f64, n).boxed(),
        Values::Distinct => {
            Just((0..n).map(|i| i as f64 * 0.25 - n as f64 / 8.0).collect::<Vec<_>>()).prop_shuffle().boxed()
        }
        Values::InsideUnit => {
            prop::collection::vec((0.2..0.9f64, any::<bool>()).prop_map(|(m, neg)| if neg { -m } else { m }), n).boxed()
        }
        Values::AboveOne => prop::collection::vec(1.1..2.0f64, n).boxed(),
        Values::BetweenSteps => {
            let fraction = prop_oneof![0.1..0.4f64, 0.6..0.9f64];
            prop::collection::vec((-3..3i32, fraction).prop_map(|(n, f)| f64::from(n) + f), n).boxed()
        }
    }
}

/// A shape of rank `0..=max_rank` with dimensions `1..=max_dim`, and values
/// of `kind` for it: the inputs of a gradient check.
pub fn inputs(max_rank: usize, max_dim: usize, kind: Values) -> impl Strategy<Value = (Vec<usize>, Vec<f64>)> {
    shape(max_rank, max_dim).prop_flat_map(move |dims| {
        let n = dims.iter().product();
        (Just(dims), values(n, kind))
    })
}
