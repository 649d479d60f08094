// Seed 002 with library layers, fixed: the batch is moved to the model's
// device, which the model's type names.
use devtensor::nn::{Linear, Relu};
use devtensor::{Cpu, Cuda, Device, Tensor};

fn run<D: Device>() -> Vec<usize> {
    let hidden = Linear::<D>::new(784, 128);
    let head = Linear::<D>::new(128, 10);
    let batch = Tensor::<Cpu>::randn([64, 784]);
    let logits = head.forward(&Relu.forward(&hidden.forward(&batch.to::<D>())));
    logits.dims().to_vec()
}

fn main() {
    let dims = if Cuda::<0>::is_available() { run::<Cuda<0>>() } else { run::<Cpu>() };
    assert_eq!(dims, vec![64, 10]);
}
