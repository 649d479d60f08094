//! Indexing and joining kernels on the CPU.
//!
//! Every index reaching these kernels was checked against its axis by the
//! caller, so the `as usize` conversions below cannot wrap.

use super::{IndexKernel, ScatterMode};
use crate::backend::cpu::for_each_chunk;
use crate::backend::cpu::{
    CpuStorage, PARALLEL_CHUNK, check_host_request, map_strided, output_buffer, split_across_threads,
};
use crate::backend::{Backend, Cpu};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::{Dims, Layout, Shape, count_of, for_each_block};
use std::cmp::Ordering;

/// The storage offset of every position of the sub-tensor `dims`/`strides`
/// starting at `offset`, in row-major order.
fn offsets_of(dims: &[usize], strides: &[usize], offset: usize) -> Result<Vec<usize>> {
    let count = count_of(dims);
    let mut out = Vec::new();
    // Fallible: the dimensions may be those of a huge broadcast view.
    let bytes = count.saturating_mul(size_of::<usize>());
    check_host_request("index_select", bytes)?;
    out.try_reserve_exact(count).map_err(|_| Error::OutOfMemory {
        op: "index_select",
        device: Cpu::name(),
        requested: bytes,
        free: None,
    })?;
    for_each_block(dims, [strides], [offset], |[base], len, [stride]| {
        out.extend((0..len).map(|i| base + i * stride));
    });
    Ok(out)
}

/// Copies the sub-tensor of `src` at `offset` with `dims`/`strides` into the
/// dense `out`, as one `copy_from_slice` when it is dense.
fn copy_block<E: Element>(out: &mut [E], src: &[E], dims: &[usize], strides: &[usize], offset: usize) {
    let mut next = 0;
    for_each_block(dims, [strides], [offset], |[base], len, [stride]| {
        let out = &mut out[next..next + len];
        if stride == 1 {
            out.copy_from_slice(&src[base..base + len]);
        } else {
            for (i, o) in out.iter_mut().enumerate() {
                *o = src[base + i * stride];
            }
        }
        next += len;
    });
}

/// The indices of a 1-D layout as storage positions along an axis of `stride`.
fn index_offsets(indices: &[i64], layout: &Layout, stride: usize) -> Result<Vec<usize>> {
    Ok(map_strided("index_select", indices, layout, |i| i)?.into_iter().map(|i| i as usize * stride).collect())
}

/// `dims`/`strides` with `axis` removed.
fn without_axis(layout: &Layout, axis: usize) -> (Dims, Dims) {
    let mut dims: Dims = layout.dims().into();
    let mut strides: Dims = layout.strides().into();
    dims.remove(axis);
    strides.remove(axis);
    (dims, strides)
}

/// A dense copy of `layout`'s elements for an accumulating kernel to add into.
fn dense_copy<E: Element>(op: &'static str, data: &[E], layout: &Layout) -> Result<Vec<E>> {
    map_strided(op, data, layout, |x| x)
}

impl IndexKernel for Cpu {
    fn first_out_of_range(indices: &CpuStorage<i64>, layout: &Layout, size: usize) -> Result<Option<i64>> {
        let data = indices.as_slice();
        let mut found = None;
        // Negative values become huge as `u64`, so one comparison catches both ends.
        let bad = |i: i64| i as u64 >= size as u64;
        for_each_block(layout.dims(), [layout.strides()], [layout.offset()], |[base], len, [stride]| {
            if found.is_some() {
                return;
            }
            found = (0..len).map(|k| data[base + k * stride]).find(|&i| bad(i));
        });
        Ok(found)
    }

    fn index_select<E: Element>(
        src: &CpuStorage<E>,
        src_layout: &Layout,
        axis: usize,
        indices: &CpuStorage<i64>,
        indices_layout: &Layout,
    ) -> Result<CpuStorage<E>> {
        let src = src.as_slice();
        let n = indices_layout.elem_count();
        let dims = src_layout.dims();
        let inner = count_of(&dims[axis + 1..]);
        let outer_count = count_of(&dims[..axis]);
        let mut out = output_buffer("index_select", count_of(&[outer_count, n, inner]))?;
        if out.is_empty() {
            return Ok(CpuStorage::from_vec(out));
        }
        let strides = src_layout.strides();
        let picks = index_offsets(indices.as_slice(), indices_layout, strides[axis])?;
        let outer = offsets_of(&dims[..axis], &strides[..axis], src_layout.offset())?;
        let (inner_dims, inner_strides) = (&dims[axis + 1..], &strides[axis + 1..]);
        if inner == 1 {
            // Selecting single elements: one plain loop per output row.
            let fill = |(row, o): (&mut [E], &usize)| {
                for (x, &p) in row.iter_mut().zip(&picks) {
                    *x = src[o + p];
                }
            };
            if split_across_threads(out.len()) {
                let rows = (PARALLEL_CHUNK / n).max(1);
                for_each_chunk(&mut out, n * rows, &|t, block| {
                    block.chunks_mut(n).zip(&outer[t * rows..]).for_each(fill);
                });
            } else {
                out.chunks_mut(n).zip(&outer).for_each(fill);
            }
            return Ok(CpuStorage::from_vec(out));
        }
        // Row-major trailing axes (always so for a contiguous input, as in
        // an embedding lookup) make each selected slice one `memcpy`.
        let dense = Layout::new(Shape::from(inner_dims), inner_strides.into(), 0).is_contiguous();
        // One chunk of `inner` elements per (outer position, index) pair.
        let fill = |(k, chunk): (usize, &mut [E])| {
            let base = outer[k / n] + picks[k % n];
            if dense {
                chunk.copy_from_slice(&src[base..base + inner]);
            } else {
                copy_block(chunk, src, inner_dims, inner_strides, base);
            }
        };
        if split_across_threads(out.len()) {
            let per_task = PARALLEL_CHUNK.div_ceil(inner);
            for_each_chunk(&mut out, inner * per_task, &|t, block| {
                block.chunks_mut(inner).enumerate().for_each(|(j, chunk)| fill((t * per_task + j, chunk)));
            });
        } else {
            out.chunks_mut(inner).enumerate().for_each(fill);
        }
        Ok(CpuStorage::from_vec(out))
    }

    fn gather<E: Element>(
        src: &CpuStorage<E>,
        src_layout: &Layout,
        axis: usize,
        index: &CpuStorage<i64>,
        index_layout: &Layout,
    ) -> Result<CpuStorage<E>> {
        let (src, idx) = (src.as_slice(), index.as_slice());
        let mut out = output_buffer("gather", index_layout.elem_count())?;
        let axis_stride = src_layout.strides()[axis];
        // Walk `index`'s shape over `src` with the gathered axis frozen; the
        // index value then supplies that axis's offset.
        let mut src_strides: Dims = src_layout.strides().into();
        src_strides[axis] = 0;
        let idx_strides = index_layout.strides();
        let walk = |out: &mut [E], dims: &[usize], ss: &[usize], is: &[usize], s0: usize, i0: usize| {
            let mut next = 0;
            for_each_block(dims, [ss, is], [s0, i0], |[s, i], len, [ss, is]| {
                for (k, o) in out[next..next + len].iter_mut().enumerate() {
                    *o = src[s + k * ss + idx[i + k * is] as usize * axis_stride];
                }
                next += len;
            });
        };
        let dims = index_layout.dims();
        let (s0, i0) = (src_layout.offset(), index_layout.offset());
        if split_across_threads(out.len()) && dims[0] > 1 {
            // Output slices along axis 0 are independent.
            let row = out.len() / dims[0];
            for_each_chunk(&mut out, row, &|r, chunk| {
                let (s, i) = (s0 + r * src_strides[0], i0 + r * idx_strides[0]);
                walk(chunk, &dims[1..], &src_strides[1..], &idx_strides[1..], s, i);
            });
        } else {
            walk(&mut out, dims, &src_strides, idx_strides, s0, i0);
        }
        Ok(CpuStorage::from_vec(out))
    }

    fn scatter<E: Element>(
        dst: &CpuStorage<E>,
        dst_layout: &Layout,
        axis: usize,
        index: &CpuStorage<i64>,
        index_layout: &Layout,
        src: &CpuStorage<E>,
        src_layout: &Layout,
        mode: ScatterMode,
    ) -> Result<CpuStorage<E>> {
        let out = dense_copy("scatter", dst.as_slice(), dst_layout)?;
        let args = (out, dst_layout.shape(), axis, index.as_slice(), index_layout, src.as_slice(), src_layout);
        Ok(CpuStorage::from_vec(match mode {
            ScatterMode::Assign => scatter_with(args, |_, s| s),
            ScatterMode::Add => scatter_with(args, E::add),
            ScatterMode::Multiply => scatter_with(args, E::mul),
            ScatterMode::Max => scatter_with(args, E::max),
            ScatterMode::Min => scatter_with(args, E::min),
        }))
    }

    fn index_add<E: Element>(
        dst: &CpuStorage<E>,
        dst_layout: &Layout,
        axis: usize,
        indices: &CpuStorage<i64>,
        indices_layout: &Layout,
        src: &CpuStorage<E>,
        src_layout: &Layout,
    ) -> Result<CpuStorage<E>> {
        let mut out = dense_copy("index_add", dst.as_slice(), dst_layout)?;
        let src = src.as_slice();
        let out_layout = Layout::contiguous(dst_layout.shape().clone());
        let picks = index_offsets(indices.as_slice(), indices_layout, out_layout.strides()[axis])?;
        let (dims, out_strides) = without_axis(&out_layout, axis);
        let (_, src_strides) = without_axis(src_layout, axis);
        let src_axis_stride = src_layout.strides()[axis];
        // Slice `j` of `src` onto slice `picks[j]` of the output, in order, so
        // repeated indices accumulate deterministically.
        for (j, &pick) in picks.iter().enumerate() {
            let src_base = src_layout.offset() + j * src_axis_stride;
            for_each_block(&dims, [&out_strides, &src_strides], [pick, src_base], |[o, s], len, [os, ss]| {
                if (os, ss) == (1, 1) {
                    for (x, &y) in out[o..o + len].iter_mut().zip(&src[s..s + len]) {
                        *x = x.add(y);
                    }
                } else {
                    for k in 0..len {
                        out[o + k * os] = out[o + k * os].add(src[s + k * ss]);
                    }
                }
            });
        }
        Ok(CpuStorage::from_vec(out))
    }

    fn cat<E: Element>(inputs: &[(&CpuStorage<E>, &Layout)], axis: usize, out_shape: &Shape) -> Result<CpuStorage<E>> {
        let mut out = output_buffer("cat", out_shape.elem_count())?;
        if out.is_empty() {
            return Ok(CpuStorage::from_vec(out)); // and the products below might overflow
        }
        let dims = out_shape.dims();
        // Each output row (one position of the axes before `axis`) is the
        // inputs' matching rows side by side.
        let row: usize = dims[axis..].iter().product();
        let outer: usize = dims[..axis].iter().product();
        let dense: Vec<Option<&[E]>> =
            inputs.iter().map(|(s, l)| l.contiguous_range().map(|r| &s.as_slice()[r])).collect();
        if dense.iter().all(Option::is_some) {
            let parts: Vec<&[E]> = dense.into_iter().flatten().collect();
            let widths: Vec<usize> = parts.iter().map(|p| p.len() / outer.max(1)).collect();
            let fill = |(r, out_row): (usize, &mut [E])| {
                let mut at = 0;
                for (part, &w) in parts.iter().zip(&widths) {
                    out_row[at..at + w].copy_from_slice(&part[r * w..(r + 1) * w]);
                    at += w;
                }
            };
            if split_across_threads(out.len()) && outer > 1 {
                let per_task = PARALLEL_CHUNK.div_ceil(row);
                for_each_chunk(&mut out, row * per_task, &|t, block| {
                    block.chunks_mut(row).enumerate().for_each(|(j, out_row)| fill((t * per_task + j, out_row)));
                });
            } else {
                out.chunks_mut(row).enumerate().for_each(fill);
            }
            return Ok(CpuStorage::from_vec(out));
        }
        // Strided inputs: write each into its window of the output, seen as
        // a view with the output's strides.
        let out_strides = out_shape.contiguous_strides();
        let mut start = 0;
        for (storage, layout) in inputs {
            let src = storage.as_slice();
            let window = start * out_strides[axis];
            for_each_block(
                layout.dims(),
                [&out_strides, layout.strides()],
                [window, layout.offset()],
                |[o, s], len, [os, ss]| {
                    if (os, ss) == (1, 1) {
                        out[o..o + len].copy_from_slice(&src[s..s + len]);
                    } else {
                        for k in 0..len {
                            out[o + k * os] = src[s + k * ss];
                        }
                    }
                },
            );
            start += layout.dims()[axis];
        }
        Ok(CpuStorage::from_vec(out))
    }

    fn argsort_rows<E: Element>(
        src: &CpuStorage<E>,
        layout: &Layout,
        descending: bool,
        k: usize,
    ) -> Result<CpuStorage<i64>> {
        let n = layout.dims().last().copied().unwrap_or(1);
        let range = layout.contiguous_range().expect("argsort_rows is given a contiguous tensor");
        let src = &src.as_slice()[range];
        let rows = src.len() / n;
        let mut out = output_buffer("sort", rows * k)?;
        if out.is_empty() {
            return Ok(CpuStorage::from_vec(out));
        }
        let sort_row = |order: &mut Vec<usize>, (row, out): (&[E], &mut [i64])| {
            order.clear();
            order.extend(0..n);
            // The key order, then the position: a total order, so a partial
            // selection gives the same first k as a full stable sort.
            let before = |&a: &usize, &b: &usize| {
                let keys = match (row[a].is_nan(), row[b].is_nan()) {
                    (false, false) => row[a].partial_cmp(&row[b]).unwrap_or(Ordering::Equal),
                    (a_nan, b_nan) => a_nan.cmp(&b_nan),
                };
                if descending { keys.reverse() } else { keys }.then(a.cmp(&b))
            };
            if k < n {
                order.select_nth_unstable_by(k, before);
                order.truncate(k);
            }
            order.sort_unstable_by(before);
            for (o, &i) in out.iter_mut().zip(order.iter()) {
                *o = i as i64;
            }
        };
        let rows_of = src.chunks(n).zip(out.chunks_mut(k));
        if split_across_threads(src.len()) && rows > 1 {
            let min_rows = (PARALLEL_CHUNK / n).max(1);
            for_each_chunk(&mut out, k * min_rows, &|t, block| {
                let mut order = Vec::new();
                for (row, out) in src[t * min_rows * n..].chunks(n).zip(block.chunks_mut(k)) {
                    sort_row(&mut order, (row, out));
                }
            });
        } else {
            let mut order = Vec::new();
            rows_of.for_each(|row| sort_row(&mut order, row));
        }
        Ok(CpuStorage::from_vec(out))
    }
}

/// The operands of [`scatter_with`]: the dense copy of the destination and
/// its shape, the axis, and the index and source with their layouts.
type ScatterArgs<'a, E> = (Vec<E>, &'a Shape, usize, &'a [i64], &'a Layout, &'a [E], &'a Layout);

/// The body of [`IndexKernel::scatter`] for one way of combining:
/// `out[at] = combine(out[at], src[p])` along each line in order, so that
/// repeated indices combine deterministically (the last write wins for
/// `Assign`).
fn scatter_with<E: Element>(
    (mut out, shape, axis, idx, index_layout, src, src_layout): ScatterArgs<'_, E>,
    combine: impl Fn(E, E) -> E + Sync,
) -> Vec<E> {
    let mut out_strides = shape.contiguous_strides();
    let axis_stride = out_strides[axis];
    out_strides[axis] = 0;
    let (idx_strides, src_strides) = (index_layout.strides(), src_layout.strides());
    let walk = |out: &mut [E], dims: &[usize], os: &[usize], is: &[usize], ss: &[usize], i0: usize, s0: usize| {
        for_each_block(dims, [os, is, ss], [0, i0, s0], |[o, i, s], len, [os, is, ss]| {
            for k in 0..len {
                let at = o + k * os + idx[i + k * is] as usize * axis_stride;
                out[at] = combine(out[at], src[s + k * ss]);
            }
        });
    };
    let dims = index_layout.dims();
    let (i0, s0) = (index_layout.offset(), src_layout.offset());
    // Repeated indices make writes collide along `axis` only, so slices
    // along axis 0 can run in parallel when that is not the scattered axis.
    if axis != 0 && split_across_threads(index_layout.elem_count()) && dims[0] > 1 {
        let row = out_strides[0];
        let end = (dims[0] * row).min(out.len());
        for_each_chunk(&mut out[..end], row, &|r, chunk| {
            let (i, s) = (i0 + r * idx_strides[0], s0 + r * src_strides[0]);
            walk(chunk, &dims[1..], &out_strides[1..], &idx_strides[1..], &src_strides[1..], i, s);
        });
    } else {
        walk(&mut out, dims, &out_strides, idx_strides, src_strides, i0, s0);
    }
    out
}
