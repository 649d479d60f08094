// ui-tests/fail/dtype_mistakes.rs with each mistake fixed by saying which
// dtype to compute in: one `.to_dtype::<..>()` per function.
use devtensor::nn::{cross_entropy, mse_loss, Conv2d, Linear, Reduction};
use devtensor::ops::attention::AttentionMask;
use devtensor::static_shapes::{Const, STensor};
use devtensor::nn::ToDtype;
use devtensor::{bf16, f16, Checkpoint, Cpu, Cuda, Device, FloatElement, Tensor};

fn residual(x: &Tensor<Cpu>, h: &Tensor<Cpu, bf16>) -> Tensor<Cpu> {
    x + h.to_dtype::<f32>()
}

fn product(a: &Tensor<Cpu>, b: &Tensor<Cpu, f16>) -> Tensor<Cpu> {
    a.matmul(&b.to_dtype::<f32>())
}

fn layer_input(layer: &Linear<Cpu>, batch: &Tensor<Cpu, bf16>) -> Tensor<Cpu> {
    layer.forward(&batch.to_dtype::<f32>())
}

fn conv_input(conv: &Conv2d<Cpu>, image: &Tensor<Cpu, bf16>) -> Tensor<Cpu> {
    conv.forward(&image.to_dtype::<f32>())
}

fn loss(pred: &Tensor<Cpu, bf16>, target: &Tensor<Cpu>) -> Tensor<Cpu, bf16> {
    mse_loss(pred, &target.to_dtype::<bf16>(), Reduction::Mean)
}

fn labels_as_floats(logits: &Tensor<Cpu>, labels: &Tensor<Cpu>) -> Tensor<Cpu> {
    cross_entropy(logits, &labels.to_dtype::<i64>())
}

fn attention(q: &Tensor<Cpu, bf16>, k: &Tensor<Cpu, f16>, v: &Tensor<Cpu, bf16>) -> Tensor<Cpu, bf16> {
    q.scaled_dot_product_attention(&k.to_dtype::<bf16>(), v, AttentionMask::Causal, None)
}

fn accumulate(total: &mut Tensor<Cpu>, grad: &Tensor<Cpu, bf16>) {
    *total += grad.to_dtype::<f32>();
}

fn checkpoint(model: &mut Linear<Cpu>, path: &str) {
    Checkpoint::<Cpu, bf16>::load(path).to_dtype::<f32>().load_into(model);
}

fn static_bias(x: &STensor<Cpu, (usize, Const<10>)>, bias: &STensor<Cpu, (Const<10>,), bf16>) -> STensor<Cpu, (usize, Const<10>)> {
    x + &bias.to_dtype::<f32>()
}
fn static_product(x: &STensor<Cpu, (usize, Const<4>)>, w: &STensor<Cpu, (Const<4>, Const<10>), bf16>) -> STensor<Cpu, (usize, Const<10>)> {
    x.matmul(&w.to_dtype::<f32>())
}

struct Classifier<D: Device, E: FloatElement> {
    body: Linear<D, E>,
    head: Linear<D, E>,
}
devtensor::module!(Classifier<E> { body, head });

#[allow(dead_code)] // needs a GPU to run; compiling it is the point
fn both(x: &Tensor<Cuda<0>>, h: &Tensor<Cpu, bf16>) -> Tensor<Cuda<0>> {
    x + h.to::<Cuda<0>>().to_dtype::<f32>()
}

fn main() {
    let half = |dims: &[usize]| Tensor::<Cpu>::randn(dims).to_dtype::<bf16>();
    let x = Tensor::<Cpu>::randn([4, 3]);
    assert_eq!(residual(&x, &half(&[4, 3])).dims(), &[4, 3]);
    assert_eq!(product(&x, &Tensor::<Cpu>::randn([3, 2]).to_dtype::<f16>()).dims(), &[4, 2]);
    assert_eq!(layer_input(&Linear::new(3, 5), &half(&[4, 3])).dims(), &[4, 5]);
    assert_eq!(conv_input(&Conv2d::new(2, 3, 3), &half(&[1, 2, 5, 5])).dims(), &[1, 3, 3, 3]);
    assert_eq!(loss(&half(&[4, 3]), &x).dims(), &[] as &[usize]);
    let labels = Tensor::<Cpu>::from_vec(vec![0.0, 2.0, 1.0, 0.0], [4]);
    assert!(labels_as_floats(&x, &labels).item().is_finite());
    let q = half(&[1, 2, 4, 8]);
    assert_eq!(attention(&q, &q.to_dtype::<f16>(), &q).dims(), &[1, 2, 4, 8]);
    let mut total = Tensor::<Cpu>::zeros([4, 3]);
    accumulate(&mut total, &half(&[4, 3]));
    let path = std::env::temp_dir().join(format!("devtensor-dtype-fixed-{}.safetensors", std::process::id()));
    let saved = Linear::<Cpu, f32>::new(3, 2);
    Checkpoint::from_model(&saved).to_dtype::<bf16>().save(&path);
    let mut model = Linear::<Cpu>::new(3, 2);
    checkpoint(&mut model, path.to_str().unwrap());
    let rounded: Vec<f32> = saved.weight.to_vec().iter().map(|&w| bf16::from_f32(w).to_f32()).collect();
    assert_eq!(model.weight.to_vec(), rounded);
    std::fs::remove_file(&path).ok();
    let batch: STensor<Cpu, (usize, Const<10>)> = Tensor::<Cpu>::ones([2, 10]).try_static().unwrap();
    let bias: STensor<Cpu, (Const<10>,), bf16> = half(&[10]).try_static().unwrap();
    assert_eq!(static_bias(&batch, &bias).dynamic().dims(), &[2, 10]);
    let inputs: STensor<Cpu, (usize, Const<4>)> = Tensor::<Cpu>::ones([2, 4]).try_static().unwrap();
    let weights: STensor<Cpu, (Const<4>, Const<10>), bf16> = half(&[4, 10]).try_static().unwrap();
    assert_eq!(static_product(&inputs, &weights).dynamic().dims(), &[2, 10]);
    let classifier = Classifier { body: Linear::<Cpu>::new(4, 8), head: Linear::new(8, 3) };
    let classifier = classifier.to_dtype::<bf16>();
    let hidden = classifier.body.forward(&half(&[2, 4])).relu();
    assert_eq!(classifier.head.forward(&hidden).dims(), &[2, 3]);
}
