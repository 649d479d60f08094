// The fix for static_matmul_inner.rs: weights with 784 rows.
use devtensor::static_shapes::{Const, STensor};
use devtensor::{Cpu, Tensor};

fn main() {
    let a: STensor<Cpu, (usize, Const<784>)> = Tensor::<Cpu>::zeros([8, 784]).try_static().unwrap();
    let w: STensor<Cpu, (Const<784>, Const<10>)> = Tensor::<Cpu>::zeros([784, 10]).try_static().unwrap();
    let y: STensor<Cpu, (usize, Const<10>)> = a.matmul(&w);
    assert_eq!(y.dynamic().dims(), &[8, 10]);
}
