//! Checkpoints: a model's parameters and buffers, and optionally an
//! optimizer's state, in the safetensors format.

use super::{Module, TensorKind};
use crate::device::{Cpu, Device};
use crate::element::{DType, FloatElement};
use crate::error::{Error, Result, or_panic};
use crate::optim::Optimizer;
use crate::tensor::Tensor;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::HashMap;
use std::path::Path;

/// Names of optimizer state entries start with this, so that they cannot
/// collide with a parameter's name.
const OPTIMIZER_PREFIX: &str = "optimizer.";

/// Named tensors on device `D`, read from or written to a safetensors
/// file: PyTorch's `state_dict` plus, optionally, the optimizer's.
///
/// Loading reads the file on the host and copies each tensor to `D`, so a
/// checkpoint saved from a GPU loads on the CPU and the reverse. The device
/// is in the type, so a checkpoint loaded onto one device cannot be put into
/// a model on another: that does not compile.
///
/// ```
/// use devtensor::nn::{Checkpoint, Linear, Module};
/// use devtensor::Cpu;
/// let model = Linear::<Cpu>::new(3, 2);
/// let path = std::env::temp_dir().join("devtensor-doc-linear.safetensors");
/// Checkpoint::try_from_model(&model)?.try_save(&path)?;
///
/// let mut fresh = Linear::<Cpu>::new(3, 2);
/// Checkpoint::<Cpu>::try_load(&path)?.try_load_into(&mut fresh)?;
/// assert_eq!(fresh.weight.to_vec(), model.weight.to_vec());
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), devtensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Checkpoint<D: Device, E: FloatElement = f32> {
    tensors: Vec<(String, Tensor<D, E>)>,
    /// Where it was read from, for errors.
    source: String,
}

impl<D: Device, E: FloatElement> Checkpoint<D, E> {
    /// Every parameter and buffer of `model`, by name (detached: the
    /// checkpoint shares storage and records nothing).
    pub fn try_from_model<M: Module<D, E>>(model: &M) -> Result<Self> {
        let tensors = model.named_tensors().into_iter().map(|(name, _, t)| (name, t.detach())).collect();
        Ok(Checkpoint { tensors, source: "(taken from a model)".into() })
    }

    /// Adds `optimizer`'s state (under names starting with `optimizer.`),
    /// so that training resumes where it stopped.
    pub fn with_optimizer(mut self, optimizer: &impl Optimizer<D, E>) -> Self {
        let state = optimizer.state().into_iter().map(|(name, t)| (format!("{OPTIMIZER_PREFIX}{name}"), t.detach()));
        self.tensors.extend(state);
        self
    }

    /// The tensors, by name, in the order they were saved.
    pub fn tensors(&self) -> &[(String, Tensor<D, E>)] {
        &self.tensors
    }

    /// Writes the checkpoint to `path` (copying each tensor to the host).
    /// Fails when a tensor cannot be read back or the file cannot be written.
    pub fn try_save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let mut host = Vec::with_capacity(self.tensors.len());
        for (name, t) in &self.tensors {
            let bytes = to_le_bytes(&t.try_to_vec()?);
            host.push((name.clone(), t.dims().to_vec(), bytes));
        }
        let views = host
            .iter()
            .map(|(name, dims, bytes)| {
                let view = TensorView::new(safetensors_dtype::<E>(), dims.clone(), bytes)
                    .map_err(|e| checkpoint_error(path, format!("tensor `{name}`: {e}")))?;
                Ok((name.as_str(), view))
            })
            .collect::<Result<Vec<_>>>()?;
        let metadata = Some(HashMap::from([("format".to_string(), "devtensor".to_string())]));
        safetensors::serialize_to_file(views, metadata, path).map_err(|e| checkpoint_error(path, e.to_string()))
    }

    /// Panicking form of [`try_save`](Self::try_save).
    #[track_caller]
    pub fn save(&self, path: impl AsRef<Path>) {
        or_panic(self.try_save(path))
    }

    /// Reads the checkpoint at `path` onto `D`.
    ///
    /// The file is validated before anything is allocated for it: a
    /// truncated or corrupt file, a header that declares sizes past the
    /// file's end or overlapping tensors, and tensors of another element
    /// type than `E` are errors naming the file (and the tensor), never a
    /// panic or a huge allocation.
    pub fn try_load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| checkpoint_error(path, format!("cannot read the file: {e}")))?;
        let file = SafeTensors::deserialize(&bytes)
            .map_err(|e| checkpoint_error(path, format!("not a valid safetensors file: {e}")))?;
        let mut tensors = Vec::new();
        // Tensors in the order of their data in the file, which is the order
        // they were saved in.
        let mut entries = file.tensors();
        entries.sort_by_key(|(_, view)| view.data().as_ptr() as usize);
        for (name, view) in entries {
            if view.dtype() != safetensors_dtype::<E>() {
                return Err(checkpoint_error(
                    path,
                    format!("tensor `{name}` holds {:?} elements, but the model's are {}", view.dtype(), E::DTYPE.name()),
                ));
            }
            let values = from_le_bytes::<E>(view.data());
            let host = Tensor::<Cpu, E>::try_from_vec(values, view.shape())
                .map_err(|e| checkpoint_error(path, format!("tensor `{name}`: {e}")))?;
            tensors.push((name, host.try_to::<D>()?));
        }
        Ok(Checkpoint { tensors, source: path.display().to_string() })
    }

    /// Panicking form of [`try_load`](Self::try_load).
    #[track_caller]
    pub fn load(path: impl AsRef<Path>) -> Self {
        or_panic(Self::try_load(path))
    }

    /// Copies the checkpoint's tensors into `model`'s parameters and
    /// buffers, by name (PyTorch's `load_state_dict(strict=True)`). Fails,
    /// naming the first mismatch and changing nothing, when a tensor of the
    /// model is missing from the checkpoint, has another shape, or when the
    /// checkpoint holds a model tensor the model does not have.
    pub fn try_load_into<M: Module<D, E>>(&self, model: &mut M) -> Result<()> {
        let saved: HashMap<&str, &Tensor<D, E>> =
            self.tensors.iter().filter(|(n, _)| !n.starts_with(OPTIMIZER_PREFIX)).map(|(n, t)| (n.as_str(), t)).collect();
        let mismatch = |reason: String| Error::Checkpoint { path: self.source.clone(), reason };
        let expected = model.named_tensors();
        for (name, _, t) in &expected {
            match saved.get(name.as_str()) {
                None => return Err(mismatch(format!("the model's tensor `{name}` is missing from the checkpoint"))),
                Some(s) if s.shape() != t.shape() => {
                    return Err(mismatch(format!(
                        "tensor `{name}` has shape {} in the checkpoint but {} in the model",
                        s.shape(),
                        t.shape()
                    )));
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = self.tensors.iter().map(|(n, _)| n).find(|n| {
            !n.starts_with(OPTIMIZER_PREFIX) && !expected.iter().any(|(name, _, _)| name == *n)
        }) {
            return Err(mismatch(format!("the checkpoint's tensor `{extra}` is not in the model")));
        }
        model.visit_mut("", &mut |name, kind, t| {
            let value = saved[name].detach();
            *t = match kind {
                TensorKind::Parameter => value.requires_grad(),
                TensorKind::Buffer => value,
            };
        });
        Ok(())
    }

    /// Panicking form of [`try_load_into`](Self::try_load_into).
    #[track_caller]
    pub fn load_into<M: Module<D, E>>(&self, model: &mut M) {
        or_panic(self.try_load_into(model))
    }

    /// The optimizer state saved with [`with_optimizer`](Self::with_optimizer),
    /// for [`Optimizer::try_load_state`].
    pub fn optimizer_state(&self) -> Vec<(String, Tensor<D, E>)> {
        self.tensors
            .iter()
            .filter_map(|(n, t)| n.strip_prefix(OPTIMIZER_PREFIX).map(|n| (n.to_string(), t.clone())))
            .collect()
    }
}

fn checkpoint_error(path: &Path, reason: String) -> Error {
    Error::Checkpoint { path: path.display().to_string(), reason }
}

fn safetensors_dtype<E: FloatElement>() -> Dtype {
    match E::DTYPE {
        DType::F64 => Dtype::F64,
        _ => Dtype::F32,
    }
}

/// The values as little-endian bytes, as safetensors stores them.
fn to_le_bytes<E: FloatElement>(values: &[E]) -> Vec<u8> {
    match E::DTYPE {
        DType::F64 => values.iter().flat_map(|&v| crate::Element::to_f64(v).to_le_bytes()).collect(),
        _ => values.iter().flat_map(|&v| (crate::Element::to_f64(v) as f32).to_le_bytes()).collect(),
    }
}

/// The inverse of [`to_le_bytes`]; `bytes` holds whole elements (safetensors
/// checked its length against the shape).
fn from_le_bytes<E: FloatElement>(bytes: &[u8]) -> Vec<E> {
    match E::DTYPE {
        DType::F64 => bytes.chunks_exact(8).map(|b| E::from_f64(f64::from_le_bytes(b.try_into().expect("8 bytes")))).collect(),
        _ => bytes.chunks_exact(4).map(|b| E::from_f32(f32::from_le_bytes(b.try_into().expect("4 bytes")))).collect(),
    }
}
