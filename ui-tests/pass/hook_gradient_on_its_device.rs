// A gradient hook, fixed: the gradient is clipped where it lives, on the
// activations' own device, which the tensor's type names.
use devtensor::{Cpu, Cuda, Device, Tensor};

fn clipped<D: Device>() -> Vec<f32> {
    let x = Tensor::<Cpu>::from_vec(vec![1.0, -4.0], [2]).to::<D>().requires_grad();
    let activations = &x * 3.0;
    let _handle = activations.register_hook(|grad| Some(grad.clamp(-1.0, 1.0)));
    let grads = activations.square().sum().backward();
    grads.get(&x).unwrap().to::<Cpu>().to_vec()
}

fn main() {
    let grads = if Cuda::<0>::is_available() { clipped::<Cuda<0>>() } else { clipped::<Cpu>() };
    assert_eq!(grads, vec![3.0, -3.0]);
}
