//! Compiles every CUDA kernel source as host C++ under the shim header, and
//! generates one trampoline per kernel plus the name -> trampoline registry.
//!
//! Kernel folders: the repository's `kernels/` (when present), its
//! `examples/kernels/` (custom ops, which include `common.cuh` from
//! `kernels/`) and this package's `tests/kernels/`, or instead of the first
//! two the folders named by
//! `DEVTENSOR_EMU_KERNELS_DIR` / `DEVTENSOR_EMU_TEST_KERNELS_DIR` (used by
//! `scripts/emu-mutation.sh` to build the emulator from a mutated copy).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The contract: `extern "C" __global__ void NAME(`, found in the preprocessed
/// source, where `__global__` became the marker `__devtensor_emu_kernel__`.
fn kernel_names(src: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = src;
    while let Some(pos) = rest.find("extern") {
        rest = &rest[pos + "extern".len()..];
        let mut toks = rest.trim_start();
        let Some(t) = toks.strip_prefix("\"C\"") else {
            continue;
        };
        toks = t.trim_start();
        let Some(t) = toks.strip_prefix("__devtensor_emu_kernel__") else {
            continue;
        };
        toks = t.trim_start();
        let Some(t) = toks.strip_prefix("void") else {
            continue;
        };
        if !t.starts_with(char::is_whitespace) {
            continue;
        }
        toks = t.trim_start();
        let end = toks.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(toks.len());
        let name = &toks[..end];
        if !name.is_empty() && toks[end..].trim_start().starts_with('(') {
            names.push(name.to_string());
        }
    }
    names
}

/// The unit after the preprocessor, with the shim in scanning mode.
fn preprocess(shim: &Path, includes: &Path, out: &Path, unit: &str, idx: usize) -> String {
    let path = out.join(format!("scan_{idx}.cpp"));
    std::fs::write(&path, unit).unwrap();
    let compiler = cc::Build::new().cpp(true).get_compiler();
    let output = compiler
        .to_command()
        .args(["-std=c++17", "-E", "-P", "-DDEVTENSOR_EMU_SCAN"])
        .arg(format!("-I{}", shim.display()))
        .arg(format!("-I{}", includes.display()))
        .arg("-include")
        .arg(shim.join("cuda_shim.h"))
        .arg(&path)
        .output()
        .expect("run the C++ preprocessor");
    if !output.status.success() {
        panic!("preprocessing {} failed:\n{}", path.display(), String::from_utf8_lossy(&output.stderr));
    }
    String::from_utf8(output.stdout).unwrap()
}

fn cu_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> =
        rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == "cu")).collect();
    v.sort();
    v
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let shim = manifest.join("shim");
    // DEVTENSOR_EMU_KERNELS_DIR swaps in another kernel folder (e.g. to try a branch's kernels).
    println!("cargo:rerun-if-env-changed=DEVTENSOR_EMU_KERNELS_DIR");
    let project =
        std::env::var_os("DEVTENSOR_EMU_KERNELS_DIR").map(PathBuf::from).unwrap_or(manifest.join("../kernels"));
    // DEVTENSOR_EMU_TEST_KERNELS_DIR does the same for the emulator's own test kernels.
    println!("cargo:rerun-if-env-changed=DEVTENSOR_EMU_TEST_KERNELS_DIR");
    let tests =
        std::env::var_os("DEVTENSOR_EMU_TEST_KERNELS_DIR").map(PathBuf::from).unwrap_or(manifest.join("tests/kernels"));
    // The examples' custom-op kernels (examples/custom_op.rs), which
    // include the project's common.cuh by name.
    let examples = manifest.join("../examples/kernels");
    let dirs = [project.clone(), tests, examples];
    for d in &dirs {
        println!("cargo:rerun-if-changed={}", d.display());
    }
    for f in ["cuda_shim.h", "emu_launch.h", "runtime.cpp"] {
        println!("cargo:rerun-if-changed={}", shim.join(f).display());
    }

    let mut registry = String::new();
    let mut externs = String::new();
    let mut seen = std::collections::BTreeMap::<String, PathBuf>::new();
    let mut units = Vec::new();
    for dir in &dirs {
        let _ = std::fs::read_dir(dir).map(|rd| {
            for e in rd.flatten() {
                println!("cargo:rerun-if-changed={}", e.path().display());
            }
        });
        for (i, file) in cu_files(dir).into_iter().enumerate() {
            let file = file.canonicalize().unwrap();
            let mut unit = String::new();
            // Library headers first, so that the anonymous namespace below
            // holds only the kernel source itself.
            writeln!(unit, "#include \"emu_launch.h\"\nnamespace {{\n#include \"{}\"\n}}", file.display()).unwrap();
            let names = kernel_names(&preprocess(&shim, &project, &out, &unit, units.len()));
            for n in &names {
                if let Some(prev) = seen.insert(n.clone(), file.clone()) {
                    panic!("kernel `{n}` is defined in both {} and {}", prev.display(), file.display());
                }
                writeln!(
                    unit,
                    "extern \"C\" int devtensor_emu_launch__{n}(void** p, const unsigned* d, emu::LaunchError* e) \
                     {{ return emu::launch(\"{n}\", &{n}, p, d, e); }}\n\
                     extern \"C\" unsigned devtensor_emu_nparams__{n}() {{ return emu::param_count(&{n}); }}\n\
                     extern \"C\" const uint32_t* devtensor_emu_layout__{n}() {{ return emu::param_layout(&{n}); }}"
                )
                .unwrap();
                writeln!(
                    externs,
                    "    fn devtensor_emu_launch__{n}(p: *mut *mut c_void, d: *const u32, e: *mut LaunchError) -> i32;\n    \
                     fn devtensor_emu_nparams__{n}() -> u32;\n    fn devtensor_emu_layout__{n}() -> *const u32;"
                )
                .unwrap();
                writeln!(
                    registry,
                    "    KernelEntry {{ name: \"{n}\", launch: devtensor_emu_launch__{n}, nparams: devtensor_emu_nparams__{n}, \
                     layout: devtensor_emu_layout__{n} }},"
                )
                .unwrap();
            }
            let stem = file.file_stem().unwrap().to_string_lossy().to_string();
            let path = out.join(format!("emu_{}_{i}_{stem}.cpp", units.len()));
            std::fs::write(&path, unit).unwrap();
            units.push(path);
        }
    }

    let rs = format!(
        "// Generated by build.rs: one entry per `extern \"C\" __global__` kernel.\n\
         unsafe extern \"C\" {{\n{externs}}}\n\
         /// Every kernel compiled into this emulator.\n\
         pub(crate) static KERNELS: &[KernelEntry] = &[\n{registry}];\n"
    );
    std::fs::write(out.join("kernels.rs"), rs).unwrap();

    let mut b = cc::Build::new();
    b.cpp(true)
        .std("c++17")
        .opt_level(2)
        .include(&shim)
        .include(&project)
        .flag("-include")
        .flag(shim.join("cuda_shim.h").to_str().unwrap())
        // glibc's fortified longjmp refuses to jump between fiber stacks.
        .flag("-U_FORTIFY_SOURCE")
        .flag("-fno-strict-aliasing")
        .flag("-fno-omit-frame-pointer")
        // Large frames probe every page, so a fiber running off its stack
        // always hits its guard page instead of landing in other memory.
        .flag("-fstack-clash-protection")
        .warnings(false);
    // Every read of threadIdx, blockIdx and __shared__ memory is a
    // thread-local access in a library that cudarc dlopens; TLS descriptors
    // make those cheaper than __tls_get_addr calls (ops suite: 118 s -> 100 s
    // of CPU on the emulated GPUs).
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64") {
        b.flag("-mtls-dialect=gnu2");
    }
    // One compiler per core at a time (cargo's NUM_JOBS), each taking the
    // next unit: `cc` alone compiles them one after the other, and the op
    // families' units are most of the emulator's build.
    let sources: Vec<PathBuf> = std::iter::once(shim.join("runtime.cpp")).chain(units).collect();
    let jobs = std::env::var("NUM_JOBS").ok().and_then(|n| n.parse().ok()).unwrap_or(1usize).clamp(1, sources.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let objects: Vec<PathBuf> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..jobs)
            .map(|_| {
                s.spawn(|| {
                    let mut objects = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(source) = sources.get(i) else { break objects };
                        objects.extend(b.clone().file(source).compile_intermediates());
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a compiler thread panicked")).collect()
    });
    b.objects(objects).compile("devtensor_emu_kernels");
}
