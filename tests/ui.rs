//! The compile-time device checks: every program in `ui-tests/fail` must be
//! rejected with exactly the diagnostic in its `.stderr` snapshot, and every
//! program in `ui-tests/pass` (the corrected versions) must build and run.
//!
//! After an intended change to a diagnostic, regenerate the snapshots with
//! `TRYBUILD=overwrite cargo test --test ui` and review each diff by eye: the
//! snapshots are part of the product.

#[test]
fn device_mixing_is_rejected_at_compile_time() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui-tests/fail/*.rs");
    cases.pass("ui-tests/pass/*.rs");
}
