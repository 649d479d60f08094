//! Every CUDA kernel file compiles and assembles for the GPUs we target.
//!
//! No machine of this project has a GPU, so this is how CI knows that
//! `kernels/*.cu` (and the examples' `examples/kernels/*.cu`) is valid CUDA:
//! each file is compiled with NVRTC (through
//! cudarc, as the CUDA backend will compile it) for `compute_80` and
//! `compute_90`, and the PTX is assembled with `ptxas -arch=sm_80` /
//! `sm_90`. The test fails on any compiler or assembler error or warning,
//! on any register spill, on a kernel whose name the host could not look up
//! (every `extern "C" __global__` function declared in the source must be an
//! `.entry` of the PTX, and every `.entry` must be such a function), and on
//! constructs outside the kernel contract that the emulated GPU cannot run.
//! Each file is compiled in its run-time form, with common.cuh prepended
//! and no include path, as the backend embeds it.
//!
//! NVRTC, ptxas and the CUDA headers come from pinned PyPI wheels installed
//! by `scripts/install-cuda-tools.sh` into `.cache/cuda-tools` (or
//! `$DEVTENSOR_CUDA_TOOLS`); `libnvrtc.so.13` must be on `LD_LIBRARY_PATH`.
//! `scripts/test-all.sh` does both. Without the tools the test prints a SKIP
//! line and passes, unless `REQUIRE_NVRTC=1` (set in CI), where it fails.

use cudarc::nvrtc::{result, sys};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CStr, CString, c_int};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// (NVRTC virtual architecture, ptxas real architecture): Ampere and Hopper.
const ARCHS: [(&str, &str); 2] = [("compute_80", "sm_80"), ("compute_90", "sm_90")];

/// The NVRTC version cudarc is built for (its `cuda-13000` feature).
const NVRTC_VERSION: (c_int, c_int) = (13, 0);

/// Element-type suffixes of kernel names, as in the Rust `DType` enum.
const DTYPES: [&str; 6] = ["f32", "f64", "i64", "u8", "bf16", "f16"];
/// The op families whose ops may bring their own CUDA source.
const CUSTOM_OP_FAMILIES: [&str; 3] = ["unary", "binary", "compare"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the wheels' files are: `<dir>/nvidia/cu13/{bin,include,lib}`.
struct Tools {
    ptxas: PathBuf,
    include: PathBuf,
}

/// The tools, or why they cannot be used.
fn find_tools() -> Result<Tools, String> {
    let dir =
        std::env::var_os("DEVTENSOR_CUDA_TOOLS").map(PathBuf::from).unwrap_or_else(|| repo().join(".cache/cuda-tools"));
    let cuda = dir.join("nvidia/cu13");
    let ptxas = cuda.join("bin/ptxas");
    let include = cuda.join("include");
    if !ptxas.is_file() || !include.join("cuda_runtime.h").is_file() {
        return Err(format!("ptxas or the CUDA headers are not under {}", cuda.display()));
    }
    // SAFETY: this only tries to dlopen libnvrtc under its usual names and
    // closes it again; nothing from the library is called.
    if !unsafe { sys::is_culib_present() } {
        return Err(format!(
            "libnvrtc.so.13 is not on the library search path (LD_LIBRARY_PATH={:?}; expected {})",
            std::env::var("LD_LIBRARY_PATH").unwrap_or_default(),
            cuda.join("lib").display()
        ));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: libnvrtc is present (checked above), so cudarc's lazy symbol
    // lookup succeeds; both pointers are valid for one write each.
    let status = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    status.result().map_err(|e| format!("nvrtcVersion failed: {e}"))?;
    if (major, minor) != NVRTC_VERSION {
        return Err(format!(
            "found NVRTC {major}.{minor}, but cudarc is built for {}.{} (`cuda-13000` in Cargo.toml); \
             pin the same version in scripts/install-cuda-tools.sh",
            NVRTC_VERSION.0, NVRTC_VERSION.1
        ));
    }
    Ok(Tools { ptxas, include })
}

/// Compiles `src` to PTX with NVRTC. Ok((ptx, log)) or Err(log). No
/// include path is given: the source must stand alone, as it does at run
/// time, where the backend prepends common.cuh to each embedded file.
fn nvrtc(name: &str, src: &str, arch: &str) -> Result<(String, String), String> {
    let src = CString::new(src).map_err(|_| "the source contains a NUL byte".to_string())?;
    let name = CString::new(name).expect("file names have no NUL byte");
    let prog = result::create_program(&src, Some(&name)).map_err(|e| format!("nvrtcCreateProgram: {e}"))?;
    let options = [format!("--gpu-architecture={arch}"), "--std=c++17".to_string()];
    // SAFETY: `prog` is a live program created above, used by this thread
    // only, and destroyed exactly once at the end of this function.
    let compiled = unsafe { result::compile_program(prog, &options) };
    // SAFETY: as above; NVRTC keeps a log for every compiled program.
    let log = unsafe { result::get_program_log(prog) }
        .map(|raw| c_chars_to_string(&raw))
        .unwrap_or_else(|e| format!("(no log: {e})"));
    let ptx = match compiled {
        // SAFETY: as above; the program compiled, so it has PTX.
        Ok(()) => unsafe { result::get_ptx(prog) }.map(|raw| c_chars_to_string(&raw)),
        Err(e) => Err(e),
    };
    // SAFETY: `prog` is live and not used after this call.
    unsafe { result::destroy_program(prog) }.expect("nvrtcDestroyProgram");
    match ptx {
        Ok(ptx) => Ok((ptx, log)),
        Err(e) => Err(format!("NVRTC failed ({e}):\n{log}")),
    }
}

/// A NUL-terminated C string held in a `Vec<c_char>`, as UTF-8 text.
fn c_chars_to_string(raw: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = raw.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned())
}

/// What ptxas `-v` said about one kernel.
#[derive(Default)]
struct KernelInfo {
    registers: u32,
    spill_stores: u32,
    spill_loads: u32,
}

/// The first integer in `text` before `marker` (ptxas writes `N bytes spill stores`).
fn number_before(text: &str, marker: &str) -> Option<u32> {
    let head = &text[..text.find(marker)?];
    head.split(|c: char| !c.is_ascii_digit()).rfind(|s| !s.is_empty())?.parse().ok()
}

/// Per-kernel resource usage from ptxas `-v` output.
fn parse_ptxas(output: &str) -> BTreeMap<String, KernelInfo> {
    let mut kernels: BTreeMap<String, KernelInfo> = BTreeMap::new();
    let mut current = None;
    for line in output.lines() {
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            current = Some(rest.trim().to_string());
        } else if let Some(name) = line.split("Compiling entry function '").nth(1) {
            current = name.split('\'').next().map(str::to_string);
        }
        let Some(name) = current.clone() else { continue };
        let info = kernels.entry(name).or_default();
        if line.contains("bytes spill stores") {
            info.spill_stores = number_before(line, " bytes spill stores").unwrap_or(u32::MAX);
            info.spill_loads = number_before(line, " bytes spill loads").unwrap_or(u32::MAX);
        }
        if line.contains("Used ") && line.contains(" registers") {
            info.registers = number_before(line, " registers").unwrap_or(0);
        }
    }
    kernels
}

/// Assembles `ptx` for `sm`, failing on errors and warnings. Ok((per-kernel info, output)).
fn ptxas(ptx: &str, sm: &str, stem: &str, tools: &Tools) -> Result<(BTreeMap<String, KernelInfo>, String), String> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kernels_compile");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let ptx_path = dir.join(format!("{stem}.{sm}.ptx"));
    std::fs::write(&ptx_path, ptx).map_err(|e| format!("cannot write {}: {e}", ptx_path.display()))?;
    let out = Command::new(&tools.ptxas)
        .arg(format!("-arch={sm}"))
        .args(["-v", "--warning-as-error", "-o"])
        .arg(dir.join(format!("{stem}.{sm}.cubin")))
        .arg(&ptx_path)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tools.ptxas.display()))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        let problems: Vec<&str> = text.lines().filter(|l| !l.contains("ptxas info")).collect();
        return Err(format!(
            "ptxas failed ({}); PTX kept at {}:\n{}",
            out.status,
            ptx_path.display(),
            problems.join("\n")
        ));
    }
    Ok((parse_ptxas(&text), text))
}

/// Names of the kernels of a PTX module: `[.visible|.weak] .entry NAME(`.
fn ptx_entries(ptx: &str) -> BTreeSet<String> {
    ptx.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace().skip_while(|w| w.starts_with('.') && *w != ".entry");
            (words.next() == Some(".entry")).then(|| words.next()).flatten()
        })
        .map(|name| name.split('(').next().unwrap_or("").to_string())
        .collect()
}

/// The source with `//` and `/* */` comments blanked out (string literals
/// in kernels are only `"C"` and include names, which contain neither).
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
            out.push(' ');
        } else {
            let c = rest.chars().next().expect("rest is not empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Names of the `extern "C" __global__ void NAME(` functions in `text`.
fn declared_kernels(text: &str) -> BTreeSet<String> {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.split("extern \"C\" __global__ void ")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            // Macro bodies build names with `##`; those are found after preprocessing.
            (!name.is_empty() && !rest[name.len()..].trim_start().starts_with("##")).then_some(name)
        })
        .collect()
}

/// The source after the C preprocessor, so that kernels declared through
/// macros (`binary_##op##_##name`) appear under their real names. The host
/// preprocessor is independent of NVRTC, which makes this a cross-check.
/// `None` when no preprocessor is installed.
fn preprocess(path: &Path, tools: &Tools) -> Option<Result<String, String>> {
    let out = Command::new("cpp")
        .args(["-P", "-x", "c++", "-std=c++17"])
        .arg("-I")
        .arg(repo().join("kernels"))
        .arg("-I")
        .arg(&tools.include)
        .arg(path)
        .output()
        .ok()?;
    Some(if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("cpp failed:\n{}", String::from_utf8_lossy(&out.stderr)))
    })
}

/// Constructs the kernel contract excludes, because the emulated GPU (which
/// runs these files as host C++) cannot run them or the host cannot launch
/// them. Returns one line per violation.
fn contract_violations(file: &str, src: &str) -> Vec<String> {
    const FORBIDDEN: [(&str, &str); 12] = [
        ("extern __shared__", "dynamic shared memory"),
        ("printf", "device printf"),
        ("__half", "half types"),
        ("__nv_bfloat16", "bfloat16 types"),
        ("cooperative_groups", "cooperative groups"),
        ("<<<", "dynamic parallelism"),
        ("tex1D", "textures"),
        ("tex2D", "textures"),
        ("__ldg", "read-only cache loads"),
        ("asm(", "inline PTX"),
        ("asm volatile", "inline PTX"),
        ("__syncwarp", "warp barriers (use __syncthreads)"),
    ];
    let code = strip_comments(src);
    let mut problems = Vec::new();
    if file.ends_with(".cu") {
        for (no, line) in code.lines().enumerate() {
            let line = line.trim();
            if line.starts_with("#include") && line != "#include \"common.cuh\"" {
                problems.push(format!(
                    "{file}:{}: `{line}`: kernel files include only common.cuh, which the backend prepends at run time",
                    no + 1
                ));
            }
        }
    }
    for (no, line) in code.lines().enumerate() {
        let at = format!("{file}:{}", no + 1);
        for (pattern, what) in FORBIDDEN {
            // The two inline PTX instructions, the tensor cores' product and
            // the paired rounding to a half type, have the emulator's meaning
            // beside them in common.cuh.
            let allowed_ptx = file == "kernels/common.cuh"
                && pattern == "asm("
                && (line.contains("asm(\"mma.sync") || line.contains("asm(\"cvt.rn."));
            if line.contains(pattern) && !allowed_ptx {
                problems.push(format!("{at}: `{pattern}` ({what}) is outside the kernel contract"));
            }
        }
        for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            let allowed = match word {
                w if w.starts_with("atomic") => w == "atomicAdd",
                w if w.starts_with("__shfl") => w == "__shfl_down_sync" || w == "__shfl_xor_sync",
                _ => true,
            };
            if !allowed {
                problems.push(format!("{at}: `{word}` is outside the kernel contract (atomicAdd and full-mask __shfl_down_sync/__shfl_xor_sync only)"));
            }
        }
        if line.contains("__shfl_") && line.contains("_sync(") && !line.contains("0xffffffff") {
            problems.push(format!("{at}: warp shuffles must use the full mask 0xffffffff"));
        }
    }
    problems
}

/// Everything learnt about one kernel file, or what went wrong with it.
struct FileReport {
    file: String,
    summary: String,
    kernels: BTreeSet<String>,
    failures: Vec<String>,
}

fn check_file(path: &Path, tools: &Tools) -> FileReport {
    let file = path.strip_prefix(repo()).unwrap_or(path).display().to_string();
    let stem = path.file_stem().expect("a file stem").to_string_lossy().into_owned();
    // Kernel names start with their op family: the file's name in kernels/;
    // an example's custom op belongs to a family that takes custom kernels
    // (`UnaryOp::KERNELS`, `BinaryOp::KERNELS`, `CompareOp::KERNELS`).
    let families =
        if file.starts_with("examples/") { CUSTOM_OP_FAMILIES.map(String::from).to_vec() } else { vec![stem.clone()] };
    let mut report =
        FileReport { file: file.clone(), summary: String::new(), kernels: BTreeSet::new(), failures: Vec::new() };
    let src = match std::fs::read_to_string(path) {
        Ok(src) => src,
        Err(e) => {
            report.failures.push(format!("{file}: cannot read: {e}"));
            return report;
        }
    };

    // The kernels the source declares, as the host will look them up.
    let mut declared = declared_kernels(&strip_comments(&src));
    let mut preprocessed = false;
    match preprocess(path, tools) {
        Some(Ok(text)) => {
            declared.extend(declared_kernels(&text));
            preprocessed = true;
        }
        Some(Err(e)) => report.failures.push(format!("{file}: {e}")),
        None => {}
    }
    report.failures.extend(contract_violations(&file, &src));

    // Compiled in the run-time form, the one the backend hands NVRTC:
    // common.cuh prepended, no include path at all.
    let common = match std::fs::read_to_string(repo().join("kernels/common.cuh")) {
        Ok(common) => common,
        Err(e) => {
            report.failures.push(format!("cannot read kernels/common.cuh: {e}"));
            return report;
        }
    };
    let text = format!("{common}\n{src}");
    let mut entries_seen: Option<BTreeSet<String>> = None;
    // Both architectures at once: the largest file (every unary op in four
    // types) is otherwise the test's longest chain of work, one compile and
    // one assembly after the other.
    let builds: Vec<_> = std::thread::scope(|s| {
        let handles = ARCHS.map(|(arch, sm)| {
            let (file, text, stem) = (&file, &text, &stem);
            s.spawn(move || {
                // NVRTC looks for quoted includes beside the program's name,
                // so the name must not point into kernels/.
                let compiled = nvrtc(&format!("/embedded/{file}"), text, arch);
                let assembled = compiled.as_ref().ok().map(|(ptx, _)| ptxas(ptx, sm, &format!("{stem}.{arch}"), tools));
                (arch, sm, compiled, assembled)
            })
        });
        handles.into_iter().map(|h| h.join().expect("a compile thread panicked")).collect()
    });
    for (arch, sm, compiled, assembled) in builds {
        let (ptx, log) = match compiled {
            Ok(ok) => ok,
            Err(e) => {
                report.failures.push(format!(
                    "{file} for {arch}, with common.cuh prepended and no include path (how the backend compiles it): {e}"
                ));
                continue;
            }
        };
        if !log.trim().is_empty() {
            report.failures.push(format!("{file} for {arch}: NVRTC warnings (treated as errors):\n{}", log.trim_end()));
        }
        let entries = ptx_entries(&ptx);
        let (info, _) = match assembled.expect("assembled when compiled") {
            Ok(ok) => ok,
            Err(e) => {
                report.failures.push(format!("{file} for {sm}: {e}"));
                continue;
            }
        };
        let spills: Vec<String> = info
            .iter()
            .filter(|(_, k)| k.spill_stores != 0 || k.spill_loads != 0)
            .map(|(name, k)| {
                format!("{name}: {} bytes spill stores, {} bytes spill loads", k.spill_stores, k.spill_loads)
            })
            .collect();
        if !spills.is_empty() {
            report.failures.push(format!("{file} for {sm}: register spills:\n  {}", spills.join("\n  ")));
        }
        let unassembled: Vec<&String> = entries.iter().filter(|e| !info.contains_key(*e)).collect();
        if !unassembled.is_empty() {
            report.failures.push(format!("{file} for {sm}: ptxas reported nothing for {unassembled:?}"));
        }
        let max_regs = info.values().map(|k| k.registers).max().unwrap_or(0);
        let spilled = if spills.is_empty() { "no spills".to_string() } else { format!("{} SPILLING", spills.len()) };
        let _ = write!(report.summary, "; {arch}/{sm}: assembled, at most {max_regs} registers, {spilled}");
        entries_seen = Some(entries);
    }

    if let Some(entries) = entries_seen {
        let missing: Vec<&String> = declared.difference(&entries).collect();
        if !missing.is_empty() {
            report
                .failures
                .push(format!("{file}: declared `extern \"C\" __global__` but not an .entry of the PTX: {missing:?}"));
        }
        if preprocessed {
            // Any other entry is a kernel the host cannot find by a plain
            // name, e.g. a C++-mangled template without extern "C".
            let undeclared: Vec<&String> = entries.difference(&declared).collect();
            if !undeclared.is_empty() {
                report
                    .failures
                    .push(format!("{file}: .entry without an `extern \"C\" __global__` declaration: {undeclared:?}"));
            }
        }
        let misnamed: Vec<&String> = entries
            .iter()
            .filter(|e| {
                !families.iter().any(|f| e.starts_with(&format!("{f}_")))
                    || !DTYPES.iter().any(|t| e.ends_with(&format!("_{t}")))
            })
            .collect();
        if !misnamed.is_empty() {
            let families = families.join("|");
            report.failures.push(format!("{file}: kernel names must read `{families}_<op>_<dtype>`: {misnamed:?}"));
        }
        report.kernels = entries;
    }
    report.summary = format!("{file}: {} kernels{}", report.kernels.len(), report.summary);
    if !preprocessed {
        report.summary.push_str(" (no `cpp` found: macro-generated names checked against the PTX only)");
    }
    report
}

#[test]
fn every_kernel_compiles_and_assembles_without_spills() {
    let required = std::env::var("REQUIRE_NVRTC").is_ok_and(|v| v == "1");
    let tools = match find_tools() {
        Ok(tools) => tools,
        Err(reason) if required => panic!(
            "REQUIRE_NVRTC=1 but the CUDA tools are unusable: {reason}. \
             Run `bash scripts/install-cuda-tools.sh` and put its nvidia/cu13/lib on LD_LIBRARY_PATH \
             (`bash scripts/test-all.sh` does both)."
        ),
        Err(reason) => {
            println!(
                "SKIP kernels_compile: {reason}. The CUDA kernels were NOT compiled. Run \
                 `bash scripts/test-all.sh`, or `bash scripts/install-cuda-tools.sh` and set \
                 LD_LIBRARY_PATH to its nvidia/cu13/lib; REQUIRE_NVRTC=1 makes this skip a failure."
            );
            return;
        }
    };

    // The project's kernels, and the examples' custom-op kernels, which are
    // compiled the same way (common.cuh prepended) by `UnaryOp::KERNELS`.
    let mut files: Vec<PathBuf> = ["kernels", "examples/kernels"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(repo().join(dir)).unwrap_or_else(|e| panic!("cannot read {dir}/: {e}")))
        .map(|e| e.expect("readable kernel folder entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no kernels/*.cu files found");

    // Files are independent: compile them side by side.
    let reports: Vec<FileReport> = std::thread::scope(|s| {
        let handles: Vec<_> = files.iter().map(|f| s.spawn(|| check_file(f, &tools))).collect();
        handles.into_iter().map(|h| h.join().expect("checking a kernel file panicked")).collect()
    });

    let mut failures: Vec<String> = Vec::new();
    // Headers are compiled as part of every file; check their contract once.
    for entry in std::fs::read_dir(repo().join("kernels")).expect("kernels/ exists") {
        let path = entry.expect("readable kernels/ entry").path();
        if path.extension().is_some_and(|x| x == "cuh") {
            let file = format!("kernels/{}", path.file_name().expect("a file").to_string_lossy());
            let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {file}: {e}"));
            failures.extend(contract_violations(&file, &src));
        }
    }
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    let mut total = 0;
    for report in &reports {
        println!("{}", report.summary);
        total += report.kernels.len();
        failures.extend(report.failures.iter().cloned());
        for kernel in &report.kernels {
            if let Some(other) = owner.insert(kernel, &report.file) {
                failures.push(format!("kernel `{kernel}` is defined in both {other} and {}", report.file));
            }
        }
    }
    println!("{total} kernels in {} files compiled for {:?}", reports.len(), ARCHS);
    let requested = kernels_the_ops_request();
    for (kernel, op) in &requested {
        if !owner.contains_key(kernel.as_str()) {
            failures.push(format!("{op} asks for the kernel `{kernel}`, which no file in kernels/ defines"));
        }
    }
    println!("{} kernels the op types of src/ops/ ask for, all defined", requested.len());
    assert!(failures.is_empty(), "{} problem(s) in kernels/:\n\n{}\n", failures.len(), failures.join("\n\n"));
}

/// Every kernel name the built-in unary, binary and comparison ops ask the
/// CUDA backend for, with the op that asks (`Exp (src/ops/unary/ops.rs)`):
/// read from the op types' definitions in every file of `src/ops/<family>/`
/// but its `mod.rs`, `cpu.rs` and `cuda.rs`: `impl<F: FloatElement>
/// UnaryOp<F> for Exp` with `const NAME: &'static str = "exp"` and
/// `KernelSource::BUILT_IN`, or a row of a declaring macro (`float_op!`,
/// `step_op!`, `comparison_ops!`),
/// and spelt as `src/ops/<family>/cuda.rs` spells them,
/// `<family>_<NAME>_<form><dtype>`. So a new op without its line in
/// `kernels/<family>.cu` fails here, on the CPU, and not first on a GPU.
fn kernels_the_ops_request() -> BTreeSet<(String, String)> {
    // The forms each family's cuda.rs launches (see their `function`).
    let families: [(&str, &str, &[&str]); 3] = [
        ("unary", "UnaryOp", &[""]),
        ("binary", "BinaryOp", &["", "rows_", "scalar_"]),
        ("compare", "CompareOp", &["", "scalar_"]),
    ];
    // Ops declared as rows of a macro (`Tan, "tan", |x| ..;` in
    // `src/ops/unary/math.rs`), with the element types each macro covers.
    let macro_rows: [(&str, &[&str]); 3] =
        [("float_op! {", &["f32", "f64", "bf16", "f16"]), ("step_op! {", &DTYPES), ("comparison_ops! {", &DTYPES)];
    let mut requested = BTreeSet::new();
    for (family, op_trait, forms) in families {
        let dir = repo().join(format!("src/ops/{family}"));
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").file_name().to_string_lossy().into_owned())
            .filter(|f| f.ends_with(".rs") && !["mod.rs", "cpu.rs", "cuda.rs"].contains(&f.as_str()))
            .collect();
        files.sort();
        let mut ops = 0;
        for file in files.iter().map(|f| format!("src/ops/{family}/{f}")) {
            let src = std::fs::read_to_string(repo().join(&file)).unwrap_or_else(|e| panic!("cannot read {file}: {e}"));
            for block in src.split("\nimpl").skip(1) {
                let header = block.lines().next().unwrap_or_default();
                let Some(rest) = header.split_once(&format!(" {op_trait}<")) else { continue };
                let op = rest.1.split(" for ").nth(1).unwrap_or_default().trim_end_matches(" {").to_string();
                // The element types the impl covers: every `Element`, or the floats.
                let dtypes: &[&str] = if header.contains("FloatElement") {
                    &["f32", "f64", "bf16", "f16"]
                } else if header.contains("Element") {
                    &DTYPES
                } else {
                    panic!("{file}: cannot tell which element types `impl{header}` covers")
                };
                let body = block.split("\n}").next().unwrap_or_default();
                if !body.contains("KernelSource::BUILT_IN") || body.contains("const NAME: &'static str = $") {
                    continue;
                }
                let name = body
                    .split("const NAME: &'static str = \"")
                    .nth(1)
                    .and_then(|n| n.split('"').next())
                    .unwrap_or_else(|| panic!("{file}: `{op}` has no `const NAME`"));
                ops += 1;
                for form in forms {
                    for dtype in dtypes {
                        requested.insert((format!("{family}_{name}_{form}{dtype}"), format!("{op} ({file})")));
                    }
                }
            }
            // Macro rows start with the op's type and its quoted name, `Equal, "eq", |a, b| ..;`.
            for (opening, dtypes) in macro_rows {
                let Some(rows) = src.split(opening).nth(1) else { continue };
                let rows = rows.split("\n}").next().unwrap_or_default();
                for row in rows.lines().map(str::trim).filter(|l| l.starts_with(|c: char| c.is_ascii_uppercase())) {
                    let mut parts = row.splitn(3, ", ");
                    let (op, name) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
                    let Some(name) = name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) else { continue };
                    ops += 1;
                    for form in forms {
                        for dtype in dtypes.iter() {
                            requested.insert((format!("{family}_{name}_{form}{dtype}"), format!("{op} ({file})")));
                        }
                    }
                }
            }
        }
        assert!(ops >= 5, "src/ops/{family}/: only {ops} built-in {op_trait}s found; has the files' layout changed?");
    }
    requested
}
