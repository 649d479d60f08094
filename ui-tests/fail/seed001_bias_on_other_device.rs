// Seed 001: the product is on the GPU, the bias stayed on the CPU.
use devtensor::{Cpu, Cuda, Tensor};

fn linear(x: &Tensor<Cuda<0>>, w: &Tensor<Cuda<0>>, b: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
    x.matmul(w) + b
}

fn main() {}
