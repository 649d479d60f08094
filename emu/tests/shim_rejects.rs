//! Constructs outside the kernel contract must fail the emulator's build, not
//! run with a different meaning. Each case is compiled the way build.rs
//! compiles a kernel file (shim force-included, source inside an anonymous
//! namespace, trampoline instantiated) and must be rejected by g++.

use std::path::PathBuf;
use std::process::Command;

fn compile(name: &str, kernel_src: &str, kernel: &str) -> (bool, String) {
    let shim = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("shim");
    let dir = std::env::temp_dir().join(format!("devtensor-emu-shim-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let unit = dir.join("unit.cpp");
    std::fs::write(
        &unit,
        format!(
            "#include \"emu_launch.h\"\nnamespace {{\n{kernel_src}\n}}\n\
             extern \"C\" int t(void** p, const unsigned* d, emu::LaunchError* e) {{ return emu::launch(\"{kernel}\", &{kernel}, p, d, e); }}\n"
        ),
    )
    .unwrap();
    let out = Command::new(std::env::var("CXX").unwrap_or_else(|_| "g++".into()))
        .args(["-std=c++17", "-fsyntax-only"])
        .arg(format!("-I{}", shim.display()))
        .arg("-include")
        .arg(shim.join("cuda_shim.h"))
        .arg(&unit)
        .output()
        .expect("g++ runs");
    let _ = std::fs::remove_dir_all(&dir);
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn rejected(name: &str, src: &str, kernel: &str, expect: &str) {
    let (ok, err) = compile(name, src, kernel);
    assert!(!ok, "{name}: the shim accepted a construct outside the contract");
    assert!(err.contains(expect), "{name}: expected `{expect}` in:\n{err}");
}

#[test]
fn contract_kernel_compiles() {
    let (ok, err) = compile(
        "ok",
        r#"extern "C" __global__ void k_ok_f32(const float* x, float* y, size_t n) {
            __shared__ float s[32];
            float v = x[threadIdx.x];
            v += __shfl_down_sync(0xffffffff, v, 1);
            v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, 2));
            if (threadIdx.x < 32) s[threadIdx.x] = expf(v);
            __syncthreads();
            atomicAdd(y, s[0]);
        }"#,
        "k_ok_f32",
    );
    assert!(ok, "{err}");
}

#[test]
fn dynamic_shared_memory_is_rejected() {
    rejected(
        "extern_shared",
        r#"extern "C" __global__ void k_dyn_f32(float* y) { extern __shared__ float s[]; y[0] = s[0]; }"#,
        "k_dyn_f32",
        "error",
    );
}

#[test]
fn unknown_intrinsics_are_rejected() {
    for (name, body) in [
        ("shfl_up", "y[0] = __shfl_up_sync(0xffffffff, y[0], 1);"),
        ("syncthreads_count", "y[0] = __syncthreads_count(1);"),
        ("atomic_cas", "atomicCAS((int*)y, 0, 1);"),
        ("half", "__half h = __float2half(y[0]); y[0] = __half2float(h);"),
        ("clock", "y[0] = (float)clock64();"),
    ] {
        rejected(
            name,
            &format!("extern \"C\" __global__ void k_x_f32(float* y) {{ {body} }}"),
            "k_x_f32",
            "not declared",
        );
    }
}

#[test]
fn printf_is_rejected() {
    rejected(
        "printf",
        r#"extern "C" __global__ void k_p_f32(float* y) { printf("%f", y[0]); }"#,
        "k_p_f32",
        "poisoned",
    );
}

#[test]
fn struct_arguments_are_rejected() {
    rejected(
        "struct_arg",
        r#"struct Pair { float a, b; };
           extern "C" __global__ void k_s_f32(Pair p, float* y) { y[0] = p.a + p.b; }"#,
        "k_s_f32",
        "kernel parameters must be scalars or pointers",
    );
}

#[test]
fn cooperative_groups_are_rejected() {
    rejected(
        "coop",
        "#include <cooperative_groups.h>\nextern \"C\" __global__ void k_c_f32(float* y) { y[0] = 1.0f; }",
        "k_c_f32",
        "cooperative_groups.h",
    );
}
