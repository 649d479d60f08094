//! Scaled dot-product attention checked against a plain `f64` loop (scores,
//! masks, softmax over the visible keys, zeros for a query that sees none),
//! on random batch shapes, lengths, widths, layouts and masks, with
//! finite-difference gradients for queries, keys, values and the additive
//! mask, on every device; and grouped-query attention (keys and values
//! shared by groups of query heads) the same way.

use crate::common::*;
use devtensor::ops::attention::AttentionMask;
use devtensor::{Device, Error, FloatElement, Tensor};
use proptest::prelude::*;

/// The kinds of mask a case draws; the broadcast shape of a `Keep` or
/// `Add` mask drops leading axes and sets some axes to 1.
#[derive(Clone, Copy, Debug)]
enum MaskKind {
    None,
    Causal,
    Keep,
    Hide,
    Add,
}

/// A case: batch axes, L, S, E, Ev, the mask kind, which mask axes are
/// broadcast (size 1) and how many leading ones are dropped; and how many
/// query heads (the last batch axis) share each key and value head, 1 but
/// for grouped-query attention.
#[derive(Clone, Debug)]
struct Case {
    batch: Vec<usize>,
    group: usize,
    l: usize,
    s: usize,
    e: usize,
    ev: usize,
    mask: MaskKind,
    ones: Vec<bool>,
    drop: usize,
}

impl Case {
    fn scores_dims(&self) -> Vec<usize> {
        [self.batch.clone(), vec![self.l, self.s]].concat()
    }

    /// The batch axes of the keys and values: the heads divided by the group.
    fn kv_batch(&self) -> Vec<usize> {
        let mut batch = self.batch.clone();
        if let Some(heads) = batch.last_mut() {
            *heads /= self.group;
        }
        batch
    }

    /// The attention of the case: grouped-query where its group is not 1.
    fn attend<D: Device, E: FloatElement>(
        &self,
        q: &Tensor<D, E>,
        k: &Tensor<D, E>,
        v: &Tensor<D, E>,
        mask: AttentionMask<'_, D, E>,
        scale: Option<f64>,
    ) -> Tensor<D, E> {
        if self.group == 1 {
            q.scaled_dot_product_attention(k, v, mask, scale)
        } else {
            q.scaled_dot_product_attention_gqa(k, v, mask, scale)
        }
    }

    /// The mask's own shape: the scores' shape with some axes 1 and some
    /// leading axes dropped.
    fn mask_dims(&self) -> Vec<usize> {
        let full = self.scores_dims();
        let dims: Vec<usize> = full.iter().zip(&self.ones).map(|(&d, &one)| if one { 1 } else { d }).collect();
        dims[self.drop.min(dims.len())..].to_vec()
    }
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(1usize..=3, 0..=2),
        1usize..=5,
        1usize..=5,
        1usize..=4,
        1usize..=3,
        prop_oneof![
            Just(MaskKind::None),
            Just(MaskKind::Causal),
            Just(MaskKind::Keep),
            Just(MaskKind::Hide),
            Just(MaskKind::Add)
        ],
        prop::collection::vec(any::<bool>(), 4),
        0usize..=4,
        prop_oneof![2 => Just(1usize), 1 => 2usize..=3],
    )
        .prop_map(|(mut batch, l, s, e, ev, mask, ones, drop, group)| {
            if group > 1 {
                // The query heads, a multiple of the key and value heads.
                match batch.last_mut() {
                    Some(heads) => *heads *= group,
                    None => batch.push(group),
                }
            }
            let ones = [ones, vec![false]].concat();
            Case { batch, group, l, s, e, ev, mask, ones, drop }
        })
}

/// The attention of the case in `f64` by plain loops; `keep` and `add` are
/// the mask's values (row-major in its own shape).
fn reference(c: &Case, q: &[f64], k: &[f64], v: &[f64], keep: &[u8], add: &[f64], scale: f64) -> Vec<f64> {
    let scores_dims = c.scores_dims();
    let mask_dims = c.mask_dims();
    let batches: usize = c.batch.iter().product();
    let mut out = vec![0.0; batches * c.l * c.ev];
    for b in 0..batches {
        // The key and value problem of query problem `b`: query head `h`
        // attends with key head `h / group`, as PyTorch's `enable_gqa`.
        let kb = b / c.group;
        for i in 0..c.l {
            let mut scores = Vec::new();
            for j in 0..c.s {
                let mut at = unravel(b, &c.batch);
                at.extend([i, j]);
                let visible = match c.mask {
                    MaskKind::Causal => j <= i,
                    MaskKind::Keep => broadcast_read(keep, &mask_dims, &at) != 0,
                    MaskKind::Hide => broadcast_read(keep, &mask_dims, &at) == 0,
                    _ => true,
                };
                let extra = if let MaskKind::Add = c.mask { broadcast_read(add, &mask_dims, &at) } else { 0.0 };
                let _ = &scores_dims;
                let dot: f64 = (0..c.e).map(|d| q[(b * c.l + i) * c.e + d] * k[(kb * c.s + j) * c.e + d]).sum();
                let score = dot * scale + extra;
                if visible && score != f64::NEG_INFINITY {
                    scores.push((j, score));
                }
            }
            if scores.is_empty() {
                continue;
            }
            let max = scores.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = scores.iter().map(|s| (s.1 - max).exp()).sum();
            for &(j, s) in &scores {
                let p = (s - max).exp() / total;
                for d in 0..c.ev {
                    out[(b * c.l + i) * c.ev + d] += p * v[(kb * c.s + j) * c.ev + d];
                }
            }
        }
    }
    out
}

/// The case's operands (laid out as `variant`) and mask values from `seed`.
struct Operands<D: Device, E: FloatElement> {
    q: Tensor<D, E>,
    k: Tensor<D, E>,
    v: Tensor<D, E>,
    keep: Tensor<D, u8>,
    add: Tensor<D, E>,
    data: [Vec<f64>; 3],
    keep_data: Vec<u8>,
    add_data: Vec<f64>,
}

fn operands<D: Device, E: FloatElement>(c: &Case, seed: u64, variant: Variant) -> Operands<D, E> {
    let dims = |rows: usize, cols: usize| [c.batch.clone(), vec![rows, cols]].concat();
    let kv_dims = |rows: usize, cols: usize| [c.kv_batch(), vec![rows, cols]].concat();
    let make = |d: &[usize], s: u64| -> Vec<f64> {
        let n: usize = d.iter().product();
        // Representable in f32, so both types see the same inputs.
        gradcheck::data(n, s).iter().map(|x| f64::from(*x as f32)).collect()
    };
    let (qd, kd, vd) = (dims(c.l, c.e), kv_dims(c.s, c.e), kv_dims(c.s, c.ev));
    let data = [make(&qd, seed), make(&kd, seed ^ 1), make(&vd, seed ^ 2)];
    let md = c.mask_dims();
    let n: usize = md.iter().product();
    let bits = gradcheck::data(n, seed ^ 3);
    let keep_data: Vec<u8> = bits.iter().map(|&b| u8::from(b > -1.0)).collect();
    let add_data: Vec<f64> =
        bits.iter().map(|&b| if b < -1.6 { f64::NEG_INFINITY } else { f64::from((b * 0.5) as f32) }).collect();
    let t = |x: &[f64], d: &[usize]| tensor_with::<D, E>(&cast_all(x), d, variant);
    Operands {
        q: t(&data[0], &qd),
        k: t(&data[1], &kd),
        v: t(&data[2], &vd),
        keep: Tensor::from_slice(&keep_data, md.as_slice()),
        add: Tensor::from_vec(cast_all(&add_data), md.as_slice()),
        data,
        keep_data,
        add_data,
    }
}

fn mask_of<'a, D: Device, E: FloatElement>(c: &Case, o: &'a Operands<D, E>) -> AttentionMask<'a, D, E> {
    match c.mask {
        MaskKind::None => AttentionMask::None,
        MaskKind::Causal => AttentionMask::Causal,
        MaskKind::Keep => AttentionMask::Keep(&o.keep),
        MaskKind::Hide => AttentionMask::Hide(&o.keep),
        MaskKind::Add => AttentionMask::Add(&o.add),
    }
}

fn check_forward<D: Device, E: FloatElement>(c: &Case, seed: u64, variant: Variant, scale: Option<f64>, tol: f64) {
    let o = operands::<D, E>(c, seed, variant);
    let got = c.attend(&o.q, &o.k, &o.v, mask_of(c, &o), scale);
    let expected_dims = [c.batch.clone(), vec![c.l, c.ev]].concat();
    assert_eq!(got.dims(), expected_dims.as_slice());
    let scale = scale.unwrap_or(1.0 / (c.e as f64).sqrt());
    let expected = reference(c, &o.data[0], &o.data[1], &o.data[2], &o.keep_data, &o.add_data, scale);
    assert_close(&as_f64(&got.to_vec()), &expected, tol, tol);
}

device_proptests! {
    cases = 64;

    fn attention_matches_a_plain_loop<D>(c in case(), seed in any::<u64>(), v in variant(), scaled in any::<bool>()) {
        let scale = scaled.then_some(0.7);
        check_forward::<D, f32>(&c, seed, v, scale, 1e-5);
        check_forward::<D, f64>(&c, seed, v, scale, 1e-12);
    }

    fn attention_gradients_match_finite_differences<D>(c in case(), seed in any::<u64>(), v in variant()) {
        let o = operands::<D, f64>(&c, seed, v);
        let inputs = [o.q.clone(), o.k.clone(), o.v.clone()];
        gradcheck::gradcheck("attention", &inputs, |x| c.attend(&x[0], &x[1], &x[2], mask_of(&c, &o), None));
        if let MaskKind::Add = c.mask {
            // The additive mask is differentiable too (where it is finite).
            let finite = o.add.masked_fill(&o.add.eq_scalar(f64::NEG_INFINITY), 0.0);
            gradcheck::gradcheck("attention mask", &[finite], |m| {
                c.attend(&o.q, &o.k, &o.v, AttentionMask::Add(&m[0]), None)
            });
        }
    }
}

fn queries_that_see_nothing_get_zeros_and_no_gradient<D: Device>() {
    let q = Tensor::<D, f64>::from_vec(vec![0.3, -1.0, 2.0, 0.5], [2, 2]).requires_grad();
    let kv = Tensor::<D, f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [3, 2]);
    // The second query sees no key.
    let keep = Tensor::<D, u8>::from_vec(vec![1, 0, 1, 0, 0, 0], [2, 3]);
    let out = q.scaled_dot_product_attention(&kv, &kv, AttentionMask::Keep(&keep), None);
    assert_eq!(out.to_vec2()[1], vec![0.0, 0.0]);
    assert!(out.to_vec().iter().all(|x| x.is_finite()));
    let grads = out.sum().backward();
    let g = grads.get(&q).unwrap().to_vec2();
    assert_eq!(g[1], vec![0.0, 0.0]);
    assert!(g[0].iter().all(|x| x.is_finite()));
}

/// Grouped-query attention of empty tensors, as PyTorch's: no queries, no
/// keys (every query sees nothing: zeros, and zero gradients), no heads.
fn grouped_query_attention_of_empty_tensors<D: Device>() {
    let kv = Tensor::<D, f64>::ones([1, 2, 5, 3]);
    let none =
        Tensor::<D, f64>::zeros([1, 4, 0, 3]).scaled_dot_product_attention_gqa(&kv, &kv, AttentionMask::None, None);
    assert_eq!(none.dims(), &[1, 4, 0, 3]);
    let q = Tensor::<D, f64>::ones([1, 4, 3, 2]).requires_grad();
    let nothing = Tensor::<D, f64>::zeros([1, 2, 0, 2]);
    let out = q.scaled_dot_product_attention_gqa(&nothing, &nothing, AttentionMask::None, None);
    assert_eq!((out.dims(), out.to_vec()), (&[1, 4, 3, 2][..], vec![0.0; 24]));
    assert_eq!(out.sum().backward().get(&q).unwrap().to_vec(), vec![0.0; 24]);
    let headless =
        Tensor::<D, f64>::zeros([1, 0, 3, 3]).scaled_dot_product_attention_gqa(&kv, &kv, AttentionMask::None, None);
    assert_eq!(headless.dims(), &[1, 0, 3, 3]);
}

fn bad_shapes_are_errors_naming_them<D: Device>() {
    let q = Tensor::<D>::zeros([2, 3, 4]);
    let message = |r: devtensor::Result<Tensor<D>>| r.unwrap_err().to_string();
    let name = D::name();
    assert_eq!(
        message(q.try_scaled_dot_product_attention(
            &Tensor::<D>::zeros([2, 5, 3]),
            &Tensor::<D>::zeros([2, 5, 4]),
            AttentionMask::None,
            None
        )),
        format!(
            "scaled_dot_product_attention on {name}: shapes [2, 3, 4], [2, 5, 3] and [2, 5, 4]: queries and keys need the same last dimension (the embedding)"
        )
    );
    assert_eq!(
        message(q.try_scaled_dot_product_attention(
            &Tensor::<D>::zeros([2, 5, 4]),
            &Tensor::<D>::zeros([2, 6, 4]),
            AttentionMask::None,
            None
        )),
        format!(
            "scaled_dot_product_attention on {name}: shapes [2, 3, 4], [2, 5, 4] and [2, 6, 4]: keys and values need the same number of positions (their second-last axis)"
        )
    );
    assert_eq!(
        message(q.try_scaled_dot_product_attention(
            &Tensor::<D>::zeros([3, 5, 4]),
            &Tensor::<D>::zeros([3, 5, 4]),
            AttentionMask::None,
            None
        )),
        format!(
            "scaled_dot_product_attention on {name}: shapes [2, 3, 4], [3, 5, 4] and [3, 5, 4]: queries, keys and values need the same batch axes (all but the last two)"
        )
    );
    // Fewer key heads than query heads: PyTorch's `enable_gqa`, named.
    let (q4, kv2) = (Tensor::<D>::zeros([1, 4, 3, 4]), Tensor::<D>::zeros([1, 2, 5, 4]));
    assert_eq!(
        message(q4.try_scaled_dot_product_attention(&kv2, &kv2, AttentionMask::None, None)),
        format!(
            "scaled_dot_product_attention on {name}: shapes [1, 4, 3, 4], [1, 2, 5, 4] and [1, 2, 5, 4]: the keys and values have fewer heads (axis -3) than the queries: grouped-query attention is scaled_dot_product_attention_gqa (PyTorch's enable_gqa=True)"
        )
    );
    let kv3 = Tensor::<D>::zeros([1, 3, 5, 4]);
    assert_eq!(
        message(q4.try_scaled_dot_product_attention_gqa(&kv3, &kv3, AttentionMask::None, None)),
        format!(
            "scaled_dot_product_attention on {name}: shapes [1, 4, 3, 4], [1, 3, 5, 4] and [1, 3, 5, 4]: the query heads (axis -3) must be a multiple of the key heads, and keys and values need as many heads"
        )
    );
    assert_eq!(
        message(q4.try_scaled_dot_product_attention_gqa(&kv2, &kv3, AttentionMask::None, None)),
        format!(
            "scaled_dot_product_attention on {name}: shapes [1, 4, 3, 4], [1, 2, 5, 4] and [1, 3, 5, 4]: the query heads (axis -3) must be a multiple of the key heads, and keys and values need as many heads"
        )
    );
    assert_eq!(
        message(Tensor::<D>::zeros([3, 4]).try_scaled_dot_product_attention_gqa(
            &Tensor::<D>::zeros([5, 4]),
            &Tensor::<D>::zeros([5, 4]),
            AttentionMask::None,
            None
        )),
        format!(
            "scaled_dot_product_attention on {name}: shapes [3, 4], [5, 4] and [5, 4]: grouped-query attention needs queries, keys and values of the same rank, at least 3 (heads, positions, embedding)"
        )
    );
    assert_eq!(
        message(q4.try_scaled_dot_product_attention_gqa(
            &Tensor::<D>::zeros([2, 2, 5, 4]),
            &Tensor::<D>::zeros([2, 2, 5, 4]),
            AttentionMask::None,
            None
        )),
        format!(
            "scaled_dot_product_attention on {name}: shapes [1, 4, 3, 4], [2, 2, 5, 4] and [2, 2, 5, 4]: queries, keys and values need the same batch axes (all but the heads and the last two)"
        )
    );
    let kv = Tensor::<D>::zeros([2, 5, 4]);
    let keep = Tensor::<D, u8>::ones([3, 4]);
    let err = q.try_scaled_dot_product_attention(&kv, &kv, AttentionMask::Keep(&keep), None);
    assert!(matches!(err, Err(Error::Shape { op: "scaled_dot_product_attention", .. })), "{err:?}");
    assert_eq!(
        message(err),
        format!(
            "scaled_dot_product_attention on {name}: shapes [2, 3, 4], [2, 5, 4], [2, 5, 4] and [3, 4]: the mask does not broadcast to the scores' shape [batch.., queries, keys]"
        )
    );
}

/// Problems large enough to be split across threads (whole problems, and
/// the forward's blocks of query rows of a single problem), and, on a GPU,
/// rows longer than a block's 256 threads (the online softmax rescales
/// between chunks of keys, and key rows sum over chunks of queries), against the loop
/// for the result and against the composed form (forced by an additive
/// mask of zeros that needs a gradient) for the gradients.
fn large_problems_take_the_parallel_paths<D: Device>() {
    let cases = [
        Case {
            batch: vec![3, 2],
            group: 1,
            l: sized(150, 20),
            s: sized(130, 17),
            e: 16,
            ev: 8,
            mask: MaskKind::Causal,
            ones: vec![false; 4],
            drop: 0,
        },
        Case {
            batch: vec![],
            group: 1,
            l: sized(300, 40),
            s: sized(600, 30),
            e: 8,
            ev: 5,
            mask: MaskKind::Keep,
            ones: vec![false, true],
            drop: 0,
        },
        // Heads wider than the GPU's tiles (64): its row kernels, over
        // more keys than a block's 256 threads.
        Case {
            batch: vec![2],
            group: 1,
            l: sized(40, 9),
            s: sized(300, 11),
            e: 80,
            ev: 66,
            mask: MaskKind::Keep,
            ones: vec![true, false, false],
            drop: 0,
        },
        // Grouped-query attention: two query heads per key and value head
        // (the GPU's tiles, the CPU's parallel backward over key heads),
        // and three over a wide head (the GPU's row kernels).
        Case {
            batch: vec![2, 4],
            group: 2,
            l: sized(90, 12),
            s: sized(90, 12),
            e: 16,
            ev: 8,
            mask: MaskKind::Causal,
            ones: vec![false; 4],
            drop: 0,
        },
        Case {
            batch: vec![1, 3],
            group: 3,
            l: sized(20, 5),
            s: sized(270, 9),
            e: 72,
            ev: 70,
            mask: MaskKind::Keep,
            ones: vec![true, false, false, false],
            drop: 0,
        },
    ];
    // f32, the GPU's 32-row tiles, against the loop.
    let o = operands::<D, f32>(&cases[0], 12, Variant::Contiguous);
    let out = o.q.scaled_dot_product_attention(&o.k, &o.v, mask_of(&cases[0], &o), None);
    let expected = reference(&cases[0], &o.data[0], &o.data[1], &o.data[2], &o.keep_data, &o.add_data, 0.25);
    assert_close(&as_f64(&out.to_vec()), &expected, 2e-6, 2e-5);
    for c in &cases {
        let o = operands::<D, f64>(c, 11, Variant::Contiguous);
        let (q, k, v) = (o.q.clone().requires_grad(), o.k.clone().requires_grad(), o.v.clone().requires_grad());
        let out = c.attend(&q, &k, &v, mask_of(c, &o), None);
        let expected =
            reference(c, &o.data[0], &o.data[1], &o.data[2], &o.keep_data, &o.add_data, 1.0 / (c.e as f64).sqrt());
        assert_close(&out.to_vec(), &expected, 1e-12, 1e-12);
        let weights = Tensor::<D, f64>::from_vec(gradcheck::data(out.elem_count(), 5), out.dims());
        let fused = (&out * &weights).sum().backward();
        // The same through the composed form.
        let zero = Tensor::<D, f64>::zeros(c.scores_dims()).requires_grad();
        let mask = match c.mask {
            MaskKind::Causal => zero.masked_fill(&Tensor::<D, u8>::ones([c.l, c.s]).triu(1), f64::NEG_INFINITY),
            _ => zero.masked_fill(&o.keep.logical_not(), f64::NEG_INFINITY),
        };
        let composed_out = c.attend(&q, &k, &v, AttentionMask::Add(&mask), None);
        assert_close(&composed_out.to_vec(), &expected, 1e-12, 1e-12);
        let composed = (&composed_out * &weights).sum().backward();
        for (name, x) in [("q", &q), ("k", &k), ("v", &v)] {
            let (a, b) = (fused.get(x).unwrap().to_vec(), composed.get(x).unwrap().to_vec());
            assert_close(&a, &b, 1e-11, 1e-11);
            assert!(a.iter().any(|&g| g != 0.0), "{name}: an all-zero gradient proves nothing");
        }
    }
}

/// The heads of one projection, as a GPT splits them: `[B, T, 3·H·D]`
/// viewed as queries, keys and values `[B, H, T, D]`, whose rows are
/// `3·H·D` apart (the CPU kernels read them in place), large enough for the
/// parallel paths: the result against the loop, the projection's gradient
/// against the same attention of contiguous copies of the heads.
fn heads_split_from_one_projection<D: Device>() {
    let (b, t, h, d) = (3, sized(70, 9), 2, 8);
    let data = gradcheck::data(b * t * 3 * h * d, 21);
    let run = |copy: bool| {
        let qkv = Tensor::<D, f64>::from_vec(data.clone(), [b, t, 3 * h * d]).requires_grad();
        let parts = qkv.split(h * d, 2);
        let heads = |x: &Tensor<D, f64>| {
            let x = x.reshape([b, t, h, d]).transpose(1, 2);
            if copy { x.contiguous() } else { x }
        };
        let (q, k, v) = (heads(&parts[0]), heads(&parts[1]), heads(&parts[2]));
        assert_eq!(q.is_contiguous(), copy);
        let out = q.scaled_dot_product_attention(&k, &v, AttentionMask::Causal, None);
        let c = Case {
            batch: vec![b, h],
            group: 1,
            l: t,
            s: t,
            e: d,
            ev: d,
            mask: MaskKind::Causal,
            ones: vec![false; 4],
            drop: 0,
        };
        let expected = reference(&c, &q.to_vec(), &k.to_vec(), &v.to_vec(), &[], &[], 1.0 / (d as f64).sqrt());
        assert_close(&out.to_vec(), &expected, 1e-12, 1e-12);
        let weights = Tensor::<D, f64>::from_vec(gradcheck::data(out.elem_count(), 5), out.dims());
        (&out * &weights).sum().backward().get(&qkv).expect("the projection's gradient").to_vec()
    };
    let (in_place, copied) = (run(false), run(true));
    assert_close(&in_place, &copied, 1e-12, 1e-12);
    assert!(in_place.iter().any(|&g| g != 0.0), "an all-zero gradient proves nothing");
    // The CPU's kernels write the result and the gradients in the heads'
    // memory order, `[B, T, H, D]`, so that turning them back into rows of
    // the projection copies nothing (as PyTorch's CPU attention).
    if D::name() == "Cpu" {
        let heads = |part: usize| {
            let rows = data[part * b * t * h * d..(part + 1) * b * t * h * d].to_vec();
            Tensor::<D, f64>::from_vec(rows, [b, t, h, d]).transpose(1, 2).requires_grad()
        };
        let (q, k, v) = (heads(0), heads(1), heads(2));
        let out = q.scaled_dot_product_attention(&k, &v, AttentionMask::Causal, None);
        let grads = out.sum().backward();
        let grad = |x: &Tensor<D, f64>| grads.get(x).expect("a gradient").clone();
        for x in [out.clone(), grad(&q), grad(&k), grad(&v)] {
            assert!(x.transpose(1, 2).is_contiguous(), "{:?}", x.layout());
        }
    }
}

/// Dropout on the weights, reproduced: from the same seed the mask is
/// `rand(weights' shape) >= p` (the attention itself draws nothing), so the
/// result is a loop over the reference weights with that mask; the
/// gradient by finite differences on a fixed mask (a fixed seed per call).
fn attention_dropout_zeroes_weights_and_rescales<D: Device>() {
    let c = Case {
        batch: vec![2],
        group: 1,
        l: 5,
        s: 7,
        e: 3,
        ev: 2,
        mask: MaskKind::Causal,
        ones: vec![false; 3],
        drop: 0,
    };
    let o = operands::<D, f64>(&c, 21, Variant::Contiguous);
    let p = 0.3;
    devtensor::manual_seed(5);
    let out = o.q.scaled_dot_product_attention_dropout(&o.k, &o.v, mask_of(&c, &o), None, p);
    devtensor::manual_seed(5);
    let draws = Tensor::<D, f64>::rand([2, 5, 7]).to_vec();
    // The reference weights: the loop's output with one-hot values.
    let scale = 1.0 / (c.e as f64).sqrt();
    let mut expected = vec![0.0; 2 * 5 * 2];
    for b in 0..2 {
        for j in 0..7 {
            let mut one_hot = vec![0.0; 2 * 7];
            one_hot[b * 7 + j] = 1.0;
            let ce = Case { ev: 1, ..c.clone() };
            let w = reference(&ce, &o.data[0], &o.data[1], &one_hot, &o.keep_data, &o.add_data, scale);
            for i in 0..5 {
                let kept = if draws[(b * 5 + i) * 7 + j] >= p { w[b * 5 + i] / (1.0 - p) } else { 0.0 };
                for d in 0..2 {
                    expected[(b * 5 + i) * 2 + d] += kept * o.data[2][(b * 7 + j) * 2 + d];
                }
            }
        }
    }
    assert_close(&out.to_vec(), &expected, 1e-12, 1e-12);
    assert!(draws.iter().any(|&u| u < p), "some weight must be dropped for the test to mean something");
    let inputs = [o.q.clone(), o.k.clone(), o.v.clone()];
    gradcheck::gradcheck("attention dropout", &inputs, |x| {
        devtensor::manual_seed(5);
        x[0].scaled_dot_product_attention_dropout(&x[1], &x[2], AttentionMask::Causal, None, p)
    });
    let err = o.q.try_scaled_dot_product_attention_dropout(&o.k, &o.v, AttentionMask::None, None, 1.5).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("scaled_dot_product_attention on {}: dropout_p must be between 0 and 1, got 1.5", D::name())
    );
}

device_tests! {
    attention_dropout_zeroes_weights_and_rescales => attention_dropout_zeroes_weights_and_rescales,
    heads_split_from_one_projection => heads_split_from_one_projection,
    large_problems_take_the_parallel_paths => large_problems_take_the_parallel_paths,
    queries_that_see_nothing_get_zeros_and_no_gradient => queries_that_see_nothing_get_zeros_and_no_gradient,
    bad_shapes_are_errors_naming_them => bad_shapes_are_errors_naming_them,
    grouped_query_attention_of_empty_tensors => grouped_query_attention_of_empty_tensors,
}
