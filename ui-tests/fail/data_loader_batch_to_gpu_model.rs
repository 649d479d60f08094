// Seed 001/002: the data loader hands out CPU batches and the model is on
// the GPU; the batch is fed to it as it comes.
use devtensor::data::{DataLoader, TensorDataset};
use devtensor::nn::{Linear, cross_entropy};
use devtensor::{Cpu, Cuda, Tensor};

fn main() {
    let data = TensorDataset::try_new(Tensor::<Cpu>::zeros([100, 8]), Tensor::<Cpu, i64>::zeros([100])).unwrap();
    let mut loader = DataLoader::new(data, 32).shuffle(0);
    let model = Linear::<Cuda<0>>::new(8, 2);
    for batch in loader.iter() {
        let (inputs, labels) = batch.unwrap();
        let loss = cross_entropy(&model.forward(&inputs), &labels);
        println!("{loss}");
    }
}
