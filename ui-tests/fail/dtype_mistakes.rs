// The dtype mistakes PyTorch reports at run time ("expected scalar type
// Float but found BFloat16", "mat1 and mat2 must have the same dtype",
// "Input type (c10::BFloat16) and bias type (float) should be the same"),
// one per function, each a compile error here. The fixes are in
// ui-tests/pass/dtype_mistakes_fixed.rs.
use devtensor::nn::{cross_entropy, mse_loss, Conv2d, Linear, Reduction};
use devtensor::ops::attention::AttentionMask;
use devtensor::static_shapes::{Const, STensor};
use devtensor::{bf16, f16, Checkpoint, Cpu, Cuda, Device, FloatElement, Tensor};

/// Adding a bf16 activation to an f32 residual.
fn residual(x: &Tensor<Cpu>, h: &Tensor<Cpu, bf16>) -> Tensor<Cpu> {
    x + h
}

/// A product of an f32 and an f16 matrix.
fn product(a: &Tensor<Cpu>, b: &Tensor<Cpu, f16>) -> Tensor<Cpu> {
    a.matmul(b)
}

/// An f32 layer fed a bf16 batch.
fn layer_input(layer: &Linear<Cpu>, batch: &Tensor<Cpu, bf16>) -> Tensor<Cpu> {
    layer.forward(batch)
}

/// A convolution of a bf16 image with f32 weights.
fn conv_input(conv: &Conv2d<Cpu>, image: &Tensor<Cpu, bf16>) -> Tensor<Cpu> {
    conv.forward(image)
}

/// A loss between a bf16 prediction and an f32 target.
fn loss(pred: &Tensor<Cpu, bf16>, target: &Tensor<Cpu>) -> Tensor<Cpu, bf16> {
    mse_loss(pred, target, Reduction::Mean)
}

/// Class labels kept as floats.
fn labels_as_floats(logits: &Tensor<Cpu>, labels: &Tensor<Cpu>) -> Tensor<Cpu> {
    cross_entropy(logits, labels)
}

/// Keys in f16 for bf16 queries.
fn attention(q: &Tensor<Cpu, bf16>, k: &Tensor<Cpu, f16>, v: &Tensor<Cpu, bf16>) -> Tensor<Cpu, bf16> {
    q.scaled_dot_product_attention(k, v, AttentionMask::Causal, None)
}

/// Accumulating bf16 gradients into an f32 buffer in place.
fn accumulate(total: &mut Tensor<Cpu>, grad: &Tensor<Cpu, bf16>) {
    *total += grad;
}

/// A bf16 checkpoint loaded into an f32 model without converting it.
fn checkpoint(model: &mut Linear<Cpu>, path: &str) {
    Checkpoint::<Cpu, bf16>::load(path).load_into(model);
}

/// Static shapes: an f32 batch plus a bf16 bias, and an f32 batch times
/// bf16 weights.
fn static_bias(x: &STensor<Cpu, (usize, Const<10>)>, bias: &STensor<Cpu, (Const<10>,), bf16>) -> STensor<Cpu, (usize, Const<10>)> {
    x + bias
}
fn static_product(x: &STensor<Cpu, (usize, Const<4>)>, w: &STensor<Cpu, (Const<4>, Const<10>), bf16>) -> STensor<Cpu, (usize, Const<10>)> {
    x.matmul(w)
}

/// A model generic over its dtype with one layer left in f32: it could
/// not convert with `.to_dtype::<bf16>()`.
struct Classifier<D: Device, E: FloatElement> {
    body: Linear<D, E>,
    head: Linear<D>,
}
devtensor::module!(Classifier<E> { body, head });

/// A device mistake and a dtype mistake in one expression: both reported.
fn both(x: &Tensor<Cuda<0>>, h: &Tensor<Cpu, bf16>) -> Tensor<Cuda<0>> {
    x + h
}

fn main() {}
