// Seed 002's model with static shapes and the real flatten size, 16 * 32 * 32:
// it builds, and the sizes in between are computed by the compiler.
use devtensor::nn::Module;
use devtensor::optim::{Adam, AdamConfig, Optimizer};
use devtensor::static_shapes::{Const, SConv2d, SLinear, SMaxPool2d, STensor};
use devtensor::{Cpu, Tensor};

fn main() {
    let conv = SConv2d::<Cpu, 3, 16, 3, 1, 1>::new();
    let pool = SMaxPool2d::<2, 2>;
    let mut fc = SLinear::<Cpu, { 16 * 32 * 32 }, 10>::new();
    let x: STensor<Cpu, (usize, Const<3>, Const<64>, Const<64>)> = Tensor::<Cpu>::zeros([4, 3, 64, 64]).try_static().unwrap();
    let labels: STensor<Cpu, (usize,), i64> = Tensor::<Cpu, i64>::zeros([4]).try_static().unwrap();
    let mut opt = Adam::new(&fc, AdamConfig::default());
    let logits = fc.forward(&pool.forward(&conv.forward(&x).relu()).flatten());
    assert_eq!(logits.dynamic().dims(), &[4, 10]);
    let loss = logits.cross_entropy(&labels);
    opt.step(&mut fc, &loss.backward());
    assert_eq!(fc.num_parameters(), 16 * 32 * 32 * 10 + 10);
}
