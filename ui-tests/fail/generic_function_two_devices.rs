// Device-generic code ties its arguments to one device `D`; calling it with
// tensors from two devices cannot pick one.
use devtensor::{Cpu, Cuda, Device, Tensor};

fn weighted_sum<D: Device>(x: &Tensor<D>, w: &Tensor<D>) -> Tensor<D> {
    x * w
}

fn main() {
    let x = Tensor::<Cpu>::ones([4]);
    let w = Tensor::<Cuda<0>>::ones([4]);
    let _ = weighted_sum(&x, &w);
}
