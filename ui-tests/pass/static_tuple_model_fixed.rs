// The fix for static_tuple_model_input_on_cpu.rs: move the batch to the
// model's device. A tuple model's output type is computed by the compiler,
// and the model moves between devices as one value.
use devtensor::nn::{Module, Relu};
use devtensor::static_shapes::{Const, SForward, SLinear, STensor};
use devtensor::{Cpu, Cuda, Tensor};

type Mlp<D> = (SLinear<D, 64, 32>, Relu, SLinear<D, 32, 10>);

fn logits(model: &Mlp<Cuda<0>>, x: &STensor<Cpu, (usize, Const<64>)>) -> STensor<Cuda<0>, (usize, Const<10>)> {
    model.forward(&x.to::<Cuda<0>>())
}

fn main() {
    let model: Mlp<Cpu> = (SLinear::new(), Relu, SLinear::new());
    let x = Tensor::<Cpu>::zeros([2, 64]).try_static().unwrap();
    assert_eq!(model.forward(&x).dynamic().dims(), &[2, 10]);
    if Cuda::<0>::is_available() {
        let _ = logits(&model.to::<Cuda<0>>(), &x);
    }
}
