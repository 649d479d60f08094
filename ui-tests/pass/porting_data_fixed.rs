// ui-tests/fail/porting_data.rs with each mistake fixed: batches moved
// (or iterated with `to_device`), masks, permutations and biases made on
// the device they meet.
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
    let batches: Vec<(Tensor<Cuda<0>>, Tensor<Cuda<0>, i64>)> = batches.iter().map(|(x, y)| (x.to(), y.to())).collect();
    evaluate(model, &batches)
}

fn loader_batch_to_the_gpu_model(model: &Net<Cuda<0>>, x: Tensor<Cpu>, y: Tensor<Cpu, i64>) {
    let mut loader = DataLoader::new(TensorDataset::try_new(x, y).unwrap(), 32);
    for batch in loader.to_device::<Cuda<0>>() {
        let (inputs, _labels) = batch.unwrap();
        let _ = model.forward(&inputs);
    }
}

fn centred_on_gpu_statistics(batch: &Tensor<Cpu>, mean: &Tensor<Cuda<0>>) -> Tensor<Cuda<0>> {
    batch.to::<Cuda<0>>() - mean
}

fn padding_mask_made_on_the_host(scores: &Tensor<Cuda<0>>, lengths: &Tensor<Cpu, i64>) -> Tensor<Cuda<0>> {
    let positions = Tensor::<Cuda<0>, i64>::arange(0, scores.dims()[1] as i64);
    let mask = positions.lt(&lengths.to::<Cuda<0>>().unsqueeze(1)).to_dtype::<f32>();
    scores * mask
}

fn shuffled_with_a_host_permutation(batch: &Tensor<Cuda<0>>) -> Tensor<Cuda<0>> {
    let order = Tensor::<Cuda<0>, i64>::randperm(batch.dims()[0]);
    batch.index_select(0, &order)
}

fn affine<D: Device>(x: &Tensor<D>, w: &Tensor<D>) -> Tensor<D> {
    x.matmul(w) + Tensor::<D>::zeros([w.dims()[1]])
}

fn concatenated_across_devices(a: &Tensor<Cuda<0>>, b: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
    Tensor::cat(&[a, &b.to::<Cuda<0>>()], 0)
}

fn main() {}
