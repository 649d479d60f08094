// The fix for static_wrong_device.rs and static_shape_and_device.rs: move
// one side with `.to::<Cpu>()`; the shape travels with the tensor.
use devtensor::static_shapes::{Const, STensor};
use devtensor::{Cpu, Cuda};

fn sum(a: &STensor<Cpu, (usize, Const<10>)>, b: &STensor<Cuda<0>, (usize, Const<10>)>) -> STensor<Cpu, (usize, Const<10>)> {
    a + &b.to::<Cpu>()
}

fn main() {}
