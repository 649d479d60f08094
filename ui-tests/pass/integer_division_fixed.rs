// The fixes for `integer_div_assign.rs` and `device_not_inferred.rs`.
use devtensor::{Cpu, Tensor};

fn main() {
    let correct = Tensor::<Cpu, i64>::from_vec(vec![90, 7], [2]);
    let total = Tensor::<Cpu, i64>::from_vec(vec![100, 10], [2]);
    // True division, as PyTorch's `/`: an f32 tensor.
    let accuracy: Tensor<Cpu, f32> = &correct / &total;
    assert_eq!(accuracy.to_vec(), vec![0.9, 0.7]);
    // Integer quotients, named.
    assert_eq!(correct.div_floor(&total).to_vec(), vec![0, 0]);
    let mut halves = correct.clone();
    halves = halves.div_trunc(&Tensor::<Cpu, i64>::scalar(2));
    assert_eq!(halves.to_vec(), vec![45, 3]);

    let a = Tensor::<Cpu>::ones([3]);
    let b = &a + &Tensor::<Cpu>::ones([3]);
    assert_eq!(b.to_vec(), vec![2.0; 3]);
}
