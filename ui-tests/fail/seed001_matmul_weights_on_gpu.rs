// Seed 001: `torch.matmul(x, w) + b` where `x` was created on the CPU and the
// weights on the GPU.
use devtensor::{Cpu, Cuda, Tensor};

fn linear(x: &Tensor<Cpu>, w: &Tensor<Cuda<0>>) -> Tensor<Cpu> {
    x.matmul(w)
}

fn main() {}
