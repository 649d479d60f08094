//! Shared helpers for the integration tests: proptest strategies for shapes
//! and data, non-contiguous views with known contents, index arithmetic
//! for plain-loop reference implementations, and the machinery that runs
//! each device-generic check on `Cpu`, `Cuda<0>` and `Cuda<1>` (bottom half).
// Each test binary uses only some helpers and macros.
#![allow(dead_code, unused_macros)]

pub mod gradcheck;

use devtensor::{Device, Element, Tensor};
use proptest::prelude::*;

/// The multi-index of flat (row-major) position `flat`.
pub fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    for (i, &d) in dims.iter().enumerate().rev() {
        index[i] = flat % d;
        flat /= d;
    }
    index
}

/// The flat (row-major) position of a multi-index.
pub fn ravel(index: &[usize], dims: &[usize]) -> usize {
    debug_assert_eq!(index.len(), dims.len());
    // Horner's rule over the row-major strides: no allocation, which matters
    // under Miri, where the references call this for every element.
    index.iter().zip(dims).fold(0, |flat, (&i, &d)| flat * d + i)
}

/// Every multi-index of `dims`, row-major.
pub fn indices(dims: &[usize]) -> impl Iterator<Item = Vec<usize>> + '_ {
    (0..dims.iter().product()).map(move |flat| unravel(flat, dims))
}

/// The element of `data` (row-major, shape `dims`) that broadcasting reads
/// for output multi-index `out_index` (NumPy rules: align at the end, size-1
/// axes repeat).
pub fn broadcast_read<T: Copy>(data: &[T], dims: &[usize], out_index: &[usize]) -> T {
    let lead = out_index.len() - dims.len();
    // As `ravel`, with index 0 on the size-1 axes.
    let flat = dims.iter().zip(&out_index[lead..]).fold(0, |flat, (&d, &i)| flat * d + if d == 1 { 0 } else { i });
    data[flat]
}

/// NumPy's broadcast shape, computed the plain way.
pub fn broadcast_dims(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let get = |d: &[usize], i: usize| if i + d.len() >= rank { d[i + d.len() - rank] } else { 1 };
    (0..rank)
        .map(|i| match (get(a, i), get(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// Shapes of rank `0..=max_rank` with dimensions `1..=max_dim`.
pub fn shape(max_rank: usize, max_dim: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1..=max_dim, 0..=max_rank)
}

/// Shapes that may contain zero-sized dimensions.
pub fn shape_maybe_empty(max_rank: usize, max_dim: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..=max_dim, 0..=max_rank)
}

/// A shape and `f64` data in `-10..10` for it.
pub fn shaped_data(max_rank: usize, max_dim: usize) -> impl Strategy<Value = (Vec<usize>, Vec<f64>)> {
    shape(max_rank, max_dim).prop_flat_map(|dims| {
        let len: usize = dims.iter().product();
        (Just(dims), prop::collection::vec(-10.0..10.0f64, len))
    })
}

/// Two shapes that broadcast together: a base shape, and a copy in which
/// some axes are 1 and some leading axes are dropped; randomly swapped.
pub fn broadcast_pair(max_rank: usize, max_dim: usize) -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    shape(max_rank, max_dim)
        .prop_flat_map(|dims| {
            let rank = dims.len();
            (Just(dims), prop::collection::vec(any::<bool>(), rank), 0..=rank, any::<bool>())
        })
        .prop_map(|(dims, ones, drop, swap)| {
            let other: Vec<usize> =
                dims.iter().zip(&ones).map(|(&d, &one)| if one { 1 } else { d }).skip(drop).collect();
            if swap { (other, dims) } else { (dims, other) }
        })
}

/// How a test tensor is laid out in storage.
#[derive(Clone, Copy, Debug)]
pub enum Variant {
    /// Dense, row-major.
    Contiguous,
    /// Stored with its axes reversed, then permuted back: strides out of order.
    Permuted,
    /// Cut with `narrow` out of a larger tensor: an offset and gaps.
    Narrowed,
}

/// Any [`Variant`].
pub fn variant() -> impl Strategy<Value = Variant> {
    prop_oneof![Just(Variant::Contiguous), Just(Variant::Permuted), Just(Variant::Narrowed)]
}

/// A tensor on `D` whose logical contents are `data` (row-major, shape `dims`),
/// laid out as `variant` says.
pub fn tensor_with<D: Device, E: Element>(data: &[E], dims: &[usize], variant: Variant) -> Tensor<D, E> {
    let rank = dims.len();
    match variant {
        Variant::Contiguous => Tensor::from_slice(data, dims),
        Variant::Permuted => {
            let reversed: Vec<usize> = dims.iter().rev().copied().collect();
            let mut stored = vec![E::ZERO; data.len()];
            for (flat, index) in indices(dims).enumerate() {
                let rev: Vec<usize> = index.iter().rev().copied().collect();
                stored[ravel(&rev, &reversed)] = data[flat];
            }
            let axes: Vec<usize> = (0..rank).rev().collect();
            Tensor::<D, E>::from_vec(stored, reversed).permute(axes)
        }
        Variant::Narrowed => {
            // Each axis gets one extra element in front and one behind.
            let padded: Vec<usize> = dims.iter().map(|d| d + 2).collect();
            let mut stored = vec![E::ZERO; padded.iter().product()];
            for (flat, index) in indices(dims).enumerate() {
                let shifted: Vec<usize> = index.iter().map(|i| i + 1).collect();
                stored[ravel(&shifted, &padded)] = data[flat];
            }
            let mut t = Tensor::<D, E>::from_vec(stored, padded);
            for (axis, &d) in dims.iter().enumerate() {
                t = t.narrow(axis as isize, 1, d);
            }
            t
        }
    }
}

/// Converts test data to the element type under test.
pub fn cast_all<E: Element>(data: &[f64]) -> Vec<E> {
    data.iter().map(|&x| E::from_f64(x)).collect()
}

/// Asserts two float sequences agree within `abs + rel * |expected|`.
#[track_caller]
pub fn assert_close(actual: &[f64], expected: &[f64], abs: f64, rel: f64) {
    assert_eq!(actual.len(), expected.len(), "lengths differ");
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let ok = (a.is_nan() && e.is_nan()) || a == e || (a - e).abs() <= abs + rel * e.abs();
        assert!(ok, "element {i}: got {a}, expected {e}\nactual:   {actual:?}\nexpected: {expected:?}");
    }
}

/// Element values as `f64`, for comparisons.
pub fn as_f64<E: Element>(data: &[E]) -> Vec<f64> {
    data.iter().map(|x| x.to_f64()).collect()
}

// ---------------------------------------------------------------------------
// Write a test once, run it on every device (DESIGN.md; issue 3, item 8).
//
// A check is a generic `fn check_x<D: Device>(..)` that asserts against a
// plain host reference. The macros below instantiate it for `Cpu`, `Cuda<0>`
// and `Cuda<1>`, one `#[test]` per device (`name::cpu`, `name::cuda0`,
// `name::cuda1`), so a failure names the device it happened on. A CUDA
// instance that finds no usable GPU prints one `SKIP Cuda<N>: <reason>` line
// per test binary and passes, unless `DEVTENSOR_REQUIRE_CUDA=1`, where it
// fails with that reason: CI under the emulated driver sets it, so the suite
// cannot pass there by silently skipping.

/// Proptest cases for the `Cpu` instance of a device proptest is given per
/// test (the files' historic counts); CUDA instances run this many, because
/// the emulated driver runs kernels on the CPU 10-100x slower than native
/// code. Override with `DEVTENSOR_CUDA_CASES` (e.g. more on a real GPU).
pub const CUDA_CASES: u32 = 16;

/// Proptest cases for a CUDA instance: [`CUDA_CASES`] or `DEVTENSOR_CUDA_CASES`,
/// times [`cases_factor`].
pub fn cuda_cases() -> u32 {
    let cases = std::env::var("DEVTENSOR_CUDA_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CUDA_CASES);
    cases.saturating_mul(cases_factor())
}

/// `DEVTENSOR_PROPTEST_FACTOR` (default 1): every property test runs this
/// many times its cases, on every device, for a sweep of many draws (issue
/// 38: `DEVTENSOR_PROPTEST_FACTOR=10`). Which draws they are is fixed by
/// `PROPTEST_RNG_SEED` (proptest's own variable; `scripts/test-all.sh`
/// picks and prints one).
pub fn cases_factor() -> u32 {
    match std::env::var("DEVTENSOR_PROPTEST_FACTOR") {
        Err(_) => 1,
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("DEVTENSOR_PROPTEST_FACTOR={v:?} is not a whole number")),
    }
}

/// Whether `DEVTENSOR_REQUIRE_CUDA=1` asks that CUDA instances run, not skip.
pub fn cuda_required() -> bool {
    std::env::var("DEVTENSOR_REQUIRE_CUDA").is_ok_and(|v| v == "1")
}

/// Whether the CUDA instances for ordinal `N` should run.
///
/// `false` when `Cuda<N>` cannot be initialised; the first such call in this
/// test binary prints `SKIP Cuda<N>: <reason>` straight to stderr (past the
/// test harness's output capture, so it shows without `--nocapture`). Panics
/// with the reason instead when `DEVTENSOR_REQUIRE_CUDA=1`.
#[track_caller]
pub fn cuda_ready<const N: usize>() -> bool {
    use std::io::Write;
    use std::sync::OnceLock;
    // One probe per ordinal and binary: `try_init` is cheap, but the line
    // must appear once, not once per case.
    static PROBES: [OnceLock<Result<(), String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let probe = PROBES[N].get_or_init(|| {
        let result = devtensor::Cuda::<N>::try_init().map_err(|e| e.to_string());
        // One write per line, so the harness's progress output cannot split it.
        let line = match &result {
            // Which driver the GPU came from: with-emu.sh names the emulator here.
            Ok(()) => Some(match std::env::var("DEVTENSOR_EMU_DRIVER") {
                Ok(path) => format!("RUN Cuda<{N}>: emulated driver devtensor-emu ({path})\n"),
                Err(_) => format!("RUN Cuda<{N}>: the system's CUDA driver\n"),
            }),
            Err(reason) if !cuda_required() => Some(format!("SKIP Cuda<{N}>: {reason}\n")),
            Err(_) => None,
        };
        if let Some(line) = line {
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
        result
    });
    match probe {
        Ok(()) => true,
        Err(reason) if cuda_required() => panic!("DEVTENSOR_REQUIRE_CUDA=1 but Cuda<{N}> is unavailable: {reason}"),
        Err(_) => false,
    }
}

/// Families of operations, for the tolerances a CUDA result is held to
/// against the `Cpu` one (see [`tolerance`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Data movement, integer arithmetic, comparisons, `+ - * /`, max/min,
    /// neg/abs/relu/square/clamp, indexing, cat: one IEEE operation or none
    /// per element, so every device gives the same bits.
    Exact,
    /// exp, log, tanh, sigmoid, powf, sin, cos, sqrt, recip: CUDA's libdevice
    /// is within 1-4 ulp of the correctly rounded value, as is the host libm.
    Transcendental,
    /// sum, mean, softmax, log_softmax: the summation order differs (blocked
    /// and parallel on the CPU, a tree of warps on the GPU).
    Reduction,
    /// matmul: cuBLAS and gemm sum each dot product in different orders.
    Matmul,
}

/// `(abs, rel)` tolerance for `family` in element type `E`, as used by
/// [`assert_close`]: `|got - cpu| <= abs + rel * |cpu|`. The one place these
/// numbers are written down. Integer types are always exact.
pub fn tolerance<E: Element>(family: Family) -> (f64, f64) {
    use devtensor::DType;
    match (family, E::DTYPE) {
        (Family::Exact, _) | (_, DType::I64 | DType::U8) => (0.0, 0.0),
        // A few ulp: f32 epsilon is 1.2e-7, f64 2.2e-16.
        (Family::Transcendental, DType::F32) => (1e-6, 1e-6),
        (Family::Transcendental, _) => (1e-14, 1e-14),
        // Reordered sums of up to ~1e6 terms of magnitude <= 10 (the sizes in
        // these tests); each check also holds every device to its own bound
        // against the exact `f64` reference, which is the sharper test.
        (Family::Reduction | Family::Matmul, DType::F32) => (1e-3, 1e-4),
        (Family::Reduction | Family::Matmul, _) => (1e-9, 1e-10),
    }
}

/// Asserts a device result matches the `Cpu` one within [`tolerance`].
#[track_caller]
pub fn assert_matches_cpu<E: Element>(device: &str, family: Family, got: &[E], cpu: &[E]) {
    let (abs, rel) = tolerance::<E>(family);
    let (got, cpu) = (as_f64(got), as_f64(cpu));
    assert_eq!(got.len(), cpu.len(), "{device}: {family:?} result has {} elements, Cpu's {}", got.len(), cpu.len());
    for (i, (&g, &c)) in got.iter().zip(&cpu).enumerate() {
        let ok = (g.is_nan() && c.is_nan()) || g == c || (g - c).abs() <= abs + rel * c.abs();
        assert!(ok, "{device} vs Cpu ({family:?}, abs {abs}, rel {rel}): element {i}: got {g}, Cpu gave {c}");
    }
}

/// Runs `$body` once per device with `$d` naming the device type: on `Cpu`,
/// then on `Cuda<0>` and `Cuda<1>` where [`cuda_ready`] says so. For inline
/// use inside a test; the body is expanded three times, so it must not move
/// what it uses.
macro_rules! on_devices {
    ($d:ident => $body:expr) => {{
        {
            type $d = devtensor::Cpu;
            $body;
        }
        if $crate::common::cuda_ready::<0>() {
            type $d = devtensor::Cuda<0>;
            $body;
        }
        if $crate::common::cuda_ready::<1>() {
            type $d = devtensor::Cuda<1>;
            $body;
        }
    }};
}

/// One `#[test]` per device for each generic check `fn check<D: Device>()`:
/// `device_tests! { name => check, .. }` gives `name::cpu`, `name::cuda0`,
/// `name::cuda1`.
macro_rules! device_tests {
    ($($name:ident => $check:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn cpu() {
                super::$check::<devtensor::Cpu>();
            }
            #[test]
            fn cuda0() {
                if $crate::common::cuda_ready::<0>() {
                    super::$check::<devtensor::Cuda<0>>();
                }
            }
            #[test]
            fn cuda1() {
                if $crate::common::cuda_ready::<1>() {
                    super::$check::<devtensor::Cuda<1>>();
                }
            }
        }
    )*};
}

/// Like [`device_tests!`] for checks that also return their results as
/// `Vec<E>`: each CUDA result must match the `Cpu` one within the
/// [`tolerance`] of `$family` (on top of the check's own reference).
macro_rules! device_tests_vs_cpu {
    ($($name:ident => $check:ident, $family:expr);* $(;)?) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn cpu() {
                super::$check::<devtensor::Cpu>();
            }
            #[test]
            fn cuda0() {
                if $crate::common::cuda_ready::<0>() {
                    let got = super::$check::<devtensor::Cuda<0>>();
                    let cpu = super::$check::<devtensor::Cpu>();
                    $crate::common::assert_matches_cpu("Cuda<0>", $family, &got, &cpu);
                }
            }
            #[test]
            fn cuda1() {
                if $crate::common::cuda_ready::<1>() {
                    let got = super::$check::<devtensor::Cuda<1>>();
                    let cpu = super::$check::<devtensor::Cpu>();
                    $crate::common::assert_matches_cpu("Cuda<1>", $family, &got, &cpu);
                }
            }
        }
    )*};
}

/// Property tests instantiated per device: each
/// `fn name<D>(arg in strategy, ..) { body }` becomes `name::cpu` with
/// `$cases` cases ([`cpu_cases`]: fewer under Miri) and `name::cuda0`, `name::cuda1` with [`cuda_cases`]
/// cases, `D` naming the device inside the body.
macro_rules! device_proptests {
    (cases = $cases:expr; $($(#[$meta:meta])* fn $name:ident<$d:ident>($($args:tt)*) $body:block)*) => {$(
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            proptest::proptest! {
                #![proptest_config(proptest::prelude::ProptestConfig::with_cases($crate::common::cpu_cases($cases)))]
                #[test]
                fn cpu($($args)*) {
                    type $d = devtensor::Cpu;
                    $body
                }
            }
            #[test]
            fn cuda0() {
                // Checked outside the property, so that a required but
                // missing GPU fails once rather than being "shrunk".
                if !$crate::common::cuda_ready::<0>() {
                    return;
                }
                type $d = devtensor::Cuda<0>;
                let config = proptest::prelude::ProptestConfig::with_cases($crate::common::cuda_cases());
                proptest::proptest!(config, |($($args)*)| $body);
            }
            #[test]
            fn cuda1() {
                // Checked outside the property, so that a required but
                // missing GPU fails once rather than being "shrunk".
                if !$crate::common::cuda_ready::<1>() {
                    return;
                }
                type $d = devtensor::Cuda<1>;
                let config = proptest::prelude::ProptestConfig::with_cases($crate::common::cuda_cases());
                proptest::proptest!(config, |($($args)*)| $body);
            }
        }
    )*};
}

/// The repository's root: the suites are the package `devtensor-suite`,
/// whose manifest is in `suite/`, and read the fixtures under `tests/`.
pub const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// Element counts for the large-input cases: several CUDA blocks of 256
/// threads (and several grid-stride rounds at the larger one), neither a
/// multiple of 256, both past the CPU's parallel threshold. 1_000_003 is prime,
/// so no block or chunk size divides it. Smaller under Miri (see [`sized`]):
/// past its parallel threshold of 256; 2_053, prime too, spans three chunks.
pub const LARGE_SIZES: [usize; 2] = if cfg!(miri) { [300, 2_053] } else { [70_000, 1_000_003] };

/// `native`, or `miri` when the tests run under Miri (`scripts/miri.sh`).
/// Miri interprets the code thousands of times slower than it runs natively,
/// and the library's parallel and pooling thresholds are 256 times lower
/// under it (`src/backend/cpu/`; 8³ multiply-adds for `matmul`), so the
/// smaller size still reaches the same code paths.
pub const fn sized(native: usize, miri: usize) -> usize {
    if cfg!(miri) { miri } else { native }
}

/// Proptest cases for a `Cpu` instance whose file asks for `cases`: those
/// times [`cases_factor`], but under Miri `PROPTEST_CASES` (set by
/// `scripts/miri.sh`), or 4.
pub fn cpu_cases(cases: u32) -> u32 {
    if !cfg!(miri) {
        return cases.saturating_mul(cases_factor());
    }
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(4)
}

/// A well-mixed hash of `x`, so nearby seeds give unrelated values.
pub fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
