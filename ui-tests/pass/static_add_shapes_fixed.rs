// The fix for static_add_shapes.rs: bring [B, 12] to [B, 10] first (here
// with a linear layer), then add; a [10] bias broadcasts over the batch.
use devtensor::static_shapes::{Const, SLinear, STensor};
use devtensor::{Cpu, Tensor};

fn sum(a: &STensor<Cpu, (usize, Const<10>)>, b: &STensor<Cpu, (usize, Const<12>)>) -> STensor<Cpu, (usize, Const<10>)> {
    let project = SLinear::<Cpu, 12, 10>::new();
    let bias: STensor<Cpu, (Const<10>,)> = Tensor::<Cpu>::ones([10]).try_static().unwrap();
    &(a + &project.forward(b)) + &bias
}

fn main() {
    let a = Tensor::<Cpu>::zeros([3, 10]).try_static().unwrap();
    let b = Tensor::<Cpu>::zeros([3, 12]).try_static().unwrap();
    assert_eq!(sum(&a, &b).dynamic().dims(), &[3, 10]);
}
