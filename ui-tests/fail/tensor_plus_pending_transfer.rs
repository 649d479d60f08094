// The other way round: a tensor plus a transfer still in flight.
use devtensor::{Cuda, Tensor};

fn main() {
    let bias = Tensor::<Cuda<0>>::zeros([10]);
    let on_cpu = bias.to_async::<devtensor::Cpu>();
    let sum = &bias.to::<devtensor::Cpu>() * on_cpu;
    println!("{sum}");
}
