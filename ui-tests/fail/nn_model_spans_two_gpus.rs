// A model split over two GPUs (pipeline style): the first stage's output is
// fed to the second stage without being moved.
use devtensor::nn::{Linear, Relu};
use devtensor::{Cuda, Tensor};

struct TwoStage {
    first: Linear<Cuda<0>>,
    second: Linear<Cuda<1>>,
}

impl TwoStage {
    fn forward(&self, x: &Tensor<Cuda<0>>) -> Tensor<Cuda<1>> {
        let h = Relu.forward(&self.first.forward(x));
        self.second.forward(&h)
    }
}

fn main() {
    let model = TwoStage { first: Linear::new(8, 8), second: Linear::new(8, 2) };
    println!("{}", model.forward(&Tensor::ones([1, 8])));
}
