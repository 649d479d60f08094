//! Every kernel of the project's `kernels/` folder (or `DEVTENSOR_EMU_KERNELS_DIR`,
//! the same override build.rs reads) loads in the emulator: NVRTC compiles each
//! file as the library does, and every `.entry` of the PTX must resolve to a
//! host-compiled kernel whose parameter layout matches the PTX.

use std::path::PathBuf;

use cudarc::driver::CudaContext;
use cudarc::nvrtc::{CompileOptions, Ptx};

#[test]
fn every_project_kernel_resolves_with_a_matching_signature() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::var_os("DEVTENSOR_EMU_KERNELS_DIR").map(PathBuf::from).unwrap_or(manifest.join("../kernels"));
    let Ok(rd) = std::fs::read_dir(&dir) else {
        eprintln!("SKIP project kernels: no folder {}", dir.display());
        return;
    };
    // SAFETY: only probes whether the library can be opened.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        assert!(std::env::var("REQUIRE_NVRTC").map_or(true, |v| v != "1"), "REQUIRE_NVRTC=1 but NVRTC is missing");
        eprintln!("SKIP project kernels: NVRTC not found");
        return;
    }
    let cuda_include = manifest.join("../.cache/cuda-tools/nvidia/cu13/include");
    let ctx = CudaContext::new(0).unwrap();
    let mut files: Vec<PathBuf> =
        rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "cu")).collect();
    files.sort();
    let mut total = 0;
    for file in files {
        let src = std::fs::read_to_string(&file).unwrap();
        let opts = CompileOptions {
            include_paths: vec![dir.display().to_string(), cuda_include.display().to_string()],
            arch: Some("compute_80"),
            options: vec!["--std=c++17".to_string()],
            ..Default::default()
        };
        let ptx = cudarc::nvrtc::compile_ptx_with_opts(&src, opts)
            .unwrap_or_else(|e| panic!("NVRTC on {}: {e:?}", file.display()))
            .to_src();
        let entries: Vec<String> = ptx
            .lines()
            .filter_map(|l| l.split(".entry ").nth(1))
            .map(|r| r.split(|c: char| c == '(' || c.is_whitespace()).next().unwrap().to_string())
            .collect();
        assert!(!entries.is_empty(), "{} has no kernels", file.display());
        let module = ctx.load_module(Ptx::from_src(ptx)).unwrap();
        for name in &entries {
            module
                .load_function(name)
                .unwrap_or_else(|e| panic!("{}: `{name}` does not resolve in the emulator: {e}", file.display()));
        }
        total += entries.len();
    }
    eprintln!("project kernels: {total} entries resolve in the emulator");
}
