// How a PyTorch user writes models in devtensor, with one device mistake in
// each function: a model of their own (the `Forward` trait), a GPT-style
// model with a token-id input, a pipeline over two GPUs, a positional
// embedding built on the host, a `Sequential`, a metric, an LSTM's initial
// state, a packed batch and an EmbeddingBag's offsets made on the host.
// Every error here is devtensor's own message, naming both devices.
// Fixed: ui-tests/pass/porting_models_fixed.rs.
use devtensor::nn::{
    Embedding, EmbeddingBag, EmbeddingBagInput, Forward, Linear, Lstm, Relu, Sequential, pack_padded_sequence,
};
use devtensor::{Cpu, Cuda, Device, OnDevice, Result, Tensor};

struct Mlp<D: Device> {
    hidden: Linear<D>,
    out: Linear<D>,
}
devtensor::module!(Mlp { hidden, out });

impl<D: Device> Forward<D> for Mlp<D> {
    fn forward_on(&self, x: &Tensor<D>) -> Result<Tensor<D>> {
        self.out.try_forward(&self.hidden.try_forward(x)?.try_relu()?)
    }
}

struct TinyGpt<D: Device> {
    wte: Embedding<D>,
    wpe: Embedding<D>,
    head: Linear<D>,
}
devtensor::module!(TinyGpt { wte, wpe, head });

impl<D: Device> TinyGpt<D> {
    // Token ids as `&impl OnDevice<D, i64>`: ids on another device than the
    // model get devtensor's message at the call.
    fn logits(&self, ids: &impl OnDevice<D, i64>) -> Tensor<D> {
        let ids = ids.tensor();
        let positions = Tensor::<D, i64>::arange(0, ids.dims()[1] as i64);
        self.head.forward(&(self.wte.forward(ids) + self.wpe.forward(&positions)))
    }

    // The positions made on the host, as `torch.arange(T)` without `device=`.
    fn logits_with_host_positions(&self, ids: &Tensor<D, i64>) -> Tensor<D> {
        let positions = Tensor::<Cpu, i64>::arange(0, ids.dims()[1] as i64);
        self.head.forward(&(self.wte.forward(ids) + self.wpe.forward(&positions)))
    }
}

fn batch_left_on_the_host(model: &Mlp<Cuda<0>>, batch: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
    model.forward(batch)
}

fn token_ids_left_on_the_host(model: &TinyGpt<Cuda<0>>, ids: &Tensor<Cpu, i64>) -> Tensor<Cuda<0>> {
    model.logits(ids)
}

fn pipeline_stage_on_the_wrong_gpu(first: &Mlp<Cuda<0>>, second: &Mlp<Cuda<1>>, x: &Tensor<Cuda<0>>) -> Tensor<Cuda<1>> {
    let h = first.forward(x);
    second.forward(&h)
}

fn sequential_fed_a_host_batch(x: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
    let model = Sequential::new((Linear::<Cuda<0>>::new(4, 8), Relu, Linear::new(8, 2)));
    model.forward(x)
}

fn accuracy<D: Device>(logits: &Tensor<D>, labels: &impl OnDevice<D, i64>) -> f32 {
    let labels = labels.tensor();
    logits.argmax(-1).eq(labels).to_dtype::<f32>().mean().item()
}

fn metric_with_host_labels(logits: &Tensor<Cuda<0>>, labels: &Tensor<Cpu, i64>) -> f32 {
    accuracy(logits, labels)
}

struct CharLstm<D: Device> {
    embed: Embedding<D>,
    lstm: Lstm<D>,
    head: Linear<D>,
}
devtensor::module!(CharLstm { embed, lstm, head });

// The initial state made as `torch.zeros(layers, batch, hidden)` without `device=`.
fn lstm_state_made_on_the_host(model: &CharLstm<Cuda<0>>, ids: &Tensor<Cuda<0>, i64>) -> Tensor<Cuda<0>> {
    let h0 = Tensor::<Cpu>::zeros([1, ids.dims()[0], 64]);
    let c0 = Tensor::<Cuda<0>>::zeros([1, ids.dims()[0], 64]);
    let (out, _) = model.lstm.forward_with_state(&model.embed.forward(ids), (&h0, &c0));
    model.head.forward(&out)
}

// Variable-length sequences packed on the host for a model on the GPU.
fn packed_batch_left_on_the_host(lstm: &Lstm<Cuda<0>>, x: &Tensor<Cpu>, lengths: &[usize]) -> Tensor<Cuda<0>> {
    let packed = pack_padded_sequence(x, lengths, true, false);
    let (_, (h_n, _)) = lstm.forward(&packed);
    h_n
}

struct TextClassifier<D: Device> {
    embedding: EmbeddingBag<D>,
    fc: Linear<D>,
}
devtensor::module!(TextClassifier { embedding, fc });

// The text classification tutorial's `offsets`, made with `torch.tensor(..)` on the host.
fn bag_offsets_left_on_the_host(
    model: &TextClassifier<Cuda<0>>,
    text: &Tensor<Cuda<0>, i64>,
    offsets: &Tensor<Cpu, i64>,
) -> Tensor<Cuda<0>> {
    model.fc.forward(&model.embedding.forward(EmbeddingBagInput::new(text).offsets(offsets)))
}

fn main() {}
