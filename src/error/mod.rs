//! The one error type of the library.
//!
//! Every fallible operation has a `try_*` form returning [`Result`]; the plain
//! form panics with exactly the text of the [`Error`]'s `Display`.

mod checks;

pub(crate) use checks::*;

use crate::layout::Shape;
use std::fmt;

/// `Result` with [`Error`] as its error type.
pub type Result<T> = std::result::Result<T, Error>;

/// What went wrong, with the operation, the shapes and the device named.
///
/// ```
/// use devtensor::{Cpu, Error, Tensor};
/// let a = Tensor::<Cpu>::zeros([2, 3]);
/// let b = Tensor::<Cpu>::zeros([4, 5]);
/// let err = a.try_matmul(&b).unwrap_err();
/// assert!(matches!(err, Error::Shape { op: "matmul", .. }));
/// assert_eq!(
///     err.to_string(),
///     "matmul on Cpu: shapes [2, 3] and [4, 5]: the inner dimensions differ (3 vs 4)"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The operands' shapes do not fit the operation (mismatch, wrong
    /// element count, non-broadcastable shapes, empty input where data is needed).
    Shape {
        /// The operation, e.g. `"matmul"`.
        op: &'static str,
        /// The device the operation ran on, e.g. `"Cuda<0>"`.
        device: String,
        /// The shapes of the operands involved.
        shapes: Vec<Shape>,
        /// Why they do not fit.
        reason: String,
    },
    /// An axis (dimension) argument outside `-rank..rank`.
    Axis {
        /// The operation.
        op: &'static str,
        /// The device.
        device: String,
        /// The shape of the tensor the axis refers to.
        shape: Shape,
        /// The axis that was asked for.
        axis: isize,
    },
    /// An index outside the range of the axis it selects from.
    Index {
        /// The operation.
        op: &'static str,
        /// The device.
        device: String,
        /// The shape of the indexed tensor.
        shape: Shape,
        /// The axis being indexed.
        axis: usize,
        /// The offending index.
        index: i64,
    },
    /// An invalid argument that is not a shape, axis or index (a zero step,
    /// a division by zero in integer arithmetic, ...).
    Argument {
        /// The operation.
        op: &'static str,
        /// The device.
        device: String,
        /// What is wrong with the argument.
        reason: String,
    },
    /// The device cannot be used: no driver, no such GPU, no NVRTC to compile
    /// the kernels with, or an operation with no launch on this device yet.
    DeviceUnavailable {
        /// The device, e.g. `"Cuda<1>"`.
        device: String,
        /// Why it is unavailable, in a sentence.
        reason: String,
    },
    /// The CUDA driver, NVRTC or cuBLAS reported an error while running an
    /// operation (a failed launch, a kernel that faulted, a failed copy).
    Driver {
        /// The operation.
        op: &'static str,
        /// The device.
        device: String,
        /// What the driver said.
        reason: String,
    },
    /// The device ran out of memory: the allocator refused a size that is
    /// possible in principle. (A size that cannot exist at all, such as a
    /// shape whose element count overflows, is an [`Error::Shape`].)
    OutOfMemory {
        /// The operation that asked for the memory.
        op: &'static str,
        /// The device.
        device: String,
        /// Bytes the allocation asked for.
        requested: usize,
        /// Bytes free on the device when it failed, where the device says.
        free: Option<usize>,
    },
    /// A checkpoint file could not be written or read, is not a valid
    /// safetensors file, or does not match the model it is loaded into.
    Checkpoint {
        /// The file.
        path: String,
        /// What is wrong, naming the first mismatching tensor where there is one.
        reason: String,
    },
    /// A multi-process job is set up wrongly or one of its processes
    /// failed: names the rank where it is known. (Not called `Job`, the
    /// name of [`parallel::Job`](crate::parallel::Job): two items of one
    /// name make rustc print full paths in compile errors.)
    Distributed {
        /// The process the error is about, where known.
        rank: Option<usize>,
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Shape { op, device, shapes, reason } => {
                write!(f, "{op} on {device}: ")?;
                match shapes.as_slice() {
                    [] => {}
                    [one] => write!(f, "shape {one}: ")?,
                    many => {
                        f.write_str("shapes ")?;
                        for (i, s) in many.iter().enumerate() {
                            let sep = match i {
                                0 => "",
                                _ if i + 1 == many.len() => " and ",
                                _ => ", ",
                            };
                            write!(f, "{sep}{s}")?;
                        }
                        f.write_str(": ")?;
                    }
                }
                f.write_str(reason)
            }
            Error::Axis { op, device, shape, axis } if shape.rank() == 0 => write!(
                f,
                "{op} on {device}: axis {axis} is out of range for a rank-0 tensor \
                 (expected 0 or -1, which treat it as one element)"
            ),
            Error::Axis { op, device, shape, axis } => {
                let rank = shape.rank() as isize;
                write!(
                    f,
                    "{op} on {device}: axis {axis} is out of range for shape {shape} \
                     (expected an axis in {}..{rank})",
                    -rank
                )
            }
            Error::Index { op, device, shape, axis, index } => write!(
                f,
                "{op} on {device}: index {index} is out of range for axis {axis} of size {} \
                 (shape {shape})",
                shape.dims()[*axis]
            ),
            Error::Argument { op, device, reason } => write!(f, "{op} on {device}: {reason}"),
            Error::DeviceUnavailable { device, reason } => {
                write!(f, "device {device} is unavailable: {reason}")
            }
            Error::Driver { op, device, reason } => write!(f, "{op} on {device}: CUDA error: {reason}"),
            Error::OutOfMemory { op, device, requested, free } => {
                write!(f, "{op} on {device}: out of memory: tried to allocate {requested} bytes")?;
                match free {
                    Some(free) => write!(f, " with {free} bytes free"),
                    None => Ok(()),
                }
            }
            Error::Checkpoint { path, reason } => write!(f, "checkpoint {path}: {reason}"),
            Error::Distributed { rank: Some(rank), reason } => write!(f, "distributed job, rank {rank}: {reason}"),
            Error::Distributed { rank: None, reason } => write!(f, "distributed job: {reason}"),
        }
    }
}

impl std::error::Error for Error {}

/// Unwraps a `try_*` result for the plain, panicking form of an operation.
///
/// `#[track_caller]` makes the panic point at the user's line, not ours.
#[track_caller]
pub(crate) fn or_panic<T>(result: Result<T>) -> T {
    match result {
        Ok(value) => value,
        Err(err) => panic!("{err}"),
    }
}

/// The name of type `T` without module paths (`Net<Cuda<0>>`, not
/// `my_crate::Net<devtensor::backend::cuda::Cuda<0>>`), for messages.
pub(crate) fn short_type_name<T: ?Sized>() -> String {
    let full = std::any::type_name::<T>();
    let mut out = String::with_capacity(full.len());
    let mut word = String::new();
    for c in full.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            out.push_str(word.rsplit("::").next().unwrap_or(""));
            word.clear();
            out.push(c);
        }
    }
    out.push_str(word.rsplit("::").next().unwrap_or(""));
    out
}
