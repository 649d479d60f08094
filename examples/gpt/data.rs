//! The Shakespeare text of the character-level examples, its characters as
//! tokens, and the pseudo-random batches of windows cut from it. Shared by
//! `examples/train_gpt.rs`, `examples/ddp_gpt.rs` and
//! `examples/train_char_lstm.rs`: `#[path = "gpt/data.rs"] mod data;`. The
//! batch positions are the ones `scripts/train_gpt_torch.py` and
//! `scripts/train_char_lstm_torch.py` draw.

use devtensor::{Device, Tensor};
use flate2::read::GzDecoder;
use std::io::Read;

/// The text as bytes (it is ASCII).
pub fn load_text() -> Vec<u8> {
    let mut text = Vec::new();
    GzDecoder::new(&include_bytes!("../data/shakespeare.txt.gz")[..])
        .read_to_end(&mut text)
        .expect("the bundled text decompresses");
    text
}

/// SplitMix64: the batch positions, the same in `scripts/train_gpt_torch.py`.
pub fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The characters of a text, in byte order: the tokens.
pub struct Vocabulary {
    /// Token `i` is character `chars[i]`.
    pub chars: Vec<u8>,
    /// The token of each byte.
    pub index: [i64; 256],
}

impl Vocabulary {
    /// The characters that `text` uses.
    pub fn of(text: &[u8]) -> Self {
        let mut chars = text.to_vec();
        chars.sort_unstable();
        chars.dedup();
        let mut index = [0i64; 256];
        for (i, &c) in chars.iter().enumerate() {
            index[c as usize] = i as i64;
        }
        Vocabulary { chars, index }
    }

    /// `text` as tokens.
    pub fn encode(&self, text: &[u8]) -> Vec<i64> {
        text.iter().map(|&c| self.index[c as usize]).collect()
    }
}

/// A split of the encoded text on `D`, and how to cut batches from it.
pub struct Split<D: Device> {
    pub tokens: Tensor<D, i64>,
    /// Distinguishes the splits' batch streams.
    pub stream: u64,
    /// Windows per batch.
    pub rows: usize,
    /// Tokens per window.
    pub block: usize,
}

impl<D: Device> Split<D> {
    /// The training (first 90%) and validation splits of `tokens`, on `D`.
    pub fn train_and_validation(tokens: &[i64], rows: usize, block: usize) -> (Self, Self) {
        let cut = tokens.len() * 9 / 10;
        let split =
            |part: &[i64], stream| Split { tokens: Tensor::from_slice(part, [part.len()]), stream, rows, block };
        (split(&tokens[..cut], 1), split(&tokens[cut..], 2))
    }

    /// Batch `index` of this split: `rows` windows of `block` tokens at
    /// pseudo-random starts, and the same windows one token later.
    pub fn batch(&self, index: u64) -> (Tensor<D, i64>, Tensor<D, i64>) {
        let (rows, block) = (self.rows, self.block);
        let starts = self.tokens.elem_count() - block - 1;
        let offsets: Vec<i64> = (0..rows as u64)
            .map(|row| (splitmix(self.stream ^ splitmix(index * rows as u64 + row)) % starts as u64) as i64)
            .flat_map(|start| start..start + block as i64)
            .collect();
        let x = Tensor::<D, i64>::from_vec(offsets, [rows * block]);
        let y = &x + 1;
        let window = |at: &Tensor<D, i64>| self.tokens.index_select(0, at).reshape([rows, block]);
        (window(&x), window(&y))
    }
}
