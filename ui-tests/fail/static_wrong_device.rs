// A static tensor on the wrong device: the device error is reported as
// such, and the shapes (which agree) add nothing to it.
use devtensor::static_shapes::{Const, STensor};
use devtensor::{Cpu, Cuda};

fn sum(a: &STensor<Cpu, (usize, Const<10>)>, b: &STensor<Cuda<0>, (usize, Const<10>)>) -> STensor<Cpu, (usize, Const<10>)> {
    a + b
}

fn main() {}
