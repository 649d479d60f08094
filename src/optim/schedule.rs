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

/// PyTorch's `OneCycleLR` (cosine annealing, two phases): over the first
/// `pct_start` of `total_steps` the rate rises from `max_lr / div_factor`
/// to `max_lr`, then falls to `max_lr / div_factor / final_div_factor`;
/// with `cycle_momentum`, [`apply`](LrSchedule::apply) also moves the
/// momentum (SGD's, or Adam's first beta) the other way, from
/// `max_momentum` down to `base_momentum` and back, as PyTorch does by
/// default. Counted in steps (call `apply` before each optimizer step);
/// `Default` gives PyTorch's defaults for everything but `max_lr` and
/// `total_steps`.
///
/// ```
/// use devtensor::optim::{LrSchedule, OneCycleLr};
/// let s = OneCycleLr { max_lr: 0.1, total_steps: 100, ..Default::default() };
/// assert!((s.lr(0) - 0.004).abs() < 1e-12); // max_lr / 25
/// assert!((s.lr(29) - 0.1).abs() < 1e-12); // the peak, at 30% - 1
/// assert!((s.lr(99) - 4e-7).abs() < 1e-15); // max_lr / 25 / 1e4
/// assert_eq!((s.momentum(0), s.momentum(29)), (0.95, 0.85));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OneCycleLr {
    /// The peak rate.
    pub max_lr: f64,
    /// Steps in the cycle; `lr` holds the last rate beyond them.
    pub total_steps: usize,
    /// The share of the cycle spent rising (0.3).
    pub pct_start: f64,
    /// The starting rate is `max_lr / div_factor` (25).
    pub div_factor: f64,
    /// The final rate is the starting rate over this (1e4).
    pub final_div_factor: f64,
    /// Whether `apply` also cycles the momentum (true, as PyTorch's default).
    pub cycle_momentum: bool,
    /// The momentum at the peak rate (0.85).
    pub base_momentum: f64,
    /// The momentum at the ends of the cycle (0.95).
    pub max_momentum: f64,
}

impl Default for OneCycleLr {
    fn default() -> Self {
        OneCycleLr {
            max_lr: 0.0,
            total_steps: 1,
            pct_start: 0.3,
            div_factor: 25.0,
            final_div_factor: 1e4,
            cycle_momentum: true,
            base_momentum: 0.85,
            max_momentum: 0.95,
        }
    }
}

impl OneCycleLr {
    /// The phase of `step` (PyTorch's two phases, the first ending at
    /// `pct_start · total_steps - 1`) and how far into it, 0 to 1.
    fn phase(&self, step: usize) -> (bool, f64) {
        let step = step.min(self.total_steps.saturating_sub(1)) as f64;
        let first_end = self.pct_start * self.total_steps as f64 - 1.0;
        let last_end = self.total_steps as f64 - 1.0;
        if step <= first_end { (true, step / first_end) } else { (false, (step - first_end) / (last_end - first_end)) }
    }

    /// The momentum for `step`: from `max_momentum` to `base_momentum` while
    /// the rate rises, and back while it falls.
    pub fn momentum(&self, step: usize) -> f64 {
        let (rising, pct) = self.phase(step);
        if rising {
            cos_anneal(self.max_momentum, self.base_momentum, pct)
        } else {
            cos_anneal(self.base_momentum, self.max_momentum, pct)
        }
    }
}

/// PyTorch's `_annealing_cos`: from `start` at 0 to `end` at 1.
fn cos_anneal(start: f64, end: f64, pct: f64) -> f64 {
    end + (start - end) / 2.0 * ((std::f64::consts::PI * pct).cos() + 1.0)
}

impl LrSchedule for OneCycleLr {
    fn lr(&self, step: usize) -> f64 {
        let initial = self.max_lr / self.div_factor;
        let (rising, pct) = self.phase(step);
        if rising {
            cos_anneal(initial, self.max_lr, pct)
        } else {
            cos_anneal(self.max_lr, initial / self.final_div_factor, pct)
        }
    }

    /// Sets the rate, and with `cycle_momentum` the momentum, for `step`.
    fn apply<D: Device, E: FloatElement>(&self, optimizer: &mut impl Optimizer<D, E>, step: usize) {
        optimizer.set_lr(self.lr(step));
        if self.cycle_momentum {
            optimizer.set_momentum(self.momentum(step));
        }
    }
}

/// PyTorch's `ExponentialLR`: `base_lr · gamma^epoch`.
///
/// ```
/// use devtensor::optim::{ExponentialLr, LrSchedule};
/// let s = ExponentialLr { base_lr: 1.0, gamma: 0.5 };
/// assert_eq!([0, 1, 2].map(|e| s.lr(e)), [1.0, 0.5, 0.25]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExponentialLr {
    /// The rate at epoch 0.
    pub base_lr: f64,
    /// The factor applied every epoch.
    pub gamma: f64,
}

impl LrSchedule for ExponentialLr {
    fn lr(&self, epoch: usize) -> f64 {
        self.base_lr * self.gamma.powf(epoch as f64)
    }
}

/// PyTorch's `MultiStepLR`: `base_lr · gamma^k`, with `k` the number of
/// milestones at or before `epoch` (a milestone listed twice counts twice,
/// as in PyTorch; the order does not matter).
///
/// ```
/// use devtensor::optim::{LrSchedule, MultiStepLr};
/// let s = MultiStepLr { base_lr: 1.0, milestones: vec![2, 4], gamma: 0.1 };
/// assert_eq!([0, 1, 2, 3, 4].map(|e| s.lr(e)), [1.0, 1.0, 0.1, 0.1, 0.1 * 0.1]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct MultiStepLr {
    /// The rate at epoch 0.
    pub base_lr: f64,
    /// The epochs at which the rate is multiplied by `gamma`.
    pub milestones: Vec<usize>,
    /// The factor applied at each milestone (PyTorch's default is 0.1).
    pub gamma: f64,
}

impl LrSchedule for MultiStepLr {
    fn lr(&self, epoch: usize) -> f64 {
        let passed = self.milestones.iter().filter(|&&m| m <= epoch).count();
        self.base_lr * self.gamma.powi(passed.min(i32::MAX as usize) as i32)
    }
}

/// PyTorch's `ConstantLR`: `base_lr · factor` until `total_iters`, then
/// `base_lr` (PyTorch's defaults: `factor` 1/3, `total_iters` 5).
///
/// ```
/// use devtensor::optim::{ConstantLr, LrSchedule};
/// let s = ConstantLr { base_lr: 1.0, factor: 0.5, total_iters: 2 };
/// assert_eq!([0, 1, 2, 3].map(|e| s.lr(e)), [0.5, 0.5, 1.0, 1.0]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConstantLr {
    /// The optimizer's rate, which `factor` multiplies.
    pub base_lr: f64,
    /// The factor before `total_iters`.
    pub factor: f64,
    /// The epoch from which the full rate applies.
    pub total_iters: usize,
}

impl LrSchedule for ConstantLr {
    fn lr(&self, epoch: usize) -> f64 {
        if epoch < self.total_iters { self.base_lr * self.factor } else { self.base_lr }
    }
}

/// PyTorch's `PolynomialLR`: `base_lr · (1 - min(epoch, total_iters) /
/// total_iters)^power`, zero from `total_iters` on (PyTorch's defaults:
/// `total_iters` 5, `power` 1).
///
/// ```
/// use devtensor::optim::{LrSchedule, PolynomialLr};
/// let s = PolynomialLr { base_lr: 1.0, total_iters: 4, power: 1.0 };
/// assert_eq!([0, 1, 2, 4, 9].map(|e| s.lr(e)), [1.0, 0.75, 0.5, 0.0, 0.0]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolynomialLr {
    /// The rate at epoch 0.
    pub base_lr: f64,
    /// The epoch at which the rate reaches zero.
    pub total_iters: usize,
    /// The polynomial's power.
    pub power: f64,
}

impl LrSchedule for PolynomialLr {
    fn lr(&self, epoch: usize) -> f64 {
        if self.total_iters == 0 {
            return 0.0;
        }
        let left = 1.0 - epoch.min(self.total_iters) as f64 / self.total_iters as f64;
        self.base_lr * left.powf(self.power)
    }
}

/// PyTorch's `CosineAnnealingWarmRestarts` (SGDR): a cosine from `base_lr`
/// down to `eta_min` over `t_0` epochs, then again from `base_lr`, each
/// period `t_mult` times the one before.
///
/// ```
/// use devtensor::optim::{CosineAnnealingWarmRestarts, LrSchedule};
/// let s = CosineAnnealingWarmRestarts { base_lr: 1.0, t_0: 2, t_mult: 2, eta_min: 0.0 };
/// // Periods of 2, 4, 8, ... epochs, restarting at 2 and 6.
/// let want = [1.0, 0.5, 1.0, 0.8535533905932737, 0.5, 0.14644660940672627, 1.0];
/// for (epoch, want) in want.into_iter().enumerate() {
///     assert!((s.lr(epoch) - want).abs() < 1e-15);
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CosineAnnealingWarmRestarts {
    /// The rate at the start of every period.
    pub base_lr: f64,
    /// The first period, in epochs (at least 1).
    pub t_0: usize,
    /// The growth of each period over the last (at least 1; PyTorch's
    /// default is 1).
    pub t_mult: usize,
    /// The smallest rate.
    pub eta_min: f64,
}

impl LrSchedule for CosineAnnealingWarmRestarts {
    fn lr(&self, epoch: usize) -> f64 {
        let (t_0, t_mult) = (self.t_0.max(1), self.t_mult.max(1));
        // Where `epoch` falls in its period, counted exactly (PyTorch's
        // closed form takes a floating-point logarithm).
        let (mut t_cur, mut t_i) = (epoch, t_0);
        if t_mult == 1 {
            t_cur %= t_0;
        } else {
            while t_cur >= t_i {
                t_cur -= t_i;
                t_i = t_i.saturating_mul(t_mult);
            }
        }
        cos_anneal(self.base_lr, self.eta_min, t_cur as f64 / t_i as f64)
    }
}

/// PyTorch's `LambdaLR`: `base_lr · lr_lambda(epoch)`, for a warm-up or any
/// schedule written as a closure.
///
/// ```
/// use devtensor::optim::{LambdaLr, LrSchedule};
/// let warmup = 10;
/// let s = LambdaLr { base_lr: 1e-3, lr_lambda: move |e: usize| ((e + 1) as f64 / warmup as f64).min(1.0) };
/// assert_eq!(s.lr(0), 1e-4);
/// assert_eq!(s.lr(50), 1e-3);
/// ```
#[derive(Clone, Copy)]
pub struct LambdaLr<F> {
    /// The optimizer's rate, which the closure's value multiplies.
    pub base_lr: f64,
    /// The factor for each epoch.
    pub lr_lambda: F,
}

impl<F: Fn(usize) -> f64> LrSchedule for LambdaLr<F> {
    fn lr(&self, epoch: usize) -> f64 {
        self.base_lr * (self.lr_lambda)(epoch)
    }
}

/// PyTorch's `MultiplicativeLR`: each epoch's rate is the last one times
/// `lr_lambda(epoch)`, so `lr(e) = base_lr · lr_lambda(1) · … ·
/// lr_lambda(e)` (computed in `e` calls of the closure).
///
/// ```
/// use devtensor::optim::{LrSchedule, MultiplicativeLr};
/// let s = MultiplicativeLr { base_lr: 1.0, lr_lambda: |_| 0.5 };
/// assert_eq!([0, 1, 2].map(|e| s.lr(e)), [1.0, 0.5, 0.25]);
/// ```
#[derive(Clone, Copy)]
pub struct MultiplicativeLr<F> {
    /// The rate at epoch 0.
    pub base_lr: f64,
    /// The factor from the last epoch's rate to this one's.
    pub lr_lambda: F,
}

impl<F: Fn(usize) -> f64> LrSchedule for MultiplicativeLr<F> {
    fn lr(&self, epoch: usize) -> f64 {
        (1..=epoch).fold(self.base_lr, |lr, e| lr * (self.lr_lambda)(e))
    }
}

/// The closure schedules show their rate, not their closure.
macro_rules! debug_closure_schedule {
    ($($Schedule:ident),*) => {$(
        impl<F> std::fmt::Debug for $Schedule<F> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($Schedule)).field("base_lr", &self.base_lr).finish_non_exhaustive()
            }
        }
    )*};
}

debug_closure_schedule!(LambdaLr, MultiplicativeLr);
