//! The bundled handwritten digits (see README.md beside this file), shared
//! by the examples: `#[path = "data/digits.rs"] mod digits;`.

use std::io::Read;

const DIGITS: &[u8] = include_bytes!("digits.csv.gz");

/// Pixels (0..16, 64 per image, row-major 8x8) and labels (0..9) of the
/// 1797 images.
pub fn load_digits() -> (Vec<f32>, Vec<i64>) {
    let mut csv = String::new();
    flate2::read::GzDecoder::new(DIGITS).read_to_string(&mut csv).expect("the bundled file is valid gzip");
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for line in csv.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<f32> = line.split(',').map(|f| f.trim().parse().expect("a number")).collect();
        pixels.extend_from_slice(&fields[..64]);
        labels.push(fields[64] as i64);
    }
    (pixels, labels)
}

/// Images `[N, 1, 8, 8]` scaled to `[0, 1]` and labels `[N]`, on the CPU.
pub type Split = (devtensor::Tensor<devtensor::Cpu>, devtensor::Tensor<devtensor::Cpu, i64>);

/// The images and labels shuffled with `seed` and split 80/20 into a
/// training and a test set.
#[allow(dead_code)] // not every example splits the data
pub fn shuffled_split(pixels: &[f32], labels: &[i64], seed: u64) -> (Split, Split) {
    use devtensor::{Cpu, Generator, Tensor};
    let n = labels.len();
    let images = Tensor::<Cpu>::from_slice(pixels, [n, 1, 8, 8]) / 16.0;
    let labels = Tensor::<Cpu, i64>::from_slice(labels, [n]);
    let order = Tensor::<Cpu, i64>::randperm_with(n, &mut Generator::new(seed));
    let train = n * 4 / 5;
    let part = |start: usize, len: usize| {
        let rows = order.narrow(0, start, len);
        (images.index_select(0, &rows), labels.index_select(0, &rows))
    };
    (part(0, train), part(train, n - train))
}
