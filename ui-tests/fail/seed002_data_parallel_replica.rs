// Seed 002, multi-GPU: the replica on the second GPU is handed a batch that
// still lives on the first one.
use devtensor::{Cuda, Tensor};

fn replica_step(weight: &Tensor<Cuda<1>>, batch: &Tensor<Cuda<0>>) -> Tensor<Cuda<1>> {
    weight * batch
}

fn main() {}
