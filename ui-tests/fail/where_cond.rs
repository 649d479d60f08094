// `where` takes a mask and two sources: all three on one device.
use devtensor::{Cpu, Cuda, Tensor};

fn relu_by_mask(mask: &Tensor<Cuda<0>, u8>, x: &Tensor<Cuda<0>>, zeros: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
    mask.where_cond(x, zeros)
}

fn main() {}
