// Elementwise maximum of tensors on two devices.
use devtensor::{Cpu, Cuda, Tensor};

fn clip_below(x: &Tensor<Cuda<1>>, floor: &Tensor<Cpu>) -> Tensor<Cuda<1>> {
    x.maximum(floor)
}

fn main() {}
