//! NCCL communicators over several GPUs of one process (one rank per GPU),
//! for data-parallel training's all-reduce. NCCL is loaded at run time like
//! the other CUDA libraries; its absence is an error, not a panic.

use super::CudaStorage;
use super::context::{self, CudaDevice};
use crate::error::{Error, Result};
use cudarc::nccl::{result, sys};
use std::sync::Arc;

/// One communicator per GPU of a list, made together by `ncclCommInitAll`:
/// rank `r` is the `r`-th GPU.
pub struct NcclClique {
    comms: Vec<sys::ncclComm_t>,
    devices: Vec<Arc<CudaDevice>>,
}

// SAFETY: an NCCL communicator is a handle that NCCL lets any thread use;
// devtensor issues each rank's calls from one thread at a time (the rank's
// replica thread), and `Drop` runs when no call is in flight.
unsafe impl Send for NcclClique {}
// SAFETY: as above; shared references only issue calls on distinct ranks.
unsafe impl Sync for NcclClique {}

fn unavailable(reason: impl Into<String>) -> Error {
    Error::DeviceUnavailable { device: "NCCL".into(), reason: reason.into() }
}

impl NcclClique {
    /// Communicators for the GPUs `ordinals` (distinct), rank `r` on
    /// `Cuda<ordinals[r]>`. Fails when NCCL is not installed
    /// (`libnccl.so` not on the library path), a GPU is unavailable, or
    /// NCCL cannot set up.
    pub(crate) fn try_new(ordinals: &[usize]) -> Result<Self> {
        // SAFETY: only tries to dlopen NCCL; cudarc panics on the first call
        // into a library it cannot load, so look first.
        if !unsafe { sys::is_culib_present() } {
            return Err(unavailable("NCCL was not found (libnccl.so is not on the library search path)"));
        }
        let devices = ordinals.iter().map(|&o| context::device(o)).collect::<Result<Vec<_>>>()?;
        let list: Vec<i32> = ordinals.iter().map(|&o| o as i32).collect();
        let mut comms = vec![std::ptr::null_mut(); list.len()];
        // SAFETY: `comms` has room for one communicator per entry of `list`,
        // and both outlive the call.
        unsafe { result::comm_init_all(comms.as_mut_ptr(), list.len() as i32, list.as_ptr()) }
            .map_err(|e| unavailable(format!("ncclCommInitAll failed: {e:?}")))?;
        Ok(NcclClique { comms, devices })
    }

    /// Sums rank `rank`'s `storage` with the other ranks' in place, queued
    /// on the rank's compute stream after the work that wrote it. Every
    /// rank must make the same calls in the same order.
    pub(crate) fn all_reduce_sum(&self, rank: usize, storage: &CudaStorage<f32>) -> Result<()> {
        let device = &self.devices[rank];
        device.ctx.bind_to_thread().map_err(|e| device.error("all_reduce", e))?;
        let ptr = storage.ptr() as *mut std::ffi::c_void;
        // SAFETY: the buffer holds `storage.len()` floats on this rank's GPU
        // and stays alive while the call is queued: the caller keeps the
        // tensor until later work on the same stream has read the result.
        unsafe {
            result::all_reduce(
                ptr,
                ptr,
                storage.len(),
                sys::ncclDataType_t::ncclFloat32,
                sys::ncclRedOp_t::ncclSum,
                self.comms[rank],
                device.stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map(|_| ())
        .map_err(|e| device.error("all_reduce", format_args!("ncclAllReduce failed: {e:?}")))
    }

    /// Aborts every communicator, so that a rank waiting for one that
    /// failed returns instead of waiting forever.
    pub(crate) fn abort(&self) {
        for &comm in &self.comms {
            // SAFETY: `comm` came from `ncclCommInitAll` and is not yet destroyed.
            let _ = unsafe { result::comm_abort(comm) };
        }
    }
}

impl Drop for NcclClique {
    fn drop(&mut self) {
        for &comm in &self.comms {
            // SAFETY: as in `abort`; destroying an aborted communicator is allowed.
            let _ = unsafe { result::comm_destroy(comm) };
        }
    }
}
