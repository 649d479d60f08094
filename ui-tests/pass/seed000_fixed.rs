// Seed 000, fixed: pick the device once, move both tensors to it, then add.
// The program is written once, generic over the device, and run on CUDA when
// present, else on the CPU.
use devtensor::{Cpu, Cuda, Device, Tensor};

fn run<D: Device>() -> Vec<f32> {
    let tensor_cpu = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0], [3]);
    let tensor_gpu = Tensor::<D>::from_vec(vec![4.0, 5.0, 6.0], [3]);
    let result = tensor_cpu.to::<D>() + tensor_gpu;
    result.to_vec()
}

fn main() {
    let result = if Cuda::<0>::is_available() { run::<Cuda<0>>() } else { run::<Cpu>() };
    assert_eq!(result, vec![5.0, 7.0, 9.0]);
}
