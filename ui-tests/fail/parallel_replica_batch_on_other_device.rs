// Seed 002's `nn.DataParallel` mistake in devtensor's data-parallel API: the
// replica on `Cuda<1>` declares that it takes its batch on `Cuda<0>`. Each
// replica must take its rows on its own device (the library moves them
// there), so the model cannot be replicated. The fix is
// ui-tests/pass/parallel_replica_batch_fixed.rs.
use devtensor::nn::{Linear, try_cross_entropy};
use devtensor::optim::SgdConfig;
use devtensor::parallel::{DataParallel, Loss};
use devtensor::{Cpu, Cuda, Device, Result, Tensor};

struct Net<D: Device> {
    fc: Linear<D>,
}
devtensor::module!(Net { fc });

impl Loss<Cuda<0>> for Net<Cuda<0>> {
    type Batch = (Tensor<Cuda<0>>, Tensor<Cuda<0>, i64>);
    fn loss(&self, (x, y): &Self::Batch) -> Result<Tensor<Cuda<0>>> {
        try_cross_entropy(&self.fc.try_forward(x)?, y)
    }
}

impl Loss<Cuda<1>> for Net<Cuda<1>> {
    type Batch = (Tensor<Cuda<0>>, Tensor<Cuda<0>, i64>);
    fn loss(&self, (x, y): &Self::Batch) -> Result<Tensor<Cuda<1>>> {
        try_cross_entropy(&self.fc.try_forward(&x.to::<Cuda<1>>())?, &y.to::<Cuda<1>>())
    }
}

fn main() {
    let model = Net { fc: Linear::<Cpu>::new(4, 2) };
    let _dp = DataParallel::<(Cuda<0>, Cuda<1>), _, (Tensor<Cpu>, Tensor<Cpu, i64>), _>::try_new(&model, SgdConfig::default());
}
