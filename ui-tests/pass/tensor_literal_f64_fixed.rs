// ui-tests/fail/tensor_literal_f64.rs fixed: f64 data names its element
// type; literals without a type need none.
use devtensor::{Cpu, Tensor, tensor};

fn main() {
    let weights: Vec<f64> = vec![0.25, 0.5, 0.25];
    let w = Tensor::<Cpu, f64>::from_vec(weights, [3]);
    assert_eq!(w.sum().item(), 1.0);
    let logits = tensor([[1.0, 2.0], [0.5, 0.5]]); // f32, as torch.tensor
    let labels = tensor([1, 0]); // i64
    let loss = devtensor::nn::cross_entropy(&logits, &labels);
    assert!(loss.item() > 0.0);
}
