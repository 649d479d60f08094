// Fixed: the activation crosses from the first GPU to the second explicitly.
use devtensor::nn::{Linear, Relu};
use devtensor::{Cuda, Tensor};

struct TwoStage {
    first: Linear<Cuda<0>>,
    second: Linear<Cuda<1>>,
}

impl TwoStage {
    fn forward(&self, x: &Tensor<Cuda<0>>) -> Tensor<Cuda<1>> {
        let h = Relu.forward(&self.first.forward(x));
        self.second.forward(&h.to::<Cuda<1>>())
    }
}

fn main() {
    // Runs only where two GPUs are present; the point is that it compiles.
    if Cuda::<0>::is_available() && Cuda::<1>::is_available() {
        let model = TwoStage { first: Linear::new(8, 8), second: Linear::new(8, 2) };
        assert_eq!(model.forward(&Tensor::ones([1, 8])).dims(), &[1, 2]);
    }
}
