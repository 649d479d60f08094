//! `matmul` checked against a triple loop in `f64`, on random sizes
//! (including 1 and 0), broadcast batch axes, vectors, and transposed,
//! permuted, narrowed and broadcast views of both operands.
//!
//! Tolerances: a computed dot product of length `k` differs from the exact
//! one by at most `γ_k · Σ|a_ip · b_pj|` with `γ_k ≈ k·u` (u the unit
//! roundoff), whatever the summation order; blocked and FMA-based kernels
//! included. The checks allow `k · ε · Σ|a·b|` (ε = 2u, the machine epsilon
//! of the element type) plus a tiny absolute slack, against a reference
//! computed in `f64` on inputs already rounded to the element type.

use crate::common::*;
use devtensor::{Cpu, Device, Error, FloatElement, Tensor};
use proptest::prelude::*;

/// How an operand is laid out in storage, beyond `common::Variant`.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// One of the shared variants: contiguous, permuted (all axes reversed), narrowed.
    Common(Variant),
    /// Each matrix stored column-major and viewed through `transpose(-1, -2)`,
    /// the layout of `x.t()` in `x.t().matmul(..)`.
    Transposed,
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![variant().prop_map(Layout::Common), Just(Layout::Transposed)]
}

/// A tensor on `D` with logical contents `data` (row-major, shape `dims`).
fn operand<D: Device, E: FloatElement>(data: &[E], dims: &[usize], layout: Layout) -> Tensor<D, E> {
    match layout {
        Layout::Common(v) => tensor_with(data, dims, v),
        Layout::Transposed if dims.len() < 2 => Tensor::from_slice(data, dims),
        Layout::Transposed => {
            let r = dims.len();
            let mut swapped = dims.to_vec();
            swapped.swap(r - 2, r - 1);
            let mut stored = vec![E::ZERO; data.len()];
            for (flat, mut index) in indices(dims).enumerate() {
                index.swap(r - 2, r - 1);
                stored[ravel(&index, &swapped)] = data[flat];
            }
            Tensor::<D, E>::from_vec(stored, swapped).transpose(-1, -2)
        }
    }
}

/// `torch.matmul` by definition: promote vectors, broadcast batch axes, sum
/// products in a plain loop. Returns the output dims, the products, and for
/// each element `Σ|a·b|`, the scale of its rounding error.
fn reference(a: &[f64], ad: &[usize], b: &[f64], bd: &[usize]) -> (Vec<usize>, Vec<f64>, Vec<f64>) {
    let la: Vec<usize> = if ad.len() == 1 { vec![1, ad[0]] } else { ad.to_vec() };
    let rb: Vec<usize> = if bd.len() == 1 { vec![bd[0], 1] } else { bd.to_vec() };
    let (m, k, n) = (la[la.len() - 2], la[la.len() - 1], rb[rb.len() - 1]);
    assert_eq!(k, rb[rb.len() - 2]);
    let batch = broadcast_dims(&la[..la.len() - 2], &rb[..rb.len() - 2]).expect("batch axes broadcast");
    let (mut out, mut scale) = (Vec::new(), Vec::new());
    for bi in indices(&batch) {
        for i in 0..m {
            for j in 0..n {
                let (mut sum, mut abs) = (0.0, 0.0);
                for p in 0..k {
                    let at = |tail: [usize; 2]| [bi.as_slice(), &tail].concat();
                    let prod = broadcast_read(a, &la, &at([i, p])) * broadcast_read(b, &rb, &at([p, j]));
                    sum += prod;
                    abs += f64::abs(prod);
                }
                out.push(sum);
                scale.push(abs);
            }
        }
    }
    let mut dims = batch;
    if ad.len() > 1 {
        dims.push(m);
    }
    if bd.len() > 1 {
        dims.push(n);
    }
    (dims, out, scale)
}

/// Asserts `got` is within the documented error bound of the reference.
#[track_caller]
fn assert_within_bound<E: FloatElement>(got: &[f64], expected: &[f64], scale: &[f64], k: usize) {
    let eps = devtensor::Element::to_f64(E::epsilon());
    assert_eq!(got.len(), expected.len(), "lengths differ");
    for (i, ((&g, &e), &s)) in got.iter().zip(expected).zip(scale).enumerate() {
        let bound = (k.max(1) as f64) * eps * s + 1e-30;
        assert!((g - e).abs() <= bound, "element {i}: got {g}, expected {e} (allowed error {bound})");
    }
}

/// Multiplies `a` (dims `ad`) by `b` (dims `bd`) on `D` in element type `E`,
/// laid out as asked, and compares with the reference.
fn check_matmul<D: Device, E: FloatElement>(
    a: &[f64],
    ad: &[usize],
    b: &[f64],
    bd: &[usize],
    (la, lb): (Layout, Layout),
) {
    // Round the inputs to `E` first, so the reference sees what the kernel sees.
    let (ea, eb): (Vec<E>, Vec<E>) = (cast_all(a), cast_all(b));
    let (ra, rb) = (as_f64(&ea), as_f64(&eb));
    let ta = operand::<D, E>(&ea, ad, la);
    let tb = operand::<D, E>(&eb, bd, lb);
    let got = ta.try_matmul(&tb).unwrap_or_else(|e| panic!("{ad:?} · {bd:?}: {e}"));
    let (dims, expected, scale) = reference(&ra, ad, &rb, bd);
    assert_eq!(got.dims(), dims.as_slice(), "{ad:?} · {bd:?}");
    let k = ad[ad.len() - 1];
    assert_within_bound::<E>(&as_f64(&got.to_vec()), &expected, &scale, k);
    // The panicking form agrees with the fallible one.
    assert_eq!(ta.matmul(&tb).to_vec(), got.to_vec());
}

/// Operand shapes for one product: random batch axes that broadcast
/// together, sizes `0..=max` for m, k, n, and either operand possibly a vector.
fn operands(max_batch_rank: usize, max: usize) -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    (broadcast_pair(max_batch_rank, 3), 0..=max, 0..=max, 0..=max, any::<bool>(), any::<bool>()).prop_map(
        |((ba, bb), m, k, n, lhs_vector, rhs_vector)| {
            let ad = if lhs_vector { vec![k] } else { [ba, vec![m, k]].concat() };
            let bd = if rhs_vector { vec![k] } else { [bb, vec![k, n]].concat() };
            (ad, bd)
        },
    )
}

/// Operand shapes and data in `-10..10` for them.
fn operands_with_data(
    max_batch_rank: usize,
    max: usize,
) -> impl Strategy<Value = (Vec<usize>, Vec<f64>, Vec<usize>, Vec<f64>)> {
    operands(max_batch_rank, max).prop_flat_map(|(ad, bd)| {
        let (na, nb): (usize, usize) = (ad.iter().product(), bd.iter().product());
        (Just(ad), prop::collection::vec(-10.0..10.0f64, na), Just(bd), prop::collection::vec(-10.0..10.0f64, nb))
    })
}

/// Small whole numbers from `seed`, exact in `f64` through every product here.
fn whole(len: usize, seed: u64) -> Vec<f64> {
    (0..len as u64).map(|i| ((i.wrapping_mul(7) ^ seed) % 11) as f64 - 5.0).collect()
}

/// `Σ_k a[i, k] b[k, j]` of row-major `a` `[n, m]` and `b` `[m, p]`.
fn plain_product(a: &[f64], b: &[f64], (n, m, p): (usize, usize, usize)) -> Vec<f64> {
    (0..n * p).map(|ij| (0..m).map(|k| a[ij / p * m + k] * b[k * p + ij % p]).sum()).collect()
}

/// `outer`, `dot`, `addmm`, `addmv`, `baddbmm` and `addbmm` against plain
/// loops on whole numbers (exact in `f64`), with the factors 0, 1, 0.5 and
/// -2, operands in every layout, an input broadcast from a row (or a
/// scalar), empty sizes, and a NaN in the input where `beta` is 0 (not
/// read, as in PyTorch); the gradients by finite differences.
fn check_add_products<D: Device>(
    (b, n, m, p): (usize, usize, usize, usize),
    (beta, alpha): (f64, f64),
    seed: u64,
    la: Layout,
    lb: Layout,
    row: bool,
) {
    let tensor = |data: &[f64], dims: &[usize], layout: Layout| operand::<D, f64>(data, dims, layout);
    let (a, bm) = (whole(b * n * m, seed), whole(b * m * p, seed ^ 1));
    let scaled = |input: &[f64], product: &[f64], at: &dyn Fn(usize) -> usize| -> Vec<f64> {
        (0..product.len())
            .map(|i| if beta == 0.0 { alpha * product[i] } else { beta * input[at(i)] + alpha * product[i] })
            .collect()
    };
    let mut input = whole(if row { p } else { n * p }, seed ^ 2);
    if beta == 0.0 && !input.is_empty() {
        input[0] = f64::NAN;
    }
    let input_dims: Vec<usize> = if row { vec![p] } else { vec![n, p] };
    let c = tensor(&input, &input_dims, Layout::Common(Variant::Contiguous));
    let at = |i: usize| if row { i % p.max(1) } else { i };

    let (a0, b0) = (&whole(n * m, seed ^ 6)[..], &whole(m * p, seed ^ 7)[..]);
    let (ta, tb) = (tensor(a0, &[n, m], la), tensor(b0, &[m, p], lb));
    let want = scaled(&input, &plain_product(a0, b0, (n, m, p)), &at);
    assert_eq!(c.addmm(&ta, &tb, beta, alpha).to_vec(), want, "addmm");
    let v = whole(m, seed ^ 3);
    let tv = tensor(&v, &[m], la);
    let vector_input = whole(n, seed ^ 4);
    let want = scaled(&vector_input, &plain_product(a0, &v, (n, m, 1)), &|i| i);
    assert_eq!(Tensor::<D, f64>::from_slice(&vector_input, [n]).addmv(&ta, &tv, beta, alpha).to_vec(), want, "addmv");
    if m > 0 {
        // The first column of `a0` and the first row of `b0`.
        let column: Vec<f64> = a0.iter().step_by(m).copied().collect();
        let (x, y) = (tensor(&column, &[n], la), tensor(&b0[..p], &[p], lb));
        let want: Vec<f64> = (0..n * p).map(|ij| column[ij / p] * b0[ij % p]).collect();
        assert_eq!(x.outer(&y).to_vec(), want, "outer");
    }
    let (x, y) = (tensor(&v, &[m], la), tensor(&whole(m, seed ^ 5), &[m], lb));
    assert_eq!(x.dot(&y).item(), v.iter().zip(whole(m, seed ^ 5)).map(|(a, b)| a * b).sum::<f64>(), "dot");

    // Batches: baddbmm with an input broadcast over them, addbmm summing them.
    let (ta, tb) = (tensor(&a, &[b, n, m], la), tensor(&bm, &[b, m, p], lb));
    let products: Vec<Vec<f64>> =
        (0..b).map(|i| plain_product(&a[i * n * m..][..n * m], &bm[i * m * p..][..m * p], (n, m, p))).collect();
    let batched: Vec<f64> = products.concat();
    let c3 = c.reshape(if row { vec![1, 1, p] } else { vec![1, n, p] });
    let want = scaled(&input, &batched, &|i| at(i % (n * p).max(1)));
    assert_eq!(c3.baddbmm(&ta, &tb, beta, alpha).to_vec(), want, "baddbmm");
    let summed: Vec<f64> = (0..n * p).map(|ij| products.iter().map(|q| q[ij]).sum()).collect();
    assert_eq!(c.addbmm(&ta, &tb, beta, alpha).to_vec(), scaled(&input, &summed, &at), "addbmm");

    if beta != 0.0 && n * m * p > 0 {
        let c = c.detach();
        let inputs = [c.clone(), tensor(a0, &[n, m], la), tensor(b0, &[m, p], lb)];
        gradcheck::gradcheck("addmm", &inputs, |x| x[0].addmm(&x[1], &x[2], beta, alpha));
        let batches = [c3, ta, tb];
        gradcheck::gradcheck("baddbmm", &batches, |x| x[0].baddbmm(&x[1], &x[2], beta, alpha));
        let batches = [c, batches[1].clone(), batches[2].clone()];
        gradcheck::gradcheck("addbmm", &batches, |x| x[0].addbmm(&x[1], &x[2], beta, alpha));
    }
}

device_proptests! {
    cases = 48;

    fn add_products_match_plain_loops<D>(
        sizes in (0usize..=3, 0usize..=4, 0usize..=4, 0usize..=4), factors in (0usize..4, 0usize..4),
        seed in any::<u64>(), la in layout(), lb in layout(), row in any::<bool>(),
    ) {
        const FACTORS: [f64; 4] = [0.0, 1.0, 0.5, -2.0];
        check_add_products::<D>(sizes, (FACTORS[factors.0], FACTORS[factors.1]), seed, la, lb, row);
    }
}

/// Their errors name the op the user called, with PyTorch's reasons.
fn add_product_errors_name_the_op<D: Device>() {
    let m = |dims: &[usize]| Tensor::<D, f64>::zeros(dims);
    let text = |e: Error| e.to_string();
    let err = text(m(&[2, 4]).try_addmm(&m(&[2, 3]), &m(&[4, 4]), 1.0, 1.0).unwrap_err());
    assert!(
        err.starts_with("addmm on ") && err.contains("mat1 and mat2 shapes cannot be multiplied ([2, 3] and [4, 4])"),
        "{err}"
    );
    let err = text(m(&[3, 4]).try_addmm(&m(&[2, 3]), &m(&[3, 4]), 1.0, 1.0).unwrap_err());
    assert!(err.contains("the input [3, 4] does not broadcast to the product's shape [2, 4]"), "{err}");
    let err = text(m(&[2]).try_addmv(&m(&[2, 3]), &m(&[2]), 1.0, 1.0).unwrap_err());
    assert!(err.starts_with("addmv on ") && err.contains("a vector [m]"), "{err}");
    let err = text(m(&[2, 2, 2]).try_baddbmm(&m(&[2, 2, 3]), &m(&[3, 3, 2]), 1.0, 1.0).unwrap_err());
    assert!(err.contains("the same number of batches, got 2 and 3"), "{err}");
    let err = text(m(&[2, 2]).try_addbmm(&m(&[2, 2, 3]), &m(&[2, 2]), 1.0, 1.0).unwrap_err());
    assert!(err.starts_with("addbmm on ") && err.contains("must be 3-D"), "{err}");
    assert!(text(m(&[3]).try_dot(&m(&[4])).unwrap_err()).contains("1-D tensors of the same length"));
    assert!(text(m(&[3, 1]).try_outer(&m(&[4])).unwrap_err()).contains("two 1-D tensors"));
}

device_proptests! {
    cases = 128;

    fn matmul_matches_triple_loop_f64<D>((ad, a, bd, b) in operands_with_data(2, 6), la in layout(), lb in layout()) {
        check_matmul::<D, f64>(&a, &ad, &b, &bd, (la, lb));
    }

    fn matmul_matches_triple_loop_f32<D>((ad, a, bd, b) in operands_with_data(2, 6), la in layout(), lb in layout()) {
        check_matmul::<D, f32>(&a, &ad, &b, &bd, (la, lb));
    }
}

device_proptests! {
    // Sizes past gemm's register blocks (and its edge handling), fewer cases.
    cases = 16;

    fn matmul_matches_triple_loop_on_larger_matrices<D>(
        m in 1..sized(40, 10), k in 1..sized(70, 12), n in 1..sized(40, 10),
        seed in prop::collection::vec(-10.0..10.0f64, 1..16),
        la in layout(), lb in layout(),
    ) {
        let a: Vec<f64> = (0..m * k).map(|i| seed[i % seed.len()] + (i % 7) as f64).collect();
        let b: Vec<f64> = (0..k * n).map(|i| seed[(i * 3) % seed.len()] - (i % 5) as f64).collect();
        check_matmul::<D, f32>(&a, &[m, k], &b, &[k, n], (la, lb));
        check_matmul::<D, f64>(&a, &[m, k], &b, &[k, n], (la, lb));
    }
}

/// Deterministic data in `-1..1` without a random generator.
fn wave(len: usize, phase: f64) -> Vec<f64> {
    (0..len).map(|i| ((i as f64) * 0.37 + phase).sin()).collect()
}

fn check_threaded_paths<D: Device>() {
    // One product large enough to be split across threads, with a transposed operand.
    let (m, k, n) = (sized(130, 9), sized(97, 8), sized(110, 8));
    for (la, lb) in [
        (Layout::Common(Variant::Contiguous), Layout::Transposed),
        (Layout::Transposed, Layout::Common(Variant::Narrowed)),
    ] {
        check_matmul::<D, f32>(&wave(m * k, 0.1), &[m, k], &wave(k * n, 0.2), &[k, n], (la, lb));
    }
    // Products of enough rows to be split by rows, one block per thread, in
    // blocks of different sizes; the left side's rows are a column apart,
    // then the right side is transposed, as in a `Linear`.
    let (m, k, n) = (sized(613, 21), sized(40, 6), sized(53, 7));
    for (la, lb) in [
        (Layout::Transposed, Layout::Common(Variant::Contiguous)),
        (Layout::Common(Variant::Narrowed), Layout::Transposed),
    ] {
        check_matmul::<D, f32>(&wave(m * k, 0.15), &[m, k], &wave(k * n, 0.25), &[k, n], (la, lb));
    }
    // Many small products, handed to threads whole; the right side broadcasts.
    let (batch, s) = (sized(300, 10), sized(16, 4));
    check_matmul::<D, f64>(
        &wave(batch * s * s, 0.3),
        &[batch, s, s],
        &wave(s * s, 0.4),
        &[1, s, s],
        (Layout::Common(Variant::Permuted), Layout::Common(Variant::Contiguous)),
    );
    // Several products each large enough to split, handed to threads whole
    // (a convolution's weight against a batch of columns); the right side
    // is transposed, as in a weight gradient.
    let (batch, m, k, n) = (sized(9, 9), sized(40, 4), sized(150, 6), sized(160, 5));
    check_matmul::<D, f32>(
        &wave(m * k, 0.5),
        &[1, m, k],
        &wave(batch * k * n, 0.6),
        &[batch, k, n],
        (Layout::Common(Variant::Contiguous), Layout::Transposed),
    );
}

fn check_broadcast_views<D: Device>() {
    // Rows repeated by `broadcast_to` have row stride 0, columns likewise.
    let row = Tensor::<D, f64>::from_vec(vec![1.0, 2.0, 3.0], [1, 3]).broadcast_to([4, 3]);
    let col = Tensor::<D, f64>::from_vec(vec![1.0, -1.0, 2.0], [3, 1]).broadcast_to([3, 2]);
    assert_eq!(row.matmul(&col).to_vec(), vec![5.0; 8]);
    // A batch axis broadcast explicitly, as a view, on the left.
    let m = Tensor::<D, f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    let stacked = m.unsqueeze(0).broadcast_to([3, 2, 2]);
    let eye = Tensor::<D, f64>::eye(2);
    assert_eq!(stacked.matmul(&eye).to_vec(), [1.0, 2.0, 3.0, 4.0].repeat(3));
}

fn check_empty<D: Device>() {
    let zeros = |dims: &[usize]| Tensor::<D, f32>::zeros(dims);
    // k = 0: an empty sum is 0, whatever was in the recycled output buffer.
    let s = sized(300, 24);
    let big = Tensor::<D, f32>::full([s, s], 7.0);
    drop(big);
    let out = zeros(&[s, 0]).matmul(&zeros(&[0, s]));
    assert_eq!(out.dims(), &[s, s]);
    assert!(out.to_vec().iter().all(|&x| x == 0.0));
    assert_eq!(zeros(&[0]).matmul(&zeros(&[0])).to_vec(), vec![0.0]);
    // m, n or a batch axis of 0: empty results of the right shape.
    assert_eq!(zeros(&[0, 3]).matmul(&zeros(&[3, 4])).dims(), &[0, 4]);
    assert_eq!(zeros(&[2, 3]).matmul(&zeros(&[3, 0])).dims(), &[2, 0]);
    assert_eq!(zeros(&[0, 2, 3]).matmul(&zeros(&[3, 4])).dims(), &[0, 2, 4]);
    assert_eq!(zeros(&[5, 1, 2, 3]).matmul(&zeros(&[0, 3, 4])).dims(), &[5, 0, 2, 4]);
}

fn check_errors<D: Device>() {
    let t = |dims: &[usize]| Tensor::<D, f32>::zeros(dims);
    let device = D::name();
    let cases: [(&[usize], &[usize], String); 6] = [
        (&[2, 3], &[4, 5], "shapes [2, 3] and [4, 5]: the inner dimensions differ (3 vs 4)".into()),
        (&[3], &[4], "shapes [3] and [4]: the inner dimensions differ (3 vs 4)".into()),
        (&[3], &[2, 4], "shapes [3] and [2, 4]: the inner dimensions differ (3 vs 2)".into()),
        (&[2, 3, 4], &[5], "shapes [2, 3, 4] and [5]: the inner dimensions differ (4 vs 5)".into()),
        (
            &[2, 3, 4],
            &[3, 4, 5],
            "shapes [2, 3, 4] and [3, 4, 5]: the batch dimensions [2] and [3] cannot be broadcast together".into(),
        ),
        (
            &[],
            &[3],
            "shapes [] and [3]: both operands need at least one dimension (use `*` to scale by a scalar)".into(),
        ),
    ];
    for (ad, bd, reason) in cases {
        let err = t(ad).try_matmul(&t(bd)).unwrap_err();
        assert!(matches!(err, Error::Shape { op: "matmul", .. }), "{err:?}");
        assert_eq!(err.to_string(), format!("matmul on {device}: {reason}"));
    }
    let err = t(&[2]).try_matmul(&t(&[])).unwrap_err();
    assert!(err.to_string().ends_with("both operands need at least one dimension (use `*` to scale by a scalar)"));
}

#[test]
fn errors_name_the_op_the_shapes_and_the_device_cpu_text() {
    assert_eq!(
        Tensor::<Cpu>::zeros([2, 3]).try_matmul(&Tensor::<Cpu>::zeros([4, 5])).unwrap_err().to_string(),
        "matmul on Cpu: shapes [2, 3] and [4, 5]: the inner dimensions differ (3 vs 4)"
    );
}

#[test]
#[should_panic(expected = "matmul on Cpu: shapes [2, 3] and [4, 5]: the inner dimensions differ (3 vs 4)")]
fn plain_form_panics_with_the_try_message() {
    let _ = Tensor::<Cpu>::zeros([2, 3]).matmul(&Tensor::<Cpu>::zeros([4, 5]));
}

fn dot_product_is_rank_zero_and_exact_on_small_integers<D: Device>() {
    let a = Tensor::<D, f64>::from_vec(vec![1.0, 2.0, 3.0], [3]);
    let b = Tensor::<D, f64>::from_vec(vec![4.0, 5.0, 6.0], [3]);
    let d = a.matmul(&b);
    assert_eq!(d.rank(), 0);
    assert_eq!(d.to_vec(), vec![32.0]);
}

/// Products whose outputs (66_563 elements) span several CUDA blocks and tiles, with sizes
/// that are not multiples of 256 or of any tile size, transposed operands,
/// a broadcast batch, and a dot product of [`LARGE_SIZES`]` [0]` terms; each
/// against the triple loop. Returns every result, which the CUDA instances
/// also compare with the `Cpu` ones.
fn large_products<D: Device>() -> Vec<f32> {
    let cases: [(&[usize], &[usize], Layout, Layout); 3] = [
        (
            &[sized(257, 9), sized(40, 5)],
            &[sized(40, 5), sized(259, 12)],
            Layout::Transposed,
            Layout::Common(Variant::Contiguous),
        ),
        (
            &[3, sized(65, 5), sized(129, 7)],
            &[sized(129, 7), sized(33, 6)],
            Layout::Common(Variant::Narrowed),
            Layout::Transposed,
        ),
        (&[2, LARGE_SIZES[0]], &[LARGE_SIZES[0]], Layout::Common(Variant::Permuted), Layout::Common(Variant::Narrowed)),
    ];
    let mut all = Vec::new();
    for (k, (ad, bd, la, lb)) in cases.into_iter().enumerate() {
        let a = wave(ad.iter().product(), 0.5 + k as f64);
        let b = wave(bd.iter().product(), 0.7 + k as f64);
        check_matmul::<D, f32>(&a, ad, &b, bd, (la, lb));
        let (ea, eb): (Vec<f32>, Vec<f32>) = (cast_all(&a), cast_all(&b));
        all.extend(operand::<D, f32>(&ea, ad, la).matmul(&operand::<D, f32>(&eb, bd, lb)).to_vec());
    }
    all
}

device_tests! {
    threaded_paths_match_triple_loop => check_threaded_paths,
    broadcast_views_are_multiplied_without_copies => check_broadcast_views,
    empty_operands_give_empty_or_zero_results => check_empty,
    errors_name_the_op_the_shapes_and_the_device => check_errors,
    dot_product_is_rank_zero_and_exact_on_small_integers => dot_product_is_rank_zero_and_exact_on_small_integers,
    add_product_errors_name_the_op => add_product_errors_name_the_op,
}

device_tests_vs_cpu! {
    large_products => large_products, Family::Matmul;
}
