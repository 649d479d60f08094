//! Quick start: softmax regression on real handwritten digits (8x8 images),
//! written once for any device and run on `Cuda<0>` when a GPU is present,
//! else on the CPU. Gradients are written out by hand.
//!
//! Run with `cargo run --release --example quickstart`.

use devtensor::{Cpu, Cuda, Device, Tensor};

#[path = "data/digits.rs"]
mod digits;
use digits::load_digits;

const TRAIN_ROWS: usize = 1500;

/// Trains on the first 1500 images and returns the accuracy on the rest.
fn train<D: Device>(pixels: &[f32], labels: &[i64]) -> f32 {
    let n = labels.len();
    // Data starts on the host; moving it to `D` is one explicit call.
    let x = Tensor::<Cpu>::from_slice(pixels, [n, 64]).to::<D>() / 16.0;
    let y = Tensor::<Cpu, i64>::from_slice(labels, [n]).to::<D>();
    let (x_train, y_train) = (x.narrow(0, 0, TRAIN_ROWS), y.narrow(0, 0, TRAIN_ROWS));
    let one_hot = y_train.unsqueeze(1).eq(&Tensor::<D, i64>::arange(0, 10)).to_dtype::<f32>();

    let (mut w, mut b) = (Tensor::<D>::zeros([64, 10]), Tensor::<D>::zeros([10]));
    let lr = 0.5;
    for step in 0..=300 {
        let logits = x_train.matmul(&w) + &b;
        if step % 100 == 0 {
            let loss = -(logits.log_softmax(-1) * &one_hot).sum_axis(1).mean();
            println!("step {step:3}: cross-entropy {:.4}", loss.item());
        }
        // d(loss)/d(logits) for softmax + cross-entropy, averaged over the batch.
        let grad = (logits.softmax(-1) - &one_hot) / TRAIN_ROWS as f32;
        w -= x_train.t().matmul(&grad) * lr;
        b -= grad.sum_axis(0) * lr;
    }

    let (x_test, y_test) = (x.narrow(0, TRAIN_ROWS, n - TRAIN_ROWS), y.narrow(0, TRAIN_ROWS, n - TRAIN_ROWS));
    let predicted = (x_test.matmul(&w) + &b).argmax(-1);
    predicted.eq(&y_test).to_dtype::<f32>().mean().item()
}

fn main() {
    let (pixels, labels) = load_digits();
    println!("{} images of handwritten digits", labels.len());
    let accuracy = if Cuda::<0>::is_available() {
        println!("training on Cuda<0>");
        train::<Cuda<0>>(&pixels, &labels)
    } else {
        println!("training on Cpu (no CUDA device: {})", Cuda::<0>::try_init().unwrap_err());
        train::<Cpu>(&pixels, &labels)
    };
    println!("test accuracy: {:.1}%", 100.0 * accuracy);
}
