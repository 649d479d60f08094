// Fixed: the loader delivers the batches on the model's device, each copied
// while the previous one is being used.
use devtensor::data::{DataLoader, TensorDataset};
use devtensor::nn::{Linear, cross_entropy};
use devtensor::{Cpu, Cuda, Device, Tensor};

fn run<D: Device>() -> usize {
    let data = TensorDataset::try_new(Tensor::<Cpu>::zeros([100, 8]), Tensor::<Cpu, i64>::zeros([100])).unwrap();
    let mut loader = DataLoader::new(data, 32).shuffle(0);
    let model = Linear::<D>::new(8, 2);
    let mut steps = 0;
    for batch in loader.to_device::<D>() {
        let (inputs, labels) = batch.unwrap();
        let loss = cross_entropy(&model.forward(&inputs), &labels);
        assert!(loss.item().is_finite());
        steps += 1;
    }
    steps
}

fn main() {
    let steps = if Cuda::<0>::is_available() { run::<Cuda<0>>() } else { run::<Cpu>() };
    assert_eq!(steps, 4);
}
