// Cuda<0> and Cuda<1> mix only after an explicit move.
use devtensor::{Cuda, Tensor};

#[allow(dead_code)]
fn difference(a: &Tensor<Cuda<0>>, b: &Tensor<Cuda<1>>) -> Tensor<Cuda<0>> {
    a - &b.to::<Cuda<0>>()
}

#[allow(dead_code)]
fn replica_step(weight: &Tensor<Cuda<1>>, batch: &Tensor<Cuda<0>>) -> Tensor<Cuda<1>> {
    weight * batch.to::<Cuda<1>>()
}

fn main() {}
