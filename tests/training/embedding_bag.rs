//! `EmbeddingBag` against PyTorch's outputs and gradients
//! (`embedding_bag.safetensors`), against a plain loop on random bags, and
//! its errors.

use crate::fixture::{Case, assert_close, load};
use devtensor::nn::{EmbeddingBag, EmbeddingBagInput, EmbeddingBagMode as Mode, Module, ToDtype};
use devtensor::{Device, Error, Tensor};
use proptest::prelude::*;

type T<D> = Tensor<D, f64>;

/// The cases of `EMBEDDING_BAG_CASES` in make_fixtures.py: mode,
/// padding_idx, include_last_offset.
const CASES: [(&str, Mode, Option<usize>, bool); 6] = [
    ("mean_offsets", Mode::Mean, Some(1), false),
    ("sum_weighted", Mode::Sum, None, false),
    ("sum_2d", Mode::Sum, None, false),
    ("mean_2d", Mode::Mean, None, false),
    ("max_2d", Mode::Max, None, false),
    ("max_offsets", Mode::Max, Some(0), true),
];

fn embedding_bag_matches_pytorch<D: Device>() {
    let file = load("embedding_bag.safetensors");
    for (name, mode, padding_idx, last) in CASES {
        let case = Case::<D>::new(&file, name, |n| n == "weight");
        let mut bag = EmbeddingBag::<D, f64>::new(5, 3).mode(mode).include_last_offset(last);
        if let Some(i) = padding_idx {
            bag = bag.padding_idx(i);
        }
        case.load(&mut bag);
        let input = case.find_int("input").unwrap();
        let offsets = case.find_int("offsets");
        let weights = case.find("per_sample_weights").map(|w| w.requires_grad());
        let mut bags = EmbeddingBagInput::new(&input);
        if let Some(offsets) = &offsets {
            bags = bags.offsets(offsets);
        }
        if let Some(weights) = &weights {
            bags = bags.per_sample_weights(weights);
        }
        let output = bag.forward(bags);
        let inputs: Vec<(&str, &T<D>)> = weights.iter().map(|w| ("per_sample_weights", w)).collect();
        case.check(&bag, &inputs, &[("output", output)]);
    }
}

/// The bags of `indices` cut at `starts` (which end with the length),
/// reduced by a loop over the host copy of `table` `[rows, dim]`.
fn reference(
    table: &[f64],
    dim: usize,
    indices: &[i64],
    starts: &[usize],
    weights: Option<&[f64]>,
    mode: Mode,
    padding_idx: Option<usize>,
) -> Vec<f64> {
    let mut out = Vec::new();
    for window in starts.windows(2) {
        let kept: Vec<usize> = (window[0]..window[1]).filter(|&p| padding_idx != Some(indices[p] as usize)).collect();
        for f in 0..dim {
            let value = |p: usize| table[indices[p] as usize * dim + f] * weights.map_or(1.0, |w| w[p]);
            out.push(match (mode, kept.is_empty()) {
                (_, true) => 0.0,
                (Mode::Sum, _) => kept.iter().map(|&p| value(p)).sum(),
                (Mode::Mean, _) => kept.iter().map(|&p| value(p)).sum::<f64>() / kept.len() as f64,
                (Mode::Max, _) => kept.iter().map(|&p| value(p)).fold(f64::NEG_INFINITY, f64::max),
            });
        }
    }
    out
}

fn bags_strategy() -> impl Strategy<Value = (usize, Vec<usize>)> {
    // Up to 5 bags of 0 to 4 indices each, over a table of 1 to 6 rows.
    (1..7usize, proptest::collection::vec(0..5usize, 0..5))
}

device_proptests! {
    cases = 24;
    /// Every mode, 1-D with offsets (empty bags included) or 2-D, with or
    /// without padding and per-sample weights, against the loop; the
    /// weight's gradient of a sum against the count of each row's uses.
    fn embedding_bag_matches_a_loop<D>(
        (rows, lengths) in bags_strategy(), dim in 1..4usize, mode_index in 0..3usize,
        padding in any::<bool>(), two_d in any::<bool>(), seed in any::<u64>(),
    ) {
        let mode = [Mode::Sum, Mode::Mean, Mode::Max][mode_index];
        // A 2-D input is bags of one length.
        let lengths: Vec<usize> = if two_d { vec![lengths.first().copied().unwrap_or(2); lengths.len().max(1)] } else { lengths };
        let n: usize = lengths.iter().sum();
        let indices: Vec<i64> = crate::gradcheck::data(n, seed).iter().map(|v| ((v.abs() * 97.0) as usize % rows) as i64).collect();
        let mut starts = vec![0];
        for l in &lengths {
            starts.push(starts.last().unwrap() + l);
        }
        let padding_idx = padding.then_some(0);
        let mut bag = EmbeddingBag::<D, f64>::new(rows, dim).mode(mode);
        if let Some(i) = padding_idx {
            bag = bag.padding_idx(i);
        }
        let table = bag.weight.to_vec();
        let weighted = mode == Mode::Sum && seed % 2 == 0;
        let weights = crate::gradcheck::data(n, seed ^ 7);
        let input = if two_d {
            Tensor::<D, i64>::from_vec(indices.clone(), [lengths.len(), lengths[0]])
        } else {
            Tensor::<D, i64>::from_vec(indices.clone(), [n])
        };
        let w = T::<D>::from_vec(weights.clone(), input.dims());
        let offsets = Tensor::<D, i64>::from_vec(starts[..lengths.len()].iter().map(|&s| s as i64).collect(), [lengths.len()]);
        let mut bags = EmbeddingBagInput::new(&input);
        if !two_d {
            bags = bags.offsets(&offsets);
        }
        if weighted {
            bags = bags.per_sample_weights(&w);
        }
        let got = bag.forward(bags);
        let want = reference(&table, dim, &indices, &starts, weighted.then_some(&weights[..]), mode, padding_idx);
        let what = format!("{mode:?} rows {rows} dim {dim} bags {lengths:?} padding {padding_idx:?}");
        prop_assert_eq!(got.dims(), &[lengths.len(), dim]);
        assert_close(&what, &got, &T::<D>::from_vec(want, [lengths.len(), dim]));
        if mode == Mode::Sum && !weighted {
            // d(sum of all outputs)/d(row r) = the number of uses of r, per feature.
            let grads = got.sum().backward();
            let grad = grads.get(&bag.weight).expect("a gradient for the weight").to_vec();
            for r in 0..rows {
                let uses = if padding_idx == Some(r) { 0 } else { indices.iter().filter(|&&i| i as usize == r).count() };
                for f in 0..dim {
                    prop_assert_eq!(grad[r * dim + f], uses as f64, "{}: row {}", what, r);
                }
            }
        }
    }
}

fn embedding_bag_checks_its_input_and_moves<D: Device>() {
    let bag = EmbeddingBag::<D>::new(4, 2);
    let input = Tensor::<D, i64>::from_vec(vec![0, 1, 2], [3]);
    let offsets = |o: Vec<i64>| Tensor::<D, i64>::from_vec(o.clone(), [o.len()]);
    let err = |r: devtensor::Result<Tensor<D>>| r.unwrap_err().to_string();
    let e = err(bag.try_forward(EmbeddingBagInput::new(&input).offsets(&offsets(vec![1, 2]))));
    assert!(e.starts_with("EmbeddingBag on ") && e.contains("offsets[0] must be 0"), "{e}");
    let e = err(bag.try_forward(EmbeddingBagInput::new(&input).offsets(&offsets(vec![0, 2, 1]))));
    assert!(e.contains("must not decrease") && e.contains("offsets[2] = 1") && e.contains("shapes [3] and [3]"), "{e}");
    let e = err(bag.try_forward(EmbeddingBagInput::new(&input).offsets(&offsets(vec![0, 4]))));
    assert!(e.contains("input's length 3"), "{e}");
    let e = err(bag.try_forward(&input));
    assert!(e.contains("a 1-D input with 1-D offsets"), "{e}");
    let e = err(bag.try_forward(&Tensor::<D, i64>::from_vec(vec![0, 4], [1, 2])));
    assert!(e.contains("index 4 is out of range for EmbeddingBag(4, 2)"), "{e}");
    let w = Tensor::<D>::ones([3]);
    let e = err(bag.try_forward(EmbeddingBagInput::new(&input).offsets(&offsets(vec![0])).per_sample_weights(&w)));
    assert!(e.contains("only supported for mode Sum (got mean)"), "{e}");
    let sum = bag.clone().mode(Mode::Sum);
    let e = err(sum
        .try_forward(EmbeddingBagInput::new(&input).offsets(&offsets(vec![0])).per_sample_weights(&w.narrow(0, 0, 2))));
    assert!(e.contains("per_sample_weights must have the input's shape"), "{e}");
    let last = bag.clone().include_last_offset(true);
    let e = err(last.try_forward(EmbeddingBagInput::new(&input).offsets(&offsets(vec![0, 2]))));
    assert!(e.contains("the last offset must be the input's length 3"), "{e}");
    assert_eq!(last.forward(EmbeddingBagInput::new(&input).offsets(&offsets(vec![0, 2, 3]))).dims(), &[2, 2]);
    assert!(EmbeddingBag::<D>::try_new(4, 2).unwrap().try_padding_idx(4).is_err());
    // No bags, and bags of no indices.
    assert_eq!(bag.forward(&Tensor::<D, i64>::zeros([0, 3])).dims(), &[0, 2]);
    let none = Tensor::<D, i64>::zeros([0]);
    for mode in [Mode::Sum, Mode::Mean, Mode::Max] {
        let out = bag.clone().mode(mode).forward(EmbeddingBagInput::new(&none).offsets(&offsets(vec![0, 0])));
        assert_eq!(out.to_vec(), vec![0.0; 4], "{mode:?}");
    }
    // PyTorch's state_dict names; moved, converted and frozen with the model.
    let names: Vec<String> = bag.named_tensors().into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, ["weight"]);
    let moved = bag.to::<devtensor::Cpu>().to_dtype::<f64>();
    let two = Tensor::<D, i64>::from_vec(vec![0, 3], [1, 2]);
    let want = bag.forward(&two).to_vec();
    let got = moved.forward(&two.to::<devtensor::Cpu>()).to_vec();
    assert!(got.iter().zip(&want).all(|(g, w)| (g - *w as f64).abs() < 1e-6), "{got:?} against {want:?}");
    let frozen = EmbeddingBag::from_pretrained(bag.weight.detach(), None);
    assert!(!frozen.forward(&two).tracks_grad());
    assert!(matches!(EmbeddingBag::try_from_weights(Tensor::<D>::zeros([3]), None), Err(Error::Shape { .. })));
}

device_tests! {
    embedding_bag_matches_pytorch => embedding_bag_matches_pytorch,
    embedding_bag_checks_its_input_and_moves => embedding_bag_checks_its_input_and_moves,
}
