// The fix for parallel_replica_batch_on_other_device.rs: one `Loss` for
// every device, each replica taking its batch on its own device.
use devtensor::nn::{Linear, try_cross_entropy};
use devtensor::optim::SgdConfig;
use devtensor::parallel::{DataParallel, Loss};
use devtensor::{Cpu, Cuda, Device, Result, Tensor};

struct Net<D: Device> {
    fc: Linear<D>,
}
devtensor::module!(Net { fc });

impl<D: Device> Loss<D> for Net<D> {
    type Batch = (Tensor<D>, Tensor<D, i64>);
    fn loss(&self, (x, y): &Self::Batch) -> Result<Tensor<D>> {
        try_cross_entropy(&self.fc.try_forward(x)?, y)
    }
}

fn main() {
    let model = Net { fc: Linear::<Cpu>::new(4, 2) };
    if Cuda::<1>::is_available() {
        let mut dp = DataParallel::<(Cuda<0>, Cuda<1>), _, _, _>::try_new(&model, SgdConfig::default()).unwrap();
        dp.step(&(Tensor::<Cpu>::zeros([4, 4]), Tensor::<Cpu, i64>::zeros([4])));
    }
}
