// `/` is true division, as in PyTorch, so `/=` cannot write its float
// result into an integer tensor (PyTorch fails at run time: "result type
// Float can't be cast to the desired output type Long"). Fix: `div_trunc`
// or `div_floor` for an integer quotient, or divide float copies.
use devtensor::{Cpu, Tensor};

fn main() {
    let mut correct = Tensor::<Cpu, i64>::from_vec(vec![90, 7], [2]);
    let total = Tensor::<Cpu, i64>::from_vec(vec![100, 10], [2]);
    correct /= &total;
}
