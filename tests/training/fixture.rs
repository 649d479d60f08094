//! Reading the float64 fixtures that `tests/fixtures/pytorch/make_fixtures.py`
//! writes with PyTorch, case by case: each case's `state_dict`, inputs,
//! outputs, cotangents (`d<output>`) and gradients (`grad.<name>`).

use devtensor::io::Checkpoint;
use devtensor::nn::{Module, init};
use devtensor::{Cpu, Device, Tensor};

type T<D> = Tensor<D, f64>;

/// The fixture file `name` of `tests/fixtures/pytorch`.
pub fn load(name: &str) -> Checkpoint<Cpu, f64> {
    Checkpoint::load(format!("{}/tests/fixtures/pytorch/{name}", crate::common::REPO))
}

/// One case of a fixture: its tensors by name, moved to `D`.
pub struct Case<'a, D: Device> {
    file: &'a Checkpoint<Cpu, f64>,
    name: &'a str,
    /// Which of the case's names are its module's `state_dict`.
    is_state: fn(&str) -> bool,
    _device: std::marker::PhantomData<D>,
}

impl<'a, D: Device> Case<'a, D> {
    /// The case `name` of `file`, whose `state_dict` entries are the names
    /// `is_state` accepts.
    pub fn new(file: &'a Checkpoint<Cpu, f64>, name: &'a str, is_state: fn(&str) -> bool) -> Self {
        Case { file, name, is_state, _device: std::marker::PhantomData }
    }

    /// The float tensor `key` of the case, if it has one.
    pub fn find(&self, key: &str) -> Option<T<D>> {
        let key = format!("{}.{key}", self.name);
        self.file.tensors().iter().find(|(n, _)| *n == key).map(|(_, t)| t.to::<D>())
    }

    /// The float tensor `key` of the case.
    pub fn get(&self, key: &str) -> T<D> {
        self.find(key).unwrap_or_else(|| panic!("no `{}.{key}` in the fixture", self.name))
    }

    /// The integer tensor `key` of the case, if it has one.
    pub fn find_int(&self, key: &str) -> Option<Tensor<D, i64>> {
        let key = format!("{}.{key}", self.name);
        self.file.int_tensors().iter().find(|(n, _)| *n == key).map(|(_, t)| t.to::<D>())
    }

    /// The case's `lengths` (of a packed batch), if it has them.
    pub fn lengths(&self) -> Option<Vec<usize>> {
        let t = self.find_int("lengths")?;
        Some(t.to_vec().into_iter().map(|l| l as usize).collect())
    }

    /// Loads PyTorch's `state_dict` into `model` by name, after checking
    /// that the names are exactly PyTorch's.
    pub fn load<M: Module<D, f64>>(&self, model: &mut M) {
        let prefix = format!("{}.", self.name);
        let mut torch: Vec<&str> = self
            .file
            .tensors()
            .iter()
            .filter_map(|(n, _)| n.strip_prefix(&prefix))
            .filter(|n| (self.is_state)(n))
            .collect();
        torch.sort();
        let mut ours: Vec<String> = model.named_tensors().into_iter().map(|(n, _, _)| n).collect();
        ours.sort();
        assert_eq!(ours, torch, "{}: PyTorch's state_dict names", self.name);
        init::apply(model, |name, _| Ok(Some(self.get(name)))).unwrap();
    }

    /// Checks the outputs, then the gradients of `Σ sum(d<o> · o)` toward
    /// the inputs and every parameter of `model`.
    pub fn check<M: Module<D, f64>>(&self, model: &M, inputs: &[(&str, &T<D>)], outputs: &[(&str, T<D>)]) {
        let mut loss = T::<D>::scalar(0.0);
        for (name, got) in outputs {
            let want = self.get(name);
            assert_eq!(got.dims(), want.dims(), "{}: {name}", self.name);
            assert_close(&format!("{} {name} on {}", self.name, D::name()), got, &want);
            loss = &loss + &(&self.get(&format!("d{name}")) * got).sum();
        }
        let grads = loss.backward();
        let params = model.named_tensors().into_iter().map(|(n, _, t)| (n, t));
        for (name, t) in inputs.iter().map(|(n, t)| (n.to_string(), (*t).clone())).chain(params) {
            let got = grads.get(&t).unwrap_or_else(|| panic!("{}: no gradient for {name}", self.name));
            assert_close(
                &format!("{} gradient of {name} on {}", self.name, D::name()),
                got,
                &self.get(&format!("grad.{name}")),
            );
        }
    }
}

/// `got` equals `want` to float64's rounding (relative `1e-12`, absolute
/// near zero).
pub fn assert_close<D: Device>(what: &str, got: &T<D>, want: &T<D>) {
    assert_eq!(got.dims(), want.dims(), "{what}");
    for (i, (g, w)) in got.to_vec().iter().zip(want.to_vec()).enumerate() {
        assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "{what}: element {i}: got {g}, PyTorch {w}");
    }
}
