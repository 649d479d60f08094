//! Hostile input, on every device: sizes at and past the limits of `usize`,
//! `isize` and memory, integer edge cases, and the places where PyTorch's
//! semantics surprise (issue 8). Each case asserts the exact `Error`
//! variant, that the message names the operation and the offending size,
//! and that the device still computes afterwards (on a GPU: the context is
//! alive; under the emulator an out-of-bounds kernel write fails the test).
//!
//! Reference values are PyTorch 2.x's documented results for the same call.

use devtensor::{Cpu, Device, Element, Error, PinnedTensor, Shape, Tensor};
use proptest::prelude::*;

const BIG: usize = 1 << 32; // BIG * BIG overflows `usize`
const TERA: usize = 1 << 40; // 4 TiB of f32: possible in principle, never in memory

/// The device still runs kernels and reads results back correctly.
#[track_caller]
fn assert_device_works<D: Device>() {
    let x = Tensor::<D>::arange(0, 5);
    assert_eq!((&x * 2.0).sum().item(), 20.0, "{} no longer computes", D::name());
}

/// `err` is a shape error of `op` whose message names `op` and `size`.
#[track_caller]
fn assert_shape_error(err: Error, op: &str, size: &str) {
    let message = err.to_string();
    assert!(matches!(&err, Error::Shape { op: o, .. } if *o == op), "expected a shape error of {op}, got: {message}");
    assert!(message.starts_with(&format!("{op} on ")), "{message}");
    assert!(message.contains(size), "the message should name {size}: {message}");
}

/// A stride-0 view of `dims` over a single element: huge, but free.
fn broadcast<D: Device, E: Element>(value: E, dims: &[usize]) -> Tensor<D, E> {
    Tensor::<D, E>::full([1], value).reshape(vec![1; dims.len()]).broadcast_to(dims)
}

// ---- 1. Shapes whose element count overflows are errors before anything is allocated

fn check_overflowing_shapes_are_shape_errors<D: Device>() {
    let huge = [BIG, BIG];
    let size = "[4294967296, 4294967296]";
    assert_shape_error(Tensor::<D>::try_from_vec(vec![], huge).unwrap_err(), "from_vec", size);
    assert_shape_error(Tensor::<D>::try_from_slice(&[], huge).unwrap_err(), "from_slice", size);
    assert_shape_error(Tensor::<D>::try_zeros(huge).unwrap_err(), "zeros", size);
    assert_shape_error(Tensor::<D, u8>::try_ones(huge).unwrap_err(), "ones", size);
    assert_shape_error(Tensor::<D, i64>::try_full(huge, 3).unwrap_err(), "full", size);
    assert_shape_error(Tensor::<D>::try_rand(huge).unwrap_err(), "rand", size);
    assert_shape_error(Tensor::<D, f64>::try_randn(huge).unwrap_err(), "randn", size);
    assert_shape_error(Tensor::<D>::try_eye(BIG).unwrap_err(), "eye", size);
    // Page-locked buffers are checked before the driver is asked (or needed).
    assert_shape_error(PinnedTensor::<f32>::try_zeros(huge).unwrap_err(), "pinned zeros", size);
    assert_shape_error(PinnedTensor::<f64>::try_zeros([1 << 61]).unwrap_err(), "pinned zeros", "isize::MAX bytes");
    let one = Tensor::<D>::ones([1]);
    assert_shape_error(one.try_broadcast_to(huge).unwrap_err(), "broadcast_to", size);
    assert_shape_error(one.try_reshape(huge).unwrap_err(), "reshape", size);

    // Results whose every operand fits, but whose count does not.
    let (col, row) = (broadcast::<D, f32>(1.0, &[BIG, 1]), broadcast::<D, f32>(1.0, &[1, BIG]));
    assert_shape_error(col.try_add(&row).unwrap_err(), "add", size);
    assert_shape_error(col.try_mul(&row).unwrap_err(), "mul", size);
    assert_shape_error(col.try_div(&row).unwrap_err(), "div", size);
    assert_shape_error(col.try_lt(&row).unwrap_err(), "lt", size);
    let mask = broadcast::<D, u8>(1, &[BIG, 1]);
    assert_shape_error(mask.try_where_cond(&row, &col).unwrap_err(), "where_cond", size);
    assert_shape_error(col.try_matmul(&row).unwrap_err(), "matmul", size);
    let picks = broadcast::<D, i64>(0, &[BIG]);
    assert_shape_error(col.try_index_select(1, &picks).unwrap_err(), "index_select", size);
    let half = broadcast::<D, f32>(1.0, &[1 << 62]);
    assert_shape_error(Tensor::try_cat(&[&half, &half], 0).unwrap_err(), "cat", "[4611686018427387904]");
    assert_shape_error(Tensor::try_stack(&[&half, &half], 0).unwrap_err(), "cat", "4611686018427387904");

    // A shape with a zero dimension has no elements, however large the others.
    let empty = Tensor::<D>::from_vec(vec![], [BIG, BIG, 0]);
    assert_eq!(empty.elem_count(), 0);
    assert_eq!(empty.unsqueeze(1).sum().item(), 0.0);
    assert_eq!(Shape::from(huge).checked_elem_count(), None);
    assert_device_works::<D>();
}

// ---- 2. Sizes that could exist but not in memory: Shape past isize::MAX bytes, OutOfMemory below

fn check_impossible_allocations_are_errors<D: Device>() {
    if cfg!(miri) {
        return; // Miri stops at an allocation it cannot grant instead of returning null.
    }
    // 2^61 f64 elements: a valid count, but 2^64 bytes.
    let err = Tensor::<D, f64>::try_zeros([1 << 61]).unwrap_err();
    assert_shape_error(err, "zeros", "2305843009213693952");
    // 2^62 bytes: a size no allocator grants.
    match Tensor::<D, u8>::try_zeros([1 << 62]).unwrap_err() {
        Error::OutOfMemory { op, device, requested, .. } => {
            assert_eq!((op, device.as_str()), ("zeros", D::name().as_str()));
            assert!(requested >= 1 << 62);
        }
        other => panic!("expected OutOfMemory, got {other}"),
    }
    // Materialising a 4 TiB broadcast view.
    let huge = broadcast::<D, f32>(1.0, &[TERA]);
    let mut errors =
        vec![huge.try_to_vec().unwrap_err(), huge.try_contiguous().unwrap_err(), huge.try_exp().unwrap_err()];
    if D::cuda_ordinal().is_some() {
        // Asynchronous moves off and onto the GPU stage through page-locked memory.
        errors.push(huge.try_to_async::<Cpu>().and_then(|p| p.try_wait()).unwrap_err());
        let host = broadcast::<Cpu, f32>(1.0, &[TERA]);
        errors.push(host.try_to_async::<D>().and_then(|p| p.try_join()).unwrap_err());
        errors.push(host.try_to::<D>().unwrap_err());
    }
    for err in errors {
        let message = err.to_string();
        assert!(matches!(err, Error::OutOfMemory { requested, .. } if requested >= 4 * TERA), "{message}");
        assert!(message.contains("out of memory") && message.contains(&(4 * TERA).to_string()), "{message}");
    }
    assert_device_works::<D>();
}

// ---- 3. Reductions of broadcast views read only the memory that exists

fn check_broadcast_reductions_do_not_materialise<D: Device>() {
    // PyTorch: torch.ones(1).expand(2**40).sum() == 1099511627776.
    let huge = broadcast::<D, f32>(1.0, &[TERA]);
    assert_eq!(huge.sum().item(), TERA as f32);
    assert_eq!(huge.mean().item(), 1.0);
    assert_eq!(huge.max().item(), 1.0);
    assert_eq!(huge.min().item(), 1.0);
    // A broadcast axis reduced, a real one kept: [2^40 (broadcast), 3].
    let rows = Tensor::<D, f64>::from_vec(vec![1.0, -2.0, 3.5], [1, 3]).broadcast_to([TERA, 3]);
    assert_eq!(rows.sum_axis(0).to_vec(), vec![TERA as f64, -2.0 * TERA as f64, 3.5 * TERA as f64]);
    assert_eq!(rows.mean_keepdim(0).to_vec2(), vec![vec![1.0, -2.0, 3.5]]);
    assert_eq!(rows.max_axis(0).to_vec(), vec![1.0, -2.0, 3.5]);
    assert_eq!(rows.argmax(0).to_vec(), vec![0, 0, 0]);
    // The flat index of the first extreme: row 0, columns 2 and 1.
    assert_eq!((rows.argmax_all().item(), rows.argmin_all().item()), (2, 1));
    let cols = Tensor::<D>::from_vec(vec![1.0, 5.0, 5.0, -1.0], [4, 1]).broadcast_to([4, TERA]);
    assert_eq!(cols.argmax_all().item(), TERA as i64); // [1, 0]
    assert_eq!(cols.argmin_all().item(), 3 * TERA as i64); // [3, 0]
    assert_eq!(rows.sum().item(), 2.5 * TERA as f64);
    // Integer sums of a broadcast view are the wrapped products, exactly.
    let sevens = broadcast::<D, i64>(7, &[TERA, 4]);
    assert_eq!(sevens.sum().item(), 7 * 4 * TERA as i64);
    let mask = broadcast::<D, u8>(1, &[TERA]);
    assert_eq!(mask.sum().item(), TERA as i64);
    // Indices are checked once per distinct element: 2^40 copies of a bad one.
    let picks = broadcast::<D, i64>(7, &[TERA]);
    let err = Tensor::<D>::ones([4, 3]).try_index_select(0, &picks).unwrap_err();
    assert!(matches!(err, Error::Index { op: "index_select", index: 7, .. }), "{err}");
    assert_device_works::<D>();
}

// ---- 4. Integer and range edge cases

fn check_ranges_are_exact<D: Device>() {
    // torch.arange(2**63 - 3, 2**63 - 1) == [9223372036854775804, 9223372036854775805]
    let top = Tensor::<D, i64>::arange(i64::MAX - 2, i64::MAX);
    assert_eq!(top.to_vec(), vec![i64::MAX - 2, i64::MAX - 1]);
    // Values past 2^53 are exact (they would round through f64).
    let past = Tensor::<D, i64>::arange((1i64 << 53) + 1, (1i64 << 53) + 4).to_vec();
    assert_eq!(past, vec![(1 << 53) + 1, (1 << 53) + 2, (1 << 53) + 3]);
    assert_eq!(Tensor::<D, i64>::arange_step(i64::MIN, i64::MAX, i64::MAX).to_vec(), vec![i64::MIN, -1, i64::MAX - 1]);
    // torch.arange(0, 0.3, 0.1) has 3 elements; torch.arange(1, 2.5, 0.5) has 3.
    assert_eq!(Tensor::<D>::arange_step(0.0, 0.3, 0.1).elem_count(), 3);
    assert_eq!(Tensor::<D, f64>::arange_step(1.0, 2.5, 0.5).to_vec(), vec![1.0, 1.5, 2.0]);
    // Bad ranges are argument errors naming arange and the values.
    let err = Tensor::<D, u8>::try_arange(250, 260).unwrap_err();
    assert!(matches!(err, Error::Argument { op: "arange", .. }), "{err}");
    assert!(err.to_string().contains("259"), "{err}");
    let err = Tensor::<D>::try_arange_step(0.0, 1e300, 1e-300).unwrap_err();
    assert!(matches!(err, Error::Argument { op: "arange", .. }) && err.to_string().contains("2^63 - 1"), "{err}");
    let err = Tensor::<D, i64>::try_arange_step(0, 5, 0).unwrap_err();
    assert_eq!(err.to_string(), format!("arange on {}: the step must be non-zero, got 0", D::name()));
    let err = Tensor::<D>::try_linspace(0.0, 1.0, usize::MAX).unwrap_err();
    assert_shape_error(err, "linspace", &usize::MAX.to_string());
    // Out-of-range narrow arithmetic does not wrap.
    let x = Tensor::<D>::zeros([4]);
    assert_shape_error(x.try_narrow(0, usize::MAX, 2).unwrap_err(), "narrow", "out of range");
    assert_device_works::<D>();
}

// ---- 5. PyTorch's semantics: sums of masks, true division, rank-0 axes

fn check_pytorch_semantics<D: Device>() {
    // (pred == labels).sum() counts past 255 in int64, as PyTorch's does.
    let pred = Tensor::<D, i64>::zeros([300]);
    let correct: Tensor<D, i64> = pred.eq(&Tensor::<D, i64>::zeros([300])).sum();
    assert_eq!(correct.item(), 300);
    let mask = Tensor::<D, u8>::ones([2, 300]);
    assert_eq!(mask.sum_axis(1).to_vec(), vec![300i64, 300]);
    assert_eq!(mask.sum_keepdim(0).to_vec2(), vec![vec![2i64; 300]]);
    // torch.tensor([7, -7, 1]) / torch.tensor([2, 2, 0]) == [3.5, -3.5, inf] (float32)
    let a = Tensor::<D, i64>::from_vec(vec![7, -7, 1], [3]);
    let b = Tensor::<D, i64>::from_vec(vec![2, 2, 0], [3]);
    let q: Tensor<D, f32> = &a / &b;
    assert_eq!(q.to_vec(), vec![3.5, -3.5, f32::INFINITY]);
    assert_eq!((&a / 2).to_vec(), vec![3.5, -3.5, 0.5]);
    assert_eq!((10 / &b).to_vec(), vec![5.0, 5.0, f32::INFINITY]);
    // torch.div(a, 2, rounding_mode="trunc") == [3, -3, 0]; "floor" == [3, -4, 0]
    assert_eq!(a.try_div_trunc_scalar(2).unwrap().to_vec(), vec![3, -3, 0]);
    assert_eq!(a.try_div_floor_scalar(2).unwrap().to_vec(), vec![3, -4, 0]);
    // Integer division by zero is an error in every form, scalar-first included.
    for (err, op) in [
        (a.try_div_trunc(&b).unwrap_err(), "div_trunc"),
        (a.try_div_floor(&b).unwrap_err(), "div_floor"),
        (a.try_div_trunc_scalar(0).unwrap_err(), "div_trunc"),
        (b.try_rdiv_floor_scalar(10).unwrap_err(), "div_floor"),
        (b.try_rdiv_trunc_scalar(10).unwrap_err(), "div_trunc"),
    ] {
        assert!(matches!(err, Error::Argument { op: o, .. } if o == op), "{err}");
        assert_eq!(err.to_string(), format!("{op} on {}: integer division by zero", D::name()));
    }
    assert_eq!(b.try_rdiv_scalar(10).unwrap().to_vec(), vec![5.0, 5.0, f32::INFINITY]);
    assert_eq!(b.try_rsub_scalar(10).unwrap().to_vec(), vec![8, 8, 10]);
    // Rank-0 tensors accept axis 0 and -1 (torch.tensor(3.).sum(0) == 3,
    // .softmax(-1) == 1, .log_softmax(0) == 0, .argmax(0) == 0).
    let s = Tensor::<D>::scalar(3.0);
    assert_eq!(s.sum_axis(0).dims(), &[] as &[usize]);
    assert_eq!(s.sum_axis(-1).item(), 3.0);
    assert_eq!(s.sum_keepdim(0).dims(), &[] as &[usize]);
    assert_eq!(s.mean_axis(0).item(), 3.0);
    assert_eq!(s.max_axis(-1).item(), 3.0);
    assert_eq!(s.softmax(-1).item(), 1.0);
    assert_eq!(s.log_softmax(0).item(), 0.0);
    assert_eq!(s.argmax(0).item(), 0);
    assert_eq!(s.transpose(0, -1).item(), 3.0);
    assert_eq!(s.squeeze(0).item(), 3.0);
    let err = s.try_sum_axis(1).unwrap_err();
    assert!(matches!(err, Error::Axis { op: "sum_axis", axis: 1, .. }), "{err}");
    assert!(err.to_string().contains("rank-0 tensor (expected 0 or -1"), "{err}");
    let err = s.try_narrow(0, 0, 1).unwrap_err();
    assert_shape_error(err, "narrow", "rank-0");
    assert_device_works::<D>();
}

// ---- 6. Empty tensors whose other axes are huge: a product of those axes
// overflows, but the tensor has no elements, so every op gives an empty
// result or, where a result would need a huge axis, a shape error

fn check_empty_tensors_with_huge_axes<D: Device>() {
    const HUGE: usize = 1 << 62;
    let x = Tensor::<D>::zeros([0, HUGE, 4]);
    let empty_with_dims = |t: Result<Tensor<D>, Error>, dims: &[usize], what: &str| {
        let t = t.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(t.dims(), dims, "{what}");
        assert!(t.to_vec().is_empty(), "{what}");
    };
    empty_with_dims(Tensor::try_cat(&[&x, &x], 0), &[0, HUGE, 4], "cat axis 0");
    empty_with_dims(Tensor::try_cat(&[&x, &x], 2), &[0, HUGE, 8], "cat axis 2");
    empty_with_dims(Tensor::try_stack(&[&x, &x], 1), &[0, 2, HUGE, 4], "stack");
    empty_with_dims(x.try_sum_axis(2), &[0, HUGE], "sum_axis 2");
    empty_with_dims(x.try_softmax(1), &[0, HUGE, 4], "softmax");
    empty_with_dims(x.try_matmul(&Tensor::<D>::ones([4, 3])), &[0, HUGE, 3], "matmul");
    empty_with_dims(x.try_index_select(2, &Tensor::<D, i64>::from_vec(vec![0, 3], [2])), &[0, HUGE, 2], "index_select");
    empty_with_dims(x.try_flatten(0, 1), &[0, 4], "flatten of the empty axes");
    empty_with_dims(x.try_add(&broadcast::<D, f32>(1.0, &[HUGE, 1])), &[0, HUGE, 4], "add");
    // [HUGE, 4] would be 2^64 elements: no tensor can have that shape.
    assert_shape_error(x.try_sum_axis(0).unwrap_err(), "sum_axis", "[0, 4611686018427387904, 4]");
    assert_shape_error(x.try_flatten(1, 2).unwrap_err(), "flatten", "2^63 - 1");
    assert_device_works::<D>();
}

device_tests! {
    overflowing_shapes_are_shape_errors => check_overflowing_shapes_are_shape_errors,
    impossible_allocations_are_errors => check_impossible_allocations_are_errors,
    broadcast_reductions_do_not_materialise => check_broadcast_reductions_do_not_materialise,
    ranges_are_exact => check_ranges_are_exact,
    pytorch_semantics => check_pytorch_semantics,
    empty_tensors_with_huge_axes => check_empty_tensors_with_huge_axes,
}

// ---- Properties: any shape near or past the limits is an error or a valid tensor, never a crash

/// Dimensions drawn around the interesting boundaries: 0, 1, small, 2^31,
/// 2^32, 2^62, `isize::MAX` and `usize::MAX`.
fn edge_dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1),
        2..5usize,
        Just(1 << 31),
        Just(1 << 32),
        Just(1 << 62),
        Just(isize::MAX as usize),
        Just(usize::MAX),
    ]
}

device_proptests! {
    cases = 256;

    /// Every creation function and a view of each op family either makes a
    /// tensor whose count is the exact product of its dimensions, or fails
    /// with a shape, out-of-memory or argument error: the product is
    /// computed independently in `u128` here.
    fn edge_shapes_never_crash<D>(dims in prop::collection::vec(edge_dim(), 0..4)) {
        let exact: Option<u128> = dims.iter().try_fold(1u128, |acc, &d| acc.checked_mul(d as u128));
        let exact = if dims.contains(&0) { Some(0) } else { exact };
        let fits = exact.is_some_and(|n| n <= isize::MAX as u128);
        // Views: free whatever the size, when the count fits.
        let view = Tensor::<D>::ones([1]).reshape(vec![1; dims.len()]).try_broadcast_to(dims.as_slice());
        prop_assert_eq!(view.is_ok(), fits, "broadcast_to {:?}", dims);
        if let Ok(view) = &view {
            prop_assert_eq!(view.elem_count() as u128, exact.unwrap());
            // The sum of a broadcast of ones is its count, without memory.
            if view.elem_count() > 0 && view.elem_count() < (1 << 24) {
                prop_assert_eq!(view.sum().item(), view.elem_count() as f32);
            }
            let wide = view.try_sum().map(|s| s.item());
            prop_assert!(wide.is_ok(), "sum of {:?}: {:?}", dims, wide);
        }
        // Creation: small counts succeed; anything else is a clean error. Counts
        // that could be granted lazily by an overcommitting allocator (a few
        // GiB) are left out: filling them would only cost time and memory.
        // (Under Miri only small ones: it stops at an allocation it cannot grant.)
        let decisive = exact.is_none_or(|n| n <= 1 << 20 || (n >= 1 << 45 && !cfg!(miri)));
        for result in decisive.then(|| [
            Tensor::<D, u8>::try_zeros(dims.as_slice()).map(|t| t.elem_count()),
            Tensor::<D, f64>::try_full(dims.as_slice(), 1.5).map(|t| t.elem_count()),
            Tensor::<D>::try_from_vec(vec![], dims.as_slice()).map(|t| t.elem_count()),
            Tensor::<D>::ones([1]).try_reshape(dims.as_slice()).map(|t| t.elem_count()),
        ]).into_iter().flatten() {
            match result {
                Ok(n) => prop_assert_eq!(n as u128, exact.unwrap()),
                Err(Error::Shape { .. } | Error::OutOfMemory { .. }) => {}
                Err(other) => prop_assert!(false, "unexpected error for {:?}: {}", dims, other),
            }
        }
        if exact.is_some_and(|n| n <= 64) {
            prop_assert!(Tensor::<D, u8>::try_zeros(dims.as_slice()).is_ok());
        }
    }
}

/// The exact element count of `dims` in `u128`, `None` past `2^63 - 1`.
fn exact_count(dims: &[usize]) -> Option<u128> {
    let n = if dims.contains(&0) { 0 } else { dims.iter().try_fold(1u128, |acc, &d| acc.checked_mul(d as u128))? };
    (n <= isize::MAX as u128).then_some(n)
}

/// Whether a result of `n` elements is worth materialising in a test: small,
/// or so large that every allocator refuses it at once.
fn decisive(n: Option<u128>) -> bool {
    n.is_none_or(|n| n <= 1 << 16 || (n >= 1 << 45 && !cfg!(miri)))
}

device_proptests! {
    cases = 256;

    /// Binary, comparison, `where_cond`, `matmul` and `cat` on broadcast views
    /// of edge-sized shapes: a correct result when the output can exist, a
    /// shape or out-of-memory error when it cannot, and never a crash.
    fn edge_shapes_through_every_op_family<D>(
        a in prop::collection::vec(edge_dim(), 0..3),
        b in prop::collection::vec(edge_dim(), 0..3),
    ) {
        let (Some(na), Some(_)) = (exact_count(&a), exact_count(&b)) else {
            return Ok(()); // not even a view of these exists (checked above)
        };
        let (x, y) = (broadcast::<D, f32>(2.0, &a), broadcast::<D, f32>(4.0, &b));
        let rank = a.len().max(b.len());
        let dim = |d: &[usize], i: usize| if i + d.len() >= rank { d[i + d.len() - rank] } else { 1 };
        let out: Option<Vec<usize>> = (0..rank)
            .map(|i| match (dim(&a, i), dim(&b, i)) {
                (p, q) if p == q => Some(p),
                (1, q) => Some(q),
                (p, 1) => Some(p),
                _ => None,
            })
            .collect();
        let expect = |result: devtensor::Result<Vec<f32>>, value: f32, what: &str| -> Result<(), TestCaseError> {
            match (&out, result) {
                (None, Err(Error::Shape { .. })) => {}
                (Some(dims), Ok(v)) => {
                    prop_assert_eq!(v.len() as u128, exact_count(dims).unwrap(), "{} {:?} {:?}", what, a, b);
                    prop_assert!(v.iter().all(|&e| e == value), "{} {:?} {:?}", what, a, b);
                }
                (Some(dims), Err(Error::Shape { .. } | Error::OutOfMemory { .. })) => {
                    prop_assert!(exact_count(dims).is_none_or(|n| n >= 1 << 45), "{} {:?} {:?}", what, a, b);
                }
                (_, other) => prop_assert!(false, "{} {:?} {:?}: {:?}", what, a, b, other.map(|v| v.len())),
            }
            Ok(())
        };
        if decisive(out.as_deref().and_then(exact_count)) {
            expect(x.try_add(&y).and_then(|t| t.try_to_vec()), 6.0, "add")?;
            expect(x.try_div(&y).and_then(|t| t.try_to_vec()), 0.5, "div")?;
            expect(x.try_lt(&y).and_then(|t| t.try_to_dtype::<f32>()).and_then(|t| t.try_to_vec()), 1.0, "lt")?;
            let mask = broadcast::<D, u8>(0, &a);
            expect(mask.try_where_cond(&x, &y).and_then(|t| t.try_to_vec()), 4.0, "where_cond")?;
        }
        // cat along a new leading axis of size 1 each: 2 * na elements when a == b.
        if a == b && decisive(na.checked_mul(2)) {
            let joined = Tensor::try_stack(&[&x, &x], 0).and_then(|t| t.try_to_vec());
            match joined {
                Ok(v) => prop_assert!(v.len() as u128 == 2 * na && v.iter().all(|&e| e == 2.0)),
                Err(Error::Shape { .. } | Error::OutOfMemory { .. }) => prop_assert!(2 * na >= 1 << 45),
                Err(other) => prop_assert!(false, "stack {:?}: {}", a, other),
            }
        }
        // matmul of [m, k] by [k, n] views: m * n outputs of k products each.
        if let ([m, k], [k2, n]) = (a.as_slice(), b.as_slice()) {
            let work = (*m as u128).saturating_mul(*n as u128).saturating_mul(*k as u128);
            let impossible = exact_count(&[*m, *n]).is_none_or(|c| c >= 1 << 45);
            let outputs = exact_count(&[*m, *n]).unwrap_or(u128::MAX);
            if k == k2 && (work > 1 << 16 || outputs > 1 << 16) && !impossible {
                return Ok(()); // a valid product too long or too large to compute here
            }
            match x.try_matmul(&y) {
                Err(Error::Shape { .. }) if k != k2 => {}
                Err(Error::Shape { .. } | Error::OutOfMemory { .. }) => prop_assert!(impossible, "matmul {:?} {:?}", a, b),
                Ok(p) => {
                    let v = p.to_vec();
                    prop_assert!(v.len() == m * n && v.iter().all(|&e| e == 8.0 * *k as f32), "matmul {:?} {:?}", a, b);
                }
                Err(other) => prop_assert!(false, "matmul {:?} {:?}: {}", a, b, other),
            }
        }
    }
}
