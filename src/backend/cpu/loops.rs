//! The loops every CPU kernel shares: element-wise maps over strided
//! inputs, compiled for the widest vector unit present and split across
//! threads when the output is large.

use super::math::BASELINE_FMA;
use super::pool::{POOL_MIN_BYTES, output_buffer};
use super::tasks::for_each_chunk;
#[cfg(target_arch = "x86_64")]
use super::{Cpu, CpuIsa};
use crate::element::Element;
use crate::error::Result;
use crate::layout::{Layout, for_each_block};
use smallvec::SmallVec;
use std::marker::PhantomData;

/// Output sizes from which elementwise kernels split work across threads;
/// below it, thread hand-off costs more than it saves.
pub(crate) const PARALLEL_MIN_ELEMS: usize = if cfg!(miri) { 1 << 8 } else { 1 << 16 };
/// Elements per parallel work item: large enough to amortise scheduling,
/// small enough to balance two to a few dozen cores. A multiple of the
/// reductions' block (1024), so under Miri only 32 times smaller.
pub(crate) const PARALLEL_CHUNK: usize = if cfg!(miri) { 1 << 10 } else { 1 << 15 };

/// Whether a loop over `elems` elements is worth splitting across threads:
/// large enough to pay for the hand-off, with more than one thread to hand
/// it to. With one, rayon would give the loop to its only worker and put
/// the caller to sleep until it finishes: two context switches for nothing
/// (LeNet's batch-4 inference on one thread took 297 µs that way, 127 µs
/// with this check).
pub(crate) fn split_across_threads(elems: usize) -> bool {
    elems >= PARALLEL_MIN_ELEMS && pool_threads() > 1
}

/// How many items of `len` elements make one parallel task of about
/// [`PARALLEL_CHUNK`] elements (at least one).
pub(crate) fn items_per_task(len: usize) -> usize {
    (PARALLEL_CHUNK / len.max(1)).max(1)
}

/// Threads in rayon's pool, looked up once: the pool does not change size
/// after it starts, and every kernel that might split asks.
pub(crate) fn pool_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(super::Cpu::num_threads)
}

/// Whether an output of `len` elements of `T` is built with `collect`: a
/// fresh allocation written once, with no zero-fill first and no thread
/// hand-off. Larger outputs come from the pool and may be split across threads.
pub(crate) fn is_small_output<T>(len: usize) -> bool {
    len < PARALLEL_MIN_ELEMS && len * size_of::<T>() < POOL_MIN_BYTES
}

/// A loop for [`vectorized`] to compile for the CPU's widest vector unit.
///
/// Any `FnOnce() -> R` closure is one; the compiler then decides whether to
/// inline it into the copy built with AVX-512, and declines for a large
/// body, which then runs with baseline 128-bit vectors. A type whose `run`
/// is `#[inline(always)]` (such as the map of [`map_strided`]) is always
/// compiled into that copy.
///
/// `FMA` says whether the copy being compiled has fused multiply-add as one
/// instruction: the polynomials of [`exp_nonpositive`](super::exp_nonpositive)
/// and [`erfc`](super::erfc) then take half the instructions, and without
/// it `mul_add` would be a call to libm per element (8x slower GELU on the
/// scalar path). A closure cannot be generic, so it runs without.
pub(crate) trait VectorLoop {
    /// What the loop returns.
    type Output;
    /// Runs the loop.
    fn run<const FMA: bool>(self) -> Self::Output;
}

impl<R, F: FnOnce() -> R> VectorLoop for F {
    type Output = R;
    #[inline(always)]
    fn run<const FMA: bool>(self) -> R {
        self()
    }
}

/// An element function for [`map_strided`]. Closures are ones; a type whose
/// `call` is `#[inline(always)]` (an op's `apply`) is always inlined into
/// the vectorised loop, however large its body (GELU's `erfc` and `exp`).
pub(crate) trait ElementFn<E, T>: Sync {
    /// The function's value at `x`, in a loop compiled with fused
    /// multiply-add or without (`FMA`, as in [`VectorLoop::run`]).
    fn call<const FMA: bool>(&self, x: E) -> T;
}

impl<E, T, F: Fn(E) -> T + Sync> ElementFn<E, T> for F {
    #[inline(always)]
    fn call<const FMA: bool>(&self, x: E) -> T {
        self(x)
    }
}

/// Runs `body`, a loop for the compiler to vectorise, compiled for the
/// widest vector unit the kernels may use ([`Cpu::isa`]).
///
/// The crate is built for baseline x86-64 (SSE2), so without this a dense
/// elementwise loop uses 128-bit vectors even on an AVX-512 machine. `body`
/// is inlined into a copy of this function built with AVX-512 or AVX2
/// enabled, chosen at run time (the level is a cached load).
#[inline(always)]
pub(crate) fn vectorized<L: VectorLoop>(body: L) -> L::Output {
    #[cfg(target_arch = "x86_64")]
    match Cpu::isa() {
        // SAFETY: `Cpu::isa` is never above `Cpu::detected_isa`, which
        // reports AVX-512 only when the CPU has the four subsets
        // `with_avx512` enables, and FMA.
        CpuIsa::Avx512 => return unsafe { with_avx512(body) },
        // SAFETY: likewise, AVX2 and FMA were detected on this CPU.
        CpuIsa::Avx2 => return unsafe { with_avx2(body) },
        CpuIsa::Scalar => {}
    }
    body.run::<BASELINE_FMA>()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
fn with_avx512<L: VectorLoop>(body: L) -> L::Output {
    body.run::<true>()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn with_avx2<L: VectorLoop>(body: L) -> L::Output {
    body.run::<true>()
}

/// `out[i] = f(src[i])`, as a [`VectorLoop`] that is always inlined whole.
/// `S` is `T` or, for a fresh vector, `MaybeUninit<T>`.
struct DenseMap<'a, E, T, S, F> {
    out: &'a mut [S],
    src: &'a [E],
    f: &'a F,
    value: PhantomData<fn() -> T>,
}

/// An output element a [`DenseMap`] writes: initialised or not.
trait Slot<T> {
    fn put(&mut self, value: T);
}

impl<T> Slot<T> for T {
    #[inline(always)]
    fn put(&mut self, value: T) {
        *self = value;
    }
}

impl<T> Slot<T> for std::mem::MaybeUninit<T> {
    #[inline(always)]
    fn put(&mut self, value: T) {
        self.write(value);
    }
}

impl<E: Copy, T, S: Slot<T>, F: ElementFn<E, T>> VectorLoop for DenseMap<'_, E, T, S, F> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        for (o, &x) in self.out.iter_mut().zip(self.src) {
            o.put(self.f.call::<FMA>(x));
        }
    }
}

/// Gathers the elements `layout` selects into a new row-major vector,
/// applying `f`; dense inputs run as one vectorised loop, split across
/// threads when large.
///
/// `op` names the operation in an allocation error.
pub(crate) fn map_strided<E: Element, T: Element>(
    op: &'static str,
    src: &[E],
    layout: &Layout,
    f: impl Fn(E) -> T + Sync,
) -> Result<Vec<T>> {
    map_elements(op, src, layout, f)
}

/// [`map_strided`] with any [`ElementFn`], such as an op's `apply`.
pub(crate) fn map_elements<E: Element, T: Element>(
    op: &'static str,
    src: &[E],
    layout: &Layout,
    f: impl ElementFn<E, T>,
) -> Result<Vec<T>> {
    let len = layout.elem_count();
    if let Some(range) = layout.contiguous_range() {
        let src = &src[range];
        if is_small_output::<T>(len) {
            let mut out = Vec::with_capacity(len);
            vectorized(DenseMap { out: &mut out.spare_capacity_mut()[..len], src, f: &f, value: PhantomData });
            // SAFETY: the map wrote each of the first `len` elements (`src`
            // has `len`, the slice `len` slots of the reserved capacity).
            unsafe { out.set_len(len) };
            return Ok(out);
        }
        let mut out = output_buffer(op, len)?;
        let run = |out: &mut [T], src: &[E]| vectorized(DenseMap { out, src, f: &f, value: PhantomData });
        if split_across_threads(out.len()) {
            for_each_chunk(&mut out, PARALLEL_CHUNK, &|i, o| run(o, &src[i * PARALLEL_CHUNK..][..o.len()]));
        } else {
            run(&mut out, src);
        }
        return Ok(out);
    }
    let mut out = output_buffer(op, len)?;
    // The `contiguous` after a transpose or a head split.
    split_strided(&mut out, layout.dims(), [layout.strides()], [layout.offset()], &|out, dims, [strides], [offset]| {
        gather(out, src, dims, strides, offset, &f)
    });
    Ok(out)
}

/// Runs `task(out, dims, strides, offsets)` over the row-major `out` of
/// strided operands of shape `dims`: once when small, and when large split
/// along its outermost axis of more than one index, into tasks of whole
/// slices of that axis of about `PARALLEL_CHUNK` elements each, each task
/// given its part of `out` and the dims and offsets of its slices.
fn split_strided<T: Send, const K: usize>(
    out: &mut [T],
    dims: &[usize],
    strides: [&[usize]; K],
    offsets: [usize; K],
    task: &(dyn Fn(&mut [T], &[usize], [&[usize]; K], [usize; K]) + Sync),
) {
    // The task is a trait object: this function, its splitting and its
    // array arithmetic are compiled once per output type, not per kernel.
    match dims.iter().position(|&d| d > 1) {
        Some(axis) if split_across_threads(out.len()) => {
            let slice_len = out.len() / dims[axis];
            let per_task = items_per_task(slice_len);
            for_each_chunk(out, per_task * slice_len, &|i, out| {
                let mut task_dims: SmallVec<[usize; 6]> = SmallVec::from_slice(&dims[axis..]);
                task_dims[0] = out.len() / slice_len;
                let offsets = std::array::from_fn(|k| offsets[k] + i * per_task * strides[k][axis]);
                task(out, &task_dims, strides.map(|s| &s[axis..]), offsets);
            });
        }
        _ => task(out, dims, strides, offsets),
    }
}

/// `out = f(src[...])` in row-major order of the elements that `dims`,
/// `strides` and `offset` select.
fn gather<E: Element, T>(
    out: &mut [T],
    src: &[E],
    dims: &[usize],
    strides: &[usize],
    offset: usize,
    f: &impl ElementFn<E, T>,
) {
    let mut next = 0;
    for_each_block(dims, [strides], [offset], |[base], len, [stride]| {
        let out = &mut out[next..next + len];
        if stride == 1 {
            for (o, &x) in out.iter_mut().zip(&src[base..base + len]) {
                *o = f.call::<BASELINE_FMA>(x);
            }
        } else {
            for (i, o) in out.iter_mut().enumerate() {
                *o = f.call::<BASELINE_FMA>(src[base + i * stride]);
            }
        }
        next += len;
    });
}

/// `out[i] = f(a[i], b[i])` over two operands laid out with one shape.
/// Dense operands run as one vectorised loop, split across threads when
/// large; a broadcast (stride-0) operand of the inner block is hoisted.
pub(crate) fn zip_into<A: Element, B: Element, T: Element>(
    out: &mut [T],
    a: &[A],
    al: &Layout,
    b: &[B],
    bl: &Layout,
    f: impl Fn(A, B) -> T + Sync,
) {
    if let (Some(ra), Some(rb)) = (al.contiguous_range(), bl.contiguous_range()) {
        let (a, b) = (&a[ra], &b[rb]);
        let run = |out: &mut [T], a: &[A], b: &[B]| {
            vectorized(|| {
                for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                    *o = f(x, y);
                }
            })
        };
        if split_across_threads(out.len()) {
            for_each_chunk(out, PARALLEL_CHUNK, &|i, o| {
                let start = i * PARALLEL_CHUNK;
                run(o, &a[start..][..o.len()], &b[start..][..o.len()])
            });
        } else {
            run(out, a, b);
        }
        return;
    }
    // Broadcasts: a bias added to every row, a tensor scaled by a scalar
    // tensor (2% of a GPT's training step on one thread, in baseline
    // vectors, before they were split and vectorised).
    split_strided(
        out,
        al.dims(),
        [al.strides(), bl.strides()],
        [al.offset(), bl.offset()],
        &|out, dims, strides, offsets| {
            let mut next = 0;
            for_each_block(dims, strides, offsets, |[x, y], len, [sx, sy]| {
                let out = &mut out[next..next + len];
                match (sx, sy) {
                    (1, 1) => vectorized(|| {
                        for ((o, &p), &q) in out.iter_mut().zip(&a[x..x + len]).zip(&b[y..y + len]) {
                            *o = f(p, q);
                        }
                    }),
                    (1, 0) => vectorized(|| {
                        let q = b[y];
                        for (o, &p) in out.iter_mut().zip(&a[x..x + len]) {
                            *o = f(p, q);
                        }
                    }),
                    (0, 1) => vectorized(|| {
                        let p = a[x];
                        for (o, &q) in out.iter_mut().zip(&b[y..y + len]) {
                            *o = f(p, q);
                        }
                    }),
                    _ => {
                        for (i, o) in out.iter_mut().enumerate() {
                            *o = f(a[x + i * sx], b[y + i * sy]);
                        }
                    }
                }
                next += len;
            });
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Shape;
    use proptest::prelude::*;

    /// The element of `layout` at row-major position `i`, found by division:
    /// independent of the block walker and of how the gather is split.
    fn offset_of(layout: &Layout, mut i: usize) -> usize {
        let mut offset = layout.offset();
        for (&d, &s) in layout.dims().iter().zip(layout.strides()).rev() {
            offset += (i % d) * s;
            i /= d;
        }
        offset
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 24 }))]

        /// Gathers of permuted, stepped and offset views, large enough to
        /// be split across threads (and small ones that are not), against
        /// the element-by-element reference.
        #[test]
        fn strided_gather_matches_indexing(
            dims in prop::collection::vec(1usize..24, 1..=4),
            scale in 1usize..=if cfg!(miri) { 4 } else { 96 },
            steps in prop::collection::vec(1usize..=3, 4),
            order in Just((0..4).collect::<Vec<usize>>()).prop_shuffle(),
            offset in 0usize..5,
        ) {
            let (layout, len) = strided_view(dims, scale, &steps, order, offset);
            let src: Vec<i64> = (0..len).map(|x| x as i64).collect();
            let got = map_strided("test", &src, &layout, |x| x).unwrap();
            let want: Vec<i64> = (0..layout.elem_count()).map(|i| src[offset_of(&layout, i)]).collect();
            prop_assert_eq!(got, want);
        }

        /// Pairs of a strided view and a broadcast of a dense tensor (axes
        /// of stride 0), split across threads when large, against indexing.
        #[test]
        fn strided_zip_matches_indexing(
            dims in prop::collection::vec(1usize..24, 1..=4),
            scale in 1usize..=if cfg!(miri) { 4 } else { 96 },
            steps in prop::collection::vec(1usize..=3, 4),
            order in Just((0..4).collect::<Vec<usize>>()).prop_shuffle(),
            broadcast in prop::collection::vec(any::<bool>(), 4),
            offset in 0usize..5,
        ) {
            let (a, len) = strided_view(dims, scale, &steps, order, offset);
            let mut strides = vec![0; a.dims().len()];
            let mut step = 1;
            for axis in (0..strides.len()).rev() {
                if !broadcast[axis] {
                    strides[axis] = step;
                    step *= a.dims()[axis];
                }
            }
            let b = Layout::new(a.shape().clone(), strides.into_iter().collect(), 0);
            let (xs, ys): (Vec<i64>, Vec<i64>) = ((0..len as i64).collect(), (0..step as i64).map(|y| -y).collect());
            let mut got = vec![0; a.elem_count()];
            zip_into(&mut got, &xs, &a, &ys, &b, |x, y| x * 1000 + y);
            let want: Vec<i64> =
                (0..a.elem_count()).map(|i| xs[offset_of(&a, i)] * 1000 + ys[offset_of(&b, i)]).collect();
            prop_assert_eq!(got, want);
        }
    }

    /// A view of `dims` (the first axis scaled by `scale`, so that some views
    /// pass the threshold of splitting) that steps over a dense parent's axes
    /// by `steps` and permutes them by `order`, from `offset`; and the
    /// parent's storage length.
    fn strided_view(
        mut dims: Vec<usize>,
        scale: usize,
        steps: &[usize],
        order: Vec<usize>,
        offset: usize,
    ) -> (Layout, usize) {
        dims[0] *= scale;
        let rank = dims.len();
        let parent: Vec<usize> = dims.iter().zip(steps).map(|(&d, &s)| d * s).collect();
        let mut strides = vec![0; rank];
        let mut step = 1;
        for axis in (0..rank).rev() {
            strides[axis] = step * steps[axis];
            step *= parent[axis];
        }
        let axes: Vec<usize> = order.into_iter().filter(|&a| a < rank).collect();
        let layout = Layout::new(
            Shape::from(axes.iter().map(|&a| dims[a]).collect::<Vec<_>>()),
            axes.iter().map(|&a| strides[a]).collect(),
            offset,
        );
        (layout, offset + step)
    }
}
