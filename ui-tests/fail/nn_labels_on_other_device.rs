// The logits come out of a model on the GPU; the labels were never moved.
use devtensor::nn::{Linear, cross_entropy};
use devtensor::{Cpu, Cuda, Tensor};

fn main() {
    let model = Linear::<Cuda<0>>::new(16, 10);
    let logits = model.forward(&Tensor::<Cpu>::randn([8, 16]).to::<Cuda<0>>());
    let labels = Tensor::<Cpu, i64>::zeros([8]);
    let loss = cross_entropy(&logits, &labels);
    println!("{loss}");
}
