// Data handling as a PyTorch user ports it, one device mistake in each
// function: batches cached in a `Vec` and handed to an evaluation helper,
// a loader's batch fed to a GPU model, a mean kept on the GPU for a host
// batch, a mask and a permutation made on the host, a bias made on the host
// inside device-generic code, and two batches concatenated across devices
// (`Tensor::cat` takes one slice, whose elements share one type: rustc's
// words). Fixed: ui-tests/pass/porting_data_fixed.rs.
use devtensor::data::{DataLoader, TensorDataset};
use devtensor::nn::{Forward, Linear};
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

fn evaluate<D: Device>(model: &Net<D>, batches: &[(impl OnDevice<D>, impl OnDevice<D, i64>)]) -> usize {
    batches.iter().map(|(x, y)| model.forward(x.tensor()).argmax(-1).eq(y.tensor()).sum().item() as usize).sum()
}

fn cached_host_batches(model: &Net<Cuda<0>>, x: Tensor<Cpu>, y: Tensor<Cpu, i64>) -> usize {
    let batches: Vec<(Tensor<Cpu>, Tensor<Cpu, i64>)> = vec![(x, y)];
    evaluate(model, &batches)
}

fn loader_batch_to_the_gpu_model(model: &Net<Cuda<0>>, x: Tensor<Cpu>, y: Tensor<Cpu, i64>) {
    let mut loader = DataLoader::new(TensorDataset::try_new(x, y).unwrap(), 32);
    for batch in loader.iter() {
        let (inputs, _labels) = batch.unwrap();
        let _ = model.forward(&inputs);
    }
}

fn centred_on_gpu_statistics(batch: &Tensor<Cpu>, mean: &Tensor<Cuda<0>>) -> Tensor<Cpu> {
    batch - mean
}

fn padding_mask_made_on_the_host(scores: &Tensor<Cuda<0>>, lengths: &Tensor<Cpu, i64>) -> Tensor<Cuda<0>> {
    let positions = Tensor::<Cpu, i64>::arange(0, scores.dims()[1] as i64);
    let mask = positions.lt(&lengths.unsqueeze(1)).to_dtype::<f32>();
    scores * mask
}

fn shuffled_with_a_host_permutation(batch: &Tensor<Cuda<0>>) -> Tensor<Cuda<0>> {
    let order = Tensor::<Cpu, i64>::randperm(batch.dims()[0]);
    batch.index_select(0, &order)
}

fn affine<D: Device>(x: &Tensor<D>, w: &Tensor<D>) -> Tensor<D> {
    x.matmul(w) + Tensor::<Cpu>::zeros([w.dims()[1]])
}

fn concatenated_across_devices(a: &Tensor<Cuda<0>>, b: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
    Tensor::cat(&[a, b], 0)
}

fn main() {}
