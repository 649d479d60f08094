// Seed 002 with the flatten size fixed but a stride of 2 typed into the
// convolution: 64x64 becomes 32x32, pooled to 16x16, so the features are
// 16 * 16 * 16 = 4096, not 16 * 32 * 32. The fix is
// ui-tests/pass/static_seed002_fixed.rs.
use devtensor::static_shapes::{Const, SConv2d, SLinear, SMaxPool2d, STensor};
use devtensor::{Cpu, Tensor};

fn main() {
    let conv = SConv2d::<Cpu, 3, 16, 3, 2, 1>::new();
    let pool = SMaxPool2d::<2, 2>;
    let fc = SLinear::<Cpu, { 16 * 32 * 32 }, 10>::new();
    let x: STensor<Cpu, (usize, Const<3>, Const<64>, Const<64>)> = Tensor::<Cpu>::zeros([4, 3, 64, 64]).try_static().unwrap();
    let logits = fc.forward(&pool.forward(&conv.forward(&x).relu()).flatten());
    println!("{:?}", logits.dynamic().dims());
}
