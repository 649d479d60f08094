// ui-tests/fail/module_field_on_other_device.rs fixed: every layer on the
// model's device `D`; the model then moves as one.
use devtensor::nn::{BatchNorm2d, Conv2d, Linear, Module};
use devtensor::{Cpu, Device};

struct Net<D: Device> {
    conv: Conv2d<D>,
    bn: BatchNorm2d<D>,
    fc: Linear<D>,
}
devtensor::module!(Net { conv, bn, fc });

fn main() {
    let net = Net { conv: Conv2d::<Cpu>::new(1, 4, 3), bn: BatchNorm2d::new(4), fc: Linear::new(4, 2) };
    let moved: Net<Cpu> = net.to::<Cpu>();
    let names: Vec<String> = moved.named_tensors().into_iter().map(|(name, _, _)| name).collect();
    assert_eq!(names[2..6], ["bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"]);
}
