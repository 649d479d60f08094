//! The one place the CPU kernels hand work to rayon: parallel loops whose
//! body is a trait object.
//!
//! rayon's job machinery (stack jobs, latches, the recursive splitting of
//! a range) is generic over the closure it runs. A kernel that called
//! `par_chunks_mut(..).for_each(..)` with a closure of its own compiled all
//! of it again for every kernel, op and element type: the rayon functions
//! were a third of devtensor's LLVM IR once the core was compiled here
//! (`cargo llvm-lines --lib --release`). Through these, rayon is
//! compiled once per type of chunk or item handed out (an output element
//! type, or a kernel's tuple of task arguments), not per closure; the loop bodies
//! stay generic and fully inlined, and each task costs one indirect call,
//! nothing next to the thousands of elements a task holds.

use rayon::prelude::*;

/// `task(i, piece)` for each consecutive piece of `chunk` elements of `out`
/// (the last one shorter), split across the pool's threads.
pub(crate) fn for_each_chunk<T: Send>(out: &mut [T], chunk: usize, task: &(dyn Fn(usize, &mut [T]) + Sync)) {
    out.par_chunks_mut(chunk.max(1)).enumerate().for_each(|(i, piece)| task(i, piece));
}

/// `task(i)` for every `i` in `0..count`, in order, computed across the
/// pool's threads at least `min_len` indices to a task.
pub(crate) fn map_tasks<T: Send>(count: usize, min_len: usize, task: &(dyn Fn(usize) -> T + Sync)) -> Vec<T> {
    (0..count).into_par_iter().with_min_len(min_len.max(1)).map(task).collect()
}

/// `task(item)` for every item, split across the pool's threads, at least
/// `min_len` items to a task: for work already cut into pieces (a kernel's
/// disjoint `&mut` slices of its outputs, with what each piece reads).
pub(crate) fn for_each_item<T: Send>(items: Vec<T>, min_len: usize, task: &(dyn Fn(T) + Sync)) {
    items.into_par_iter().with_min_len(min_len.max(1)).for_each(task);
}

/// `task(item)` for every item, in order, computed across the pool's threads.
pub(crate) fn map_items<T: Send, R: Send>(items: Vec<T>, task: &(dyn Fn(T) -> R + Sync)) -> Vec<R> {
    items.into_par_iter().map(task).collect()
}
