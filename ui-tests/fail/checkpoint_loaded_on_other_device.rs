// The checkpoint was loaded onto the GPU, the model to resume is on the CPU
// (PyTorch: `torch.load(path, map_location="cuda")` into a CPU model).
use devtensor::{io::Checkpoint, nn::Linear};
use devtensor::{Cpu, Cuda};

fn main() {
    let mut model = Linear::<Cpu>::new(4, 2);
    let checkpoint = Checkpoint::<Cuda<0>>::load("model.safetensors");
    checkpoint.load_into(&mut model);
}
