// A PyTorch habit carried into data parallelism: the batch type of every
// replica written as the loader's CPU batch, and moved inside `loss`. Each
// replica must take its rows on its own device (the library moves them
// there); this is one error for all replicas, naming their devices and the
// batches they declare. Fixed: ui-tests/pass/parallel_batch_on_replica_device.rs.
use devtensor::nn::{Linear, try_cross_entropy};
use devtensor::optim::SgdConfig;
use devtensor::parallel::{DataParallel, Loss};
use devtensor::{Cpu, Cuda, Device, Result, Tensor};

struct Net<D: Device> {
    fc: Linear<D>,
}
devtensor::module!(Net { fc });

impl<D: Device> Loss<D> for Net<D> {
    type Batch = (Tensor<Cpu>, Tensor<Cpu, i64>);
    fn loss(&self, (x, y): &Self::Batch) -> Result<Tensor<D>> {
        try_cross_entropy(&self.fc.try_forward(&x.to::<D>())?, &y.to::<D>())
    }
}

fn main() {
    let model = Net { fc: Linear::<Cpu>::new(4, 2) };
    let _dp = DataParallel::<(Cuda<0>, Cuda<1>), _, (Tensor<Cpu>, Tensor<Cpu, i64>), _>::try_new(&model, SgdConfig::default());
}
