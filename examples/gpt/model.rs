//! nanoGPT's model (Karpathy's `model.py`), with its parameter names, so
//! that a PyTorch `state_dict` loads by name: token and position
//! embeddings, pre-LayerNorm blocks of causal multi-head self-attention
//! and a GELU MLP, a final LayerNorm, and an output layer tied to the token
//! embedding. Shared by `examples/train_gpt.rs`, the parity test
//! (`tests/training/gpt.rs`) and `benches/peers`:
//! `#[path = "gpt/model.rs"] mod model;`.

use devtensor::nn::{Embedding, LayerNorm, Linear, init};
use devtensor::ops::attention::AttentionMask;
use devtensor::optim::{AdamConfig, AdamW, ParamGroup};
use devtensor::{Device, Result, Tensor};

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
pub struct CausalSelfAttention<D: Device> {
    pub c_attn: Linear<D>,
    pub c_proj: Linear<D>,
    n_head: usize,
}
devtensor::module!(CausalSelfAttention { c_attn, c_proj; n_head });

impl<D: Device> CausalSelfAttention<D> {
    fn forward(&self, x: &Tensor<D>) -> Result<Tensor<D>> {
        let (b, t, c) = (x.dims()[0], x.dims()[1], x.dims()[2]);
        let qkv = self.c_attn.try_forward(x)?.try_split(c, 2)?;
        // [B, T, C] -> [B, heads, T, C / heads]
        let heads = |y: &Tensor<D>| y.try_reshape([b, t, self.n_head, c / self.n_head])?.try_transpose(1, 2);
        let (q, k, v) = (heads(&qkv[0])?, heads(&qkv[1])?, heads(&qkv[2])?);
        let y = q.try_scaled_dot_product_attention(&k, &v, AttentionMask::Causal, None)?;
        self.c_proj.try_forward(&y.try_transpose(1, 2)?.try_reshape([b, t, c])?)
    }
}

/// The block's MLP: widen four times, GELU (erf), project back.
pub struct Mlp<D: Device> {
    pub c_fc: Linear<D>,
    pub c_proj: Linear<D>,
}
devtensor::module!(Mlp { c_fc, c_proj });

/// One pre-LayerNorm transformer block: `x + attn(ln_1(x))`, then
/// `x + mlp(ln_2(x))`.
pub struct Block<D: Device> {
    pub ln_1: LayerNorm<D>,
    pub attn: CausalSelfAttention<D>,
    pub ln_2: LayerNorm<D>,
    pub mlp: Mlp<D>,
}
devtensor::module!(Block { ln_1, attn, ln_2, mlp });

impl<D: Device> Block<D> {
    fn forward(&self, x: &Tensor<D>) -> Result<Tensor<D>> {
        let x = x.try_add(&self.attn.forward(&self.ln_1.try_forward(x)?)?)?;
        let h = self.mlp.c_fc.try_forward(&self.ln_2.try_forward(&x)?)?.try_gelu()?;
        x.try_add(&self.mlp.c_proj.try_forward(&h)?)
    }
}

/// nanoGPT's `transformer` dictionary.
pub struct Transformer<D: Device> {
    pub wte: Embedding<D>,
    pub wpe: Embedding<D>,
    pub h: Vec<Block<D>>,
    pub ln_f: LayerNorm<D>,
}
devtensor::module!(Transformer { wte, wpe, h, ln_f });

/// The whole model; `lm_head.weight` is `transformer.wte.weight`, one
/// tensor under two names, as in nanoGPT.
pub struct Gpt<D: Device> {
    pub transformer: Transformer<D>,
    pub lm_head: Linear<D>,
    pub config: GptConfig,
}
devtensor::module!(Gpt { transformer, lm_head; config });

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

    /// The next-token logits `[B, T, vocab_size]` of token ids `[B, T]`.
    pub fn logits(&self, idx: &Tensor<D, i64>) -> Result<Tensor<D>> {
        let t = idx.dims()[1];
        let positions = Tensor::<D, i64>::try_arange(0, t as i64)?;
        let mut x = self.transformer.wte.try_forward(idx)?.try_add(&self.transformer.wpe.try_forward(&positions)?)?;
        for block in &self.transformer.h {
            x = block.forward(&x)?;
        }
        self.lm_head.try_forward(&self.transformer.ln_f.try_forward(&x)?)
    }

    /// The mean cross-entropy of the logits of `idx` against `targets`
    /// (both `[B, T]`).
    pub fn loss(&self, idx: &Tensor<D, i64>, targets: &Tensor<D, i64>) -> Result<Tensor<D>> {
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
    pub fn optimizer(&self, lr: f64, weight_decay: f64, betas: (f64, f64)) -> AdamW<D> {
        let decay = AdamConfig { lr, betas, weight_decay, ..AdamConfig::adamw() };
        let no_decay = ParamGroup::new("no_decay", AdamConfig { weight_decay: 0.0, ..decay }, |_, dims| dims.len() < 2);
        AdamW::new(self, decay).with_group(no_decay)
    }
}
