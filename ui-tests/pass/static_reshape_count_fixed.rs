// The fix for static_reshape_count.rs: 4 x 6 elements as 3 x 8.
use devtensor::static_shapes::{Const, STensor};
use devtensor::{Cpu, Tensor};

fn main() {
    let x: STensor<Cpu, (Const<4>, Const<6>)> = Tensor::<Cpu>::zeros([4, 6]).try_static().unwrap();
    let y = x.try_reshape((Const::<3>, Const::<8>)).unwrap();
    assert_eq!(y.dynamic().dims(), &[3, 8]);
}
