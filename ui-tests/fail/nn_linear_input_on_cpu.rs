// Seed 002 with library layers: the model is on the GPU, the batch from the
// data loader is still on the CPU.
use devtensor::nn::{Linear, Relu};
use devtensor::{Cpu, Cuda, Tensor};

fn main() {
    let hidden = Linear::<Cuda<0>>::new(784, 128);
    let head = Linear::<Cuda<0>>::new(128, 10);
    let batch = Tensor::<Cpu>::randn([64, 784]);
    let logits = head.forward(&Relu.forward(&hidden.forward(&batch)));
    println!("{logits}");
}
