// Forgetting `.to::<Cpu>()` before handing a GPU result to CPU code.
use devtensor::{Cpu, Cuda, Tensor};

fn log_to_console(x: Tensor<Cpu>) {
    println!("{x}");
}

fn main() {
    let y = Tensor::<Cuda<0>>::ones([2]);
    log_to_console(y);
}
