//! Recurrent layers: PyTorch's `nn.RNN`, `nn.LSTM` and `nn.GRU`, their
//! cells, and the variable-length batches of `torch.nn.utils.rnn`.
//!
//! One concept per file: `cell.rs` holds the three cells and the one step
//! of each recurrence (which the layers run too), `layer.rs` the layers
//! (stacks of cells over time, both directions), `packed.rs` the
//! variable-length batches.

mod cell;
mod layer;
mod packed;

pub use cell::{GruCell, LstmCell, RnnCell, RnnNonlinearity};
pub use layer::{Gru, Lstm, RecurrentConfig, RecurrentInput, Rnn};
pub use packed::{
    PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence, pad_sequence, try_pack_padded_sequence,
    try_pack_sequence, try_pad_packed_sequence, try_pad_sequence,
};
