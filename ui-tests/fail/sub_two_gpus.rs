// Two GPUs are two devices: `Cuda<0>` and `Cuda<1>` do not mix either.
use devtensor::{Cuda, Tensor};

fn difference(a: &Tensor<Cuda<0>>, b: &Tensor<Cuda<1>>) -> Tensor<Cuda<0>> {
    a - b
}

fn main() {}
