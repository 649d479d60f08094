// Seed 002 with the flatten size fixed but the padding forgotten:
// Conv2d(3, 16, 3) without padding leaves 62x62, pooled to 31x31, so the
// features are 16 * 31 * 31 = 15376, not 16 * 32 * 32. The fix is
// ui-tests/pass/static_seed002_fixed.rs.
use devtensor::static_shapes::{Const, SConv2d, SLinear, SMaxPool2d, STensor};
use devtensor::{Cpu, Tensor};

fn main() {
    let conv = SConv2d::<Cpu, 3, 16, 3>::new();
    let pool = SMaxPool2d::<2, 2>;
    let fc = SLinear::<Cpu, { 16 * 32 * 32 }, 10>::new();
    let x: STensor<Cpu, (usize, Const<3>, Const<64>, Const<64>)> = Tensor::<Cpu>::zeros([4, 3, 64, 64]).try_static().unwrap();
    let logits = fc.forward(&pool.forward(&conv.forward(&x).relu()).flatten());
    println!("{:?}", logits.dynamic().dims());
}
