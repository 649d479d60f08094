// Seed 002's batching loop: stacking samples gathered from two devices.
use devtensor::{Cuda, Tensor};

fn main() {
    let first = Tensor::<Cuda<0>>::zeros([3, 64, 64]);
    let second = Tensor::<Cuda<1>>::zeros([3, 64, 64]);
    let _ = Tensor::stack(&[&first, &second], 0);
}
