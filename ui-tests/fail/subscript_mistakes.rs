// The index and mask mistakes of PyTorch's subscript, one per function:
// PyTorch reports them at run time ("indices should be either on cpu or on
// the same device as the indexed tensor", "tensors used as indices must be
// long, int, byte or bool tensors"). The fixes are in
// ui-tests/pass/subscript_fixed.rs.
use devtensor::{Cpu, Cuda, Tensor};

/// `logits[rows, -1]` with the row indices still on the host.
fn rows_on_the_host(logits: &Tensor<Cuda<0>>, rows: &Tensor<Cpu, i64>) -> Tensor<Cuda<0>> {
    logits.i((rows, -1))
}

/// `x[mask]` with a mask made on another GPU.
fn mask_on_another_gpu(x: &Tensor<Cuda<0>>, mask: &Tensor<Cuda<1>, u8>) -> Tensor<Cuda<0>> {
    x.i(mask)
}

/// `x[mask] = 0` with the mask on the host.
fn masked_assignment_from_the_host(x: &mut Tensor<Cuda<0>>, mask: &Tensor<Cpu, u8>) {
    x.index_put_(mask, &Tensor::<Cuda<0>>::scalar(0.0), false);
}

/// A float tensor used as a mask (`x[weights > 0]` without the comparison).
fn float_mask(x: &Tensor<Cpu>, weights: &Tensor<Cpu>) -> Tensor<Cpu> {
    x.i(weights)
}

/// Float positions used as indices.
fn float_indices(x: &Tensor<Cpu>, positions: &Tensor<Cpu>) -> Tensor<Cpu> {
    x.i((.., positions))
}

/// `x[idx] = v` with the values on the host.
fn values_on_the_host(x: &Tensor<Cuda<0>>, idx: &Tensor<Cuda<0>, i64>, v: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
    x.index_put(idx, v, false)
}

fn main() {}
