//! Learning-rate schedules, as functions of the epoch (or step: the
//! warm-up schedules of transformers count steps).

use super::Optimizer;
use crate::element::FloatElement;
use crate::tensor::Device;

/// A learning rate for each epoch. Call [`apply`](LrSchedule::apply) at the
/// start of each epoch (PyTorch's `scheduler.step()` at the end of the
/// previous one).
pub trait LrSchedule {
    /// The learning rate for `epoch` (counted from 0).
    fn lr(&self, epoch: usize) -> f64;

    /// Sets `optimizer`'s learning rate to the one for `epoch`.
    fn apply<D: Device, E: FloatElement>(&self, optimizer: &mut impl Optimizer<D, E>, epoch: usize) {
        optimizer.set_lr(self.lr(epoch));
    }
}

/// PyTorch's `StepLR`: `base_lr · gamma^(epoch / step_size)` (integer division).
///
/// ```
/// use devtensor::optim::{LrSchedule, StepLr};
/// let s = StepLr { base_lr: 0.1, step_size: 2, gamma: 0.5 };
/// assert_eq!([0, 1, 2, 3, 4].map(|e| s.lr(e)), [0.1, 0.1, 0.05, 0.05, 0.025]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepLr {
    /// The rate at epoch 0.
    pub base_lr: f64,
    /// Epochs between decays.
    pub step_size: usize,
    /// The factor applied at each decay.
    pub gamma: f64,
}

impl LrSchedule for StepLr {
    fn lr(&self, epoch: usize) -> f64 {
        let decays = epoch.checked_div(self.step_size).unwrap_or(0);
        self.base_lr * self.gamma.powi(decays.min(i32::MAX as usize) as i32)
    }
}

/// PyTorch's `CosineAnnealingLR` (without restarts):
/// `eta_min + (base_lr - eta_min) · (1 + cos(π · epoch / t_max)) / 2`, held at
/// `eta_min` after `t_max`.
///
/// ```
/// use devtensor::optim::{CosineAnnealingLr, LrSchedule};
/// let s = CosineAnnealingLr { base_lr: 1.0, t_max: 4, eta_min: 0.0 };
/// assert_eq!(s.lr(0), 1.0);
/// assert!((s.lr(2) - 0.5).abs() < 1e-12);
/// assert!(s.lr(4).abs() < 1e-12);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CosineAnnealingLr {
    /// The rate at epoch 0.
    pub base_lr: f64,
    /// The epoch at which the rate reaches `eta_min`.
    pub t_max: usize,
    /// The smallest rate.
    pub eta_min: f64,
}

impl LrSchedule for CosineAnnealingLr {
    fn lr(&self, epoch: usize) -> f64 {
        if self.t_max == 0 {
            return self.eta_min;
        }
        let progress = epoch.min(self.t_max) as f64 / self.t_max as f64;
        self.eta_min + (self.base_lr - self.eta_min) * (1.0 + (std::f64::consts::PI * progress).cos()) / 2.0
    }
}

/// PyTorch's `LinearLR`: the rate moves linearly from
/// `base_lr · start_factor` to `base_lr · end_factor` over `total_iters`
/// steps and stays there: a warm-up.
///
/// ```
/// use devtensor::optim::{LinearLr, LrSchedule};
/// let warmup = LinearLr { base_lr: 1.0, start_factor: 0.25, end_factor: 1.0, total_iters: 3 };
/// assert_eq!([0, 1, 2, 3, 9].map(|e| warmup.lr(e)), [0.25, 0.5, 0.75, 1.0, 1.0]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearLr {
    /// The optimizer's rate, which the factors multiply.
    pub base_lr: f64,
    /// The factor at step 0 (PyTorch's default is 1/3).
    pub start_factor: f64,
    /// The factor from `total_iters` on (PyTorch's default is 1).
    pub end_factor: f64,
    /// Steps from the start factor to the end factor.
    pub total_iters: usize,
}

impl LrSchedule for LinearLr {
    fn lr(&self, epoch: usize) -> f64 {
        let progress =
            if self.total_iters == 0 { 1.0 } else { epoch.min(self.total_iters) as f64 / self.total_iters as f64 };
        self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * progress)
    }
}

/// PyTorch's `SequentialLR` with two schedules: `first` until step
/// `milestone`, then `second`, counted from 0 again at the milestone. A
/// linear warm-up followed by a cosine decay, the usual transformer
/// schedule, is `SequentialLr { first: LinearLr { .. }, second:
/// CosineAnnealingLr { .. }, milestone: warmup }`; nest it for more stages.
///
/// ```
/// use devtensor::optim::{CosineAnnealingLr, LinearLr, LrSchedule, SequentialLr};
/// let schedule = SequentialLr {
///     first: LinearLr { base_lr: 1e-3, start_factor: 0.01, end_factor: 1.0, total_iters: 100 },
///     second: CosineAnnealingLr { base_lr: 1e-3, t_max: 900, eta_min: 1e-4 },
///     milestone: 100,
/// };
/// assert_eq!(schedule.lr(0), 1e-5);
/// assert_eq!(schedule.lr(100), 1e-3); // the cosine's first step
/// assert!((schedule.lr(1000) - 1e-4).abs() < 1e-12);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SequentialLr<A, B> {
    /// The schedule before the milestone.
    pub first: A,
    /// The schedule from the milestone on, started at its step 0 there.
    pub second: B,
    /// The step at which `second` takes over.
    pub milestone: usize,
}

impl<A: LrSchedule, B: LrSchedule> LrSchedule for SequentialLr<A, B> {
    fn lr(&self, epoch: usize) -> f64 {
        match epoch.checked_sub(self.milestone) {
            Some(after) => self.second.lr(after),
            None => self.first.lr(epoch),
        }
    }
}
