// Seed 002, fixed: the input batch is moved to the model's device before the
// forward pass; the model's type says which device that is.
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

fn train<D: Device>() -> Vec<usize> {
    let model = Classifier::<D> { weight: Tensor::ones([10]), bias: Tensor::zeros([10]) };
    let inputs = Tensor::<Cpu>::randn([64, 10]);
    let outputs = model.forward(&inputs.to::<D>());
    outputs.dims().to_vec()
}

fn main() {
    let dims = if Cuda::<0>::is_available() { train::<Cuda<0>>() } else { train::<Cpu>() };
    assert_eq!(dims, vec![64, 10]);
}
