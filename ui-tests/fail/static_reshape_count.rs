// A reshape to a different element count, both counts static.
use devtensor::static_shapes::{Const, STensor};
use devtensor::{Cpu, Tensor};

fn main() {
    let x: STensor<Cpu, (Const<4>, Const<6>)> = Tensor::<Cpu>::zeros([4, 6]).try_static().unwrap();
    let y = x.try_reshape((Const::<5>, Const::<5>)).unwrap();
    println!("{:?}", y.shape());
}
