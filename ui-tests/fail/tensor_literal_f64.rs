// `torch.tensor` makes float32 from Python floats; `tensor(..)` does the
// same for float literals, and refuses `f64` data rather than narrowing it
// silently: name the element type instead. Fixed:
// ui-tests/pass/tensor_literal_f64_fixed.rs.
use devtensor::tensor;

fn main() {
    let weights: Vec<f64> = vec![0.25, 0.5, 0.25];
    let w = tensor(weights);
    println!("{w}");
}
