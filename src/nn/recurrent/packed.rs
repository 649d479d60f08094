//! Batches of sequences of different lengths, PyTorch's
//! `torch.nn.utils.rnn`: `pad_sequence`, `pack_padded_sequence`,
//! `pack_sequence` and `pad_packed_sequence`.
//!
//! A [`PackedSequence`] here keeps the padded batch and the lengths, where
//! PyTorch's interleaves the steps of the sequences; the recurrent layers
//! mask the steps past each sequence's end instead, which gives PyTorch's
//! outputs and final states.

use crate::element::FloatElement;
use crate::error::Error;
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;

/// Sequences of different lengths batched for a recurrent layer, from
/// [`pack_padded_sequence`] or [`pack_sequence`], and what the layer
/// returns for one: read it back with [`pad_packed_sequence`].
///
/// ```
/// use devtensor::nn::{Lstm, pack_sequence, pad_packed_sequence};
/// use devtensor::{Cpu, Tensor};
/// let lstm = Lstm::<Cpu>::new(2, 4);
/// let (a, b) = (Tensor::<Cpu>::randn([3, 2]), Tensor::<Cpu>::randn([1, 2]));
/// let packed = pack_sequence(&[&a, &b], true);
/// let (output, (h_n, _)) = lstm.forward(&packed);
/// let (output, lengths) = pad_packed_sequence(&output, false, 0.0, None);
/// assert_eq!((output.dims(), lengths), (&[3, 2, 4][..], vec![3, 1]));
/// // h_n holds each sequence's state at its own last step:
/// assert_eq!(h_n.select(1, 1).to_vec(), output.select(0, 0).select(0, 1).to_vec());
/// ```
#[derive(Clone, Debug)]
pub struct PackedSequence<D: Device, E: FloatElement = f32> {
    padded: Tensor<D, E>,
    lengths: Vec<usize>,
}

impl<D: Device, E: FloatElement> PackedSequence<D, E> {
    pub(super) fn from_parts(padded: Tensor<D, E>, lengths: Vec<usize>) -> Self {
        PackedSequence { padded, lengths }
    }

    /// The batch, `[longest, batch, features...]`; the steps past a
    /// sequence's length hold whatever the padded input held there (zeros
    /// in a layer's output).
    pub fn padded(&self) -> &Tensor<D, E> {
        &self.padded
    }

    /// Each sequence's length, in the batch's order.
    pub fn lengths(&self) -> &[usize] {
        &self.lengths
    }

    /// The number of sequences.
    pub fn batch_size(&self) -> usize {
        self.lengths.len()
    }
}

fn argument(op: &'static str, device: String, reason: String) -> Error {
    Error::Argument { op, device, reason }
}

/// PyTorch's `pack_padded_sequence(input, lengths, batch_first,
/// enforce_sorted)`: the padded batch `input` (`[seq, batch, *]`, or
/// `[batch, seq, *]` with `batch_first`) as sequences of the given
/// `lengths`. With `enforce_sorted`, as in PyTorch, the lengths must not
/// increase; either way the layer's outputs and states keep the batch's
/// order. Fails when a length is 0 or longer than `seq`, or there is not
/// one per sequence.
///
/// ```
/// use devtensor::nn::pack_padded_sequence;
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::zeros([2, 4, 3]); // batch_first
/// assert_eq!(pack_padded_sequence(&x, &[4, 2], true, true).lengths(), &[4, 2]);
/// let unsorted = devtensor::nn::try_pack_padded_sequence(&x, &[2, 4], true, true);
/// assert!(unsorted.unwrap_err().to_string().contains("decreasing order"));
/// ```
#[fallible(free)]
pub fn pack_padded_sequence<D: Device, E: FloatElement>(
    input: &Tensor<D, E>,
    lengths: &[usize],
    batch_first: bool,
    enforce_sorted: bool,
) -> PackedSequence<D, E> {
    let op = "pack_padded_sequence";
    if input.rank() < 2 {
        return Err(Error::Shape {
            op,
            device: D::name(),
            shapes: vec![input.shape().clone()],
            reason: "expected a padded batch [seq, batch, *] ([batch, seq, *] with batch_first)".into(),
        });
    }
    let padded = if batch_first { input.try_transpose(0, 1)? } else { input.clone() };
    let (steps, batch) = (padded.dims()[0], padded.dims()[1]);
    if lengths.len() != batch {
        return Err(argument(op, D::name(), format!("{} lengths for a batch of {batch} sequences", lengths.len())));
    }
    if let Some(&len) = lengths.iter().find(|&&len| len == 0 || len > steps) {
        return Err(argument(op, D::name(), format!("every length must be between 1 and {steps}, got {len}")));
    }
    if enforce_sorted && lengths.windows(2).any(|w| w[0] < w[1]) {
        return Err(argument(
            op,
            D::name(),
            format!("`lengths` {lengths:?} must be sorted in decreasing order when enforce_sorted is true"),
        ));
    }
    let longest = lengths.iter().copied().max().unwrap_or(0);
    Ok(PackedSequence { padded: padded.try_narrow(0, 0, longest)?, lengths: lengths.to_vec() })
}

/// PyTorch's `pad_packed_sequence(sequence, batch_first, padding_value,
/// total_length)`: the packed batch as a padded tensor (`[seq, batch, *]`,
/// or `[batch, seq, *]` with `batch_first`) with `padding_value` past each
/// sequence's end, and the lengths. `seq` is the longest length, or
/// `total_length` if given (at least the longest). PyTorch returns the
/// lengths as a tensor; here they are a `Vec<usize>`.
#[fallible(free)]
pub fn pad_packed_sequence<D: Device, E: FloatElement>(
    sequence: &PackedSequence<D, E>,
    batch_first: bool,
    padding_value: f64,
    total_length: Option<usize>,
) -> (Tensor<D, E>, Vec<usize>) {
    let padded = &sequence.padded;
    let (steps, batch) = (padded.dims()[0], padded.dims()[1]);
    let total = total_length.unwrap_or(steps);
    if total < steps {
        return Err(argument(
            "pad_packed_sequence",
            D::name(),
            format!("total_length {total} is shorter than the longest sequence, {steps}"),
        ));
    }
    let mut mask_dims = vec![total, batch];
    mask_dims.resize(padded.rank(), 1);
    let inside: Vec<u8> = (0..total).flat_map(|t| sequence.lengths.iter().map(move |&len| u8::from(t < len))).collect();
    let mask = Tensor::<D, u8>::try_from_vec(inside, mask_dims)?;
    let value = Tensor::<D, E>::try_scalar(E::from_f64(padding_value))?;
    let padded = if total > steps {
        let mut tail = padded.dims().to_vec();
        tail[0] = total - steps;
        Tensor::try_cat(&[padded, &Tensor::<D, E>::try_zeros(tail)?], 0)?
    } else {
        padded.clone()
    };
    let out = mask.try_where_cond(&padded, &value)?;
    let out = if batch_first { out.try_transpose(0, 1)? } else { out };
    Ok((out, sequence.lengths.clone()))
}

/// PyTorch's `pad_sequence(sequences, batch_first, padding_value)`: tensors
/// `[len_i, *]` (the same `*`) stacked into `[longest, batch, *]` (or
/// `[batch, longest, *]`), `padding_value` past each one's end. Fails on
/// an empty list or tensors whose other axes differ.
///
/// ```
/// use devtensor::nn::pad_sequence;
/// use devtensor::{Cpu, Tensor};
/// let a = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0], [3]);
/// let b = Tensor::<Cpu>::from_vec(vec![4.0], [1]);
/// assert_eq!(pad_sequence(&[&a, &b], true, -1.0).to_vec2(), vec![vec![1.0, 2.0, 3.0], vec![4.0, -1.0, -1.0]]);
/// ```
#[fallible(free)]
pub fn pad_sequence<D: Device, E: FloatElement>(
    sequences: &[&Tensor<D, E>],
    batch_first: bool,
    padding_value: f64,
) -> Tensor<D, E> {
    let rest = |t: &Tensor<D, E>| t.dims().get(1..).map(<[usize]>::to_vec);
    let fits = !sequences.is_empty() && sequences.iter().all(|t| t.rank() >= 1 && rest(t) == rest(sequences[0]));
    if !fits {
        return Err(Error::Shape {
            op: "pad_sequence",
            device: D::name(),
            shapes: sequences.iter().map(|t| t.shape().clone()).collect(),
            reason: "expected one or more tensors [len, *] with the same trailing axes".into(),
        });
    }
    let longest = sequences.iter().map(|t| t.dims()[0]).max().unwrap_or(0);
    let mut padded = Vec::with_capacity(sequences.len());
    for t in sequences {
        let mut pad_dims = t.dims().to_vec();
        pad_dims[0] = longest - t.dims()[0];
        let pad = Tensor::<D, E>::try_full(pad_dims, E::from_f64(padding_value))?;
        padded.push(Tensor::try_cat(&[*t, &pad], 0)?);
    }
    let padded: Vec<&Tensor<D, E>> = padded.iter().collect();
    Tensor::try_stack(&padded, if batch_first { 0 } else { 1 })
}

/// PyTorch's `pack_sequence(sequences, enforce_sorted)`: the tensors
/// `[len_i, *]` padded and packed, [`pad_sequence`] then
/// [`pack_padded_sequence`].
#[fallible(free)]
pub fn pack_sequence<D: Device, E: FloatElement>(
    sequences: &[&Tensor<D, E>],
    enforce_sorted: bool,
) -> PackedSequence<D, E> {
    let lengths: Vec<usize> = sequences.iter().map(|t| t.dims().first().copied().unwrap_or(0)).collect();
    try_pack_padded_sequence(&try_pad_sequence(sequences, false, 0.0)?, &lengths, false, enforce_sorted)
}
