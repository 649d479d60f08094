//! The current GPU of a thread: the ordinal that [`AnyCuda`](super::AnyCuda)
//! stands for while an operation on a `Cuda<N>` tensor runs in the core.
//!
//! The typed API knows `N` from the tensor's type; the core, compiled once
//! for every ordinal, reads it from here. [`enter`] sets it for the length
//! of one call and restores the previous value after, also when the call
//! panics, so nested calls (a gradient rule inside `backward`, an op inside
//! another) see their own device and never a neighbour's.

use std::cell::Cell;

thread_local! {
    static CURRENT: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Runs `f` with GPU `ordinal` as this thread's current one.
///
/// Every operation on a `Cuda<N>` tensor goes through here, in the user's
/// crate, so the generic part is only the call: the thread-local work is
/// in [`Scope`], compiled once.
#[inline]
pub(crate) fn enter<R>(ordinal: usize, f: impl FnOnce() -> R) -> R {
    let _scope = Scope::enter(ordinal);
    f()
}

/// GPU `ordinal` as the current one until the scope is dropped, which
/// restores the one before.
pub(crate) struct Scope(Option<usize>);

impl Scope {
    #[inline(never)]
    fn enter(ordinal: usize) -> Scope {
        Scope(CURRENT.replace(Some(ordinal)))
    }
}

impl Drop for Scope {
    #[inline(never)]
    fn drop(&mut self) {
        CURRENT.set(self.0);
    }
}

/// Runs `f` with `ordinal` as the current GPU when it is `Some`, and as it
/// is otherwise: how a gradient rule recorded on a GPU runs on that GPU
/// whichever device the backward walk started from.
#[inline]
pub(crate) fn enter_if<R>(ordinal: Option<usize>, f: impl FnOnce() -> R) -> R {
    match ordinal {
        Some(ordinal) => enter(ordinal, f),
        None => f(),
    }
}

/// The current GPU's ordinal.
///
/// Panics when no GPU is current: the core ran a CUDA operation that no
/// `Cuda<N>` entry point started, which is a bug in devtensor.
pub(crate) fn ordinal() -> usize {
    CURRENT.get().expect("devtensor bug: a CUDA operation ran in the core outside of its device's scope")
}

/// The current GPU's ordinal, if any: `None` outside every CUDA operation.
pub(crate) fn try_ordinal() -> Option<usize> {
    CURRENT.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_restore_after_a_panic() {
        assert_eq!(try_ordinal(), None);
        enter(1, || {
            assert_eq!(ordinal(), 1);
            enter(0, || assert_eq!(ordinal(), 0));
            assert_eq!(ordinal(), 1);
            let caught = std::panic::catch_unwind(|| enter(3, || panic!("inside")));
            assert!(caught.is_err());
            assert_eq!(ordinal(), 1);
        });
        assert_eq!(try_ordinal(), None);
    }
}
