// `scatter_add` reads an index and a source: both on the destination's device.
use devtensor::{Cpu, Cuda, Tensor};

fn accumulate(dst: &Tensor<Cpu>, index: &Tensor<Cpu, i64>, src: &Tensor<Cuda<0>>) -> Tensor<Cpu> {
    dst.scatter_add(0, index, src)
}

fn main() {}
