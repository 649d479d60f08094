// Masks combine only on one device.
use devtensor::{Cpu, Cuda, Tensor};

fn both(a: &Tensor<Cpu, u8>, b: &Tensor<Cuda<0>, u8>) -> Tensor<Cpu, u8> {
    a.logical_and(b)
}

fn main() {}
