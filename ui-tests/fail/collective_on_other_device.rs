// A process group works on its own GPU's tensors: a metric summed while it
// is still on the host, and a checkpoint tensor broadcast from the other
// GPU, do not compile (PyTorch fails at run time: "No backend type
// associated with device type cpu", or NCCL's "invalid device").
use devtensor::parallel::{ProcessGroup, ReduceOp};
use devtensor::{Cpu, Cuda, Tensor};

fn mean_loss(group: &ProcessGroup<Cuda<0>>, losses: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
    group.all_reduce(losses, ReduceOp::Avg)
}

fn share_weights(group: &ProcessGroup<Cuda<0>>, weights: &Tensor<Cuda<1>>) -> Tensor<Cuda<0>> {
    group.broadcast(weights, 0)
}

fn main() {}
