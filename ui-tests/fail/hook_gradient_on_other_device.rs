// A gradient hook that hands back the gradient moved to the host: the
// gradient of a `Cuda<0>` tensor must stay a `Cuda<0>` tensor.
use devtensor::{Cpu, Cuda, Tensor};

fn clip_on_host(activations: &Tensor<Cuda<0>>) {
    let _handle = activations.register_hook(|grad| Some(grad.to::<Cpu>().clamp(-1.0, 1.0)));
}

fn main() {}
