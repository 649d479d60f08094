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
    // With a passing case trybuild builds every case instead of only
    // checking it, which the static-shape cases need: their errors come from
    // evaluating constants after monomorphisation. The other fixed programs
    // run below, in this binary.
    cases.pass("ui-tests/pass/static_matmul_inner_fixed.rs");
}

/// What a fixed program's `main` returns: nothing, or a `Result` that must
/// be `Ok`, as a binary's `main` would be judged.
trait Outcome {
    fn check(self);
}

impl Outcome for () {
    fn check(self) {}
}

impl<E: std::fmt::Debug> Outcome for Result<(), E> {
    fn check(self) {
        self.unwrap();
    }
}

/// Every program in `ui-tests/pass`, compiled into this test binary (each in
/// a module of its own) and run as a test. trybuild would build each one as
/// a crate of its own, and linking 25 binaries against devtensor took
/// minutes of CI.
///
/// The programs pick `Cuda<0>` when a GPU is there, so under
/// `scripts/with-emu.sh` they run on the emulated GPUs too.
macro_rules! fixed_programs {
    ($($name:ident)*) => {
        $(
            #[allow(dead_code)]
            mod $name {
                include!(concat!("../ui-tests/pass/", stringify!($name), ".rs"));

                #[test]
                fn builds_and_runs() {
                    super::Outcome::check(main());
                }
            }
        )*

        /// A program added to `ui-tests/pass` but not to the list above
        /// would never be built.
        #[test]
        fn every_fixed_program_is_listed() {
            let listed: std::collections::BTreeSet<String> = [$(stringify!($name)),*].map(String::from).into();
            let on_disk: std::collections::BTreeSet<String> = std::fs::read_dir("ui-tests/pass")
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
                .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
                .collect();
            assert_eq!(listed, on_disk, "list every ui-tests/pass program in tests/ui.rs");
        }
    };
}

fixed_programs! {
    checkpoint_loaded_on_model_device data_loader_to_device dtype_mistakes_fixed hook_gradient_on_its_device
    integer_division_fixed layers_from_tensors
    module_field_on_model_device nn_labels_moved nn_linear_input_moved nn_model_spans_two_gpus_fixed
    optim_for_its_model parallel_batch_on_replica_device parallel_replica_batch_fixed porting_data_fixed
    porting_models_fixed porting_training_fixed seed000_fixed seed000_non_blocking_fixed seed002_fixed
    static_add_shapes_fixed static_matmul_inner_fixed static_reshape_count_fixed static_seed002_fixed
    static_tuple_model_fixed static_wrong_device_fixed subscript_fixed tensor_literal_f64_fixed two_gpus_fixed
}

/// The headers of devtensor's own diagnostics: the same-device message of
/// every operation, and those that say what to do with an optimizer, a
/// checkpoint, a model's field or a data-parallel replica's batch on
/// another device.
const DEVTENSOR_MESSAGES: [&str; 5] = [
    "error[E0277]: expected all tensors to be on the same device, but found",
    "error[E0277]: this optimizer keeps its state on",
    "error[E0277]: this checkpoint holds",
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

/// `ui-tests/fail/dtype_mistakes.rs` holds one dtype mistake per function
/// or model (the ones PyTorch reports at run time, autocast's included). Every one
/// must be reported in devtensor's words, naming both dtypes in PyTorch's
/// names, with the conversion that fixes it; the function that also mixes
/// devices must get both messages.
#[test]
fn dtype_mistakes_get_devtensors_message() {
    let source = std::fs::read_to_string("ui-tests/fail/dtype_mistakes.rs").unwrap();
    let stderr = std::fs::read_to_string("ui-tests/fail/dtype_mistakes.stderr").unwrap();
    // The mistakes are functions, and models (a struct and its `module!`).
    fn item(line: &str) -> Option<&str> {
        line.strip_prefix("fn ").or_else(|| line.strip_prefix("struct "))
    }
    let functions: Vec<&str> = source
        .lines()
        .filter_map(|l| item(l).map(|rest| rest.split(['(', '<']).next().unwrap()))
        .filter(|&name| name != "main")
        .collect();
    let mut reported = std::collections::BTreeMap::<&str, Vec<String>>::new();
    for block in stderr.split("\nerror").map(|b| b.trim_start_matches("error")) {
        let block = format!("error{block}");
        let Some(at) = block.split("ui-tests/fail/dtype_mistakes.rs:").nth(1) else { continue };
        let line: usize = at.split(':').next().unwrap().parse().unwrap();
        let function = source.lines().take(line).filter_map(item).last().unwrap();
        let function = functions.iter().find(|f| function.starts_with(*f)).unwrap();
        let header = block.lines().next().unwrap().to_string();
        if header.contains("same dtype") {
            let named =
                ["float32", "bfloat16", "float16", "int64"].iter().filter(|d| header.contains(&format!("`{d}`")));
            assert_eq!(named.count(), 2, "`{function}` does not name both dtypes: {header}");
            assert!(block.contains(".to_dtype::<"), "`{function}`'s error gives no conversion:\n{block}");
        }
        reported.entry(function).or_default().push(header);
    }
    for function in &functions {
        let headers = reported.get(function).unwrap_or_else(|| panic!("no error in `{function}`"));
        let ours = |m: &str| headers.iter().any(|h| h.starts_with(m));
        let dtype = ours("error[E0277]: expected all tensors to have the same dtype, but found")
            || ours("error[E0277]: this checkpoint holds")
            || ours("error[E0277]: the field `");
        assert!(dtype, "`{function}` is not reported in devtensor's words: {headers:?}");
        if *function == "both" {
            assert!(ours(DEVTENSOR_MESSAGES[0]), "`both` lacks the device message: {headers:?}");
        }
    }
}
