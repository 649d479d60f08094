// A pending transfer passed where a tensor is expected.
use devtensor::{Cuda, PinnedTensor, Tensor};

fn main() {
    let weights = Tensor::<Cuda<0>>::ones([784, 10]);
    let staging = PinnedTensor::<f32>::zeros([64, 784]);
    let batch = staging.to_async::<Cuda<0>>();
    let logits = batch.matmul(&weights);
    let again = weights.t().matmul(&batch);
    println!("{logits} {again}");
}
