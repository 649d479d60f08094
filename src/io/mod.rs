//! Saving and loading: checkpoints of a model's parameters and buffers and,
//! optionally, its optimizer's state, in the safetensors format (PyTorch's
//! `state_dict` files, readable by `safetensors.torch.load_file`).
//!
//! This layer sits above [`nn`](crate::nn) and [`optim`](crate::optim): a
//! checkpoint reads both, and neither knows about files.

mod checkpoint;

pub use checkpoint::{Checkpoint, IncompatibleKeys, LoadInto};
