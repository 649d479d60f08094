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
