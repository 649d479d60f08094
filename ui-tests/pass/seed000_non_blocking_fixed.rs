// Seed 000 with `non_blocking=True`, fixed: `join()` turns the transfer into
// a tensor, and the GPU runs the addition after the copy. Without a GPU the
// same program runs with `Cpu` as the target.
use devtensor::{Cpu, Cuda, Device, Tensor};

fn run<D: Device>() -> Vec<f32> {
    let tensor_cpu = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0], [3]);
    let tensor_gpu = Tensor::<D>::from_vec(vec![4.0, 5.0, 6.0], [3]);
    let tensor_cpu_gpu = tensor_cpu.to_async::<D>();
    let result = tensor_cpu_gpu.join() + &tensor_gpu;
    result.to_vec()
}

fn main() {
    let result = if Cuda::<0>::is_available() { run::<Cuda<0>>() } else { run::<Cpu>() };
    assert_eq!(result, vec![5.0, 7.0, 9.0]);
}
