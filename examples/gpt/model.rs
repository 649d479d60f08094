//! nanoGPT's model (Karpathy's `model.py`), with its parameter names, so
//! that a PyTorch `state_dict` loads by name: token and position
//! embeddings, pre-LayerNorm blocks of causal multi-head self-attention
//! and a GELU MLP, a final LayerNorm, and an output layer tied to the token
//! embedding; and generation with a key/value cache ([`Gpt::generate`]).
//! Shared by `examples/train_gpt.rs`, the parity test
//! (`tests/training/gpt.rs`) and `benches/peers`:
//! `#[path = "gpt/model.rs"] mod model;`.

use devtensor::nn::{Embedding, LayerNorm, Linear, init};
use devtensor::ops::attention::AttentionMask;
use devtensor::optim::{AdamConfig, AdamW, ParamGroup};
use devtensor::{Device, Error, FloatElement, Result, Tensor, no_grad};

/// The model's sizes (nanoGPT's `GPTConfig`, without dropout and with
/// biases).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GptConfig {
    /// Longest context, the position table's size.
    pub block_size: usize,
    /// Distinct tokens.
    pub vocab_size: usize,
    /// Blocks.
    pub n_layer: usize,
    /// Attention heads per block.
    pub n_head: usize,
    /// Width of the residual stream.
    pub n_embd: usize,
}

/// Causal self-attention: one projection to queries, keys and values
/// (`c_attn`), fused attention over the heads, and the output projection.
#[derive(Clone)]
pub struct CausalSelfAttention<D: Device, E: FloatElement = f32> {
    pub c_attn: Linear<D, E>,
    pub c_proj: Linear<D, E>,
    n_head: usize,
}
devtensor::module!(CausalSelfAttention<E> { c_attn, c_proj; n_head });

/// A block's keys and values so far (see [`KvCache`]).
type Past<D, E> = Option<(Tensor<D, E>, Tensor<D, E>)>;

impl<D: Device, E: FloatElement> CausalSelfAttention<D, E> {
    fn forward(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.forward_cached(x, &mut None)
    }

    /// The attention of `t` new tokens (`x`, `[B, t, C]`) that follow the
    /// ones whose keys and values `past` holds (`[B, heads, T, C / heads]`
    /// each; `None` for none), which gains theirs. Each new token attends to
    /// every earlier one and to itself.
    fn forward_cached(&self, x: &Tensor<D, E>, past: &mut Past<D, E>) -> Result<Tensor<D, E>> {
        let (b, t, c) = (x.dims()[0], x.dims()[1], x.dims()[2]);
        let qkv = self.c_attn.try_forward(x)?.try_split(c, 2)?;
        // [B, T, C] -> [B, heads, T, C / heads]
        let heads = |y: &Tensor<D, E>| y.try_reshape([b, t, self.n_head, c / self.n_head])?.try_transpose(1, 2);
        let (q, k, v) = (heads(&qkv[0])?, heads(&qkv[1])?, heads(&qkv[2])?);
        let (k, v, seen) = match past.take() {
            Some((pk, pv)) => {
                let seen = pk.dims()[2];
                (Tensor::try_cat(&[&pk, &k], 2)?, Tensor::try_cat(&[&pv, &v], 2)?, seen)
            }
            // Views of the projection, as they are: the first `cat` copies.
            None => (k, v, 0),
        };
        // PyTorch's `is_causal` aligns the triangle to the top left, which
        // is right only without earlier tokens; one new token sees all.
        let keep;
        let mask = match (seen, t) {
            (0, _) => AttentionMask::Causal,
            (_, 1) => AttentionMask::None,
            _ => {
                let rows = (0..t).flat_map(|i| (0..seen + t).map(move |j| u8::from(j <= seen + i))).collect();
                keep = Tensor::<D, u8>::try_from_vec(rows, [t, seen + t])?;
                AttentionMask::Keep(&keep)
            }
        };
        let y = q.try_scaled_dot_product_attention(&k, &v, mask, None)?;
        *past = Some((k, v));
        self.c_proj.try_forward(&y.try_transpose(1, 2)?.try_reshape([b, t, c])?)
    }
}

/// The block's MLP: widen four times, GELU (erf), project back.
#[derive(Clone)]
pub struct Mlp<D: Device, E: FloatElement = f32> {
    pub c_fc: Linear<D, E>,
    pub c_proj: Linear<D, E>,
}
devtensor::module!(Mlp<E> { c_fc, c_proj });

/// One pre-LayerNorm transformer block: `x + attn(ln_1(x))`, then
/// `x + mlp(ln_2(x))`.
#[derive(Clone)]
pub struct Block<D: Device, E: FloatElement = f32> {
    pub ln_1: LayerNorm<D, E>,
    pub attn: CausalSelfAttention<D, E>,
    pub ln_2: LayerNorm<D, E>,
    pub mlp: Mlp<D, E>,
}
devtensor::module!(Block<E> { ln_1, attn, ln_2, mlp });

impl<D: Device, E: FloatElement> Block<D, E> {
    fn forward(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.forward_cached(x, &mut None)
    }

    /// [`forward`](Self::forward) of new tokens, with the block's cache
    /// (see [`CausalSelfAttention::forward_cached`]).
    fn forward_cached(&self, x: &Tensor<D, E>, past: &mut Past<D, E>) -> Result<Tensor<D, E>> {
        let x = x.try_add(&self.attn.forward_cached(&self.ln_1.try_forward(x)?, past)?)?;
        let h = self.mlp.c_fc.try_forward(&self.ln_2.try_forward(&x)?)?.try_gelu()?;
        x.try_add(&self.mlp.c_proj.try_forward(&h)?)
    }
}

/// The keys and values every block computed for the tokens seen so far, so
/// that each new token runs through the model alone: O(context) work per
/// generated token, where running the whole window again is O(context²).
pub struct KvCache<D: Device, E: FloatElement = f32> {
    /// Per block: keys and values, `[B, heads, T, C / heads]` each.
    layers: Vec<Past<D, E>>,
}

impl<D: Device, E: FloatElement> KvCache<D, E> {
    /// An empty cache for `model`.
    pub fn new(model: &Gpt<D, E>) -> Self {
        KvCache { layers: (0..model.config.n_layer).map(|_| None).collect() }
    }

    /// The tokens it holds keys and values for.
    pub fn len(&self) -> usize {
        self.layers.first().and_then(Option::as_ref).map_or(0, |(k, _)| k.dims()[2])
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How [`Gpt::generate`] picks each token from the next-token logits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Divides the logits; 0 picks the most likely token (greedy).
    pub temperature: f32,
    /// Draws among the `k` most likely tokens only (nanoGPT's `top_k`);
    /// `None` among all.
    pub top_k: Option<usize>,
}

impl Sampling {
    /// The most likely token every time.
    pub const GREEDY: Sampling = Sampling { temperature: 0.0, top_k: None };
}

/// nanoGPT's `transformer` dictionary.
pub struct Transformer<D: Device, E: FloatElement = f32> {
    pub wte: Embedding<D, E>,
    pub wpe: Embedding<D, E>,
    pub h: Vec<Block<D, E>>,
    pub ln_f: LayerNorm<D, E>,
}
devtensor::module!(Transformer<E> { wte, wpe, h, ln_f });

/// The whole model; `lm_head.weight` is `transformer.wte.weight`, one
/// tensor under two names, as in nanoGPT. It is `f32` unless converted
/// (`model.to_dtype::<bf16>()`, with `devtensor::nn::ToDtype` in scope).
pub struct Gpt<D: Device, E: FloatElement = f32> {
    pub transformer: Transformer<D, E>,
    pub lm_head: Linear<D, E>,
    pub config: GptConfig,
    /// Whether training recomputes each block in the backward pass instead
    /// of keeping its activations ([`devtensor::autograd::checkpoint`],
    /// Hugging Face's `gradient_checkpointing_enable()`). Off by default.
    pub checkpoint_blocks: bool,
}
devtensor::module!(Gpt<E> { transformer, lm_head; config, checkpoint_blocks });

impl<D: Device> Gpt<D> {
    /// A model of `config`'s sizes with nanoGPT's initialisation: every
    /// linear and embedding weight normal with standard deviation 0.02
    /// (the residual projections `c_proj` 0.02 / sqrt(2 · n_layer)), biases
    /// zero, LayerNorms the identity.
    pub fn new(config: GptConfig) -> Result<Self> {
        let GptConfig { block_size, vocab_size, n_layer, n_head, n_embd } = config;
        let block = || -> Result<Block<D>> {
            Ok(Block {
                ln_1: LayerNorm::try_new(&[n_embd])?,
                attn: CausalSelfAttention {
                    c_attn: Linear::try_new(n_embd, 3 * n_embd)?,
                    c_proj: Linear::try_new(n_embd, n_embd)?,
                    n_head,
                },
                ln_2: LayerNorm::try_new(&[n_embd])?,
                mlp: Mlp { c_fc: Linear::try_new(n_embd, 4 * n_embd)?, c_proj: Linear::try_new(4 * n_embd, n_embd)? },
            })
        };
        let wte = Embedding::try_new(vocab_size, n_embd)?;
        // nanoGPT's weight tying: the embedding's leaf, given to the head,
        // is one parameter under two names.
        let lm_head = Linear::try_from_weights(wte.weight.clone(), None)?;
        let mut model = Gpt {
            transformer: Transformer {
                wte,
                wpe: Embedding::try_new(block_size, n_embd)?,
                h: (0..n_layer).map(|_| block()).collect::<Result<_>>()?,
                ln_f: LayerNorm::try_new(&[n_embd])?,
            },
            lm_head,
            config,
            checkpoint_blocks: false,
        };
        let residual_std = 0.02 / (2.0 * n_layer as f64).sqrt();
        init::apply(&mut model, |name, t| {
            let mut t = t.clone();
            if name.contains(".ln_") || name.starts_with("transformer.ln_f") {
                return Ok(None);
            } else if name.ends_with(".bias") {
                init::try_zeros_(&mut t)?;
            } else if name.ends_with("c_proj.weight") {
                init::try_normal_(&mut t, 0.0, residual_std)?;
            } else {
                init::try_normal_(&mut t, 0.0, 0.02)?;
            }
            Ok(Some(t))
        })?;
        Ok(model)
    }
}

impl<D: Device, E: FloatElement> Gpt<D, E> {
    /// The next-token logits `[B, T, vocab_size]` of token ids `[B, T]`.
    pub fn logits(&self, idx: &Tensor<D, i64>) -> Result<Tensor<D, E>> {
        let t = idx.dims()[1];
        let positions = Tensor::<D, i64>::try_arange(0, t as i64)?;
        let mut x = self.transformer.wte.try_forward(idx)?.try_add(&self.transformer.wpe.try_forward(&positions)?)?;
        for block in &self.transformer.h {
            x = match self.checkpoint_blocks {
                false => block.forward(&x)?,
                true => {
                    let block = block.clone();
                    devtensor::autograd::try_checkpoint(&[&x], move |xs| {
                        block.forward(&xs[0]).unwrap_or_else(|err| panic!("{err}"))
                    })?
                }
            };
        }
        self.lm_head.try_forward(&self.transformer.ln_f.try_forward(&x)?)
    }

    /// The next-token logits `[B, vocab_size]` after `idx` (`[B, T]`), the
    /// tokens that follow those `cache` holds; `cache` gains them. Where
    /// [`logits`](Self::logits) runs the whole sequence again, this runs
    /// only the new tokens. Fails when the cache and the new tokens
    /// together are longer than `block_size`.
    pub fn next_logits(&self, idx: &Tensor<D, i64>, cache: &mut KvCache<D, E>) -> Result<Tensor<D, E>> {
        let (b, t, seen) = (idx.dims()[0], idx.dims()[1], cache.len());
        if seen + t > self.config.block_size || t == 0 {
            return Err(Error::Argument {
                op: "Gpt::next_logits",
                device: D::name(),
                reason: format!(
                    "{t} new tokens after {seen} cached ones: expected 1 to {} in all (block_size)",
                    self.config.block_size
                ),
            });
        }
        let positions = Tensor::<D, i64>::try_arange(seen as i64, (seen + t) as i64)?;
        let mut x = self.transformer.wte.try_forward(idx)?.try_add(&self.transformer.wpe.try_forward(&positions)?)?;
        for (block, past) in self.transformer.h.iter().zip(&mut cache.layers) {
            x = block.forward_cached(&x, past)?;
        }
        // Only the last position's logits are needed: nanoGPT's
        // `x[:, [-1], :]` before the output layer.
        let last = x.try_narrow(1, t - 1, 1)?.try_reshape([b, self.config.n_embd])?;
        self.lm_head.try_forward(&self.transformer.ln_f.try_forward(&last)?)
    }

    /// `prompt` (`[B, T]` token ids) followed by `max_new_tokens` tokens,
    /// each drawn from the model's next-token distribution as `sampling`
    /// says, with a key/value cache: after the prompt, each token runs
    /// through the model alone. `[B, T + max_new_tokens]`.
    ///
    /// Fails on a negative or non-finite temperature and on `top_k` 0.
    /// When the context reaches `block_size`, the cache restarts from the
    /// last `block_size / 2` tokens (nanoGPT's loop instead crops the
    /// context to `block_size` and runs it whole for every token).
    pub fn generate(
        &self,
        prompt: &Tensor<D, i64>,
        max_new_tokens: usize,
        sampling: Sampling,
    ) -> Result<Tensor<D, i64>> {
        let Sampling { temperature, top_k } = sampling;
        if !(temperature >= 0.0 && temperature.is_finite()) || top_k == Some(0) {
            return Err(Error::Argument {
                op: "Gpt::generate",
                device: D::name(),
                reason: format!(
                    "temperature {temperature} and top_k {top_k:?}: expected a finite temperature of 0 or more and \
                     top_k of at least 1"
                ),
            });
        }
        no_grad(|| {
            let block = self.config.block_size;
            let mut tokens = prompt.clone();
            let mut cache = KvCache::new(self);
            let mut input =
                prompt.try_narrow(1, prompt.dims()[1].saturating_sub(block), prompt.dims()[1].min(block))?;
            for _ in 0..max_new_tokens {
                if cache.len() + input.dims()[1] > block {
                    let len = tokens.dims()[1];
                    let keep = (block / 2).max(1);
                    cache = KvCache::new(self);
                    input = tokens.try_narrow(1, len - keep, keep)?;
                }
                let next = self.pick(&self.next_logits(&input, &mut cache)?, sampling)?;
                tokens = Tensor::try_cat(&[&tokens, &next], 1)?;
                input = next;
            }
            Ok(tokens)
        })
    }

    /// One token per row of `logits` (`[B, vocab_size]`), as `[B, 1]`;
    /// `sampling` was checked by [`generate`](Self::generate).
    fn pick(&self, logits: &Tensor<D, E>, sampling: Sampling) -> Result<Tensor<D, i64>> {
        if sampling.temperature == 0.0 {
            return logits.try_argmax_keepdim(1);
        }
        let mut logits = logits.try_div_scalar(E::from_f64(sampling.temperature.into()))?;
        if let Some(k) = sampling.top_k.map(|k| k.min(self.config.vocab_size)) {
            // Everything below the k-th largest logit is cut.
            let (top, _) = logits.try_topk(k, 1, true)?;
            let kth = top.try_narrow(1, k - 1, 1)?;
            logits = logits.try_masked_fill(&logits.try_lt(&kth)?, E::from_f64(f64::NEG_INFINITY))?;
        }
        logits.try_softmax(1)?.try_multinomial(1, true)
    }

    /// The mean cross-entropy of the logits of `idx` against `targets`
    /// (both `[B, T]`).
    pub fn loss(&self, idx: &Tensor<D, i64>, targets: &Tensor<D, i64>) -> Result<Tensor<D, E>> {
        let logits = self.logits(idx)?;
        let rows = targets.elem_count();
        devtensor::nn::try_cross_entropy(
            &logits.try_reshape([rows, self.config.vocab_size])?,
            &targets.try_reshape([rows])?,
        )
    }

    /// nanoGPT's optimizer: AdamW with weight decay on the matrices
    /// (weights of rank 2 and up) and none on biases, LayerNorms and
    /// embeddings of rank 1.
    pub fn optimizer(&self, lr: f64, weight_decay: f64, betas: (f64, f64)) -> AdamW<D, E> {
        let decay = AdamConfig { lr, betas, weight_decay, ..AdamConfig::adamw() };
        let no_decay = ParamGroup::new("no_decay", AdamConfig { weight_decay: 0.0, ..decay }, |_, dims| dims.len() < 2);
        AdamW::new(self, decay).with_group(no_decay)
    }
}
