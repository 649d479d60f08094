//! Collating samples into a batch.

use crate::backend::Cpu;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Turns the samples of one batch into the batch, PyTorch's `collate_fn`.
pub trait Collate<Item>: Send + Sync {
    /// The batch.
    type Batch: Send;

    /// The batch of `items`, which are in sampler order. Fails when the
    /// samples cannot be combined, naming the first sample that does not fit.
    fn collate(&self, items: Vec<Item>) -> Result<Self::Batch>;
}

/// The default collate, PyTorch's `default_collate` for tensors: samples
/// that are a tensor, a tuple of one to four tensors or a `Vec` of tensors
/// are stacked along a new first axis (each field separately).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stack;

/// Stacks one field of every sample, checking shapes first so that the
/// error names the sample.
fn stack_field<E: Element>(field: &str, tensors: &[Tensor<Cpu, E>]) -> Result<Tensor<Cpu, E>> {
    let Some(first) = tensors.first() else {
        return Err(Error::Argument { op: "collate", device: "Cpu".into(), reason: "an empty batch".into() });
    };
    if let Some((i, t)) = tensors.iter().enumerate().find(|(_, t)| t.shape() != first.shape()) {
        return Err(Error::Shape {
            op: "collate",
            device: "Cpu".into(),
            shapes: vec![first.shape().clone(), t.shape().clone()],
            reason: format!("{field} of sample {i} of the batch does not have the shape of sample 0's"),
        });
    }
    Tensor::try_stack(&tensors.iter().collect::<Vec<_>>(), 0)
}

impl<E: Element> Collate<Tensor<Cpu, E>> for Stack {
    type Batch = Tensor<Cpu, E>;

    fn collate(&self, items: Vec<Tensor<Cpu, E>>) -> Result<Self::Batch> {
        stack_field("the sample", &items)
    }
}

impl<A: Element, B: Element> Collate<(Tensor<Cpu, A>, Tensor<Cpu, B>)> for Stack {
    type Batch = (Tensor<Cpu, A>, Tensor<Cpu, B>);

    fn collate(&self, items: Vec<(Tensor<Cpu, A>, Tensor<Cpu, B>)>) -> Result<Self::Batch> {
        let (a, b): (Vec<_>, Vec<_>) = items.into_iter().unzip();
        Ok((stack_field("field 0", &a)?, stack_field("field 1", &b)?))
    }
}

impl<A: Element, B: Element, C: Element> Collate<(Tensor<Cpu, A>, Tensor<Cpu, B>, Tensor<Cpu, C>)> for Stack {
    type Batch = (Tensor<Cpu, A>, Tensor<Cpu, B>, Tensor<Cpu, C>);

    fn collate(&self, items: Vec<(Tensor<Cpu, A>, Tensor<Cpu, B>, Tensor<Cpu, C>)>) -> Result<Self::Batch> {
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        for (x, y, z) in items {
            a.push(x);
            b.push(y);
            c.push(z);
        }
        Ok((stack_field("field 0", &a)?, stack_field("field 1", &b)?, stack_field("field 2", &c)?))
    }
}

impl<A: Element> Collate<(Tensor<Cpu, A>,)> for Stack {
    type Batch = (Tensor<Cpu, A>,);

    fn collate(&self, items: Vec<(Tensor<Cpu, A>,)>) -> Result<Self::Batch> {
        let a: Vec<_> = items.into_iter().map(|(a,)| a).collect();
        Ok((stack_field("field 0", &a)?,))
    }
}

impl<A: Element, B: Element, C: Element, F: Element>
    Collate<(Tensor<Cpu, A>, Tensor<Cpu, B>, Tensor<Cpu, C>, Tensor<Cpu, F>)> for Stack
{
    type Batch = (Tensor<Cpu, A>, Tensor<Cpu, B>, Tensor<Cpu, C>, Tensor<Cpu, F>);

    fn collate(
        &self,
        items: Vec<(Tensor<Cpu, A>, Tensor<Cpu, B>, Tensor<Cpu, C>, Tensor<Cpu, F>)>,
    ) -> Result<Self::Batch> {
        let (mut a, mut b, mut c, mut f) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (w, x, y, z) in items {
            a.push(w);
            b.push(x);
            c.push(y);
            f.push(z);
        }
        let fields = (stack_field("field 0", &a)?, stack_field("field 1", &b)?, stack_field("field 2", &c)?);
        Ok((fields.0, fields.1, fields.2, stack_field("field 3", &f)?))
    }
}

/// Samples that are lists of tensors (a [`TupleDataset`](super::TupleDataset)
/// of a `Vec`): field `k` of every sample stacked; every sample must have
/// as many fields as the first.
impl<E: Element> Collate<Vec<Tensor<Cpu, E>>> for Stack {
    type Batch = Vec<Tensor<Cpu, E>>;

    fn collate(&self, items: Vec<Vec<Tensor<Cpu, E>>>) -> Result<Self::Batch> {
        let fields = items.first().map_or(0, Vec::len);
        if let Some((i, item)) = items.iter().enumerate().find(|(_, item)| item.len() != fields) {
            return Err(Error::Argument {
                op: "collate",
                device: "Cpu".into(),
                reason: format!("sample {i} of the batch has {} tensors, sample 0 {fields}", item.len()),
            });
        }
        let mut columns: Vec<Vec<Tensor<Cpu, E>>> = (0..fields).map(|_| Vec::with_capacity(items.len())).collect();
        for item in items {
            for (column, t) in columns.iter_mut().zip(item) {
                column.push(t);
            }
        }
        columns.iter().enumerate().map(|(k, column)| stack_field(&format!("field {k}"), column)).collect()
    }
}
