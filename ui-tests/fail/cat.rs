// `cat` takes one list of tensors; a list cannot hold two device types.
use devtensor::{Cpu, Cuda, Tensor};

fn main() {
    let a = Tensor::<Cpu>::zeros([2, 3]);
    let b = Tensor::<Cuda<0>>::zeros([2, 3]);
    let _ = Tensor::cat(&[&a, &b], 0);
}
