//! An optimizer's state saved beside its model's, in one [`Checkpoint`]
//! (which lives in `nn`, the layer below, and knows nothing of optimizers).

use super::Optimizer;
use crate::element::FloatElement;
use crate::nn::Checkpoint;
use crate::tensor::Device;

impl<D: Device, E: FloatElement> Checkpoint<D, E> {
    /// Adds `optimizer`'s state (under names starting with `optimizer.`),
    /// so that training resumes where it stopped; read it back with
    /// [`optimizer_state`](Self::optimizer_state).
    pub fn with_optimizer(mut self, optimizer: &impl Optimizer<D, E>) -> Self {
        self.add_optimizer_state(optimizer.state());
        self
    }
}
