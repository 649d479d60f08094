// Two mistakes at once, [B, 10] on the CPU added to [B, 12] on `Cuda<0>`:
// both are reported, each in its own words.
use devtensor::static_shapes::{Const, STensor};
use devtensor::{Cpu, Cuda};

fn sum(a: &STensor<Cpu, (usize, Const<10>)>, b: &STensor<Cuda<0>, (usize, Const<12>)>) -> STensor<Cpu, (usize, Const<10>)> {
    a + b
}

fn main() {}
