// Seed 000, `non_blocking=True`: the result of an asynchronous copy used as
// a tensor while the copy may still be running.
use devtensor::{Cpu, Cuda, Tensor};

fn main() {
    let tensor_cpu = Tensor::<Cpu>::ones([1000, 1000]);
    let tensor_gpu = Tensor::<Cuda<0>>::ones([1000, 1000]);
    let tensor_cpu_gpu = tensor_cpu.to_async::<Cuda<0>>();
    let result = tensor_cpu_gpu + &tensor_gpu;
    println!("{result}");
}
