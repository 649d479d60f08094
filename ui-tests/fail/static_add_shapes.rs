// Adding [B, 10] to [B, 12]: a compile error naming both shapes.
use devtensor::static_shapes::{Const, STensor};
use devtensor::Cpu;

fn sum(a: &STensor<Cpu, (usize, Const<10>)>, b: &STensor<Cpu, (usize, Const<12>)>) -> STensor<Cpu, (usize, Const<10>)> {
    a + b
}

fn main() {}
