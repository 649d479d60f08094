//! Parity with PyTorch for transformers, from files PyTorch wrote
//! (`tests/fixtures/pytorch/make_fixtures.py gpt`): the GPT of
//! `examples/train_gpt.rs` loaded from PyTorch's `state_dict` by its names
//! and trained 5 AdamW steps on PyTorch's batch, `MultiheadAttention`, and
//! `scaled_dot_product_attention`, outputs and gradients.
//!
//! Tolerances, for f32: 5e-6 relative on losses, outputs and gradients (a
//! few roundings of sums in another order), and 2e-4 on weights after 5
//! Adam steps, whose update `m / sqrt(v)` divides small, rounded gradients.

use crate::model::{Gpt, GptConfig, KvCache, Sampling};
use devtensor::io::Checkpoint;
use devtensor::nn::{Linear, MhaInput, Module, MultiheadAttention, ToDtype, init};
use devtensor::ops::attention::AttentionMask;
use devtensor::optim::{Optimizer, clip_grad_norm};
use devtensor::{Device, Error, Tensor, bf16, no_grad};
use proptest::prelude::*;

fn fixture<D: Device>(name: &str) -> Checkpoint<D> {
    Checkpoint::load(format!("{}/tests/fixtures/pytorch/{name}", crate::common::REPO))
}

fn float<D: Device>(ckpt: &Checkpoint<D>, name: &str) -> Tensor<D> {
    ckpt.tensors().iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no `{name}` in the fixture")).1.clone()
}

fn int<D: Device>(ckpt: &Checkpoint<D>, name: &str) -> Tensor<D, i64> {
    ckpt.int_tensors().iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no `{name}` in the fixture")).1.clone()
}

fn assert_close(what: &str, got: &Tensor<impl Device>, want: &Tensor<impl Device>, tol: f32) {
    assert_eq!(got.dims(), want.dims(), "{what}");
    let (got, want) = (got.to_vec(), want.to_vec());
    let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs() / (1.0 + w.abs())).fold(0.0, f32::max);
    assert!(worst <= tol, "{what}: off by {worst:e} (relative), more than {tol:e}");
}

/// The GPT loaded from PyTorch's initial `state_dict`, then 5 steps of
/// AdamW with weight decay on matrices only and gradient clipping: every
/// loss and every final weight as PyTorch's, tied weights still tied.
fn gpt_trains_as_pytorch<D: Device>() {
    let torch = fixture::<D>("gpt_adamw.safetensors");
    let config = GptConfig { block_size: 8, vocab_size: 11, n_layer: 2, n_head: 2, n_embd: 16 };
    let mut model = Gpt::<D>::new(config).unwrap();
    let names: Vec<String> = model.named_tensors().into_iter().map(|(name, _, _)| name).collect();
    let torch_names: Vec<&str> =
        torch.tensors().iter().filter_map(|(n, _)| n.strip_prefix("init.")).collect::<Vec<_>>();
    let mut sorted = names.clone();
    sorted.sort();
    let mut torch_sorted = torch_names.clone();
    torch_sorted.sort();
    assert_eq!(sorted, torch_sorted, "PyTorch's state_dict names");
    init::apply(&mut model, |name, _| Ok(Some(float(&torch, &format!("init.{name}"))))).unwrap();
    assert_eq!(model.lm_head.weight.leaf_id(), model.transformer.wte.weight.leaf_id(), "still tied");

    // Trained as it is, and with every block checkpointed (recomputed in
    // the backward pass): both to PyTorch's losses and weights.
    let (idx, targets) = (int(&torch, "idx"), int(&torch, "targets"));
    for checkpoint_blocks in [false, true] {
        let mut model = Gpt::<D>::new(config).unwrap();
        init::apply(&mut model, |name, _| Ok(Some(float(&torch, &format!("init.{name}"))))).unwrap();
        model.checkpoint_blocks = checkpoint_blocks;
        let mut opt = model.optimizer(1e-2, 0.1, (0.9, 0.99));
        let mut losses = Vec::new();
        for _ in 0..5 {
            let loss = model.loss(&idx, &targets).unwrap();
            let mut grads = loss.backward();
            clip_grad_norm(&model, &mut grads, 1.0, 2.0);
            opt.step(&mut model, &grads);
            losses.push(loss.item());
        }
        let how = if checkpoint_blocks { " (checkpointed blocks)" } else { "" };
        assert_close(&format!("losses{how}"), &Tensor::<D>::from_vec(losses, [5]), &float(&torch, "losses"), 5e-6);
        for (name, _, weight) in model.named_tensors() {
            assert_close(&format!("{name}{how}"), &weight, &float(&torch, &format!("final.{name}")), 2e-4);
        }
    }
}

/// `nn.MultiheadAttention(8, 2, batch_first=True)` with PyTorch's weights,
/// a key padding mask and a boolean attention mask.
fn multihead_attention_matches_pytorch<D: Device>() {
    let torch = fixture::<D>("attention.safetensors");
    let t = |name: &str| float(&torch, &format!("mha.{name}"));
    let out_proj = Linear::from_weights(t("out_proj.weight"), Some(t("out_proj.bias")));
    let mha =
        MultiheadAttention::from_weights(2, t("in_proj_weight"), Some(t("in_proj_bias")), out_proj).batch_first(true);
    let (q, k, v) = (t("q").requires_grad(), t("k").requires_grad(), t("v").requires_grad());
    let padding = int(&torch, "mha.key_padding_mask").to_dtype::<u8>();
    let hide = int(&torch, "mha.attn_mask").to_dtype::<u8>();
    let (out, weights) =
        mha.forward(MhaInput::new(&q, &k, &v).key_padding_mask(&padding).attn_mask(AttentionMask::Hide(&hide)));
    assert_close("output", &out, &t("out"), 5e-6);
    assert_close("weights", &weights.unwrap(), &t("weights"), 5e-6);
    let grads = (&out * &t("g")).sum().backward();
    for (name, x) in [("grad_q", &q), ("grad_k", &k), ("grad_v", &v), ("grad_in_proj_weight", &mha.in_proj_weight)] {
        assert_close(name, grads.get(x).unwrap(), &t(name), 5e-6);
    }
    assert_close("grad_out_proj_weight", grads.get(&mha.out_proj.weight).unwrap(), &t("grad_out_proj_weight"), 5e-6);
}

/// `F.scaled_dot_product_attention` with `is_causal=True` and with a
/// boolean mask, values wider than queries and keys.
fn scaled_dot_product_attention_matches_pytorch<D: Device>() {
    attention_matches_fixture::<D>("attention.safetensors", ["sdpa_causal", "sdpa_keep"], false);
}

/// Grouped-query attention, `enable_gqa=True`: 6 query heads over 2 key and
/// value heads, causal and under a boolean mask per head.
fn grouped_query_attention_matches_pytorch<D: Device>() {
    attention_matches_fixture::<D>("attention_gqa.safetensors", ["causal", "keep"], true);
}

/// The attention of fixture `file`'s two cases, the first causal, the
/// second under its boolean `mask`: the output and the three gradients of
/// `sum(out * g)` against PyTorch's, grouped-query where `gqa`.
fn attention_matches_fixture<D: Device>(file: &str, [causal, keep]: [&str; 2], gqa: bool) {
    let torch = fixture::<D>(file);
    for case in [causal, keep] {
        let t = |name: &str| float(&torch, &format!("{case}.{name}"));
        let (q, k, v) = (t("q").requires_grad(), t("k").requires_grad(), t("v").requires_grad());
        let mask = (case == keep).then(|| int(&torch, &format!("{keep}.mask")).to_dtype::<u8>());
        let mask = mask.as_ref().map_or(AttentionMask::Causal, AttentionMask::Keep);
        let out = if gqa {
            q.scaled_dot_product_attention_gqa(&k, &v, mask, None)
        } else {
            q.scaled_dot_product_attention(&k, &v, mask, None)
        };
        assert_close(case, &out, &t("out"), 5e-6);
        let grads = (&out * &t("g")).sum().backward();
        for (name, x) in [("grad_q", &q), ("grad_k", &k), ("grad_v", &v)] {
            assert_close(&format!("{case} {name}"), grads.get(x).unwrap(), &t(name), 5e-6);
        }
    }
}

// ---- Generation with a key/value cache, against running the whole window ----

const SMALL: GptConfig = GptConfig { block_size: 10, vocab_size: 13, n_layer: 2, n_head: 2, n_embd: 16 };

/// The last position's logits `[B, vocab]` of running `idx` whole: the
/// reference for the cached path.
fn last_logits<D: Device>(model: &Gpt<D>, idx: &Tensor<D, i64>) -> Vec<Vec<f32>> {
    let t = idx.dims()[1];
    let logits = no_grad(|| model.logits(idx).unwrap());
    logits.narrow(1, t - 1, 1).reshape([idx.dims()[0], SMALL.vocab_size]).to_vec2()
}

fn assert_rows_close(what: &str, got: &[Vec<f32>], want: &[Vec<f32>]) {
    for (g, w) in got.iter().zip(want) {
        for (a, b) in g.iter().zip(w) {
            // f32 sums over 16 to 64 terms, in another order.
            assert!((a - b).abs() <= 2e-5 * (1.0 + b.abs()), "{what}: {a} against {b}");
        }
    }
}

device_proptests! {
    cases = 12;

    /// The prompt fed in chunks of any size (one token, several after
    /// earlier ones, the whole prompt at once): after each chunk the
    /// cached logits are those of the whole prefix run again; a chunk
    /// past `block_size` fails, naming the sizes.
    fn cached_logits_match_the_whole_prefix<D>(
        seed: u64, batch in 1usize..3, chunks in proptest::collection::vec(1usize..4, 1..5),
    ) {
        devtensor::manual_seed(seed);
        let model = Gpt::<D>::new(SMALL).unwrap();
        let len: usize = chunks.iter().sum::<usize>().min(SMALL.block_size);
        let ids = (0..batch * len).map(|i| ((seed >> (i % 60)).wrapping_add(7 * i as u64) % 13) as i64).collect();
        let idx = Tensor::<D, i64>::from_vec(ids, [batch, len]);
        let mut cache = KvCache::new(&model);
        let mut at = 0;
        for &size in &chunks {
            let size = size.min(len - at);
            if size == 0 {
                break;
            }
            let chunk = idx.narrow(1, at, size);
            let cached = no_grad(|| model.next_logits(&chunk, &mut cache).unwrap()).to_vec2();
            at += size;
            prop_assert_eq!(cache.len(), at);
            assert_rows_close(&format!("after {at} tokens"), &cached, &last_logits(&model, &idx.narrow(1, 0, at)));
        }
        if at == SMALL.block_size {
            let err = model.next_logits(&idx.narrow(1, 0, 1), &mut cache).unwrap_err();
            prop_assert!(matches!(err, Error::Argument { .. }), "{:?}", err);
            prop_assert!(err.to_string().contains("1 new tokens after 10 cached ones: expected 1 to 10 in all (block_size)"), "{}", err);
        }
    }

    /// Generated tokens, greedy and sampled from the top 3, past the end of
    /// the window (where the cache restarts from the last half): each is
    /// the most likely, or among the 3 most likely, next token of the
    /// window run whole.
    fn generated_tokens_follow_the_whole_window<D>(seed: u64, batch in 1usize..3, prompt in 1usize..8, new in 1usize..14) {
        devtensor::manual_seed(seed);
        let model = Gpt::<D>::new(SMALL).unwrap();
        let ids = (0..batch * prompt).map(|i| (seed.rotate_left(i as u32) % 13) as i64).collect();
        let idx = Tensor::<D, i64>::from_vec(ids, [batch, prompt]);
        for bad in [Sampling { temperature: -1.0, top_k: None }, Sampling { temperature: 0.8, top_k: Some(0) }] {
            let err = model.generate(&idx, new, bad).unwrap_err();
            prop_assert!(err.to_string().contains("expected a finite temperature of 0 or more"), "{}", err);
        }
        for (sampling, k) in [(Sampling::GREEDY, 1), (Sampling { temperature: 0.8, top_k: Some(3) }, 3)] {
            let out = model.generate(&idx, new, sampling).unwrap();
            prop_assert_eq!(out.dims(), &[batch, prompt + new]);
            let rows = out.to_vec2();
            prop_assert_eq!(&out.narrow(1, 0, prompt).to_vec2(), &idx.to_vec2());
            // The window `generate` keeps: restarted from the last half
            // whenever the next token would not fit.
            let mut start = 0;
            for n in prompt..prompt + new {
                if n - start > SMALL.block_size {
                    start = n - SMALL.block_size / 2;
                }
                let reference = last_logits(&model, &out.narrow(1, start, n - start));
                for (row, logits) in rows.iter().zip(&reference) {
                    let mut sorted = logits.clone();
                    sorted.sort_by(|a, b| b.total_cmp(a));
                    let picked = logits[row[n] as usize];
                    prop_assert!(picked >= sorted[k - 1] - 2e-5, "token {n}: logit {picked}, the top {k} {:?}", &sorted[..k]);
                }
            }
        }
    }
}

device_proptests! {
    cases = 6;

    /// The GPT converted to `bf16` as a whole (`model.to_dtype`, PyTorch's
    /// `model.to(torch.bfloat16)`) computes the `f32` model's logits within
    /// `bf16`'s precision, with its cache as without, and generates.
    fn the_gpt_in_bf16_follows_the_f32_model<D>(seed: u64, batch in 1usize..3, len in 1usize..=10) {
        devtensor::manual_seed(seed);
        let model = Gpt::<D>::new(SMALL).unwrap();
        let half = model.to_dtype::<bf16>();
        let ids = (0..batch * len).map(|i| (seed.rotate_left(3 * i as u32) % 13) as i64).collect();
        let idx = Tensor::<D, i64>::from_vec(ids, [batch, len]);
        let want = last_logits(&model, &idx);
        let whole = no_grad(|| half.logits(&idx).unwrap()).narrow(1, len - 1, 1).reshape([batch, SMALL.vocab_size]);
        let cached = no_grad(|| half.next_logits(&idx, &mut KvCache::new(&half)).unwrap());
        for (what, got) in [("logits", whole), ("cached logits", cached)] {
            for (g, w) in got.to_dtype::<f32>().to_vec2().iter().zip(&want) {
                // Each op's output rounded to bf16 (8 bits): a few of its
                // ulps of the row's largest logit, over two blocks.
                let scale = w.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                for (a, b) in g.iter().zip(w) {
                    prop_assert!((a - b).abs() <= 0.05 * scale, "{}: {} against {} (largest {})", what, a, b, scale);
                }
            }
        }
        let out = half.generate(&idx, 3, Sampling::GREEDY).unwrap();
        prop_assert_eq!(out.dims(), &[batch, len + 3]);
    }
}

device_tests! {
    gpt_trains_as_pytorch => gpt_trains_as_pytorch,
    multihead_attention_matches_pytorch => multihead_attention_matches_pytorch,
    scaled_dot_product_attention_matches_pytorch => scaled_dot_product_attention_matches_pytorch,
    grouped_query_attention_matches_pytorch => grouped_query_attention_matches_pytorch,
}
