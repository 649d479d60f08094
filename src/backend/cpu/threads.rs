//! The threads CPU kernels run on: rayon's global pool, which the program's
//! main thread joins when it runs devtensor's first CPU operation.
//!
//! rayon runs a parallel loop called from a thread outside its pool by
//! handing the whole loop to the pool's workers and putting the caller to
//! sleep until they are done: two thread wake-ups per operation, and a core
//! idle while the caller waits. A training step runs hundreds of operations,
//! most of them small, so that hand-off was a large share of it (a layer
//! norm's forward and backward took 1.9x as long as with the caller taking
//! part). PyTorch's OpenMP has the calling thread do the first share of
//! every loop itself. Joining the pool (rayon's `use_current_thread`) does
//! the same: the main thread becomes worker 0 of a pool of the usual size,
//! one other thread per further core, and runs its share of each loop.
//!
//! The pool is built this way only when nothing has built rayon's global
//! pool before (a program that configures rayon keeps its own pool), only
//! from the thread named `main`, and only with at least two threads: a
//! thread outside the pool (a data loader, a thread a user spawns) hands its
//! loops to the other workers, so there must be at least one.
//! [`Cpu::set_num_threads`] builds it with a chosen count, for programs that
//! use rayon themselves before their first tensor operation.

use super::Cpu;
use crate::backend::Backend;
use crate::error::Error;
use devtensor_macros::fallible;
use std::sync::Once;

/// Makes the calling thread a worker of rayon's global pool if this is the
/// first CPU operation of the program, it runs on the main thread, and the
/// pool would have at least two threads; otherwise leaves rayon's defaults.
/// Cheap after the first call (one atomic load).
pub(super) fn join_pool() {
    static DECIDED: Once = Once::new();
    DECIDED.call_once(|| {
        // An error means the global pool exists already (the program built
        // it, or used rayon before): then that pool is used as it is.
        let _ = build_pool(default_threads());
    });
}

/// Builds rayon's global pool of `threads` threads, the calling thread one
/// of them when it is the main thread, not already in a pool, and `threads`
/// is at least two (see the module's documentation).
fn build_pool(threads: usize) -> std::result::Result<(), rayon::ThreadPoolBuildError> {
    let builder = rayon::ThreadPoolBuilder::new().num_threads(threads);
    let on_main = std::thread::current().name() == Some("main");
    if on_main && rayon::current_thread_index().is_none() && threads >= 2 {
        builder.use_current_thread().build_global()
    } else {
        builder.build_global()
    }
}

impl Cpu {
    /// Sets how many threads CPU operations use, like PyTorch's
    /// `torch.set_num_threads`: at most `threads` run a kernel's loops, the
    /// calling main thread among them. Without it devtensor uses one thread
    /// per core (or `RAYON_NUM_THREADS`), and the main thread joins in the
    /// same way at the first CPU operation.
    ///
    /// The threads are rayon's global pool, which cannot be resized once it
    /// runs, so call this at the start of `main`, before the first CPU
    /// operation and before anything else in the program uses rayon. Fails
    /// with [`Error::Argument`] for zero threads or when the pool already
    /// runs (it then keeps its size).
    ///
    /// ```rust,standalone_crate
    /// use devtensor::{Cpu, Tensor};
    /// Cpu::try_set_num_threads(2)?;
    /// assert_eq!(Cpu::num_threads(), 2);
    /// let x = Tensor::<Cpu>::ones([4]);
    /// assert_eq!(x.sum().to_vec(), vec![4.0]);
    /// // The pool runs now: its size is fixed.
    /// assert!(Cpu::try_set_num_threads(1).is_err());
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    #[fallible]
    pub fn set_num_threads(threads: usize) {
        let error = |reason: String| Error::Argument { op: "set_num_threads", device: Cpu::name(), reason };
        if threads == 0 {
            return Err(error("a pool needs at least one thread".into()));
        }
        build_pool(threads).map_err(|_| {
            error(format!(
                "the CPU threads already run ({} of them) and cannot be resized: call set_num_threads at the start \
                 of main, before the first CPU operation and before any other use of rayon",
                rayon::current_num_threads()
            ))
        })
    }

    /// How many threads CPU operations use: PyTorch's `torch.get_num_threads`.
    /// Starts the threads (see [`set_num_threads`](Self::set_num_threads))
    /// if no operation has yet.
    ///
    /// ```
    /// use devtensor::Cpu;
    /// assert!(Cpu::num_threads() >= 1);
    /// ```
    pub fn num_threads() -> usize {
        join_pool();
        rayon::current_num_threads()
    }
}

/// The thread count rayon's default pool would have: `RAYON_NUM_THREADS`
/// when it is a positive number, else one per available core.
fn default_threads() -> usize {
    let from_env = std::env::var("RAYON_NUM_THREADS").ok().and_then(|v| v.trim().parse::<usize>().ok());
    match from_env {
        Some(n) if n > 0 => n,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}
