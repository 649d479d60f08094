//! `Tensor::einsum` against the sum of products written out, on random
//! equations (one to three operands, repeated letters, letters that appear
//! once or in every operand, explicit and implicit outputs, empty axes) and
//! layouts; its gradients by finite differences; its errors. PyTorch's
//! values for named equations are checked in `pytorch.rs`.

use crate::common::*;
use devtensor::{Device, Tensor};
use proptest::prelude::*;

/// A random equation over the letters `a..e`: each operand's letters (a
/// letter may repeat in one operand), and the output's letters, or `None`
/// for the implicit output.
fn equation(seed: u64) -> (Vec<Vec<char>>, Option<Vec<char>>) {
    let mut s = seed;
    let mut draw = |n: u64| {
        s = splitmix(s);
        (s % n) as usize
    };
    let letters = ['a', 'b', 'c', 'd', 'e'];
    let operands: Vec<Vec<char>> =
        (0..1 + draw(3)).map(|_| (0..draw(4)).map(|_| letters[draw(letters.len() as u64)]).collect()).collect();
    let mut seen: Vec<char> = operands.iter().flatten().copied().collect();
    seen.sort_unstable();
    seen.dedup();
    if draw(4) == 0 {
        return (operands, None);
    }
    let mut output: Vec<char> = seen.into_iter().filter(|_| draw(2) == 0).collect();
    // A random order.
    for i in (1..output.len()).rev() {
        output.swap(i, draw(i as u64 + 1));
    }
    (operands, Some(output))
}

/// `einsum` by its definition: for every value of every letter, the
/// product of the operands' elements, added into the output's element.
fn reference(operands: &[Vec<char>], output: &[char], sizes: &[(char, usize)], data: &[Vec<f64>]) -> Vec<f64> {
    let size = |c: &char| sizes.iter().find(|(l, _)| l == c).unwrap().1;
    let letters: Vec<char> = sizes.iter().map(|(l, _)| *l).collect();
    let all: Vec<usize> = letters.iter().map(size).collect();
    let out_dims: Vec<usize> = output.iter().map(size).collect();
    let mut out = vec![0.0; out_dims.iter().product()];
    for values in indices(&all) {
        let value = |c: &char| values[letters.iter().position(|l| l == c).unwrap()];
        let mut product = 1.0;
        for (op, d) in operands.iter().zip(data) {
            let dims: Vec<usize> = op.iter().map(size).collect();
            let at: Vec<usize> = op.iter().map(value).collect();
            // A repeated letter reads the diagonal: the same value on both axes.
            product *= d[ravel(&at, &dims)];
        }
        let at: Vec<usize> = output.iter().map(value).collect();
        out[ravel(&at, &out_dims)] += product;
    }
    out
}

fn check_einsum<D: Device>(seed: u64, layout: Variant) {
    let (operands, output) = equation(seed);
    let mut letters: Vec<char> = operands.iter().flatten().copied().collect();
    letters.sort_unstable();
    letters.dedup();
    let sizes: Vec<(char, usize)> =
        letters.iter().enumerate().map(|(k, &l)| (l, (splitmix(seed ^ k as u64) % 4) as usize)).collect();
    let size = |c: &char| sizes.iter().find(|(l, _)| l == c).unwrap().1;
    let implicit = || {
        let mut once: Vec<char> =
            letters.iter().copied().filter(|l| operands.iter().flatten().filter(|m| *m == l).count() == 1).collect();
        once.sort_unstable();
        once
    };
    let out_letters = output.clone().unwrap_or_else(implicit);
    let data: Vec<Vec<f64>> = operands
        .iter()
        .enumerate()
        .map(|(k, op)| {
            let n: usize = op.iter().map(size).product();
            (0..n as u64).map(|i| (splitmix(seed ^ (k as u64) << 32 ^ i) % 17) as f64 / 4.0 - 2.0).collect()
        })
        .collect();
    let tensors: Vec<Tensor<D, f64>> = operands
        .iter()
        .zip(&data)
        .map(|(op, d)| tensor_with::<D, f64>(d, &op.iter().map(size).collect::<Vec<_>>(), layout))
        .collect();
    let text: Vec<String> = operands.iter().map(|op| op.iter().collect()).collect();
    let mut text = text.join(",");
    if let Some(out) = &output {
        text += "->";
        text.extend(out.iter());
    }
    let refs: Vec<&Tensor<D, f64>> = tensors.iter().collect();
    let got = Tensor::einsum(&text, &refs);
    let want = reference(&operands, &out_letters, &sizes, &data);
    assert_eq!(got.dims(), out_letters.iter().map(size).collect::<Vec<_>>().as_slice(), "einsum {text:?}: shape");
    assert_close(&got.to_vec(), &want, 1e-12, 1e-12);
    let f32s: Vec<Tensor<D>> = tensors.iter().map(|t| t.to_dtype::<f32>()).collect();
    let refs32: Vec<&Tensor<D>> = f32s.iter().collect();
    let got32: Vec<f64> = Tensor::einsum(&text, &refs32).to_vec().iter().map(|&x| f64::from(x)).collect();
    assert_close(&got32, &want, 1e-4, 1e-5);
    let elements: usize = data.iter().map(Vec::len).sum();
    if D::name() == "Cpu" && elements > 0 && elements <= 40 {
        gradcheck::gradcheck("einsum", &tensors, |xs| Tensor::einsum(&text, &xs.iter().collect::<Vec<_>>()));
        gradcheck::gradgradcheck("einsum", &tensors, |xs| {
            Tensor::einsum(&text, &xs.iter().collect::<Vec<_>>()).square()
        });
    }
}

device_proptests! {
    cases = 96;

    fn einsum_is_its_sum_of_products<D>(seed in any::<u64>(), v in variant()) {
        check_einsum::<D>(seed, v);
    }
}

fn check_einsum_errors<D: Device>() {
    let (a, b) = (Tensor::<D>::zeros([2, 3]), Tensor::<D>::zeros([4, 2]));
    let message = |r: devtensor::Result<Tensor<D>>| r.unwrap_err().to_string().replace(&D::name(), "D");
    assert_eq!(
        message(Tensor::try_einsum("ij,jk", &[&a, &b])),
        "einsum on D: the axes of subscript `j` have sizes 3 and 4"
    );
    assert_eq!(
        message(Tensor::try_einsum("ij", &[&a, &b])),
        "einsum on D: the equation \"ij\" has subscripts for 1 operands, but 2 were given"
    );
    assert_eq!(
        message(Tensor::try_einsum("ijk", &[&a])),
        "einsum on D: operand 0 (\"ijk\"): 3 letters for a tensor of rank 2"
    );
    assert_eq!(
        message(Tensor::try_einsum("i1", &[&a])),
        "einsum on D: operand 0 (\"i1\"): '1' is not a letter (subscripts are a-z and A-Z)"
    );
    assert_eq!(message(Tensor::try_einsum("ij->ik", &[&a])), "einsum on D: the output subscript `k` is in no operand");
    assert_eq!(message(Tensor::try_einsum("ij->ii", &[&a])), "einsum on D: the output (\"ii\") repeats `i`");
    // A diagonal reads the diagonal alone: what lies off it plays no part.
    let m = Tensor::<D>::from_vec(vec![1.0, f32::INFINITY, f32::NAN, 2.0], [2, 2]);
    assert_eq!(Tensor::einsum("ii", &[&m]).item(), 3.0);
    assert_eq!(Tensor::einsum("ii->i", &[&m]).to_vec(), vec![1.0, 2.0]);
    let square = Tensor::<D>::zeros([2, 3]);
    assert!(message(Tensor::try_einsum("ii", &[&square])).contains("its axes 0 and 1 differ (2 vs 3)"));
}

device_tests! {
    einsum_errors_name_the_problem => check_einsum_errors,
}
