//! PyTorch's `ReduceLROnPlateau`: the learning-rate schedule that follows a
//! metric (a validation loss) instead of the epoch.

use super::Optimizer;
use crate::element::FloatElement;
use crate::tensor::Device;

/// Whether the metric should fall (a loss) or rise (an accuracy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlateauMode {
    /// Lower is better (PyTorch's `mode="min"`, the default).
    #[default]
    Min,
    /// Higher is better (`mode="max"`).
    Max,
}

/// How [`PlateauConfig::threshold`] is measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThresholdMode {
    /// Relative to the best value so far (`threshold_mode="rel"`, the
    /// default): better means below `best · (1 - threshold)` in `Min` mode.
    #[default]
    Rel,
    /// In the metric's own units (`"abs"`): below `best - threshold`.
    Abs,
}

/// The settings of [`ReduceLrOnPlateau`]; `Default` gives PyTorch's
/// defaults (`Min`, factor 0.1, patience 10, threshold 1e-4 relative, no
/// cooldown, no smallest rate, eps 1e-8).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlateauConfig {
    /// Whether the metric should fall or rise.
    pub mode: PlateauMode,
    /// The factor applied to the rate on a plateau.
    pub factor: f64,
    /// Epochs without improvement that are tolerated: the rate falls at the
    /// `patience + 1`-th.
    pub patience: usize,
    /// How much better a value must be to count as an improvement.
    pub threshold: f64,
    /// Whether `threshold` is relative or absolute.
    pub threshold_mode: ThresholdMode,
    /// Epochs after a reduction during which bad epochs are not counted.
    pub cooldown: usize,
    /// The rate is never reduced below this.
    pub min_lr: f64,
    /// A reduction smaller than this is skipped.
    pub eps: f64,
}

impl Default for PlateauConfig {
    fn default() -> Self {
        PlateauConfig {
            mode: PlateauMode::Min,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            threshold_mode: ThresholdMode::Rel,
            cooldown: 0,
            min_lr: 0.0,
            eps: 1e-8,
        }
    }
}

/// PyTorch's `ReduceLROnPlateau`: call [`step`](Self::step) with the
/// epoch's metric (`scheduler.step(val_loss)`), and once the metric has not
/// improved for more than `patience` epochs the optimizer's rate is
/// multiplied by `factor` (not below `min_lr`); `cooldown` epochs then pass
/// before bad epochs count again. Parameter groups keep their ratio to the
/// optimizer's rate.
///
/// ```
/// use devtensor::nn::Linear;
/// use devtensor::optim::{Optimizer, PlateauConfig, ReduceLrOnPlateau, Sgd, SgdConfig};
/// use devtensor::Cpu;
/// let model = Linear::<Cpu>::new(2, 1);
/// let mut opt = Sgd::new(&model, SgdConfig { lr: 0.1, ..Default::default() });
/// let mut plateau = ReduceLrOnPlateau::new(PlateauConfig { patience: 1, ..Default::default() });
/// for val_loss in [1.0, 0.5, 0.5, 0.5] {
///     plateau.step(val_loss, &mut opt);
/// }
/// // Two epochs without improvement, one more than the patience.
/// assert!((opt.lr() - 0.01).abs() < 1e-12);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ReduceLrOnPlateau {
    config: PlateauConfig,
    best: f64,
    num_bad_epochs: usize,
    cooldown_counter: usize,
}

impl ReduceLrOnPlateau {
    /// A schedule with `config`, before its first epoch.
    pub fn new(config: PlateauConfig) -> Self {
        let best = match config.mode {
            PlateauMode::Min => f64::INFINITY,
            PlateauMode::Max => f64::NEG_INFINITY,
        };
        ReduceLrOnPlateau { config, best, num_bad_epochs: 0, cooldown_counter: 0 }
    }

    /// The settings.
    pub fn config(&self) -> &PlateauConfig {
        &self.config
    }

    /// The best metric so far (infinite before the first epoch).
    pub fn best(&self) -> f64 {
        self.best
    }

    /// Epochs since the last improvement, as counted toward `patience`.
    pub fn num_bad_epochs(&self) -> usize {
        self.num_bad_epochs
    }

    /// Whether `metric` improves on the best value by the threshold.
    fn is_better(&self, metric: f64) -> bool {
        let PlateauConfig { mode, threshold, threshold_mode, .. } = self.config;
        match (mode, threshold_mode) {
            (PlateauMode::Min, ThresholdMode::Rel) => metric < self.best * (1.0 - threshold),
            (PlateauMode::Min, ThresholdMode::Abs) => metric < self.best - threshold,
            (PlateauMode::Max, ThresholdMode::Rel) => metric > self.best * (threshold + 1.0),
            (PlateauMode::Max, ThresholdMode::Abs) => metric > self.best + threshold,
        }
    }

    /// Records the end of an epoch whose metric was `metric`, and reduces
    /// `optimizer`'s rate when the plateau has lasted longer than the
    /// patience. A NaN metric counts as a bad epoch, as in PyTorch.
    pub fn step<D: Device, E: FloatElement>(&mut self, metric: f64, optimizer: &mut impl Optimizer<D, E>) {
        if self.is_better(metric) {
            self.best = metric;
            self.num_bad_epochs = 0;
        } else {
            self.num_bad_epochs += 1;
        }
        if self.cooldown_counter > 0 {
            self.cooldown_counter -= 1;
            self.num_bad_epochs = 0;
        }
        if self.num_bad_epochs > self.config.patience {
            let old = optimizer.lr();
            let new = (old * self.config.factor).max(self.config.min_lr);
            if old - new > self.config.eps {
                optimizer.set_lr(new);
            }
            self.cooldown_counter = self.config.cooldown;
            self.num_bad_epochs = 0;
        }
    }
}
