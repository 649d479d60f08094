//! A probe of the fixed cost of small operations, for counting instructions
//! with callgrind (instructions do not vary with the machine's load, unlike
//! seconds):
//!
//! ```text
//! cargo bench --bench fixed_cost --no-run
//! RAYON_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/deps/fixed_cost-<hash> 20000
//! ```
//!
//! The loop runs `&a + &b` and `&c * 2.0` on 256 `f32`, `&m + &row`
//! ([16, 16] + [16]), `.sum().item()` and `.max().item()` on untracked
//! tensors: the inference path whose cost autograd must not raise.

use devtensor::{Cpu, Tensor};
use std::hint::black_box;

fn main() {
    let iterations: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(20_000);
    let a = Tensor::<Cpu>::ones([256]);
    let b = Tensor::<Cpu>::ones([256]);
    let m = Tensor::<Cpu>::ones([16, 16]);
    let row = Tensor::<Cpu>::ones([16]);
    let mut total = 0.0f32;
    for _ in 0..iterations {
        let c = black_box(&a) + black_box(&b);
        let d = &c * 2.0;
        let e = black_box(&m) + black_box(&row);
        total += d.sum().item() + e.max().item();
    }
    println!("{total}");
}
