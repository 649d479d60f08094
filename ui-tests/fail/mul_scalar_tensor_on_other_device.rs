// A borrowed left side and an owned right side on different devices.
use devtensor::{Cpu, Cuda, Tensor};

fn scale(weights: &Tensor<Cpu>, factors: Tensor<Cuda<0>>) -> Tensor<Cpu> {
    weights * factors
}

fn main() {}
