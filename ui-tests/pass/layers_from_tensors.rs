// Every layer with parameters, built from the user's own tensors the
// documented way (`from_weights`, `from_pretrained`), read through its
// public fields, and run once. The layers are `#[non_exhaustive]`: a field
// added to one of them must not break this program (issue 35).
use devtensor::nn::{
    BatchNorm2d, Conv1d, Conv1dConfig, Conv2d, Conv2dConfig, Conv3d, Conv3dConfig, ConvTranspose1d,
    ConvTranspose1dConfig, ConvTranspose2d, ConvTranspose2dConfig, Embedding, GroupNorm, GruCell, LayerNorm, Linear,
    Lstm, LstmCell, MhaInput, Module, MultiheadAttention, RmsNorm, RnnCell,
};
use devtensor::static_shapes::{SConv2d, SLinear};
use devtensor::{Cpu, Tensor};

fn main() {
    let t = |shape: &[usize]| Tensor::<Cpu>::randn(shape);

    let linear = Linear::from_weights(t(&[4, 3]), Some(t(&[4])));
    assert_eq!(linear.forward(&t(&[2, 3])).dims(), &[2, 4]);
    assert_eq!(linear.weight.dims(), &[4, 3]);

    let embedding = Embedding::from_weights(t(&[10, 4]), Some(0));
    let frozen = Embedding::from_pretrained(t(&[10, 4]), None);
    let tokens = Tensor::<Cpu, i64>::from_vec(vec![1, 0, 9], [3]);
    assert_eq!(embedding.forward(&tokens).dims(), &[3, 4]);
    assert!(!frozen.weight.tracks_grad());

    // Tied weights, as nanoGPT's: one leaf, two layers, one parameter.
    let head = Linear::from_weights(embedding.weight.clone(), None);
    assert_eq!(head.forward(&t(&[2, 4])).dims(), &[2, 10]);

    let conv = Conv2d::from_weights(t(&[6, 2, 3, 3]), Some(t(&[6])), Conv2dConfig { groups: 2, ..Default::default() });
    assert_eq!(conv.forward(&t(&[1, 4, 5, 5])).dims(), &[1, 6, 3, 3]);
    let conv1d = Conv1d::from_weights(t(&[5, 3, 3]), None, Conv1dConfig { padding: 1, ..Default::default() });
    assert_eq!(conv1d.forward(&t(&[2, 3, 7])).dims(), &[2, 5, 7]);
    let up_config = ConvTranspose2dConfig { stride: [2, 2], ..Default::default() };
    let up = ConvTranspose2d::from_weights(t(&[4, 3, 2, 2]), Some(t(&[3])), up_config);
    assert_eq!(up.forward(&t(&[1, 4, 3, 3])).dims(), &[1, 3, 6, 6]);
    let conv3d =
        Conv3d::from_weights(t(&[4, 1, 1, 3, 3]), Some(t(&[4])), Conv3dConfig { groups: 2, ..Default::default() });
    assert_eq!(conv3d.forward(&t(&[1, 2, 3, 5, 5])).dims(), &[1, 4, 3, 3, 3]);
    assert_eq!((conv3d.window.stride, conv3d.groups), ([1, 1, 1], 2));
    let up1d_config = ConvTranspose1dConfig { stride: 2, ..Default::default() };
    let up1d = ConvTranspose1d::from_weights(t(&[4, 3, 2]), None, up1d_config);
    assert_eq!(up1d.forward(&t(&[1, 4, 5])).dims(), &[1, 3, 10]);

    let mut bn = BatchNorm2d::from_weights(t(&[3]), t(&[3]), t(&[3]), Tensor::ones([3])).eps(1e-3).momentum(0.2);
    bn.eval();
    assert_eq!(bn.forward(&t(&[2, 3, 4, 4])).dims(), &[2, 3, 4, 4]);
    let group_norm = GroupNorm::from_weights(2, t(&[4]), t(&[4])).eps(1e-6);
    assert_eq!(group_norm.forward(&t(&[2, 4, 3])).dims(), &[2, 4, 3]);
    let layer_norm = LayerNorm::from_weights(t(&[8]), t(&[8]));
    assert_eq!(layer_norm.forward(&t(&[2, 8])).dims(), &[2, 8]);
    let rms_norm = RmsNorm::from_weights(t(&[8])).eps(1e-6);
    assert_eq!(rms_norm.forward(&t(&[2, 8])).dims(), &[2, 8]);

    let out_proj = Linear::from_weights(t(&[8, 8]), Some(t(&[8])));
    let mha = MultiheadAttention::from_weights(2, t(&[24, 8]), Some(t(&[24])), out_proj).batch_first(true);
    let x = t(&[2, 5, 8]);
    let (y, weights) = mha.forward(MhaInput::self_attention(&x));
    assert_eq!((y.dims(), weights.unwrap().dims()), (&[2, 5, 8][..], &[2, 5, 5][..]));
    assert_eq!(mha.parameters().len(), 4);

    // The recurrent cells from their weights, and a layer whose cell is
    // replaced by one (PyTorch's `lstm.weight_ih_l0 = ...`).
    let rnn_cell = RnnCell::from_weights(t(&[4, 3]), t(&[4, 4]), None, None);
    assert_eq!(rnn_cell.forward(&t(&[2, 3])).dims(), &[2, 4]);
    let gru_cell = GruCell::from_weights(t(&[12, 3]), t(&[12, 4]), Some(t(&[12])), Some(t(&[12])));
    assert_eq!(gru_cell.bias_hh.as_ref().unwrap().dims(), &[12]);
    let mut lstm = Lstm::<Cpu>::new(3, 4);
    lstm.cells[0] = LstmCell::from_weights(t(&[16, 3]), t(&[16, 4]), Some(t(&[16])), Some(t(&[16])));
    let (output, (h_n, _)) = lstm.forward(&t(&[5, 2, 3]));
    assert_eq!((output.dims(), h_n.dims()), (&[5, 2, 4][..], &[1, 2, 4][..]));
    assert_eq!(lstm.parameters()[0].0, "weight_ih_l0");

    let static_linear = SLinear::<Cpu, 3, 4>::from_weights(t(&[4, 3]), None);
    let static_conv = SConv2d::<Cpu, 2, 6, 3>::from_weights(t(&[6, 2, 3, 3]), Some(t(&[6])));
    assert_eq!(static_linear.inner.weight.dims(), &[4, 3]);
    assert_eq!(static_conv.inner.weight.dims(), &[6, 2, 3, 3]);
}
