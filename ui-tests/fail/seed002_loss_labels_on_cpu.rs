// Seed 002: "I am moving the labels as well since the CrossEntropyLoss will
// need both labels and model outputs on the same device". Picking each row's
// label logit with `gather` is where forgetting that fails.
use devtensor::{Cpu, Cuda, Tensor};

fn label_logits(log_probs: &Tensor<Cuda<0>>, labels: &Tensor<Cpu, i64>) -> Tensor<Cuda<0>> {
    log_probs.gather(1, &labels.unsqueeze(1))
}

fn main() {}
