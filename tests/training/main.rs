//! The training suites, one test binary: autograd's gradient rules and
//! graph, the nn layers and losses, and the optimizers, on every device.
// The suites run the examples themselves (`#[path = "../../examples/..."]`),
// and each example brings its own copy of the digits loader.
#![allow(clippy::duplicate_mod)]

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod autograd;
mod checkpoint;
mod conv;
mod data;
mod distributed;
mod embedding_bag;
mod fixture;
mod functions;
use common::gradcheck;
mod gpt;
mod gradient_checkpointing;
mod layers;
mod mixed_precision;
mod nn;
mod optim;
mod parallel;
mod porting;
mod recurrent;
mod second_order;
mod static_shapes;
mod store_attacks;
mod transformer;

/// The functions of `examples/custom_function.rs`, run on every device
/// (`functions`).
#[allow(dead_code)] // its `main`
#[path = "../../examples/custom_function.rs"]
mod custom_function_example;

/// The GPT of `examples/train_gpt.rs`, for the parity test (`gpt`).
#[allow(dead_code)] // what only the example uses
#[path = "../../examples/gpt/model.rs"]
mod model;
