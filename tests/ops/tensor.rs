//! Creation, read-back, element-type casts, device moves and views, checked
//! against plain index arithmetic on random shapes.

use crate::common::*;
use devtensor::{Cpu, Cuda, Device, Element, Error, Generator, Tensor, manual_seed};
use proptest::prelude::*;

fn check_views<D: Device>(dims: &[usize], data: &[f64], v: Variant) {
    let t = tensor_with::<D, f64>(data, dims, v);
    assert_eq!(t.to_vec(), data, "read-back");
    let rank = dims.len();

    // permute / transpose: out[i] = in[perm^-1 applied to i].
    if rank >= 2 {
        let axes: Vec<usize> = (0..rank).rev().collect();
        let p = t.permute(&axes);
        let pdims: Vec<usize> = axes.iter().map(|&a| dims[a]).collect();
        let expected: Vec<f64> = indices(&pdims)
            .map(|i| {
                let mut src = vec![0; rank];
                for (k, &a) in axes.iter().enumerate() {
                    src[a] = i[k];
                }
                data[ravel(&src, dims)]
            })
            .collect();
        assert_eq!(p.dims(), pdims.as_slice());
        assert_eq!(p.to_vec(), expected, "permute");
        assert_eq!(
            t.transpose(0, -1).to_vec(),
            t.permute({
                let mut a: Vec<usize> = (0..rank).collect();
                a.swap(0, rank - 1);
                a
            })
            .to_vec()
        );
        // Reshaping a permuted view copies in logical order.
        assert_eq!(p.reshape([p.elem_count()]).to_vec(), expected);
        assert_eq!(p.contiguous().to_vec(), expected);
        assert!(p.contiguous().is_contiguous());
    }

    // narrow on every axis: out[i] = in[i with axis shifted by start].
    for axis in 0..rank {
        let size = dims[axis];
        let (start, len) = (size / 3, size - size / 3 - size / 4);
        let n = t.narrow(axis as isize, start, len);
        let mut ndims = dims.to_vec();
        ndims[axis] = len;
        let expected: Vec<f64> = indices(&ndims)
            .map(|mut i| {
                i[axis] += start;
                data[ravel(&i, dims)]
            })
            .collect();
        assert_eq!(n.to_vec(), expected, "narrow axis {axis}");
        if size > 0 {
            let s = t.select(axis as isize, size - 1);
            let sel: Vec<f64> = indices(dims).zip(data).filter(|(i, _)| i[axis] == size - 1).map(|(_, &x)| x).collect();
            assert_eq!(s.to_vec(), sel, "select axis {axis}");
            assert_eq!(s.rank(), rank - 1);
        }
    }

    // unsqueeze / squeeze / flatten keep the elements in order.
    for axis in 0..=rank {
        let u = t.unsqueeze(axis as isize);
        assert_eq!(u.rank(), rank + 1);
        assert_eq!(u.dims()[axis], 1);
        assert_eq!(u.to_vec(), data);
        assert_eq!(u.squeeze(axis as isize).dims(), dims);
    }
    assert_eq!(t.flatten_all().to_vec(), data);
    assert_eq!(t.squeeze_all().to_vec(), data);
}

device_proptests! {
    cases = 96;

    fn views_match_index_arithmetic<D>(dims in shape_maybe_empty(4, 5), seed in prop::collection::vec(-10.0..10.0f64, 1..16), v in variant()) {
        let data: Vec<f64> = (0..dims.iter().product()).map(|i| seed[i % seed.len()] + i as f64).collect();
        check_views::<D>(&dims, &data, v);
    }

    fn broadcast_to_repeats_elements<D>((small, big) in broadcast_pair(4, 4), v in variant()) {
        prop_assume!(broadcast_dims(&small, &big).as_deref() == Some(big.as_slice()));
        let data: Vec<f64> = (0..small.iter().product()).map(|i| i as f64).collect();
        let t = tensor_with::<D, f64>(&data, &small, v).broadcast_to(big.clone());
        let expected: Vec<f64> = indices(&big).map(|i| broadcast_read(&data, &small, &i)).collect();
        prop_assert_eq!(t.to_vec(), expected);
    }

    /// split, split_sizes, chunk and unbind cut the axis into consecutive
    /// pieces of the sizes PyTorch gives (a plain count of them here), whose
    /// elements are those of the matching index range; gradients flow back
    /// through the pieces.
    fn pieces_match_index_arithmetic<D>(
        dims in prop::collection::vec(0usize..=5, 1..=3),
        axis in 0usize..3,
        size in 1usize..=6,
        v in variant(),
    ) {
        let axis = axis % dims.len();
        let len = dims[axis];
        let data: Vec<f64> = (0..dims.iter().product()).map(|i| i as f64).collect();
        let t = tensor_with::<D, f64>(&data, &dims, v);
        let range_of = |start: usize, n: usize| -> Vec<f64> {
            indices(&dims).zip(&data).filter(|(i, _)| (start..start + n).contains(&i[axis])).map(|(_, &x)| x).collect()
        };
        // Sizes by a plain count: pieces of `size` while elements remain.
        let mut expected = Vec::new();
        let mut left = len;
        while left > 0 {
            expected.push(left.min(size));
            left -= left.min(size);
        }
        let check = |pieces: Vec<Tensor<D, f64>>, sizes: &[usize], what: &str| {
            assert_eq!(pieces.len(), sizes.len(), "{what}: number of pieces");
            let mut start = 0;
            for (piece, &n) in pieces.iter().zip(sizes) {
                assert_eq!(piece.dims()[axis], n, "{what}");
                assert_eq!(piece.to_vec(), range_of(start, n), "{what}: piece at {start}");
                start += n;
            }
        };
        let a = axis as isize;
        check(t.split(size, a), if len == 0 { &[0] } else { &expected }, "split");
        check(t.split_sizes(&expected, a), &expected, "split_sizes");
        // chunk(k) cuts pieces of ceil(len / k); k empty pieces for len 0.
        let chunk_sizes: Vec<usize> = if len == 0 { vec![0; size] } else {
            let step = len.div_ceil(size);
            (0..len).step_by(step).map(|s| step.min(len - s)).collect()
        };
        check(t.chunk(size, a), &chunk_sizes, "chunk");
        let slices = t.unbind(a);
        assert_eq!(slices.len(), len);
        for (k, slice) in slices.iter().enumerate() {
            assert_eq!(slice.rank(), dims.len() - 1);
            assert_eq!(slice.to_vec(), range_of(k, 1), "unbind {k}");
        }
        // Pieces joined in reverse order: the gradient is that permutation.
        if !data.is_empty() {
            let x = Tensor::<D, f64>::from_vec(data.clone(), dims.clone());
            let joined = |xs: &[Tensor<D, f64>]| {
                let pieces = xs[0].split(size, a);
                Tensor::cat(&pieces.iter().rev().collect::<Vec<_>>(), a)
            };
            gradcheck::gradcheck("split", std::slice::from_ref(&x), joined);
            gradcheck::gradgradcheck("split", &[x], |xs| joined(xs).square());
        }
    }

    /// expand keeps the sizes given as -1 and broadcasts the rest, like
    /// broadcast_to with those sizes written out.
    fn expand_matches_broadcast_to<D>((small, big) in broadcast_pair(4, 4), keep in prop::collection::vec(any::<bool>(), 4)) {
        prop_assume!(broadcast_dims(&small, &big).as_deref() == Some(big.as_slice()));
        let data: Vec<f64> = (0..small.iter().product()).map(|i| i as f64).collect();
        let t = Tensor::<D, f64>::from_slice(&data, small.as_slice());
        let lead = big.len() - small.len();
        let sizes: Vec<isize> = big.iter().enumerate().map(|(i, &d)| {
            if i >= lead && keep[i] && small[i - lead] == d { -1 } else { d as isize }
        }).collect();
        let expected: Vec<f64> = indices(&big).map(|i| broadcast_read(&data, &small, &i)).collect();
        let got = t.expand(&sizes);
        prop_assert_eq!(got.dims(), big.as_slice());
        prop_assert_eq!(got.to_vec(), expected);
    }

    fn casts_follow_as_semantics<D>((dims, data) in shaped_data(3, 4), v in variant()) {
        let t = tensor_with::<D, f64>(&data, &dims, v);
        prop_assert_eq!(t.to_dtype::<f32>().to_vec(), data.iter().map(|&x| x as f32).collect::<Vec<_>>());
        prop_assert_eq!(t.to_dtype::<i64>().to_vec(), data.iter().map(|&x| x as i64).collect::<Vec<_>>());
        prop_assert_eq!(t.to_dtype::<u8>().to_vec(), data.iter().map(|&x| x as u8).collect::<Vec<_>>());
        let labels = t.to_dtype::<i64>();
        prop_assert_eq!(labels.to_dtype::<f32>().to_vec(), data.iter().map(|&x| x as i64 as f32).collect::<Vec<_>>());
    }

    fn arange_matches_a_counting_loop<D>(start in -50i64..50, len in 0usize..40, step in 1i64..5) {
        let end = start + len as i64 * step;
        let t = Tensor::<D, i64>::arange_step(start, end, step);
        let expected: Vec<i64> = (0..len as i64).map(|i| start + i * step).collect();
        prop_assert_eq!(t.to_vec(), expected);
        let down = Tensor::<D, i64>::arange_step(end, start, -step).to_vec();
        prop_assert_eq!(down.len(), len);
    }
}

fn constructors_fill_as_documented<D: Device>() {
    assert_eq!(Tensor::<D>::full([2, 2], 1.5).to_vec(), vec![1.5; 4]);
    assert_eq!(Tensor::<D, i64>::eye(3).to_vec2(), vec![vec![1, 0, 0], vec![0, 1, 0], vec![0, 0, 1]]);
    assert_eq!(Tensor::<D, f64>::linspace(-1.0, 1.0, 3).to_vec(), vec![-1.0, 0.0, 1.0]);
    assert_eq!(Tensor::<D, f64>::linspace(0.0, 1.0, 1).to_vec(), vec![0.0]);
    assert!(Tensor::<D, f64>::linspace(0.0, 1.0, 0).to_vec().is_empty());
    let l = Tensor::<D, f64>::linspace(0.0, 0.3, 4).to_vec();
    assert_close(&l, &[0.0, 0.1, 0.2, 0.3], 1e-15, 0.0);
    assert_eq!(l[3], 0.3, "the last point is exactly `end`");
    assert_eq!(Tensor::<D>::arange(0.0, 2.5).to_vec(), vec![0.0, 1.0, 2.0]);
    let x = Tensor::<D, u8>::ones([2, 3]);
    assert_eq!(x.zeros_like().to_vec(), vec![0; 6]);
    assert_eq!(x.full_like(7).dims(), &[2, 3]);
}

fn random_tensors_are_reproducible_and_distributed<D: Device>() {
    manual_seed(3);
    let a = Tensor::<D, f64>::randn([20_000]);
    manual_seed(3);
    let b = Tensor::<D, f64>::randn([20_000]);
    assert_eq!(a.to_vec(), b.to_vec());
    let v = a.to_vec();
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
    // Standard errors: 0.007 for the mean, 0.01 for the variance.
    assert!(mean.abs() < 0.04 && (var - 1.0).abs() < 0.05, "mean {mean}, var {var}");
    let u = Tensor::<D, f64>::rand_with([20_000], &mut Generator::new(9)).to_vec();
    assert!(u.iter().all(|x| (0.0..1.0).contains(x)));
    let umean = u.iter().sum::<f64>() / u.len() as f64;
    assert!((umean - 0.5).abs() < 0.01, "uniform mean {umean}");
    let other = Tensor::<D, f64>::rand_with([4], &mut Generator::new(10)).to_vec();
    assert_ne!(u[..4], other[..]);
    // f32 draws are the f64 draws rounded: same seed, same numbers.
    let f = Tensor::<D, f32>::rand_with([4], &mut Generator::new(9)).to_vec();
    assert_eq!(f, u[..4].iter().map(|&x| x as f32).collect::<Vec<_>>());
}

/// The fraction of `draws` equal to `value`.
fn share<E: PartialEq>(draws: &[E], value: E) -> f64 {
    draws.iter().filter(|&d| *d == value).count() as f64 / draws.len() as f64
}

/// `randint`, `bernoulli`, `normal` (of scalars and of tensors), `empty`
/// and `rand`'s half types: each
/// draw's range, frequencies within 5 standard errors of the
/// distribution's (seeded, so the same numbers every run), the same draws
/// on every device from one seed, and PyTorch's refusals.
fn samplers_draw_from_their_distributions<D: Device>() {
    use devtensor::bf16;
    let g = |seed: u64| Generator::new(seed);
    let dice = Tensor::<D, i64>::randint_with(3, 9, [30_000], &mut g(5)).to_vec();
    assert_eq!(dice, Tensor::<Cpu, i64>::randint_with(3, 9, [30_000], &mut g(5)).to_vec(), "one seed, one tensor");
    assert!(dice.iter().all(|d| (3..9).contains(d)));
    // Each face 1/6, standard error 0.0022.
    for face in 3..9 {
        assert!((share(&dice, face) - 1.0 / 6.0).abs() < 0.011, "face {face}: {}", share(&dice, face));
    }
    let bytes = Tensor::<D, u8>::randint_with(250, 256, [1000], &mut g(6)).to_vec();
    assert!(bytes.iter().all(|&b| b >= 250) && bytes.contains(&255));
    assert!(Tensor::<D, u8>::try_randint_with(0, 257, [1], &mut g(6)).is_err());
    assert!(Tensor::<D, i64>::try_randint_with(2, 2, [1], &mut g(6)).unwrap_err().to_string().contains("low < high"));
    let whole = Tensor::<D, f32>::randint_with(-4, 4, [100], &mut g(7)).to_vec();
    assert!(whole.iter().all(|&x| x.fract() == 0.0 && (-4.0..4.0).contains(&x)));

    let p = Tensor::<D, f64>::from_vec([0.0, 1.0, 0.3].repeat(20_000), [20_000, 3]);
    let draws = p.bernoulli_with(&mut g(8));
    let columns: Vec<Vec<f64>> = (0..3).map(|c| draws.select(1, c).to_vec()).collect();
    assert!(columns[0].iter().all(|&x| x == 0.0) && columns[1].iter().all(|&x| x == 1.0));
    // 0.3: standard error 0.0032.
    assert!((share(&columns[2], 1.0) - 0.3).abs() < 0.016, "{}", share(&columns[2], 1.0));
    // A small probability in bf16 keeps its digits (the draws are f64).
    let rare = Tensor::<D, bf16>::full([200_000], bf16::from_f64(0.001)).bernoulli_with(&mut g(9)).to_vec();
    assert!((share(&rare, bf16::ONE) - 0.001).abs() < 0.0004, "{}", share(&rare, bf16::ONE));
    for bad in [1.5, -0.25, f64::NAN] {
        let err = Tensor::<D, f64>::from_vec(vec![0.5, bad], [2]).try_bernoulli_with(&mut g(1)).unwrap_err();
        assert!(err.to_string().contains("expected probabilities in [0, 1]"), "{err}");
    }

    let x = Tensor::<D, f64>::normal_with(3.0, 2.0, [40_000], &mut g(10)).to_vec();
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / x.len() as f64;
    // Standard errors 0.01 (mean) and 0.028 (variance 4).
    assert!((mean - 3.0).abs() < 0.05 && (var - 4.0).abs() < 0.14, "mean {mean}, var {var}");
    assert_eq!(Tensor::<D, f64>::normal_with(-1.0, 0.0, [3], &mut g(1)).to_vec(), [-1.0; 3]);
    for bad in [-1.0, f64::NAN] {
        assert!(
            Tensor::<D, f64>::try_normal_with(0.0, bad, [1], &mut g(1)).unwrap_err().to_string().contains("std >= 0.0")
        );
    }
    // Tensors of means and spreads: full ones give `normal_with`'s numbers;
    // broadcast, every pair's draws have its moments; a spread of 0 is the
    // mean itself; no gradient is recorded, PyTorch's being zero.
    let full = |v: f64, n: usize| Tensor::<D, f64>::full([n], v);
    assert_eq!(
        Tensor::normal_tensor_with(&full(3.0, 500), &full(2.0, 500), &mut g(10)).to_vec(),
        Tensor::<D, f64>::normal_with(3.0, 2.0, [500], &mut g(10)).to_vec()
    );
    let n = 20_000;
    let means = Tensor::<D, f64>::from_vec([vec![-5.0; n], vec![5.0; n]].concat(), [2, 1, n]).requires_grad();
    let spreads = Tensor::<D, f64>::from_vec(vec![0.5, 2.0, 0.0], [3, 1]);
    let x = Tensor::normal_tensor_with(&means, &spreads, &mut g(12));
    assert_eq!(x.dims(), &[2, 3, n]);
    assert!(!x.tracks_grad(), "normal records no gradient");
    for (i, mu) in [-5.0, 5.0].into_iter().enumerate() {
        for (j, sigma) in [0.5f64, 2.0, 0.0].into_iter().enumerate() {
            let draws = x.select(0, i).select(0, j).to_vec();
            let mean = draws.iter().sum::<f64>() / n as f64;
            let var = draws.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
            // Standard errors sigma / 141 (mean) and sigma² / 100 (variance).
            let (se_mean, se_var) = (sigma / (n as f64).sqrt(), sigma * sigma * (2.0 / n as f64).sqrt());
            assert!((mean - mu).abs() <= 5.0 * se_mean, "N({mu}, {sigma}²): mean {mean}");
            assert!((var - sigma * sigma).abs() <= 5.0 * se_var, "N({mu}, {sigma}²): variance {var}");
        }
    }
    let x32 = Tensor::<D, f32>::normal_tensor_with(&Tensor::full([4], 1.5), &Tensor::scalar(0.0), &mut g(3));
    assert_eq!(x32.to_vec(), [1.5; 4]);
    for bad in [-1.0, f64::NAN] {
        let err = Tensor::try_normal_tensor_with(&full(0.0, 2), &full(bad, 2), &mut g(1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("normal on {}: expected all elements of std >= 0.0, found {bad}", D::name())
        );
    }
    let err = Tensor::try_normal_tensor_with(&full(0.0, 2), &full(1.0, 3), &mut g(1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("normal on {}: shapes [2] and [3]: the mean and the std do not broadcast together", D::name())
    );
    assert_eq!(Tensor::<D, f64>::empty([2, 0, 3]).dims(), &[2, 0, 3]);

    // bf16 rounds about one draw in 512 up to 1: those are drawn again.
    let u = Tensor::<D, bf16>::rand_with([100_000], &mut g(11)).to_vec();
    assert!(u.iter().all(|&x| x < bf16::ONE && x >= bf16::ZERO));
}

/// `one_hot` against a plain loop, on empty labels too, and its refusals.
fn one_hot_matches_a_loop<D: Device>() {
    let labels = [3, 0, 2, 2, 1, 0];
    let got = Tensor::<D, i64>::from_vec(labels.to_vec(), [2, 3]).one_hot(4);
    assert_eq!(got.dims(), &[2, 3, 4]);
    let want: Vec<i64> = labels.iter().flat_map(|&l| (0..4).map(move |c| i64::from(c == l))).collect();
    assert_eq!(got.to_vec(), want);
    assert_eq!(Tensor::<D, i64>::zeros([0]).one_hot(5).dims(), &[0, 5]);
    for bad in [-1, 4] {
        let err = Tensor::<D, i64>::from_vec(vec![0, bad], [2]).try_one_hot(4).unwrap_err();
        assert!(err.to_string().contains("class values must be in 0..4"), "{err}");
    }
}

fn moving_to_the_same_device_shares_storage<D: Device>() {
    let x = Tensor::<D>::from_vec(vec![1.0, 2.0], [2]);
    let y = x.to::<D>();
    assert_eq!(y.to_vec(), x.to_vec());
    // Sharing is observable through in-place value semantics: writing `y`
    // must copy because `x` still holds the storage.
    let mut y = y;
    y += 1.0;
    assert_eq!(x.to_vec(), vec![1.0, 2.0]);
}

/// What a program sees for a GPU it cannot use, checked on `Cuda<7>` (an
/// ordinal neither the emulated driver, 2 devices, nor the machines this
/// runs on have) and on `Cuda<0>`, `Cuda<1>` where they are unavailable, so
/// the test holds before and after the CUDA backend lands.
fn unavailable_gpu_is_an_error_never_a_panic<const N: usize>() {
    let err = Cuda::<N>::try_init().unwrap_err();
    let name = format!("Cuda<{N}>");
    assert!(matches!(err, Error::DeviceUnavailable { ref device, .. } if *device == name), "{err}");
    let x = Tensor::<Cpu>::ones([2]);
    let moved = x.try_to::<Cuda<N>>();
    assert!(matches!(moved, Err(Error::DeviceUnavailable { .. })));
    assert!(Tensor::<Cuda<N>, i64>::try_from_vec(vec![1], [1]).is_err());
    assert!(Tensor::<Cuda<N>>::try_randn([3]).is_err());
    assert!(Tensor::<Cuda<N>>::try_eye(2).is_err());
    let message = moved.err().unwrap().to_string();
    assert!(message.starts_with(&format!("device {name} is unavailable: ")), "{message}");
}

#[test]
fn cuda_without_a_gpu_is_an_error_never_a_panic() {
    assert!(!Cuda::<7>::is_available());
    unavailable_gpu_is_an_error_never_a_panic::<7>();
    if !Cuda::<0>::is_available() {
        unavailable_gpu_is_an_error_never_a_panic::<0>();
    }
    if !Cuda::<1>::is_available() {
        unavailable_gpu_is_an_error_never_a_panic::<1>();
    }
}

#[test]
#[should_panic(expected = "device Cuda<7> is unavailable")]
fn plain_move_to_missing_gpu_panics_with_the_error_text() {
    let _ = Tensor::<Cpu>::ones([2]).to::<Cuda<7>>();
}

/// Host to `D` and back, at [`LARGE_SIZES`], strided, in every element type,
/// and empty; then on to `Cuda<1>` and back when that GPU is there too
/// (peer copy or through the host). Nothing may change on the way.
fn transfers_round_trip<D: Device>() {
    fn round_trip<D: Device, E: Element>(data: &[E], dims: &[usize], v: Variant) {
        let host = tensor_with::<Cpu, E>(data, dims, v);
        let there = host.to::<D>();
        assert_eq!(there.dims(), dims);
        assert_eq!(there.to_vec(), data, "Cpu -> {} ({v:?}, {dims:?})", D::name());
        let back = there.to::<Cpu>();
        assert_eq!(back.to_vec(), data, "{} -> Cpu", D::name());
        // A view made on the device moves as its logical contents.
        if dims.len() == 2 {
            assert_eq!(there.t().to::<Cpu>().to_vec(), host.t().contiguous().to_vec(), "transposed view");
        }
        if Cuda::<1>::is_available() {
            let other = there.to::<Cuda<1>>();
            assert_eq!(other.to_vec(), data, "{} -> Cuda<1>", D::name());
            assert_eq!(other.to::<D>().to_vec(), data, "Cuda<1> -> {}", D::name());
        }
    }
    for n in LARGE_SIZES {
        let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
        round_trip::<D, f32>(&data, &[n], Variant::Narrowed);
        let wide: Vec<i64> = (0..n as i64).map(|i| i * 1_000_003 - (1 << 40)).collect();
        round_trip::<D, i64>(&wide, &[n], Variant::Contiguous);
    }
    let bytes: Vec<u8> = (0..3 * 257).map(|i| (i % 256) as u8).collect();
    round_trip::<D, u8>(&bytes, &[3, 257], Variant::Permuted);
    let doubles: Vec<f64> = (0..70 * 3).map(|i| i as f64 / 3.0).collect();
    round_trip::<D, f64>(&doubles, &[70, 3], Variant::Narrowed);
    round_trip::<D, f32>(&[], &[0, 4], Variant::Contiguous);
    round_trip::<D, f64>(&[2.5], &[], Variant::Contiguous);
}

fn bad_arguments_name_op_shapes_and_device<D: Device>() {
    let x = Tensor::<D>::zeros([2, 3]);
    let cases: Vec<(Error, &str)> = vec![
        (
            Tensor::<D>::try_from_vec(vec![1.0; 5], [2, 3]).err().unwrap(),
            "from_vec on Cpu: shape [2, 3]: 5 elements were given for 6 places",
        ),
        (x.try_reshape([4]).err().unwrap(), "reshape on Cpu: shapes [2, 3] and [4]: 6 elements cannot be viewed as 4"),
        (
            x.try_transpose(0, 2).err().unwrap(),
            "transpose on Cpu: axis 2 is out of range for shape [2, 3] (expected an axis in -2..2)",
        ),
        (
            x.try_narrow(1, 2, 2).err().unwrap(),
            "narrow on Cpu: shape [2, 3]: elements 2..4 are out of range for axis 1 of size 3",
        ),
        (
            x.try_select(0, 2).err().unwrap(),
            "select on Cpu: index 2 is out of range for axis 0 of size 2 (shape [2, 3])",
        ),
        (
            x.try_permute([0, 0]).err().unwrap(),
            "permute on Cpu: shape [2, 3]: [0, 0] is not a permutation of the 2 axes",
        ),
        (
            x.t().try_view([6]).err().unwrap(),
            "view on Cpu: shapes [3, 2] and [6]: the tensor is not contiguous; call `.contiguous()` or use `reshape`",
        ),
        (
            x.try_unsqueeze(4).err().unwrap(),
            "unsqueeze on Cpu: axis 4 is out of range for shape [2, 3] (expected an axis in -2..2)",
        ),
        (x.try_item().err().unwrap(), "item on Cpu: shape [2, 3]: expected exactly one element, got 6"),
        (
            x.try_broadcast_to([3, 3]).err().unwrap(),
            "broadcast_to on Cpu: shapes [2, 3] and [3, 3]: the shape cannot be broadcast to the target",
        ),
        (Tensor::<D>::try_arange_step(0.0, 1.0, 0.0).err().unwrap(), "arange on Cpu: the step must be non-zero, got 0"),
        (
            Tensor::<D>::zeros([2, 2, 2]).try_t().err().unwrap(),
            "t on Cpu: shape [2, 2, 2]: expected rank 2 or less, got 3",
        ),
    ];
    for (err, text) in cases {
        // The expected texts are written for `Cpu`; other devices name themselves.
        assert_eq!(err.to_string().replace(&D::name(), "Cpu"), text);
    }
}

#[test]
#[should_panic(expected = "reshape on Cpu: shapes [2, 3] and [7]: 6 elements cannot be viewed as 7")]
fn plain_forms_panic_with_the_try_text() {
    let _ = Tensor::<Cpu>::zeros([2, 3]).reshape([7]);
}

fn tensors_move_across_threads<D: Device>() {
    let x = Tensor::<D>::arange(0.0, 8.0);
    let handles: Vec<_> = (0..2)
        .map(|k| {
            let x = x.clone();
            std::thread::spawn(move || (&x * (k as f32 + 1.0)).to_vec())
        })
        .collect();
    let results: Vec<Vec<f32>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results[1], (0..8).map(|i| 2.0 * i as f32).collect::<Vec<_>>());
}

fn element_metadata<D: Device>() {
    assert_eq!(<u8 as Element>::DTYPE.size_in_bytes(), 1);
    assert_eq!(Tensor::<D, f64>::zeros([1]).dtype().name(), "f64");
}

device_tests! {
    constructors_fill_as_documented => constructors_fill_as_documented,
    random_tensors_are_reproducible_and_distributed => random_tensors_are_reproducible_and_distributed,
    samplers_draw_from_their_distributions => samplers_draw_from_their_distributions,
    one_hot_matches_a_loop => one_hot_matches_a_loop,
    moving_to_the_same_device_shares_storage => moving_to_the_same_device_shares_storage,
    transfers_round_trip => transfers_round_trip,
    bad_arguments_name_op_shapes_and_device => bad_arguments_name_op_shapes_and_device,
    tensors_move_across_threads => tensors_move_across_threads,
    element_metadata => element_metadata,
}
