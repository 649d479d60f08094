// Comparisons produce masks on the device of their operands, so both operands
// must share it.
use devtensor::{Cpu, Cuda, Tensor};

fn correct(predictions: &Tensor<Cuda<0>, i64>, labels: &Tensor<Cpu, i64>) -> Tensor<Cuda<0>, u8> {
    predictions.eq(labels)
}

fn main() {}
