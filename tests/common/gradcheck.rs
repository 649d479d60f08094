//! The gradient check shared by the suites (training and the unary op
//! table), and the inputs it is run on.

use super::shape;
use devtensor::{Device, Tensor, no_grad};
use proptest::prelude::*;

/// The element type of gradient checks: `f64`, for accurate differences.
pub type T<D> = Tensor<D, f64>;

/// Step of the central differences: with `f64` and inputs of magnitude
/// about 1, truncation (`EPS^2`) and rounding (`1e-16 / EPS`) errors both
/// stay near `1e-10`.
const EPS: f64 = 1e-6;

/// Weights that make a scalar of a result, so that every element of the
/// result gets its own gradient: never 0, never all equal.
fn weights(n: usize) -> Vec<f64> {
    (0..n).map(|k| 1.0 + 0.5 * ((k * 7 % 5) as f64) - 0.9 * ((k % 3) as f64)).collect()
}

/// Checks the gradients that `backward` gives for each of `inputs` (made
/// leaves, keeping their layouts) against central differences of
/// `sum(f(inputs) * weights)`.
#[track_caller]
pub fn gradcheck<D: Device>(name: &str, inputs: &[T<D>], f: impl Fn(&[T<D>]) -> T<D>) {
    let leaves: Vec<T<D>> = inputs.iter().map(|t| t.detach().requires_grad()).collect();
    let y = f(&leaves);
    assert!(y.tracks_grad(), "{name}: the result does not track");
    let w = T::<D>::from_vec(weights(y.elem_count()), y.dims());
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
        let numeric: Vec<f64> = (0..base.len())
            .map(|j| {
                let at = |delta: f64| {
                    let mut data = base.clone();
                    data[j] += delta;
                    let mut xs: Vec<T<D>> = leaves.iter().map(|l| l.detach()).collect();
                    xs[i] = T::<D>::from_vec(data, leaf.dims());
                    no_grad(|| loss(&f(&xs)).item())
                };
                (at(EPS) - at(-EPS)) / (2.0 * EPS)
            })
            .collect();
        let ok = analytic.iter().zip(&numeric).all(|(a, n)| (a - n).abs() <= 1e-6 + 1e-5 * n.abs());
        assert!(
            ok,
            "{name} on {}: gradient of input {i} (shape {:?})\nbackward: {analytic:?}\nnumeric:  {numeric:?}",
            D::name(),
            leaf.dims()
        );
    }
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
    /// Magnitudes in `0.2..2`, either sign: away from the kinks of `abs`,
    /// `relu` and `clamp` and the poles of `recip` and `/`. Ties are
    /// possible only with probability 0.
    AwayFromZero,
    /// `0.2..2`: inside the domain of `log`, `sqrt` and non-integer powers.
    Positive,
    /// Distinct multiples of 0.25 in random order: `max`, `min` and their
    /// arg positions stay put under a perturbation of `EPS`.
    Distinct,
}

/// `n` values of `kind`.
pub fn values(n: usize, kind: Values) -> BoxedStrategy<Vec<f64>> {
    match kind {
        Values::AwayFromZero => {
            prop::collection::vec((0.2..2.0f64, any::<bool>()).prop_map(|(m, neg)| if neg { -m } else { m }), n).boxed()
        }
        Values::Positive => prop::collection::vec(0.2..2.0f64, n).boxed(),
        Values::Distinct => {
            Just((0..n).map(|i| i as f64 * 0.25 - n as f64 / 8.0).collect::<Vec<_>>()).prop_shuffle().boxed()
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
