// ui-tests/fail/porting_training.rs with each mistake fixed: the optimizer
// made after the move, tensors and checkpoints moved to the model's device.
use devtensor::{io::Checkpoint, nn::{Forward, Linear, Module, Reduction, cross_entropy, mse_loss}};
use devtensor::optim::{Adam, AdamConfig, Optimizer, Sgd, SgdConfig};
use devtensor::{Cpu, Cuda, Device, OnDevice, Result, Tensor};

struct Net<D: Device> {
    fc: Linear<D>,
}
devtensor::module!(Net { fc });

impl<D: Device> Forward<D> for Net<D> {
    fn forward_on(&self, x: &Tensor<D>) -> Result<Tensor<D>> {
        self.fc.try_forward(x)
    }
}

// One step, with the batch as `&impl OnDevice<D>`: a batch on another
// device than the model gets devtensor's message at the call.
fn train_step<D: Device>(model: &mut Net<D>, opt: &mut Sgd<D>, x: &impl OnDevice<D>, y: &impl OnDevice<D, i64>) -> f32 {
    let (x, y) = (x.tensor(), y.tensor());
    let loss = cross_entropy(&model.forward(x), y);
    opt.step(model, &loss.backward());
    loss.item()
}

fn optimizer_made_before_the_move(x: &Tensor<Cuda<0>>, y: &Tensor<Cuda<0>, i64>) {
    let model = Net { fc: Linear::<Cpu>::new(4, 3) };
    let mut model = model.to::<Cuda<0>>();
    let mut opt = Adam::new(&model, AdamConfig::default());
    let loss = cross_entropy(&model.forward(x), y);
    opt.step(&mut model, &loss.backward());
}

fn labels_left_on_the_host(model: &Net<Cuda<0>>, x: &Tensor<Cuda<0>>, y: &Tensor<Cpu, i64>) -> f32 {
    cross_entropy(&model.forward(x), &y.to::<Cuda<0>>()).item()
}

fn step_with_a_host_batch(model: &mut Net<Cuda<0>>, opt: &mut Sgd<Cuda<0>>, x: &Tensor<Cpu>, y: &Tensor<Cpu, i64>) -> f32 {
    train_step(model, opt, &x.to::<Cuda<0>>(), &y.to::<Cuda<0>>())
}

fn regression_target_on_another_gpu(model: &Net<Cuda<1>>, x: &Tensor<Cuda<1>>, target: &Tensor<Cuda<0>>) -> f32 {
    mse_loss(&model.forward(x), &target.to::<Cuda<1>>(), Reduction::Mean).item()
}

fn distilled_from_a_teacher_on_another_gpu(student: &Net<Cuda<0>>, teacher: &Net<Cuda<1>>, x: &Tensor<Cuda<0>>) -> f32 {
    let soft_targets = teacher.forward(&x.to::<Cuda<1>>()).softmax(-1).to::<Cuda<0>>();
    mse_loss(&student.forward(x).softmax(-1), &soft_targets, Reduction::Mean).item()
}

fn checkpoint_read_onto_the_host(model: &mut Net<Cuda<0>>) {
    Checkpoint::<Cuda<0>>::load("net.safetensors").load_into(model);
}

fn optimizer_state_read_onto_the_host(opt: &mut Adam<Cuda<0>>) {
    opt.load_state(Checkpoint::<Cuda<0>>::load("net.safetensors").optimizer_state());
}

struct Trainer<D: Device> {
    model: Net<D>,
    opt: Sgd<D>,
}

fn trainer_holding_the_host_optimizer() -> Trainer<Cuda<0>> {
    let model = Net { fc: Linear::<Cpu>::new(4, 3) }.to::<Cuda<0>>();
    let opt = Sgd::new(&model, SgdConfig::default());
    Trainer { model, opt }
}

fn main() {}
