// A small training program, as a user writes one: a CNN of a few layers on
// random data, cross-entropy, AdamW, a learning-rate schedule, evaluation
// under `no_grad`, on `Cuda<0>` when present, else on the CPU.
use devtensor::nn::{Conv2d, Flatten, Forward, Linear, MaxPool2d, Relu, cross_entropy};
use devtensor::optim::{AdamConfig, AdamW, CosineAnnealingLr, LrSchedule, Optimizer};
use devtensor::{Cpu, Device, Result, Tensor, no_grad};

struct Cnn<D: Device> {
    conv: Conv2d<D>,
    relu: Relu,
    pool: MaxPool2d,
    flatten: Flatten,
    fc: Linear<D>,
}
devtensor::module!(Cnn { conv, relu, pool, flatten, fc });

impl<D: Device> Forward<D> for Cnn<D> {
    fn forward_on(&self, x: &Tensor<D>) -> Result<Tensor<D>> {
        let x = self.pool.try_forward(&self.relu.try_forward(&self.conv.try_forward(x)?)?)?;
        self.fc.try_forward(&self.flatten.try_forward(&x)?)
    }
}

fn train<D: Device>() -> f32 {
    let x = Tensor::<Cpu>::randn([64, 1, 8, 8]).to::<D>();
    let y = (Tensor::<Cpu>::rand([64]).to::<D>() * 10.0).to_dtype::<i64>();
    let mut model: Cnn<D> = Cnn {
        conv: Conv2d::new(1, 8, 3).padding(1),
        relu: Relu,
        pool: MaxPool2d::new(2),
        flatten: Flatten::default(),
        fc: Linear::new(8 * 4 * 4, 10),
    };
    let mut optimizer = AdamW::new(&model, AdamConfig { lr: 1e-2, ..Default::default() });
    let schedule = CosineAnnealingLr { base_lr: 1e-2, t_max: 20, eta_min: 0.0 };
    for step in 0..20 {
        optimizer.set_lr(schedule.lr(step));
        let loss = cross_entropy(&model.forward(&x), &y);
        let grads = loss.backward();
        optimizer.step(&mut model, &grads);
    }
    no_grad(|| model.forward(&x).argmax(-1).eq(&y).to_dtype::<f32>().mean().item())
}

fn main() {
    let accuracy = devtensor::on_best_device!(D => train::<D>());
    println!("training accuracy {accuracy}");
}
