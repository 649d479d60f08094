//! [`Dataset`] and [`TensorDataset`].

use crate::backend::Cpu;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Samples addressed by index, PyTorch's map-style `Dataset`. Shared by the
/// loader's worker threads, hence `Send + Sync`.
pub trait Dataset: Send + Sync {
    /// One sample, e.g. an `(image, label)` pair of CPU tensors.
    type Item: Send;

    /// The number of samples.
    fn len(&self) -> usize;

    /// Whether there are no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sample `index` (below [`len`](Self::len)). Fails when reading or
    /// decoding the sample fails.
    fn get(&self, index: usize) -> Result<Self::Item>;
}

/// Samples that are the rows of CPU tensors of equal length, PyTorch's
/// `TensorDataset`: sample `i` is `(inputs[i], targets[i])`.
///
/// ```
/// use devtensor::data::{Dataset, TensorDataset};
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::from_vec((0..6).map(|v| v as f32).collect(), [3, 2]);
/// let y = Tensor::<Cpu, i64>::from_vec(vec![7, 8, 9], [3]);
/// let data = TensorDataset::try_new(x, y)?;
/// let (row, label) = data.get(1)?;
/// assert_eq!((row.to_vec(), label.item()), (vec![2.0, 3.0], 8));
/// # Ok::<(), devtensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct TensorDataset<A: Element = f32, B: Element = i64> {
    inputs: Tensor<Cpu, A>,
    targets: Tensor<Cpu, B>,
}

impl<A: Element, B: Element> TensorDataset<A, B> {
    /// The rows of `inputs` paired with those of `targets`. Fails when
    /// either is rank 0 or their first axes differ.
    pub fn try_new(inputs: Tensor<Cpu, A>, targets: Tensor<Cpu, B>) -> Result<Self> {
        if inputs.rank() == 0 || targets.rank() == 0 || inputs.dims()[0] != targets.dims()[0] {
            return Err(Error::Shape {
                op: "TensorDataset",
                device: "Cpu".into(),
                shapes: vec![inputs.shape().clone(), targets.shape().clone()],
                reason: "inputs and targets need the same number of rows (their first axis)".into(),
            });
        }
        Ok(TensorDataset { inputs: inputs.detach(), targets: targets.detach() })
    }

    /// The whole inputs tensor.
    pub fn inputs(&self) -> &Tensor<Cpu, A> {
        &self.inputs
    }

    /// The whole targets tensor.
    pub fn targets(&self) -> &Tensor<Cpu, B> {
        &self.targets
    }
}

impl<A: Element, B: Element> Dataset for TensorDataset<A, B> {
    type Item = (Tensor<Cpu, A>, Tensor<Cpu, B>);

    fn len(&self) -> usize {
        self.inputs.dims()[0]
    }

    fn get(&self, index: usize) -> Result<Self::Item> {
        Ok((self.inputs.try_select(0, index)?, self.targets.try_select(0, index)?))
    }
}
