// Fixed: the checkpoint is loaded onto the model's device, whichever it was
// saved from.
use devtensor::{io::Checkpoint, nn::{Linear, Module}};
use devtensor::{Cpu, Cuda, Device};

fn resume<D: Device>() -> Vec<f32> {
    let saved = Linear::<Cpu>::new(4, 2);
    let path = std::env::temp_dir().join(format!("devtensor-ui-{}.safetensors", std::process::id()));
    Checkpoint::try_from_model(&saved).unwrap().save(&path);
    let mut model = Linear::<D>::new(4, 2);
    Checkpoint::<D>::load(&path).load_into(&mut model);
    std::fs::remove_file(&path).ok();
    assert_eq!(model.num_parameters(), 10);
    model.weight.to_vec()
}

fn main() {
    let weights = if Cuda::<0>::is_available() { resume::<Cuda<0>>() } else { resume::<Cpu>() };
    assert_eq!(weights.len(), 8);
}
