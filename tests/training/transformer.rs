//! The transformer layers, their stacks and `nn.Transformer` against
//! PyTorch (`tests/fixtures/pytorch/make_fixtures.py transformer`,
//! float64): each case's `state_dict` loads by PyTorch's names, and the
//! output and the gradients of every input and parameter match, with
//! causal and key padding masks, post- and pre-norm, ReLU and GELU, with
//! and without biases. Then the stacks' copies, the initialisation, dropout
//! and the errors.

use crate::fixture::Case;
use devtensor::io::Checkpoint;
use devtensor::nn::{
    DecoderInput, EncoderInput, LayerNorm, Module, Sequential, ToDtype, Transformer, TransformerActivation,
    TransformerConfig, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
    TransformerInput,
};
use devtensor::ops::attention::AttentionMask;
use devtensor::{Cpu, Device, Tensor, bf16};

/// The case's names that are not its module's `state_dict`.
const NOT_STATE: [&str; 7] = ["src", "tgt", "memory", "first_padding", "memory_padding", "output", "doutput"];

fn case<'a, D: Device>(file: &'a Checkpoint<Cpu, f64>, name: &'a str) -> Case<'a, D> {
    Case::new(file, name, |n| !n.starts_with("grad.") && !NOT_STATE.contains(&n))
}

/// The settings of the fixture's cases: width 8, 2 heads, a feed-forward
/// width of 16, no dropout; `pre_norm` cases are also GELU, batch-first
/// and without biases.
fn config(pre_norm: bool, layer_norm_eps: f64) -> TransformerConfig {
    TransformerConfig {
        dim_feedforward: 16,
        dropout: 0.0,
        activation: if pre_norm { TransformerActivation::GELU } else { TransformerActivation::RELU },
        layer_norm_eps,
        batch_first: pre_norm,
        norm_first: pre_norm,
        bias: !pre_norm,
    }
}

fn padding<D: Device>(case: &Case<'_, D>, key: &str) -> Option<Tensor<D, u8>> {
    case.find_int(key).map(|t| t.to_dtype::<u8>())
}

fn transformers_match_pytorch<D: Device>() {
    let file = crate::fixture::load("transformer.safetensors");
    // (case, pre-norm, eps, causal): the settings of make_transformer's cases.
    for (name, pre_norm, eps, causal) in [("enc", false, 1e-5, false), ("enc_norm_first", true, 1e-6, true)] {
        let case = case::<D>(&file, name);
        let mut layer = TransformerEncoderLayer::<D, f64>::with_config(8, 2, config(pre_norm, eps));
        case.load(&mut layer);
        let src = case.get("src").requires_grad();
        let pad = padding(&case, "first_padding");
        let mut input = EncoderInput::new(&src);
        if causal {
            input = input.mask(AttentionMask::Causal);
        }
        if let Some(pad) = &pad {
            input = input.key_padding_mask(pad);
        }
        case.check(&layer, &[("src", &src)], &[("output", layer.forward(input))]);
    }
    for (name, pre_norm, causal) in [("dec", false, true), ("dec_norm_first", true, false)] {
        let case = case::<D>(&file, name);
        let mut layer = TransformerDecoderLayer::<D, f64>::with_config(8, 2, config(pre_norm, 1e-5));
        case.load(&mut layer);
        let (tgt, memory) = (case.get("tgt").requires_grad(), case.get("memory").requires_grad());
        let (tgt_pad, memory_pad) = (padding(&case, "first_padding"), padding(&case, "memory_padding"));
        let mut input = DecoderInput::new(&tgt, &memory);
        if causal {
            input = input.tgt_mask(AttentionMask::Causal);
        }
        if let Some(pad) = &tgt_pad {
            input = input.tgt_key_padding_mask(pad);
        }
        if let Some(pad) = &memory_pad {
            input = input.memory_key_padding_mask(pad);
        }
        case.check(&layer, &[("tgt", &tgt), ("memory", &memory)], &[("output", layer.forward(input))]);
    }
    // nn.Transformer(8, 2, 2, 2, 16, dropout=0.0): the source's padding is
    // also the memory's, and the target is causal and padded.
    let case = case::<D>(&file, "transformer");
    let mut model = Transformer::<D, f64>::with_config(8, 2, 2, 2, config(false, 1e-5));
    case.load(&mut model);
    let (src, tgt) = (case.get("src").requires_grad(), case.get("tgt").requires_grad());
    let (tgt_pad, src_pad) = (padding(&case, "first_padding").unwrap(), padding(&case, "memory_padding").unwrap());
    let input = TransformerInput::new(&src, &tgt)
        .tgt_mask(AttentionMask::Causal)
        .src_key_padding_mask(&src_pad)
        .tgt_key_padding_mask(&tgt_pad)
        .memory_key_padding_mask(&src_pad);
    case.check(&model, &[("src", &src), ("tgt", &tgt)], &[("output", model.forward(input))]);
}

fn transformer_stacks_copy_initialise_and_check<D: Device>() {
    // The stacks deep-copy their layer, as PyTorch's: equal values, separate parameters.
    let layer = TransformerEncoderLayer::<D>::with_config(
        8,
        2,
        TransformerConfig { dim_feedforward: 16, ..Default::default() },
    );
    let mut encoder = TransformerEncoder::new(&layer, 2, Some(LayerNorm::new(&[8])));
    assert_eq!(encoder.parameters().len(), 2 * layer.parameters().len() + 2);
    assert_eq!(encoder.layers[0].linear1.weight.to_vec(), layer.linear1.weight.to_vec());
    assert_eq!(encoder.layers[1].self_attn.in_proj_weight.to_vec(), layer.self_attn.in_proj_weight.to_vec());
    assert!(encoder.layers[1].linear1.weight.tracks_grad());
    let names: Vec<String> = encoder.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "layers.0.self_attn.in_proj_weight");
    assert_eq!(names.last().unwrap(), "norm.bias");
    // Training one copy leaves the other alone: a step on layer 0's weights only.
    let x = Tensor::<D>::randn([5, 3, 8]);
    let grads = encoder.layers[0].forward(&x).square().sum().backward();
    let w = &encoder.layers[0].linear1.weight;
    let stepped = (w - &(grads.get(w).unwrap() * 0.1)).detach().requires_grad();
    encoder.layers[0].linear1.weight = stepped;
    assert_ne!(encoder.layers[0].linear1.weight.to_vec(), encoder.layers[1].linear1.weight.to_vec());
    assert_eq!(encoder.layers[1].linear1.weight.to_vec(), layer.linear1.weight.to_vec());

    let config = TransformerConfig { dim_feedforward: 16, ..Default::default() };
    // PyTorch's defaults, and its spelling of the activation.
    assert_eq!(config.activation, TransformerActivation::RELU);
    assert_eq!(format!("{:?}", TransformerActivation::GELU), "\"gelu\"");
    assert_eq!((config.layer_norm_eps, config.batch_first, config.norm_first), (1e-5, false, false));

    // nn.Transformer re-initialises every matrix Xavier-uniform: bound sqrt(6 / (16 + 8)) = 0.5.
    let model = Transformer::<D>::with_config(8, 2, 1, 1, config);
    let w = model.decoder.layers[0].linear1.weight.to_vec();
    assert!(w.iter().all(|v| v.abs() <= 0.5) && w.iter().any(|v| v.abs() > 0.3), "{w:?}");
    assert_ne!(model.encoder.layers[0].linear1.weight.to_vec(), model.decoder.layers[0].linear1.weight.to_vec());
    assert_eq!(model.encoder.norm.as_ref().unwrap().weight.to_vec(), vec![1.0; 8]);

    // Dropout acts in training only; eval is deterministic.
    let mut layer = TransformerEncoderLayer::<D>::with_config(8, 2, TransformerConfig { dropout: 0.5, ..config });
    let y = layer.forward(&x);
    assert_ne!(y.to_vec(), layer.forward(&x).to_vec());
    layer.eval();
    let y = layer.forward(&x);
    assert_eq!(y.to_vec(), layer.forward(&x).to_vec());
    // In a Sequential, through `Forward`, and moved and converted with the model.
    let seq = Sequential::new((layer.clone(), layer.clone()));
    assert_eq!(seq.forward(&x).dims(), &[5, 3, 8]);
    let moved = layer.to::<Cpu>();
    // Another device's kernels sum in another order: equal to rounding, not bit for bit.
    for (g, w) in moved.forward(&x.to::<Cpu>()).to_vec().iter().zip(y.to_vec()) {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "moved encoder layer: {g} against {w}");
    }
    let half = layer.to_dtype::<bf16>();
    let y16 = half.forward(&x.to_dtype::<bf16>()).to_dtype::<f32>().to_vec();
    for (g, w) in y16.iter().zip(y.to_vec()) {
        assert!((g - w).abs() <= 5e-2 * (1.0 + w.abs()), "bf16 encoder layer: {g} against {w}");
    }

    // A decoder stack in pre-norm with a memory mask: shapes, and the mask acts.
    let decoder_layer = TransformerDecoderLayer::<D>::with_config(8, 2, TransformerConfig { dropout: 0.0, ..config });
    let decoder = TransformerDecoder::new(&decoder_layer, 2, None);
    let (tgt, memory) = (Tensor::<D>::randn([4, 3, 8]), Tensor::<D>::randn([6, 3, 8]));
    let open = decoder.forward(DecoderInput::new(&tgt, &memory));
    let hide = Tensor::<D, u8>::from_vec([[0u8, 0, 0, 1, 1, 1]; 4].concat(), [4, 6]);
    let masked = decoder.forward(DecoderInput::new(&tgt, &memory).memory_mask(AttentionMask::Hide(&hide)));
    assert_eq!(masked.dims(), &[4, 3, 8]);
    assert_ne!(open.to_vec(), masked.to_vec());
    // Hiding memory positions 3..6 is attending to memory 0..3 only.
    let short = memory.narrow(0, 0, 3).contiguous();
    let cut = decoder.forward(DecoderInput::new(&tgt, &short));
    for (a, b) in masked.to_vec().iter().zip(cut.to_vec()) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "memory mask: {a} against {b}");
    }

    // Errors name the operation and the shapes.
    let err = TransformerEncoderLayer::<D>::try_new(10, 3).unwrap_err().to_string();
    assert!(err.contains("TransformerEncoderLayer") && err.contains("divisible by nhead 3"), "{err}");
    let bad = TransformerConfig { dropout: 1.5, ..config };
    assert!(TransformerDecoderLayer::<D>::try_with_config(8, 2, bad).unwrap_err().to_string().contains("dropout"));
    let err = layer.try_forward(&Tensor::<D>::randn([5, 3, 6])).unwrap_err().to_string();
    assert!(err.contains("MultiheadAttention") && err.contains("[5, 3, 6]"), "{err}");
}

device_tests! {
    transformers_match_pytorchs => transformers_match_pytorch,
    transformer_stacks_copy_initialise_and_checks => transformer_stacks_copy_initialise_and_check,
}
