//! [`Dataset`], [`TensorDataset`] and [`TupleDataset`].

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
/// `TensorDataset`: sample `i` is `(inputs[i], targets[i])`. For one, three
/// or four tensors, or a list of them, see [`TupleDataset`].
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

/// The tensors of a [`TupleDataset`]: a tuple of one to four CPU tensors of
/// any element types, or a `Vec` of CPU tensors of one type.
pub trait TensorTuple: Send + Sync {
    /// One sample: each tensor's row, in the same form.
    type Row: Send;

    /// The tensors' shapes, in order.
    fn shapes(&self) -> Vec<crate::layout::Shape>;

    /// The same tensors, detached from any gradient graph.
    fn detached(self) -> Self;

    /// Row `index` of every tensor.
    fn row(&self, index: usize) -> Result<Self::Row>;
}

macro_rules! tensor_tuples {
    ($(($($T:ident $t:ident $i:tt),+);)*) => {$(
        impl<$($T: Element),+> TensorTuple for ($(Tensor<Cpu, $T>,)+) {
            type Row = ($(Tensor<Cpu, $T>,)+);

            fn shapes(&self) -> Vec<crate::layout::Shape> {
                vec![$(self.$i.shape().clone()),+]
            }

            fn detached(self) -> Self {
                ($(self.$i.detach(),)+)
            }

            fn row(&self, index: usize) -> Result<Self::Row> {
                Ok(($(self.$i.try_select(0, index)?,)+))
            }
        }
    )*};
}

tensor_tuples! {
    (A a 0);
    (A a 0, B b 1);
    (A a 0, B b 1, C c 2);
    (A a 0, B b 1, C c 2, F f 3);
}

impl<E: Element> TensorTuple for Vec<Tensor<Cpu, E>> {
    type Row = Vec<Tensor<Cpu, E>>;

    fn shapes(&self) -> Vec<crate::layout::Shape> {
        self.iter().map(|t| t.shape().clone()).collect()
    }

    fn detached(self) -> Self {
        self.iter().map(Tensor::detach).collect()
    }

    fn row(&self, index: usize) -> Result<Self::Row> {
        self.iter().map(|t| t.try_select(0, index)).collect()
    }
}

/// PyTorch's `TensorDataset(*tensors)` for any number of tensors: sample
/// `i` holds row `i` of each. The tensors are a tuple of one to four CPU
/// tensors of any element types (sample `i` is the tuple of their rows),
/// or a `Vec` of tensors of one type. [`TensorDataset`] is the common
/// `(inputs, targets)` pair.
///
/// ```
/// use devtensor::data::{DataLoader, Dataset, TupleDataset};
/// use devtensor::{Cpu, Tensor};
/// // BERT's inputs: token ids, attention mask, labels.
/// let ids = Tensor::<Cpu, i64>::from_vec((0..12).collect(), [3, 4]);
/// let mask = Tensor::<Cpu, u8>::ones([3, 4]);
/// let labels = Tensor::<Cpu, i64>::from_vec(vec![0, 1, 1], [3]);
/// let data = TupleDataset::try_new((ids, mask, labels))?;
/// let (row, _, label) = data.get(2)?;
/// assert_eq!((row.to_vec(), label.item()), (vec![8, 9, 10, 11], 1));
/// let mut loader = DataLoader::new(data, 2);
/// let (ids, mask, labels) = loader.iter().next().unwrap()?;
/// assert_eq!((ids.dims(), mask.dims(), labels.dims()), (&[2, 4][..], &[2, 4][..], &[2][..]));
/// # Ok::<(), devtensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct TupleDataset<T: TensorTuple> {
    tensors: T,
    len: usize,
}

impl<T: TensorTuple> TupleDataset<T> {
    /// The rows of `tensors`, detached. Fails when there is no tensor, one
    /// is rank 0 or their first axes differ.
    pub fn try_new(tensors: T) -> Result<Self> {
        let shapes = tensors.shapes();
        let len = shapes.first().filter(|s| s.rank() > 0).map(|s| s.dims()[0]);
        match len {
            Some(len) if shapes.iter().all(|s| s.rank() > 0 && s.dims()[0] == len) => {
                Ok(TupleDataset { tensors: tensors.detached(), len })
            }
            _ => Err(Error::Shape {
                op: "TupleDataset",
                device: "Cpu".into(),
                shapes,
                reason: "one tensor or more, all with the same number of rows (their first axis)".into(),
            }),
        }
    }

    /// The tensors.
    pub fn tensors(&self) -> &T {
        &self.tensors
    }
}

impl<T: TensorTuple> Dataset for TupleDataset<T> {
    type Item = T::Row;

    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, index: usize) -> Result<Self::Item> {
        self.tensors.row(index)
    }
}
