// A model generic over its device with one layer pinned to the CPU (a
// PyTorch habit: `self.bn = nn.BatchNorm2d(16).cpu()`). `module!` reports
// it once, naming the field and the fix, not once per generated method.
// Fixed: ui-tests/pass/module_field_on_model_device.rs.
use devtensor::nn::{BatchNorm2d, Conv2d, Linear};
use devtensor::{Cpu, Device};

struct Net<D: Device> {
    conv: Conv2d<D>,
    bn: BatchNorm2d<Cpu>,
    fc: Linear<D>,
}
devtensor::module!(Net { conv, bn, fc });

fn main() {}
