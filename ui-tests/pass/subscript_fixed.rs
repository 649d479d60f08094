// The lines of PyTorch code that issue 60 quotes, each ported as one line,
// and ui-tests/fail/subscript_mistakes.rs with each mistake fixed: indices
// and masks made or moved to the tensor's device, floats compared or cast.
use devtensor::ops::attention::AttentionMask;
use devtensor::ops::conv::Window2d;
use devtensor::ops::index::ScatterReduce;
use devtensor::{Cpu, Cuda, Device, Ellipsis, NewAxis, SliceStep, Tensor};

fn run<D: Device>() {
    let logits = Tensor::<D>::randn([2, 5, 11]);
    let last = logits.i((.., -1, ..)); // logits[:, -1, :]
    assert_eq!(last.dims(), &[2, 11]);
    assert_eq!(logits.i((.., (..).step(2))).dims(), &[2, 3, 11]); // logits[:, ::2]
    assert_eq!(logits.i((Ellipsis, 0, NewAxis)).dims(), &[2, 5, 1]); // logits[..., 0, None]
    let x = Tensor::<D>::from_vec(vec![1.0, -2.0, f32::NAN, 4.0], [2, 2]);
    let mask = x.gt_scalar(0.0);
    assert_eq!(x.i(&mask).to_vec(), vec![1.0, 4.0]); // x[x > 0]
    assert_eq!(x.masked_select(&mask).to_vec(), vec![1.0, 4.0]); // torch.masked_select(x, mask)
    assert_eq!(x.nonzero().dims(), &[4, 2]); // torch.nonzero(x)
    let mut y = x.clone();
    y.index_put_(&x.isnan(), &Tensor::<D>::scalar(0.0), false); // x[torch.isnan(x)] = 0
    assert_eq!(y.to_vec(), vec![1.0, -2.0, 0.0, 4.0]);
    let rows = Tensor::<D, i64>::from_vec(vec![1, 0, 1], [3]);
    assert_eq!(x.i((&rows, -1)).dims(), &[3]); // x[rows, -1]
    let counts = Tensor::<D>::zeros([2]).index_put(&rows, &Tensor::<D>::scalar(1.0), true); // index_put_(.., accumulate=True)
    assert_eq!(counts.to_vec(), vec![1.0, 2.0]);
    // Hugging Face's top-p filter: `remove.scatter(1, sorted_indices, sorted_remove)`.
    let (sorted, order) = logits.i((.., -1)).sort(-1, true);
    let remove = sorted.softmax(-1).cumsum(-1).gt_scalar(0.9).to_dtype::<f32>();
    let remove = remove.zeros_like().scatter(1, &order, &remove);
    assert_eq!(remove.dims(), &[2, 11]);
    let pooled = Tensor::<D>::zeros([2]).scatter_reduce(0, &rows.i(..2), &x.i((.., 0)), ScatterReduce::Amax, false);
    assert_eq!(pooled.dims(), &[2]);
    // Llama's attention: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    let (q, kv) = (Tensor::<D>::randn([1, 8, 4, 16]), Tensor::<D>::randn([1, 2, 4, 16]));
    let out = q.scaled_dot_product_attention_gqa(&kv, &kv, AttentionMask::Causal, None);
    assert_eq!(out.dims(), &[1, 8, 4, 16]);
    // F.unfold(images, kernel_size=2, stride=2) and F.fold(columns, (4, 4), kernel_size=2, stride=2)
    let images = Tensor::<D>::randn([2, 3, 4, 4]);
    let window = Window2d { stride: [2, 2], ..Window2d::new([2, 2]) };
    let columns = devtensor::nn::unfold(&images, window);
    assert_eq!(columns.dims(), &[2, 12, 4]);
    assert_eq!(devtensor::nn::fold(&columns, [4, 4], window).to_vec(), images.to_vec());
}

/// `logits[rows, -1]` with the rows moved to the GPU first.
fn rows_moved(logits: &Tensor<Cuda<0>>, rows: &Tensor<Cpu, i64>) -> Tensor<Cuda<0>> {
    logits.i((&rows.to::<Cuda<0>>(), -1))
}

/// The mask moved to the tensor's GPU.
fn mask_moved(x: &Tensor<Cuda<0>>, mask: &Tensor<Cuda<1>, u8>) -> Tensor<Cuda<0>> {
    x.i(&mask.to::<Cuda<0>>())
}

/// The mask made from the data on its own device.
fn masked_assignment_on_the_device(x: &mut Tensor<Cuda<0>>) {
    let mask = x.lt_scalar(0.0);
    x.index_put_(&mask, &Tensor::<Cuda<0>>::scalar(0.0), false);
}

/// The float weights compared, giving a mask.
fn float_mask_compared(x: &Tensor<Cpu>, weights: &Tensor<Cpu>) -> Tensor<Cpu> {
    x.i(&weights.gt_scalar(0.0))
}

/// Float positions cast to `i64`.
fn float_indices_cast(x: &Tensor<Cpu>, positions: &Tensor<Cpu>) -> Tensor<Cpu> {
    x.i((.., &positions.to_dtype::<i64>()))
}

fn main() {
    if Cuda::<0>::is_available() { run::<Cuda<0>>() } else { run::<Cpu>() }
}
