// Seed 002's own bug, with static shapes: `Linear(16 * 16 * 16, 10)`
// "assuming 64x64 input", but Conv2d(3, 16, 3, padding=1) and MaxPool2d(2)
// leave 16x32x32 = 16384 features. PyTorch reports it when the first batch
// arrives; here `cargo build` does.
use devtensor::static_shapes::{Const, SConv2d, SLinear, SMaxPool2d, STensor};
use devtensor::{Cpu, Tensor};

fn main() {
    let conv = SConv2d::<Cpu, 3, 16, 3, 1, 1>::new();
    let pool = SMaxPool2d::<2, 2>;
    let fc = SLinear::<Cpu, { 16 * 16 * 16 }, 10>::new();
    let x: STensor<Cpu, (usize, Const<3>, Const<64>, Const<64>)> = Tensor::<Cpu>::zeros([4, 3, 64, 64]).try_static().unwrap();
    let logits = fc.forward(&pool.forward(&conv.forward(&x).relu()).flatten());
    println!("{:?}", logits.dynamic().dims());
}
