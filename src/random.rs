//! Seedable random numbers for `rand`, `randn` and the other samplers.
//!
//! Every thread has its own generator, seeded with a fixed default, so a
//! program (or a test) gives the same numbers on every run; reseed it with
//! [`manual_seed`], or pass an explicit [`Generator`] to `rand_with`/`randn_with`.
//! Numbers are drawn on the host, so a seed gives the same tensor on every device.

use rand_distr::{Distribution, StandardNormal, StandardUniform, Uniform};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::SeedableRng;
use std::cell::RefCell;

/// The seed each thread's generator starts from.
pub const DEFAULT_SEED: u64 = 0x5eed_0fde_17e5;

/// A reproducible stream of random numbers (xoshiro256++).
///
/// ```
/// use devtensor::{Cpu, Generator, Tensor};
/// let a = Tensor::<Cpu>::randn_with([3], &mut Generator::new(7));
/// let b = Tensor::<Cpu>::randn_with([3], &mut Generator::new(7));
/// assert_eq!(a.to_vec(), b.to_vec());
/// ```
#[derive(Clone, Debug)]
pub struct Generator(Xoshiro256PlusPlus);

impl Generator {
    /// A generator whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Generator(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// Samples uniform in `[0, 1)`.
    pub(crate) fn uniform(&mut self) -> impl Iterator<Item = f64> + '_ {
        std::iter::repeat_with(|| StandardUniform.sample(&mut self.0))
    }

    /// Samples uniform among the integers `low..high`, without bias
    /// (`low < high`, which the caller checks).
    pub(crate) fn integers(&mut self, low: i64, high: i64) -> impl Iterator<Item = i64> + '_ {
        let range = Uniform::new(low, high).expect("the caller checked that low < high");
        std::iter::repeat_with(move || range.sample(&mut self.0))
    }

    /// Samples from the standard normal distribution.
    pub(crate) fn normal(&mut self) -> impl Iterator<Item = f64> + '_ {
        std::iter::repeat_with(|| StandardNormal.sample(&mut self.0))
    }
}

thread_local! {
    static THREAD_GENERATOR: RefCell<Generator> = RefCell::new(Generator::new(DEFAULT_SEED));
}

/// Reseeds this thread's generator, like `torch.manual_seed`.
///
/// ```
/// use devtensor::{manual_seed, Cpu, Tensor};
/// manual_seed(42);
/// let a = Tensor::<Cpu>::rand([4]);
/// manual_seed(42);
/// assert_eq!(a.to_vec(), Tensor::<Cpu>::rand([4]).to_vec());
/// ```
pub fn manual_seed(seed: u64) {
    THREAD_GENERATOR.with(|g| *g.borrow_mut() = Generator::new(seed));
}

/// Runs `f` with this thread's generator.
pub(crate) fn with_thread_generator<T>(f: impl FnOnce(&mut Generator) -> T) -> T {
    THREAD_GENERATOR.with(|g| f(&mut g.borrow_mut()))
}

/// A copy of this thread's generator, as it stands: what a checkpointed
/// segment keeps, to draw the same numbers when it is recomputed.
pub(crate) fn thread_generator() -> Generator {
    THREAD_GENERATOR.with(|g| g.borrow().clone())
}

/// Makes `generator` this thread's, returning the one it replaces.
pub(crate) fn replace_thread_generator(generator: Generator) -> Generator {
    THREAD_GENERATOR.with(|g| std::mem::replace(&mut *g.borrow_mut(), generator))
}
