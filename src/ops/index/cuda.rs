//! Indexing and joining kernels on CUDA (`kernels/index.cu`).

use super::{IndexKernel, ScatterMode};
use crate::backend::Backend;
use crate::backend::cuda::AnyCuda;
use crate::backend::cuda::launch::{Strided, elementwise, launch_kernel, per_row};
use crate::backend::cuda::{CudaStorage, copy_into};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::{Layout, Shape, count_of};

impl IndexKernel for AnyCuda {
    fn first_out_of_range(indices: &CudaStorage<i64>, layout: &Layout, size: usize) -> Result<Option<i64>> {
        const OP: &str = "index check";
        let device = Self::device()?;
        let n = layout.elem_count();
        if n == 0 {
            return Ok(None);
        }
        // Count on the device; only when some index is bad, read them all
        // back to name the first one (the error path need not be fast).
        let mut count = CudaStorage::<i64>::alloc(&device, OP, 1)?;
        count.write(&device, OP, &[0])?;
        let geo = Strided::new(&device, OP, layout.dims(), [layout.strides()], [layout.offset()])?;
        launch_kernel!(device, OP, "index", "index_count_out_of_range_i64", elementwise(n);
            n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], indices.ptr(), size, count.ptr())?;
        if count.read(&device, OP, 0..1)?[0] == 0 {
            return Ok(None);
        }
        let values = Self::storage_to_vec(indices, layout)?;
        Ok(values.into_iter().find(|&i| i < 0 || i as u64 >= size as u64))
    }

    fn index_select<E: Element>(
        src: &CudaStorage<E>,
        src_layout: &Layout,
        axis: usize,
        indices: &CudaStorage<i64>,
        indices_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        const OP: &str = "index_select";
        let device = Self::device()?;
        let mut out_dims = src_layout.dims().to_vec();
        out_dims[axis] = indices_layout.elem_count();
        let n = count_of(&out_dims);
        let out = CudaStorage::alloc(&device, OP, n)?;
        if n == 0 {
            return Ok(out);
        }
        let geo = Strided::exact(&device, OP, &out_dims, [src_layout.strides()], [src_layout.offset()])?;
        let (idx_stride, idx_offset) = (indices_layout.strides()[0], indices_layout.offset());
        let name = format!("index_select_{}", E::DTYPE.name());
        launch_kernel!(device, OP, "index", name, elementwise(n);
            n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], axis, indices.ptr(), idx_stride, idx_offset,
            src.ptr(), out.ptr())?;
        Ok(out)
    }

    fn gather<E: Element>(
        src: &CudaStorage<E>,
        src_layout: &Layout,
        axis: usize,
        index: &CudaStorage<i64>,
        index_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        const OP: &str = "gather";
        let device = Self::device()?;
        let n = index_layout.elem_count();
        let out = CudaStorage::alloc(&device, OP, n)?;
        if n == 0 {
            return Ok(out);
        }
        let geo = Strided::exact(
            &device,
            OP,
            index_layout.dims(),
            [index_layout.strides(), src_layout.strides()],
            [index_layout.offset(), src_layout.offset()],
        )?;
        let name = format!("index_gather_{}", E::DTYPE.name());
        launch_kernel!(device, OP, "index", name, elementwise(n);
            n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], geo.strides(1), geo.offsets[1], axis,
            index.ptr(), src.ptr(), out.ptr())?;
        Ok(out)
    }

    fn scatter<E: Element>(
        dst: &CudaStorage<E>,
        dst_layout: &Layout,
        axis: usize,
        index: &CudaStorage<i64>,
        index_layout: &Layout,
        src: &CudaStorage<E>,
        src_layout: &Layout,
        mode: ScatterMode,
    ) -> Result<CudaStorage<E>> {
        const OP: &str = "scatter";
        let device = Self::device()?;
        let out = copy_into::<E, E>(&device, OP, dst, dst_layout)?;
        let dims = index_layout.dims();
        let total = index_layout.elem_count();
        if total == 0 {
            return Ok(out);
        }
        let n_lines = total / dims[axis];
        let out_strides = dst_layout.shape().contiguous_strides();
        let geo = Strided::exact(
            &device,
            OP,
            dims,
            [index_layout.strides(), src_layout.strides(), &out_strides],
            [index_layout.offset(), src_layout.offset(), 0],
        )?;
        let name = format!("index_scatter_{}", E::DTYPE.name());
        launch_kernel!(device, OP, "index", name, elementwise(n_lines);
            n_lines, geo.rank, geo.dims(), axis, geo.strides(0), geo.offsets[0], geo.strides(1), geo.offsets[1],
            geo.strides(2), index.ptr(), src.ptr(), out.ptr(), mode as i32)?;
        Ok(out)
    }

    fn index_add<E: Element>(
        dst: &CudaStorage<E>,
        dst_layout: &Layout,
        axis: usize,
        indices: &CudaStorage<i64>,
        indices_layout: &Layout,
        src: &CudaStorage<E>,
        src_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        const OP: &str = "index_add";
        let device = Self::device()?;
        let out = copy_into::<E, E>(&device, OP, dst, dst_layout)?;
        let mut dims = dst_layout.dims().to_vec();
        dims[axis] = indices_layout.elem_count();
        let total = count_of(&dims);
        if total == 0 {
            return Ok(out);
        }
        let n_lines = total / dims[axis];
        let out_strides = dst_layout.shape().contiguous_strides();
        let geo = Strided::exact(&device, OP, &dims, [src_layout.strides(), &out_strides], [src_layout.offset(), 0])?;
        let (idx_stride, idx_offset) = (indices_layout.strides()[0], indices_layout.offset());
        let name = format!("index_add_{}", E::DTYPE.name());
        launch_kernel!(device, OP, "index", name, elementwise(n_lines);
            n_lines, geo.rank, geo.dims(), axis, indices.ptr(), idx_stride, idx_offset, geo.strides(0),
            geo.offsets[0], geo.strides(1), src.ptr(), out.ptr())?;
        Ok(out)
    }

    fn cat<E: Element>(
        inputs: &[(&CudaStorage<E>, &Layout)],
        axis: usize,
        out_shape: &Shape,
    ) -> Result<CudaStorage<E>> {
        const OP: &str = "cat";
        let device = Self::device()?;
        if inputs.is_empty() {
            // Callers never pass an empty list; answer one without panicking.
            return Err(Error::Shape {
                op: OP,
                device: Self::name(),
                shapes: vec![],
                reason: "expected at least one tensor, got an empty list".into(),
            });
        }
        let out = CudaStorage::alloc(&device, OP, out_shape.elem_count())?;
        let out_strides = out_shape.contiguous_strides();
        let mut start = 0;
        for (src, layout) in inputs {
            let n = layout.elem_count();
            if n > 0 {
                let geo = Strided::exact(
                    &device,
                    OP,
                    layout.dims(),
                    [layout.strides(), &out_strides],
                    [layout.offset(), start * out_strides[axis]],
                )?;
                let name = format!("index_cat_{}", E::DTYPE.name());
                launch_kernel!(device, OP, "index", name, elementwise(n);
                    n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], src.ptr(), geo.strides(1),
                    geo.offsets[1], out.ptr())?;
            }
            start += layout.dims()[axis];
        }
        Ok(out)
    }

    fn argsort_rows<E: Element>(
        src: &CudaStorage<E>,
        layout: &Layout,
        descending: bool,
        k: usize,
    ) -> Result<CudaStorage<i64>> {
        const OP: &str = "sort";
        /// `DT_SORT_CHUNK` in `kernels/index.cu`.
        const CHUNK: usize = 2048;
        let device = Self::device()?;
        let n = layout.dims().last().copied().unwrap_or(1);
        let range = layout.contiguous_range().expect("argsort_rows is given a contiguous tensor");
        let rows = range.len() / n;
        let out = CudaStorage::<i64>::alloc(&device, OP, rows * k)?;
        if rows * k == 0 {
            return Ok(out);
        }
        let (src, descending) = (src.ptr_at(range.start), i32::from(descending));
        let p = n.checked_next_power_of_two().ok_or_else(|| Error::Argument {
            op: OP,
            device: Self::name(),
            reason: format!("rows of {n} elements are too long to sort"),
        })?;
        let dtype = E::DTYPE.name();
        if p <= CHUNK {
            launch_kernel!(device, OP, "index", format!("index_sort_rows_{dtype}"), per_row(rows);
                rows, n, k, descending, src, out.ptr())?;
            return Ok(out);
        }
        // Rows longer than a block holds: sorted runs of CHUNK in shared
        // memory, then each longer merge as global stages down to a stride
        // of CHUNK and one shared-memory pass for the strides below.
        let keys = CudaStorage::<E>::alloc(&device, OP, rows * p)?;
        let idx = CudaStorage::<i64>::alloc(&device, OP, rows * p)?;
        let chunks = per_row(rows * (p / CHUNK));
        let chunk_kernel = format!("index_sort_chunks_{dtype}");
        launch_kernel!(device, OP, "index", chunk_kernel.clone(), chunks;
            rows, n, p, 0usize, descending, src, keys.ptr(), idx.ptr())?;
        let mut size = 2 * CHUNK;
        while size <= p {
            let mut stride = size / 2;
            while stride >= CHUNK {
                launch_kernel!(device, OP, "index", format!("index_sort_step_{dtype}"), elementwise(rows * p / 2);
                    rows, n, p, size, stride, descending, keys.ptr(), idx.ptr())?;
                stride /= 2;
            }
            launch_kernel!(device, OP, "index", chunk_kernel.clone(), chunks;
                rows, n, p, size, descending, src, keys.ptr(), idx.ptr())?;
            size *= 2;
        }
        launch_kernel!(device, OP, "index", "index_sort_take_i64", elementwise(rows * k);
            rows, p, k, idx.ptr(), out.ptr())?;
        Ok(out)
    }
}
