// Fixed: the labels travel to the logits' device with the batch.
use devtensor::nn::{Linear, cross_entropy};
use devtensor::{Cpu, Cuda, Device, Tensor};

fn run<D: Device>() -> f32 {
    let model = Linear::<D>::new(16, 10);
    let logits = model.forward(&Tensor::<Cpu>::randn([8, 16]).to::<D>());
    let labels = Tensor::<Cpu, i64>::zeros([8]);
    cross_entropy(&logits, &labels.to::<D>()).item()
}

fn main() {
    let loss = if Cuda::<0>::is_available() { run::<Cuda<0>>() } else { run::<Cpu>() };
    assert!(loss.is_finite());
}
