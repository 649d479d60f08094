// Fixed: the optimizer is made for the model it steps, on the model's device.
use devtensor::nn::{Linear, Module};
use devtensor::optim::{Optimizer, Sgd, SgdConfig};
use devtensor::{Cpu, Cuda, Device, Tensor};

fn run<D: Device>() -> usize {
    let mut model = Linear::<Cpu>::new(4, 1).to::<D>();
    let mut opt = Sgd::new(&model, SgdConfig::default());
    let loss = model.forward(&Tensor::<Cpu>::ones([2, 4]).to::<D>()).sum();
    opt.step(&mut model, &loss.backward());
    model.num_parameters()
}

fn main() {
    let n = if Cuda::<0>::is_available() { run::<Cuda<0>>() } else { run::<Cpu>() };
    assert_eq!(n, 5);
}
