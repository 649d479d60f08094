//! The fused gates on CUDA (`kernels/recurrent.cu`): one kernel per step,
//! one thread per hidden unit of each row.

use super::{GateInput, RecurrentKernel};
use crate::backend::cuda::launch::{elementwise, launch_kernel};
use crate::backend::cuda::{AnyCuda, CudaStorage};
use crate::element::FloatElement;
use crate::error::Result;

/// The device address of an operand's first element.
fn at<E: FloatElement>((storage, offset): GateInput<'_, AnyCuda, E>) -> u64 {
    storage.ptr_at(offset)
}

impl RecurrentKernel for AnyCuda {
    fn lstm_gates<E: FloatElement>(
        gx: GateInput<'_, Self, E>,
        gh: GateInput<'_, Self, E>,
        c: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
        save: bool,
    ) -> Result<(CudaStorage<E>, Option<CudaStorage<E>>)> {
        const OP: &str = "lstm_gates";
        let device = Self::device()?;
        let cells = batch * hidden;
        let out = CudaStorage::alloc(&device, OP, 2 * cells)?;
        let saved = save.then(|| CudaStorage::alloc(&device, OP, 5 * cells)).transpose()?;
        // Never written without `save`: any live address will do.
        let saved_ptr = saved.as_ref().map_or(out.ptr(), CudaStorage::ptr);
        let name = format!("recurrent_lstm_gates_{}", E::DTYPE.name());
        launch_kernel!(device, OP, "recurrent", name, elementwise(cells);
            batch, hidden, at(gx), at(gh), at(c), out.ptr(), saved_ptr, usize::from(save))?;
        Ok((out, saved))
    }

    fn lstm_gates_backward<E: FloatElement>(
        dh: GateInput<'_, Self, E>,
        dc: GateInput<'_, Self, E>,
        saved: &CudaStorage<E>,
        c: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
    ) -> Result<(CudaStorage<E>, CudaStorage<E>)> {
        const OP: &str = "lstm_gates_backward";
        let device = Self::device()?;
        let cells = batch * hidden;
        let dgates = CudaStorage::alloc(&device, OP, 4 * cells)?;
        let dc_out = CudaStorage::alloc(&device, OP, cells)?;
        let name = format!("recurrent_lstm_gates_backward_{}", E::DTYPE.name());
        launch_kernel!(device, OP, "recurrent", name, elementwise(cells);
            batch, hidden, at(dh), at(dc), saved.ptr(), at(c), dgates.ptr(), dc_out.ptr())?;
        Ok((dgates, dc_out))
    }

    fn gru_gates<E: FloatElement>(
        gx: GateInput<'_, Self, E>,
        gh: GateInput<'_, Self, E>,
        h: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
        save: bool,
    ) -> Result<(CudaStorage<E>, Option<CudaStorage<E>>)> {
        const OP: &str = "gru_gates";
        let device = Self::device()?;
        let cells = batch * hidden;
        let out = CudaStorage::alloc(&device, OP, cells)?;
        let saved = save.then(|| CudaStorage::alloc(&device, OP, 4 * cells)).transpose()?;
        let saved_ptr = saved.as_ref().map_or(out.ptr(), CudaStorage::ptr);
        let name = format!("recurrent_gru_gates_{}", E::DTYPE.name());
        launch_kernel!(device, OP, "recurrent", name, elementwise(cells);
            batch, hidden, at(gx), at(gh), at(h), out.ptr(), saved_ptr, usize::from(save))?;
        Ok((out, saved))
    }

    fn gru_gates_backward<E: FloatElement>(
        grad: GateInput<'_, Self, E>,
        saved: &CudaStorage<E>,
        h: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
    ) -> Result<[CudaStorage<E>; 3]> {
        const OP: &str = "gru_gates_backward";
        let device = Self::device()?;
        let cells = batch * hidden;
        let dgx = CudaStorage::alloc(&device, OP, 3 * cells)?;
        let dgh = CudaStorage::alloc(&device, OP, 3 * cells)?;
        let dh = CudaStorage::alloc(&device, OP, cells)?;
        let name = format!("recurrent_gru_gates_backward_{}", E::DTYPE.name());
        launch_kernel!(device, OP, "recurrent", name, elementwise(cells);
            batch, hidden, at(grad), saved.ptr(), at(h), dgx.ptr(), dgh.ptr(), dh.ptr())?;
        Ok([dgx, dgh, dh])
    }
}
