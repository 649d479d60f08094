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

/// The headers of devtensor's own diagnostics: the same-device message of
/// every operation, and those that say what to do with an optimizer, a
/// checkpoint, a model's field or a data-parallel replica's batch on
/// another device.
const DEVTENSOR_MESSAGES: [&str; 5] = [
    "error[E0277]: expected all tensors to be on the same device, but found",
    "error[E0277]: this optimizer keeps its state on",
    "error[E0277]: this checkpoint was loaded onto",
    "error[E0277]: the field `",
    "error[E0277]: every replica must take its batch on its own device",
];

/// `ui-tests/fail/porting_*.rs` hold realistic user code (models, training
/// steps, data handling written the way the README recommends), one device
/// mistake per function. This reads their reviewed snapshots (which the
/// test above proves current) and measures what a user sees: every mistake
/// must name both devices, and at least 90% must be reported in devtensor's
/// own words rather than rustc's `mismatched types`.
#[test]
fn user_code_mistakes_get_devtensors_message() {
    let devices = ["`Cpu`", "`Cuda<0>`", "`Cuda<1>`", "`D`", "<Cpu>", "<Cuda<0>>", "<Cuda<1>>"];
    let (mut mistakes, mut ours) = (0, 0);
    for group in ["models", "training", "data"] {
        let source = std::fs::read_to_string(format!("ui-tests/fail/porting_{group}.rs")).unwrap();
        let stderr = std::fs::read_to_string(format!("ui-tests/fail/porting_{group}.stderr")).unwrap();
        // The function each line of the source belongs to.
        let mut function_of_line = Vec::new();
        let mut current = String::new();
        for line in source.lines() {
            if let Some(rest) = line.trim_start().strip_prefix("fn ") {
                current = rest.split(['(', '<']).next().unwrap().to_string();
            }
            function_of_line.push(current.clone());
        }
        // Each error, with the function it points into.
        let mut verdicts: std::collections::BTreeMap<String, bool> = Default::default();
        for block in stderr.split("\nerror").map(|b| b.trim_start_matches("error")) {
            let block = format!("error{block}");
            let at = format!("ui-tests/fail/porting_{group}.rs:");
            let line: usize = block.split(&at).nth(1).unwrap().split(':').next().unwrap().parse().unwrap();
            let function = function_of_line[line - 1].clone();
            let named = devices.iter().filter(|d| block.lines().take(12).any(|l| l.contains(*d))).count();
            assert!(named >= 2, "an error in `{function}` does not name both devices:\n{block}");
            let is_ours = DEVTENSOR_MESSAGES.iter().any(|m| block.starts_with(m));
            let verdict = verdicts.entry(function).or_insert(true);
            *verdict &= is_ours;
        }
        mistakes += verdicts.len();
        ours += verdicts.values().filter(|&&v| v).count();
        println!(
            "{group}: {} mistakes, {} in devtensor's words",
            verdicts.len(),
            verdicts.values().filter(|&&v| v).count()
        );
    }
    println!("total: {ours} of {mistakes} mistakes in devtensor's words");
    assert!(mistakes >= 20, "the set shrank to {mistakes} mistakes");
    assert!(ours * 10 >= mistakes * 9, "only {ours} of {mistakes} mistakes get devtensor's message");
}
