//! Checkpoints: a model's parameters and buffers, and optionally an
//! optimizer's state, in the safetensors format.

use crate::autograd::LeafId;
use crate::backend::Cpu;
use crate::element::{DType, FloatElement};
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::nn::{Module, TensorKind};
use crate::optim::scaler::SCALER_STATE;
use crate::optim::{GradScaler, Optimizer};
use crate::tensor::Device;
use crate::tensor::Tensor;
use devtensor_macros::fallible;
use half::{bf16, f16};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::HashMap;
use std::path::Path;

/// Names of optimizer state entries start with this, so that they cannot
/// collide with a parameter's name.
const OPTIMIZER_PREFIX: &str = "optimizer.";

/// A model a [`Checkpoint`] of `E` on `D` can be loaded into: any
/// [`Module`] of `E` on `D`. This trait only exists to say, when the model
/// is on another device or of another dtype, what to do about it.
#[diagnostic::on_unimplemented(
    message = "this checkpoint holds `{E}` tensors on `{D}`, but `{Self}` is not a model of `{E}` on `{D}`",
    label = "a checkpoint of `{E}` on `{D}`",
    note = "load the checkpoint onto the model's device (`Checkpoint::<..>::load(path)` with the model's device): \
            the file is read on the host, so it loads onto any device",
    note = "a checkpoint of another dtype converts with `.to_dtype::<..>()` before `load_into`, where PyTorch's \
            `load_state_dict` would convert silently"
)]
pub trait LoadInto<D: Device, E: FloatElement = f32>: Module<D, E> {}

#[diagnostic::do_not_recommend]
impl<D: Device, E: FloatElement, M: Module<D, E>> LoadInto<D, E> for M {}

/// Named tensors on device `D`, read from or written to a safetensors
/// file: PyTorch's `state_dict` plus, optionally, the optimizer's.
///
/// Loading reads the file on the host and copies each tensor to `D`, so a
/// checkpoint saved from a GPU loads on the CPU and the reverse. The device
/// is in the type, so a checkpoint loaded onto one device cannot be put into
/// a model on another: that does not compile.
///
/// ```
/// use devtensor::io::Checkpoint;
/// use devtensor::nn::{Linear, Module};
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
    /// Integer buffers (`num_batches_tracked`), see [`Module::visit_int_buffers`].
    int_tensors: Vec<(String, Tensor<D, i64>)>,
    /// Where it was read from, for errors.
    source: String,
}

impl<D: Device, E: FloatElement> Checkpoint<D, E> {
    /// The checkpoint with its tensors converted to `T` (integer buffers
    /// stay `i64`): how a checkpoint of one dtype goes into a model of
    /// another, which PyTorch's `load_state_dict` does without saying so.
    /// Fails only when the device cannot convert.
    ///
    /// ```
    /// use devtensor::io::Checkpoint;
    /// use devtensor::nn::Linear;
    /// use devtensor::{Cpu, Tensor, bf16};
    /// let weight = Tensor::<Cpu, bf16>::from_vec(vec![bf16::from_f32(0.5); 6], [2, 3]);
    /// let checkpoint = Checkpoint::from_model(&Linear::from_weights(weight, None));
    /// let mut model = Linear::<Cpu, f32>::new(3, 2).without_bias();
    /// checkpoint.to_dtype::<f32>().load_into(&mut model);
    /// assert_eq!(model.weight.to_vec(), vec![0.5; 6]);
    /// ```
    #[fallible]
    pub fn to_dtype<T: FloatElement>(&self) -> Checkpoint<D, T> {
        let mut tensors = Vec::with_capacity(self.tensors.len());
        for (name, tensor) in &self.tensors {
            tensors.push((name.clone(), tensor.try_to_dtype::<T>()?));
        }
        Ok(Checkpoint { tensors, int_tensors: self.int_tensors.clone(), source: self.source.clone() })
    }

    /// Every parameter and buffer of `model`, by name (detached: the
    /// checkpoint shares storage and records nothing).
    #[fallible]
    pub fn from_model<M: Module<D, E>>(model: &M) -> Self {
        let tensors = model.named_tensors().into_iter().map(|(name, _, t)| (name, t.detach())).collect();
        let mut int_tensors = Vec::new();
        model.visit_int_buffers("", &mut |name, t| int_tensors.push((name.to_string(), t.clone())));
        Ok(Checkpoint { tensors, int_tensors, source: "(taken from a model)".into() })
    }

    /// Adds `optimizer`'s state (under names starting with `optimizer.`),
    /// so that training resumes where it stopped; read it back with
    /// [`optimizer_state`](Self::optimizer_state).
    pub fn with_optimizer(mut self, optimizer: &impl Optimizer<D, E>) -> Self {
        let state = optimizer.state().into_iter().map(|(name, t)| (format!("{OPTIMIZER_PREFIX}{name}"), t.detach()));
        self.tensors.extend(state);
        self
    }

    /// Adds `scaler`'s state (as integer tensors under names starting with
    /// `scaler.`), so that mixed-precision training resumes with its loss
    /// scale; read it back with [`scaler`](Self::scaler).
    ///
    /// ```
    /// use devtensor::io::Checkpoint;
    /// use devtensor::nn::Linear;
    /// use devtensor::optim::GradScaler;
    /// use devtensor::Cpu;
    /// let scaler = GradScaler::new().with_init_scale(1024.0);
    /// let checkpoint = Checkpoint::from_model(&Linear::<Cpu>::new(2, 1)).with_scaler(&scaler);
    /// assert_eq!(checkpoint.scaler(), scaler);
    /// ```
    #[fallible]
    pub fn with_scaler(mut self, scaler: &GradScaler) -> Self {
        for (name, value) in SCALER_STATE.iter().zip(scaler.state()) {
            self.int_tensors.push((name.to_string(), Tensor::try_from_vec(vec![value], [1])?));
        }
        Ok(self)
    }

    /// The loss scaler saved with [`with_scaler`](Self::with_scaler).
    /// Fails when the checkpoint holds none (or a damaged one).
    #[fallible]
    pub fn scaler(&self) -> GradScaler {
        let missing = |reason: &str| Error::Checkpoint { path: self.source.clone(), reason: reason.to_string() };
        let mut state = [0i64; 5];
        for (slot, name) in state.iter_mut().zip(SCALER_STATE) {
            let Some((_, tensor)) = self.int_tensors.iter().find(|(n, _)| n == name) else {
                return Err(missing(&format!("no `{name}`: the checkpoint was saved without with_scaler")));
            };
            let values = tensor.try_to_vec()?;
            *slot = match values.as_slice() {
                [value] => *value,
                _ => return Err(missing(&format!("`{name}` holds {} values, not 1", values.len()))),
            };
        }
        GradScaler::from_state(state).ok_or_else(|| missing("the scaler's counts do not fit 32 bits"))
    }

    /// The float tensors, by name, in the order they were saved.
    pub fn tensors(&self) -> &[(String, Tensor<D, E>)] {
        &self.tensors
    }

    /// The float tensors, to replace (what a distributed job does with rank
    /// 0's values).
    pub(crate) fn tensors_mut(&mut self) -> &mut [(String, Tensor<D, E>)] {
        &mut self.tensors
    }

    /// The integer tensors (such as `num_batches_tracked`), by name.
    pub fn int_tensors(&self) -> &[(String, Tensor<D, i64>)] {
        &self.int_tensors
    }

    /// Writes the checkpoint to `path` (copying each tensor to the host).
    /// Fails when a tensor cannot be read back or the file cannot be written.
    #[fallible]
    pub fn save(&self, path: impl AsRef<Path>) {
        let path = path.as_ref();
        let mut host = Vec::with_capacity(self.tensors.len() + self.int_tensors.len());
        for (name, t) in &self.tensors {
            let bytes = to_le_bytes(&t.try_to_vec()?);
            host.push((name.clone(), safetensors_dtype::<E>(), t.dims().to_vec(), bytes));
        }
        for (name, t) in &self.int_tensors {
            let bytes = t.try_to_vec()?.iter().flat_map(|v| v.to_le_bytes()).collect();
            host.push((name.clone(), Dtype::I64, t.dims().to_vec(), bytes));
        }
        let views = host
            .iter()
            .map(|(name, dtype, dims, bytes)| {
                let view = TensorView::new(*dtype, dims.clone(), bytes)
                    .map_err(|e| checkpoint_error(path, format!("tensor `{name}`: {e}")))?;
                Ok((name.as_str(), view))
            })
            .collect::<Result<Vec<_>>>()?;
        let metadata = Some(HashMap::from([("format".to_string(), "devtensor".to_string())]));
        safetensors::serialize_to_file(views, metadata, path).map_err(|e| checkpoint_error(path, e.to_string()))
    }

    /// Reads the checkpoint at `path` onto `D`.
    ///
    /// The file is validated before anything is allocated for it: a
    /// truncated or corrupt file, a header that declares sizes past the
    /// file's end or overlapping tensors, and tensors of another element
    /// type than `E` (or `i64`, for integer buffers such as PyTorch's
    /// `num_batches_tracked`) are errors naming the file (and the tensor),
    /// never a panic or a huge allocation. A PyTorch `state_dict` saved
    /// with `safetensors.torch.save_file` loads as it is.
    #[fallible]
    pub fn load(path: impl AsRef<Path>) -> Self {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| checkpoint_error(path, format!("cannot read the file: {e}")))?;
        let file = SafeTensors::deserialize(&bytes)
            .map_err(|e| checkpoint_error(path, format!("not a valid safetensors file: {e}")))?;
        let mut tensors = Vec::new();
        let mut int_tensors = Vec::new();
        // Tensors in the order of their data in the file, which is the order
        // they were saved in.
        let mut entries = file.tensors();
        entries.sort_by_key(|(_, view)| view.data().as_ptr() as usize);
        for (name, view) in entries {
            let wrap = |e: Error| checkpoint_error(path, format!("tensor `{name}`: {e}"));
            if view.dtype() == Dtype::I64 {
                let values =
                    view.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
                let host = Tensor::<Cpu, i64>::try_from_vec(values, view.shape()).map_err(wrap)?;
                int_tensors.push((name, host.try_to::<D>()?));
                continue;
            }
            if view.dtype() != safetensors_dtype::<E>() {
                return Err(checkpoint_error(
                    path,
                    format!(
                        "tensor `{name}` holds {:?} elements, but the model's are {}: load the file as the \
                         checkpoint of its own dtype, then convert it with `.to_dtype::<{}>()`",
                        view.dtype(),
                        E::DTYPE.name(),
                        E::DTYPE.name()
                    ),
                ));
            }
            let values = from_le_bytes::<E>(view.data());
            let host = Tensor::<Cpu, E>::try_from_vec(values, view.shape()).map_err(wrap)?;
            tensors.push((name, host.try_to::<D>()?));
        }
        Ok(Checkpoint { tensors, int_tensors, source: path.display().to_string() })
    }

    /// Copies the checkpoint's tensors into `model`'s parameters and
    /// buffers, by name (PyTorch's `load_state_dict(strict=True)`). Fails,
    /// naming the first mismatch and changing nothing, when a tensor of the
    /// model is missing from the checkpoint, has another shape or element
    /// type, or when the checkpoint holds a model tensor the model does not
    /// have.
    ///
    /// A parameter tied to another (one tensor under two names) stays tied:
    /// it gets the tensor loaded under its first name, and may be missing
    /// from the file under its other names (as `safetensors.torch.save_model`
    /// writes shared tensors once).
    ///
    /// A batch norm's `num_batches_tracked` may be missing too: files from
    /// PyTorch before 0.4.1, and from converters that drop integer buffers,
    /// have none. The layer then keeps its own count, as PyTorch's strict
    /// `load_state_dict` does for such a file.
    #[fallible]
    pub fn load_into<M: LoadInto<D, E>>(&self, model: &mut M) {
        self.load_tensors_into(model, true).map(drop)
    }

    /// Like [`load_into`](Self::load_into), but loads only the tensors
    /// that the checkpoint and the model share and reports the others,
    /// PyTorch's `load_state_dict(strict=False)` (what Hugging Face's
    /// `from_pretrained` does for a model with a new head): the model's
    /// tensors missing from the checkpoint keep their values, the
    /// checkpoint's tensors the model does not have are left out. A shared
    /// name with another shape or element type still fails, changing
    /// nothing, as in PyTorch.
    ///
    /// ```
    /// use devtensor::io::Checkpoint;
    /// use devtensor::nn::{Linear, Module};
    /// use devtensor::{Cpu, Device};
    /// struct Classifier<D: Device> {
    ///     body: Linear<D>,
    ///     head: Linear<D>,
    /// }
    /// devtensor::module!(Classifier { body, head });
    /// struct Pretrained<D: Device> {
    ///     body: Linear<D>,
    ///     lm_head: Linear<D>,
    /// }
    /// devtensor::module!(Pretrained { body, lm_head });
    ///
    /// let pretrained = Pretrained { body: Linear::<Cpu>::new(4, 4), lm_head: Linear::new(4, 9) };
    /// let mut model = Classifier { body: Linear::<Cpu>::new(4, 4), head: Linear::new(4, 2) };
    /// let report = Checkpoint::from_model(&pretrained).load_into_non_strict(&mut model);
    /// assert_eq!(report.missing_keys, ["head.weight", "head.bias"]);
    /// assert_eq!(report.unexpected_keys, ["lm_head.weight", "lm_head.bias"]);
    /// assert_eq!(model.body.weight.to_vec(), pretrained.body.weight.to_vec());
    /// ```
    #[fallible]
    pub fn load_into_non_strict<M: LoadInto<D, E>>(&self, model: &mut M) -> IncompatibleKeys {
        self.load_tensors_into(model, false)
    }

    /// The body of both loads: `strict` turns a missing or unexpected
    /// tensor into an error.
    fn load_tensors_into<M: LoadInto<D, E>>(&self, model: &mut M, strict: bool) -> Result<IncompatibleKeys> {
        let is_model_tensor = |n: &&String| !n.starts_with(OPTIMIZER_PREFIX) && !SCALER_STATE.contains(&n.as_str());
        let saved: HashMap<&str, &Tensor<D, E>> =
            self.tensors.iter().filter(|(n, _)| is_model_tensor(&n)).map(|(n, t)| (n.as_str(), t)).collect();
        let saved_int: HashMap<&str, &Tensor<D, i64>> = self.int_tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let mismatch = |reason: String| Error::Checkpoint { path: self.source.clone(), reason };
        let shape_mismatch = |name: &str, saved: &Shape, model: &Shape| {
            mismatch(format!("tensor `{name}` has shape {saved} in the checkpoint but {model} in the model"))
        };

        // Every float tensor of the model, except the later names of a tied
        // parameter, must be in the file with its shape.
        let mut tied_to: HashMap<LeafId, String> = HashMap::new();
        let mut expected: Vec<String> = Vec::new();
        let mut report = IncompatibleKeys::default();
        for (name, _, t) in model.named_tensors() {
            let first = match t.leaf_id() {
                Some(id) => tied_to.entry(id).or_insert_with(|| name.clone()) == &name,
                None => true,
            };
            match saved.get(name.as_str()) {
                Some(s) if s.shape() != t.shape() => return Err(shape_mismatch(&name, s.shape(), t.shape())),
                Some(_) => {}
                None if !first => {}
                None if saved_int.contains_key(name.as_str()) => {
                    return Err(mismatch(format!(
                        "tensor `{name}` holds I64 elements, but the model's are {}",
                        E::DTYPE.name()
                    )));
                }
                None if strict => {
                    return Err(mismatch(format!("the model's tensor `{name}` is missing from the checkpoint")));
                }
                None => report.missing_keys.push(name.clone()),
            }
            expected.push(name);
        }
        let mut int_error = None;
        model.visit_int_buffers("", &mut |name, t| {
            let problem = match saved_int.get(name) {
                Some(s) if s.shape() != t.shape() => Some(shape_mismatch(name, s.shape(), t.shape())),
                Some(_) => None,
                None if saved.contains_key(name) => Some(mismatch(format!(
                    "tensor `{name}` holds {} elements, but the model's are I64",
                    E::DTYPE.name()
                ))),
                None if is_batches_tracked(name) => None,
                None if strict => Some(mismatch(format!("the model's tensor `{name}` is missing from the checkpoint"))),
                None => {
                    report.missing_keys.push(name.to_string());
                    None
                }
            };
            int_error = int_error.take().or(problem);
            expected.push(name.to_string());
        });
        if let Some(e) = int_error {
            return Err(e);
        }
        let names = self.tensors.iter().map(|(n, _)| n).chain(self.int_tensors.iter().map(|(n, _)| n));
        for extra in names.filter(is_model_tensor).filter(|n| !expected.contains(n)) {
            if strict {
                return Err(mismatch(format!("the checkpoint's tensor `{extra}` is not in the model")));
            }
            report.unexpected_keys.push(extra.clone());
        }

        let mut loaded: HashMap<LeafId, Tensor<D, E>> = HashMap::new();
        model.visit_mut("", &mut |name, kind, t| {
            if let Some(first) = t.leaf_id().and_then(|id| loaded.get(&id)) {
                *t = first.clone();
                return;
            }
            let id = t.leaf_id();
            let Some(value) = saved.get(name).map(|t| t.detach()) else { return };
            *t = match kind {
                // A frozen parameter (no grad) stays frozen, as PyTorch's
                // load_state_dict copies into it.
                TensorKind::Parameter if t.tracks_grad() => value.requires_grad(),
                TensorKind::Parameter => value,
                TensorKind::Buffer => value,
            };
            if let Some(id) = id {
                loaded.insert(id, t.clone());
            }
        });
        model.visit_int_buffers_mut("", &mut |name, t| {
            if let Some(saved) = saved_int.get(name) {
                *t = (*saved).clone();
            }
        });
        Ok(report)
    }

    /// The optimizer state saved with [`with_optimizer`](Self::with_optimizer),
    /// for [`Optimizer::try_load_state`](crate::optim::Optimizer::try_load_state).
    pub fn optimizer_state(&self) -> Vec<(String, Tensor<D, E>)> {
        self.tensors
            .iter()
            .filter_map(|(n, t)| n.strip_prefix(OPTIMIZER_PREFIX).map(|n| (n.to_string(), t.clone())))
            .collect()
    }
}

/// What a non-strict load left out
/// ([`Checkpoint::load_into_non_strict`]), PyTorch's `_IncompatibleKeys`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IncompatibleKeys {
    /// The model's tensors the checkpoint does not have, in the model's
    /// order; they keep their values.
    pub missing_keys: Vec<String>,
    /// The checkpoint's tensors the model does not have, in the file's
    /// order; they are not loaded.
    pub unexpected_keys: Vec<String>,
}

fn checkpoint_error(path: &Path, reason: String) -> Error {
    Error::Checkpoint { path: path.display().to_string(), reason }
}

fn safetensors_dtype<E: FloatElement>() -> Dtype {
    match E::DTYPE {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::BF16 => Dtype::BF16,
        DType::F16 => Dtype::F16,
        DType::I64 | DType::U8 => unreachable!("{}", crate::element::NOT_FLOAT),
    }
}

/// The values as little-endian bytes, as safetensors stores them.
fn to_le_bytes<E: FloatElement>(values: &[E]) -> Vec<u8> {
    match E::DTYPE {
        DType::F64 => values.iter().flat_map(|&v| crate::Element::to_f64(v).to_le_bytes()).collect(),
        DType::F32 => values.iter().flat_map(|&v| (crate::Element::to_f64(v) as f32).to_le_bytes()).collect(),
        // Exact: the values are the type's own, passed through `f32`.
        DType::BF16 => values.iter().flat_map(|&v| bf16::from_f32(v.cast()).to_bits().to_le_bytes()).collect(),
        DType::F16 => values.iter().flat_map(|&v| f16::from_f32(v.cast()).to_bits().to_le_bytes()).collect(),
        DType::I64 | DType::U8 => unreachable!("{}", crate::element::NOT_FLOAT),
    }
}

/// The inverse of [`to_le_bytes`]; `bytes` holds whole elements (safetensors
/// checked its length against the shape).
fn from_le_bytes<E: FloatElement>(bytes: &[u8]) -> Vec<E> {
    match E::DTYPE {
        DType::F64 => {
            bytes.chunks_exact(8).map(|b| E::from_f64(f64::from_le_bytes(b.try_into().expect("8 bytes")))).collect()
        }
        DType::F32 => {
            bytes.chunks_exact(4).map(|b| E::from_f32(f32::from_le_bytes(b.try_into().expect("4 bytes")))).collect()
        }
        DType::BF16 => bytes.chunks_exact(2).map(|b| E::from_f32(bf16::from_le_bytes([b[0], b[1]]).to_f32())).collect(),
        DType::F16 => bytes.chunks_exact(2).map(|b| E::from_f32(f16::from_le_bytes([b[0], b[1]]).to_f32())).collect(),
        DType::I64 | DType::U8 => unreachable!("{}", crate::element::NOT_FLOAT),
    }
}

/// Whether `name` is a batch norm's count of batches, which a checkpoint
/// may lack (see [`Checkpoint::load_into`]).
fn is_batches_tracked(name: &str) -> bool {
    name == "num_batches_tracked" || name.ends_with(".num_batches_tracked")
}
