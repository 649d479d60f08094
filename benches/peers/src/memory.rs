//! `cargo run --release -- memory`: the heap that causal attention's
//! forward and backward take at growing contexts, fused against the
//! composed form (products and a softmax over the whole `[L, S]` score
//! matrix, which an additive mask that needs a gradient takes), counted by
//! this binary's allocator.

use devtensor::ops::attention::AttentionMask;
use devtensor::{Cpu, Tensor};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call is passed to the system allocator unchanged; the
// counters only observe the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract for `alloc`.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract for `alloc_zeroed`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract for `dealloc`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as the caller's contract for `realloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most bytes live above the start while `f` runs (buffers devtensor's
/// pool kept from earlier calls are reused without counting).
fn peak_during(f: impl FnOnce()) -> usize {
    let start = LIVE.load(Ordering::Relaxed);
    PEAK.store(start, Ordering::Relaxed);
    f();
    PEAK.load(Ordering::Relaxed).saturating_sub(start)
}

/// One measurement, in this process: the peak of causal attention's
/// forward and backward at context `t`, fused or composed.
pub fn measure(composed: bool, t: usize) -> usize {
    let input = |seed: u64| Tensor::<Cpu>::randn_with([1, HEADS, t, WIDTH], &mut devtensor::Generator::new(seed));
    let (q, k, v) = (input(1).requires_grad(), input(2).requires_grad(), input(3).requires_grad());
    let hidden = Tensor::<Cpu, u8>::ones([t, t]).triu(1);
    let additive = Tensor::<Cpu>::zeros([t, t]).masked_fill(&hidden, f32::NEG_INFINITY).requires_grad();
    let mask = if composed { AttentionMask::Add(&additive) } else { AttentionMask::Causal };
    peak_during(|| drop(q.scaled_dot_product_attention(&k, &v, mask, None).sum().backward()))
}

const HEADS: usize = 4;
const WIDTH: usize = 32;

/// Each measurement in a process of its own (this binary, `memory-one`),
/// so that no buffer pooled by an earlier one is reused uncounted.
pub fn report() {
    println!("causal attention, forward and backward, 1 x {HEADS} heads x T x {WIDTH}, f32, heap above the start:");
    println!("| T | fused | composed | one [T, T] score matrix per head |");
    println!("|---|---|---|---|");
    let exe = std::env::current_exe().expect("this binary's path");
    let run = |form: &str, t: usize| -> f64 {
        let out = std::process::Command::new(&exe).args(["memory-one", form, &t.to_string()]).output();
        let out = out.expect("a measuring process");
        String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().expect("a byte count") / (1 << 20) as f64
    };
    for t in [256usize, 1024, 4096] {
        let score_matrix = (HEADS * t * t * 4) as f64 / (1 << 20) as f64;
        println!("| {t} | {:.1} MiB | {:.1} MiB | {score_matrix:.1} MiB |", run("fused", t), run("composed", t));
    }
}
