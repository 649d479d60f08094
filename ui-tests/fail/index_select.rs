// Index tensors are tensors too: they live on a device.
use devtensor::{Cpu, Cuda, Tensor};

fn rows(table: &Tensor<Cuda<1>>, ids: &Tensor<Cpu, i64>) -> Tensor<Cuda<1>> {
    table.index_select(0, ids)
}

fn main() {}
