// Seed 000: `tensor_cpu + tensor_gpu` without moving either side first.
use devtensor::{Cpu, Cuda, Tensor};

fn main() {
    let tensor_cpu = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0], [3]);
    let tensor_gpu = Tensor::<Cuda<0>>::from_vec(vec![4.0, 5.0, 6.0], [3]);
    let result = tensor_cpu + tensor_gpu;
    println!("{result}");
}
