// ui-tests/fail/parallel_batch_declared_on_host.rs fixed: each replica
// declares its batch on its own device `D`; the global batch stays on the
// CPU and `DataParallel` moves every replica its rows. Run on two CPU
// replicas here, as on two GPUs.
use devtensor::nn::{Linear, try_cross_entropy};
use devtensor::optim::SgdConfig;
use devtensor::parallel::{DataParallel, Loss};
use devtensor::{Cpu, Device, Result, Tensor};

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

fn main() -> Result<()> {
    let model = Net { fc: Linear::<Cpu>::new(4, 2) };
    let mut dp = DataParallel::<(Cpu, Cpu), _, (Tensor<Cpu>, Tensor<Cpu, i64>), _>::try_new(&model, SgdConfig::default())?;
    let batch = (Tensor::<Cpu>::ones([6, 4]), Tensor::<Cpu, i64>::from_vec(vec![0, 1, 0, 1, 0, 1], [6]));
    let loss = dp.try_step(&batch)?;
    assert!(loss.is_finite());
    Ok(())
}
