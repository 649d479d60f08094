// In-place updates check devices too: an optimizer step whose gradient was
// left on the GPU while the parameter lives on the CPU.
use devtensor::{Cpu, Cuda, Tensor};

fn sgd_step(param: &mut Tensor<Cpu>, grad: &Tensor<Cuda<0>>) {
    *param -= &(grad * 0.01);
}

fn main() {}
