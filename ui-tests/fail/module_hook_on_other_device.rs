// Module hooks take and return tensors of the layer's own device: a
// forward hook that hands back a GPU layer's output moved to the host does
// not compile (PyTorch accepts it, and the next layer fails at run time
// with "Expected all tensors to be on the same device"). An activation
// runs on every device, so it keeps no hooks typed for one.
use devtensor::nn::{Hooks, Linear, Relu};
use devtensor::{Cpu, Cuda, Tensor};

fn features_on_host(layer: &Linear<Cuda<0>>) {
    let _handle = layer.register_forward_hook(|_input, output| Some(output.to::<Cpu>()));
}

fn hook_an_activation(relu: &Relu) {
    let _handle = relu.register_forward_hook(|_input, _output: &Tensor<Cpu>| None);
}

fn main() {}
