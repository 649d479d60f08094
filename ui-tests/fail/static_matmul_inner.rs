// A product whose inner sizes differ, both known to the compiler.
use devtensor::static_shapes::{Const, STensor};
use devtensor::{Cpu, Tensor};

fn main() {
    let a: STensor<Cpu, (usize, Const<784>)> = Tensor::<Cpu>::zeros([8, 784]).try_static().unwrap();
    let w: STensor<Cpu, (Const<768>, Const<10>)> = Tensor::<Cpu>::zeros([768, 10]).try_static().unwrap();
    println!("{:?}", a.matmul(&w).shape());
}
