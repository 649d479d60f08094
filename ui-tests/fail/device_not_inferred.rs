// The right-hand tensor's device is not written, and `+` does not guess it
// from the left (that is what keeps mixed devices a clear error). Fix: name
// it, `Tensor::<Cpu>::ones([3])` (or `Tensor::<D>` in generic code).
use devtensor::{Cpu, Tensor};

fn main() {
    let a = Tensor::<Cpu>::ones([3]);
    let _b = &a + &Tensor::ones([3]);
}
