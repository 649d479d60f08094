// The optimizer was made for the GPU copy of the model, and is then handed
// the CPU original (PyTorch: the optimizer holds the old parameters).
use devtensor::nn::{Linear, Module};
use devtensor::optim::{Optimizer, Sgd, SgdConfig};
use devtensor::{Cpu, Cuda, Tensor};

fn main() {
    let mut model = Linear::<Cpu>::new(4, 1);
    let on_gpu = model.to::<Cuda<0>>();
    let mut opt = Sgd::new(&on_gpu, SgdConfig::default());
    let loss = model.forward(&Tensor::<Cpu>::ones([2, 4])).sum();
    opt.step(&mut model, &loss.backward());
}
