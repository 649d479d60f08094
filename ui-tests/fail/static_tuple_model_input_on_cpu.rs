// A static model, a tuple of layers on `Cuda<0>`, fed a batch still on the
// CPU: the device error is the one reported.
use devtensor::nn::Relu;
use devtensor::static_shapes::{Const, SForward, SLinear, STensor};
use devtensor::{Cpu, Cuda};

fn logits(model: &(SLinear<Cuda<0>, 64, 32>, Relu, SLinear<Cuda<0>, 32, 10>), x: &STensor<Cpu, (usize, Const<64>)>) {
    let y = model.forward(x);
}

fn main() {}
