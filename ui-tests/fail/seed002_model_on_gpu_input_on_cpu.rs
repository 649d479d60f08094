// Seed 002: the model was moved to the GPU, the input batch stayed on the CPU.
// A model generic over its device takes inputs of that device only.
use devtensor::{Cpu, Cuda, Device, Tensor};

struct Classifier<D: Device> {
    weight: Tensor<D>,
    bias: Tensor<D>,
}

impl<D: Device> Classifier<D> {
    fn forward(&self, x: &Tensor<D>) -> Tensor<D> {
        x * &self.weight + &self.bias
    }
}

fn main() {
    let model = Classifier::<Cuda<0>> { weight: Tensor::ones([10]), bias: Tensor::zeros([10]) };
    let inputs = Tensor::<Cpu>::randn([64, 10]);
    let outputs = model.forward(&inputs);
    println!("{outputs}");
}
