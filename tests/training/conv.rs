//! Convolution and pooling against direct loops and finite differences, on
//! random geometries (stride, padding, dilation, groups), on every device;
//! and `F.unfold`/`F.fold`, which they are built on, the same way and
//! against PyTorch.

use crate::common::*;
use crate::gradcheck::{T, data, gradcheck};
use devtensor::nn::{
    AdaptiveAvgPool2d, AvgPool2d, BatchNorm2d, Conv2d, Fold, LayerNorm, MaxPool2d, Module, Unfold, fold, try_fold,
    try_unfold, unfold,
};
use devtensor::ops::conv::{AvgPoolOptions, Window2d, Window3d};
use devtensor::{Device, Error, Tensor};
use proptest::prelude::*;

/// A window with `stride`, `padding` and `dilation` on both axes.
fn window(kernel: [usize; 2], stride: usize, padding: usize, dilation: usize) -> Window2d {
    Window2d { kernel, stride: [stride; 2], padding: [padding; 2], dilation: [dilation; 2] }
}

/// `x[n][c][row][col]` of a dense `[N, C, H, W]` image, `None` in the padding.
fn pixel(x: &[f64], dims: [usize; 4], n: usize, c: usize, row: isize, col: isize) -> Option<f64> {
    let [_, cs, h, w] = dims;
    let inside = row >= 0 && col >= 0 && (row as usize) < h && (col as usize) < w;
    inside.then(|| x[((n * cs + c) * h + row as usize) * w + col as usize])
}

/// Applies `f` to the taps of every output position, by direct indexing.
fn windows(x: &[f64], dims: [usize; 4], win: Window2d, f: impl Fn(usize, usize, &[Option<f64>]) -> f64) -> Vec<f64> {
    let [n, c, h, w] = dims;
    let [oh, ow] = win.output_size([h, w]).unwrap();
    let mut out = Vec::new();
    for b in 0..n {
        for ch in 0..c {
            for y in 0..oh {
                for xo in 0..ow {
                    let mut taps = Vec::new();
                    for i in 0..win.kernel[0] {
                        for j in 0..win.kernel[1] {
                            let row = (y * win.stride[0] + i * win.dilation[0]) as isize - win.padding[0] as isize;
                            let col = (xo * win.stride[1] + j * win.dilation[1]) as isize - win.padding[1] as isize;
                            taps.push(pixel(x, dims, b, ch, row, col));
                        }
                    }
                    out.push(f(b, ch, &taps));
                }
            }
        }
    }
    out
}

#[derive(Debug, Clone)]
struct Geometry {
    n: usize,
    groups: usize,
    in_per_group: usize,
    out_per_group: usize,
    hw: [usize; 2],
    kernel: [usize; 2],
    stride: usize,
    padding: usize,
    dilation: usize,
}

fn geometry() -> impl Strategy<Value = Geometry> {
    (
        1..3usize,
        1..3usize,
        1..3usize,
        1..3usize,
        [1..6usize, 1..6usize],
        [1..4usize, 1..4usize],
        1..3usize,
        0..2usize,
        1..3usize,
    )
        .prop_map(|(n, groups, in_per_group, out_per_group, hw, kernel, stride, padding, dilation)| Geometry {
            n,
            groups,
            in_per_group,
            out_per_group,
            hw,
            kernel,
            stride,
            padding,
            dilation,
        })
        .prop_filter("the window fits", |g| {
            window(g.kernel, g.stride, g.padding, g.dilation).output_size(g.hw).is_some()
        })
}

/// PyTorch's transposed convolution in its scatter form: each input pixel
/// `x[b][c][i][j]` adds `x · w[c][o - group start][ki][kj]` to output
/// position `(i s - p + ki d, j s - p + kj d)` where that lies inside the
/// output, for the output channels of `c`'s group; then the bias.
#[allow(clippy::too_many_arguments)]
fn transposed_reference(
    x: &[f64],
    dims: [usize; 4],
    w: &[f64],
    wdims: [usize; 4],
    bias: &[f64],
    g: &Geometry,
    output_padding: usize,
) -> (Vec<f64>, [usize; 2]) {
    let [n, c, h, wd] = dims;
    let [_, out_per_group, kh, kw] = wdims;
    let o = out_per_group * g.groups;
    let size = |len: usize, k: usize| {
        ((len - 1) * g.stride + g.dilation * (k - 1) + output_padding + 1) as isize - 2 * g.padding as isize
    };
    let (oh, ow) = (size(h, kh), size(wd, kw));
    let (oh, ow) = (oh as usize, ow as usize);
    let mut out = vec![0.0; n * o * oh * ow];
    for b in 0..n {
        for ch in 0..c {
            let group = ch / (c / g.groups);
            for i in 0..h {
                for j in 0..wd {
                    let v = x[((b * c + ch) * h + i) * wd + j];
                    for oc in 0..out_per_group {
                        for ki in 0..kh {
                            for kj in 0..kw {
                                let row = (i * g.stride + ki * g.dilation) as isize - g.padding as isize;
                                let col = (j * g.stride + kj * g.dilation) as isize - g.padding as isize;
                                if row < 0 || col < 0 || row as usize >= oh || col as usize >= ow {
                                    continue;
                                }
                                let weight = w[((ch * out_per_group + oc) * kh + ki) * kw + kj];
                                let at = ((b * o + group * out_per_group + oc) * oh + row as usize) * ow + col as usize;
                                out[at] += v * weight;
                            }
                        }
                    }
                }
            }
        }
    }
    for (at, y) in out.iter_mut().enumerate() {
        *y += bias[at / (oh * ow) % o];
    }
    (out, [oh, ow])
}

device_proptests! {
    cases = 32;

    /// conv1d is conv2d over a height of 1: against conv2d on the same
    /// sequences as 1-pixel-high images, and by finite differences.
    fn conv1d_matches_conv2d_over_a_height_of_one<D>(g in geometry(), seed in any::<u64>(), v in variant()) {
        let (c, o, len, k) = (g.groups * g.in_per_group, g.groups * g.out_per_group, g.hw[1], g.kernel[1]);
        let dims = [g.n, c, len];
        let x = tensor_with::<D, f64>(&data(dims.iter().product(), seed), &dims, v);
        let wt = T::<D>::from_vec(data(o * g.in_per_group * k, !seed), [o, g.in_per_group, k]);
        let bias = T::<D>::from_vec(data(o, seed ^ 9), [o]);
        let win = devtensor::ops::conv::Window1d { stride: g.stride, padding: g.padding, dilation: g.dilation };
        let Some(_) = window([1, k], g.stride, 0, g.dilation).output_size([1, len + 2 * g.padding]) else {
            return Ok(());
        };
        let y = x.conv1d(&wt, Some(&bias), win, g.groups);
        // The reference: the image of height 1 under the same window across.
        let win2 = Window2d { kernel: [1, k], stride: [1, g.stride], padding: [0, g.padding], dilation: [1, g.dilation] };
        let image = T::<D>::from_vec(x.to_vec(), [g.n, c, 1, len]);
        let expected = image.conv2d(&T::<D>::from_vec(wt.to_vec(), [o, g.in_per_group, 1, k]), Some(&bias), win2, g.groups);
        prop_assert_eq!(y.dims(), &[g.n, o, expected.dims()[3]]);
        assert_close(&y.to_vec(), &expected.to_vec(), 1e-12, 1e-12);
        gradcheck("conv1d", &[x, wt, bias], |t| t[0].conv1d(&t[1], Some(&t[2]), win, g.groups));
    }

    /// conv_transpose1d is conv_transpose2d over a height of 1: against the
    /// scatter loop on 1-pixel-high images, and by finite differences.
    fn conv_transpose1d_matches_the_scatter_loop_over_a_height_of_one<D>(
        g in geometry(), output_padding in 0..2usize, seed in any::<u64>(), v in variant(),
    ) {
        let output_padding = output_padding.min(g.stride.max(g.dilation) - 1);
        let (c, o, len, k) = (g.groups * g.in_per_group, g.groups * g.out_per_group, g.hw[1], g.kernel[1]);
        if (len - 1) * g.stride + g.dilation * (k - 1) + output_padding < 2 * g.padding {
            return Ok(());
        }
        let x = tensor_with::<D, f64>(&data(g.n * c * len, seed), &[g.n, c, len], v);
        let wt = T::<D>::from_vec(data(c * g.out_per_group * k, !seed), [c, g.out_per_group, k]);
        let bias = T::<D>::from_vec(data(o, seed ^ 9), [o]);
        let win = devtensor::ops::conv::Window1d { stride: g.stride, padding: g.padding, dilation: g.dilation };
        let y = x.conv_transpose1d(&wt, Some(&bias), win, output_padding, g.groups);
        // PyTorch's scatter form along the one axis: input position i adds
        // x · w to output position i s - p + j d, then the bias.
        let out_len = (len - 1) * g.stride + g.dilation * (k - 1) + output_padding + 1 - 2 * g.padding;
        let (xs, ws, bs) = (x.to_vec(), wt.to_vec(), bias.to_vec());
        let mut expected: Vec<f64> = (0..g.n * o * out_len).map(|at| bs[at / out_len % o]).collect();
        for b in 0..g.n {
            for ch in 0..c {
                let group = ch / g.in_per_group;
                for i in 0..len {
                    for oc in 0..g.out_per_group {
                        for j in 0..k {
                            let Some(at) = (i * g.stride + j * g.dilation).checked_sub(g.padding).filter(|&p| p < out_len) else {
                                continue;
                            };
                            let weight = ws[(ch * g.out_per_group + oc) * k + j];
                            expected[(b * o + group * g.out_per_group + oc) * out_len + at] += xs[(b * c + ch) * len + i] * weight;
                        }
                    }
                }
            }
        }
        prop_assert_eq!(y.dims(), &[g.n, o, out_len]);
        assert_close(&y.to_vec(), &expected, 1e-12, 1e-12);
        gradcheck("conv_transpose1d", &[x, wt, bias], |t| t[0].conv_transpose1d(&t[1], Some(&t[2]), win, output_padding, g.groups));
    }

    fn conv_transpose2d_matches_a_scatter_loop_and_finite_differences<D>(
        g in geometry(), output_padding in 0..2usize, seed in any::<u64>(), v in variant(),
    ) {
        let output_padding = output_padding.min(g.stride.max(g.dilation) - 1);
        let (c, o) = (g.groups * g.in_per_group, g.groups * g.out_per_group);
        let dims = [g.n, c, g.hw[0], g.hw[1]];
        let wdims = [c, g.out_per_group, g.kernel[0], g.kernel[1]];
        let x = tensor_with::<D, f64>(&data(dims.iter().product(), seed), &dims, v);
        let wt = T::<D>::from_vec(data(wdims.iter().product(), !seed), wdims);
        let bias = T::<D>::from_vec(data(o, seed ^ 9), [o]);
        let win = window(g.kernel, g.stride, g.padding, g.dilation);
        let fits = |len: usize, k: usize| (len - 1) * g.stride + g.dilation * (k - 1) + output_padding + 1 > 2 * g.padding;
        if !fits(g.hw[0], g.kernel[0]) || !fits(g.hw[1], g.kernel[1]) {
            let err = x.try_conv_transpose2d(&wt, Some(&bias), win, [output_padding; 2], g.groups).unwrap_err();
            prop_assert!(err.to_string().contains("leaves no output"), "{}", err);
            return Ok(());
        }
        let y = x.conv_transpose2d(&wt, Some(&bias), win, [output_padding; 2], g.groups);
        let (expected, [oh, ow]) =
            transposed_reference(&x.to_vec(), dims, &wt.to_vec(), wdims, &bias.to_vec(), &g, output_padding);
        prop_assert_eq!(y.dims(), &[g.n, o, oh, ow]);
        assert_close(&y.to_vec(), &expected, 1e-12, 1e-12);
        gradcheck("conv_transpose2d", &[x, wt, bias], |t| {
            t[0].conv_transpose2d(&t[1], Some(&t[2]), win, [output_padding; 2], g.groups)
        });
    }
}

/// PyTorch's pooled size: rounded up with `ceil_mode`, less a last window
/// that would start past the image and its leading padding.
/// `None` where no window is left (rounded up, a window may run past the
/// padding even where no whole window fits).
fn pooled_len(
    len: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    ceil_mode: bool,
) -> Option<usize> {
    let reach = (len + 2 * padding + if ceil_mode { stride - 1 } else { 0 }) as isize;
    let room = reach - (dilation * (kernel - 1) + 1) as isize;
    if room < 0 {
        return None;
    }
    let out = room as usize / stride + 1;
    Some(if ceil_mode && (out - 1) * stride >= len + padding { out - 1 } else { out })
}

/// A direct 3-D convolution: every output element summed from its taps.
fn conv3d_reference(
    x: &[f64],
    dims: [usize; 5],
    w: &[f64],
    wdims: [usize; 5],
    bias: &[f64],
    window: Window3d,
    groups: usize,
) -> (Vec<f64>, [usize; 3]) {
    let [n, c, depth, h, wd] = dims;
    let [o, cg, kd, kh, kw] = wdims;
    let sizes = [depth, h, wd];
    let kernel = [kd, kh, kw];
    let out: [usize; 3] = std::array::from_fn(|a| {
        pooled_len(sizes[a], kernel[a], window.stride[a], window.padding[a], window.dilation[a], false).unwrap()
    });
    let tap = |a: usize, o: usize, t: usize| {
        (o * window.stride[a] + t * window.dilation[a]).checked_sub(window.padding[a]).filter(|&p| p < sizes[a])
    };
    let mut y = Vec::with_capacity(n * o * out.iter().product::<usize>());
    for b in 0..n {
        for oc in 0..o {
            let group = oc / (o / groups);
            for od in 0..out[0] {
                for oh in 0..out[1] {
                    for ow in 0..out[2] {
                        let mut sum = bias[oc];
                        for ic in 0..cg {
                            let ch = group * cg + ic;
                            for i in 0..kd {
                                for j in 0..kh {
                                    for k in 0..kw {
                                        let (Some(z), Some(r), Some(q)) = (tap(0, od, i), tap(1, oh, j), tap(2, ow, k))
                                        else {
                                            continue;
                                        };
                                        let v = x[(((b * c + ch) * depth + z) * h + r) * wd + q];
                                        sum += v * w[(((oc * cg + ic) * kd + i) * kh + j) * kw + k];
                                    }
                                }
                            }
                        }
                        y.push(sum);
                    }
                }
            }
        }
    }
    (y, out)
}

device_proptests! {
    cases = 16;

    fn conv3d_matches_a_direct_loop_and_finite_differences<D>(
        n in 1..3usize, groups in 1..3usize, in_per_group in 1..3usize, out_per_group in 1..3usize,
        sizes in [1..4usize, 1..5usize, 1..5usize], kernel in [1..3usize, 1..4usize, 1..3usize],
        stride in [1..3usize, 1..3usize, 1..3usize], padding in [0..2usize, 0..2usize, 0..2usize],
        dilation in [1..3usize, 1..3usize, 1..3usize], seed in any::<u64>(), v in variant(),
    ) {
        let window = Window3d { stride, padding, dilation };
        let fits = (0..3).all(|a| sizes[a] + 2 * padding[a] > dilation[a] * (kernel[a] - 1));
        let (c, o) = (groups * in_per_group, groups * out_per_group);
        let dims = [n, c, sizes[0], sizes[1], sizes[2]];
        let wdims = [o, in_per_group, kernel[0], kernel[1], kernel[2]];
        let x = tensor_with::<D, f64>(&data(dims.iter().product(), seed), &dims, v);
        let wt = T::<D>::from_vec(data(wdims.iter().product(), !seed), wdims);
        let bias = T::<D>::from_vec(data(o, seed ^ 9), [o]);
        if !fits {
            let err = x.try_conv3d(&wt, Some(&bias), window, groups).unwrap_err().to_string();
            prop_assert!(err.contains("conv3d") && err.contains("does not fit"), "{}", err);
            return Ok(());
        }
        let y = x.conv3d(&wt, Some(&bias), window, groups);
        let (expected, out) = conv3d_reference(&x.to_vec(), dims, &wt.to_vec(), wdims, &bias.to_vec(), window, groups);
        prop_assert_eq!(y.dims(), &[n, o, out[0], out[1], out[2]]);
        assert_close(&y.to_vec(), &expected, 1e-12, 1e-12);
        gradcheck("conv3d", &[x, wt, bias], |t| t[0].conv3d(&t[1], Some(&t[2]), window, groups));
    }

    /// `ceil_mode`, `count_include_pad`, `divisor_override` and the indices
    /// of max pooling against PyTorch's rules written out over each
    /// window's taps; `max_unpool2d` puts the maxima back where the
    /// indices say; gradients by finite differences.
    fn pool_options_match_pytorchs_rules<D>(
        n in 1..3usize, c in 1..3usize, hw in [1..7usize, 1..7usize], kernel in [1..4usize, 1..4usize],
        stride in [1..4usize, 1..4usize], padding in [0..2usize, 0..2usize], dilation in 1..3usize,
        ceil_mode in any::<bool>(), count_include_pad in any::<bool>(), divisor in prop::option::of(1..5usize),
        seed in any::<u64>(),
    ) {
        let padding: [usize; 2] = std::array::from_fn(|a| padding[a].min(kernel[a] / 2));
        let win = Window2d { kernel, stride, padding, dilation: [dilation; 2] };
        let sizes: [Option<usize>; 2] =
            std::array::from_fn(|a| pooled_len(hw[a], kernel[a], stride[a], padding[a], dilation, ceil_mode));
        let [Some(oh), Some(ow)] = sizes else {
            let err = Tensor::<D>::zeros([n, c, hw[0], hw[1]]).try_max_pool2d_with(win, ceil_mode).unwrap_err();
            prop_assert!(err.to_string().contains("does not fit"), "{}", err);
            return Ok(());
        };
        let out = [oh, ow];
        let dims = [n, c, hw[0], hw[1]];
        let count: usize = dims.iter().product();
        let mut values: Vec<f64> = (0..count).map(|i| i as f64 * 0.25 - 1.0).collect();
        values.sort_by_key(|v| (v.to_bits() ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let x = T::<D>::from_vec(values.clone(), dims);
        // Every window's taps: (the pixel's flat index in its plane, if in
        // the image; whether the tap is inside the padded image).
        let taps = |y: usize, xo: usize| {
            let mut taps = Vec::new();
            for i in 0..kernel[0] {
                for j in 0..kernel[1] {
                    let (pr, pc) = (y * stride[0] + i * dilation, xo * stride[1] + j * dilation);
                    let padded = pr < hw[0] + 2 * padding[0] && pc < hw[1] + 2 * padding[1];
                    let row = pr.checked_sub(padding[0]).filter(|&r| r < hw[0]);
                    let col = pc.checked_sub(padding[1]).filter(|&q| q < hw[1]);
                    taps.push((row.zip(col).map(|(r, q)| r * hw[1] + q), padded));
                }
            }
            taps
        };
        let (mut max, mut argmax, mut mean) = (vec![], vec![], vec![]);
        for plane in values.chunks(hw[0] * hw[1]) {
            for y in 0..out[0] {
                for xo in 0..out[1] {
                    let taps = taps(y, xo);
                    let inside: Vec<usize> = taps.iter().filter_map(|t| t.0).collect();
                    let best = inside.iter().copied().fold(None, |best: Option<usize>, i| match best {
                        Some(b) if plane[b] >= plane[i] => Some(b),
                        _ => Some(i),
                    });
                    max.push(best.map_or(f64::NEG_INFINITY, |b| plane[b]));
                    argmax.push(best.map(|b| b as i64));
                    let sum: f64 = inside.iter().map(|&i| plane[i]).sum();
                    let size = if count_include_pad { taps.iter().filter(|t| t.1).count() } else { inside.len() };
                    mean.push(if inside.is_empty() { 0.0 } else { sum / divisor.unwrap_or(size) as f64 });
                }
            }
        }
        let (values_got, indices) = x.max_pool2d_with_indices(win, ceil_mode);
        prop_assert_eq!(values_got.dims(), &[n, c, out[0], out[1]]);
        assert_close(&values_got.to_vec(), &max, 0.0, 0.0);
        assert_close(&x.max_pool2d_with(win, ceil_mode).to_vec(), &max, 0.0, 0.0);
        for (got, want) in indices.to_vec().iter().zip(&argmax) {
            if let Some(want) = want {
                prop_assert_eq!(got, want);
            }
        }
        let options = AvgPoolOptions { ceil_mode, count_include_pad, divisor_override: divisor };
        assert_close(&x.avg_pool2d_with(win, options).to_vec(), &mean, 1e-12, 1e-12);
        gradcheck("avg_pool2d_with", std::slice::from_ref(&x), |t| t[0].avg_pool2d_with(win, options));
        if max.iter().all(|v| v.is_finite()) {
            gradcheck("max_pool2d_with", std::slice::from_ref(&x), |t| t[0].max_pool2d_with(win, ceil_mode));
            // Unpooled into the input's size: each maximum at its pixel, zeros elsewhere.
            let unpool = Window2d { dilation: [1, 1], ..win };
            let default_fits = (0..2).all(|a| {
                let default = (out[a] - 1) * stride[a] + kernel[a];
                default >= 2 * padding[a] && default - 2 * padding[a] + stride[a] > hw[a] && hw[a] + stride[a] > default - 2 * padding[a]
            });
            if default_fits {
                let restored = values_got.max_unpool2d(&indices, unpool, Some(hw)).to_vec();
                let mut expected = vec![0.0; count];
                for (k, &i) in indices.to_vec().iter().enumerate() {
                    let plane = k / (out[0] * out[1]);
                    expected[plane * hw[0] * hw[1] + i as usize] = max[k];
                }
                assert_close(&restored, &expected, 0.0, 0.0);
            }
        }
    }
}

/// The layers: shapes as PyTorch gives them, and their errors.
fn conv1d_and_conv_transpose2d_layers<D: Device>() {
    use devtensor::nn::{Conv1d, Conv1dConfig, ConvTranspose2d};
    let conv = Conv1d::<D>::new(4, 6, 3).stride(2).padding(1);
    assert_eq!(conv.forward(&Tensor::<D>::zeros([2, 4, 9])).dims(), &[2, 6, 5]);
    assert_eq!(conv.parameters().len(), 2);
    let groups = |groups| Conv1dConfig { groups, ..Default::default() };
    let grouped = Conv1d::<D>::with_config(4, 6, 3, groups(2));
    assert_eq!(grouped.weight.dims(), &[6, 2, 3]);
    let err = Conv1d::<D>::try_with_config(4, 6, 3, groups(4)).unwrap_err().to_string();
    assert_eq!(err, format!("Conv1d on {}: groups = 4 must divide in_channels = 4 and out_channels = 6", D::name()));
    // PyTorch: ConvTranspose2d(8, 3, 3, stride=2, padding=1, output_padding=1) maps 7x7 to 14x14.
    let up = ConvTranspose2d::<D>::new(8, 3, 3).stride(2).padding(1).output_padding(1);
    assert_eq!(up.weight.dims(), &[8, 3, 3, 3]);
    assert_eq!(up.forward(&Tensor::<D>::zeros([1, 8, 7, 7])).dims(), &[1, 3, 14, 14]);
    let err = up.try_forward(&Tensor::<D>::zeros([1, 5, 7, 7])).unwrap_err().to_string();
    assert!(err.contains("the weight needs the input's 5 channels first"), "{err}");
    let bad = ConvTranspose2d::<D>::new(8, 3, 3).output_padding(1);
    let err = bad.try_forward(&Tensor::<D>::zeros([1, 8, 7, 7])).unwrap_err().to_string();
    assert!(
        err.contains("output_padding [1, 1] must be smaller than the stride [1, 1] or the dilation [1, 1]"),
        "{err}"
    );
}

device_proptests! {
    cases = 32;

    fn conv2d_matches_a_direct_loop_and_finite_differences<D>(g in geometry(), seed in any::<u64>(), v in variant()) {
        let (c, o) = (g.groups * g.in_per_group, g.groups * g.out_per_group);
        let dims = [g.n, c, g.hw[0], g.hw[1]];
        let x = tensor_with::<D, f64>(&data(dims.iter().product(), seed), &dims, v);
        let wdims = [o, g.in_per_group, g.kernel[0], g.kernel[1]];
        let wt = T::<D>::from_vec(data(wdims.iter().product(), !seed), wdims);
        let bias = T::<D>::from_vec(data(o, seed ^ 9), [o]);
        let win = window(g.kernel, g.stride, g.padding, g.dilation);
        let y = x.conv2d(&wt, Some(&bias), win, g.groups);
        let (xs, ws, bs) = (x.to_vec(), wt.to_vec(), bias.to_vec());
        // Reference: out[b][oc] = bias + sum over the group's input channels and taps.
        let [oh, ow] = win.output_size(g.hw).unwrap();
        let mut expected = Vec::new();
        for b in 0..g.n {
            for oc in 0..o {
                let group = oc / g.out_per_group;
                let mut plane = vec![bs[oc]; oh * ow];
                for ic in 0..g.in_per_group {
                    let ch = group * g.in_per_group + ic;
                    let sums = windows(&xs, dims, win, |bb, cc, taps| {
                        if bb != b || cc != ch {
                            return 0.0;
                        }
                        taps.iter().enumerate().map(|(t, v)| v.unwrap_or(0.0) * ws[(oc * g.in_per_group + ic) * taps.len() + t]).sum()
                    });
                    let start = (b * c + ch) * oh * ow;
                    for (p, s) in plane.iter_mut().zip(&sums[start..start + oh * ow]) {
                        *p += s;
                    }
                }
                expected.extend(plane);
            }
        }
        assert_eq!(y.dims(), &[g.n, o, oh, ow]);
        assert_close(&y.to_vec(), &expected, 1e-12, 1e-12);
        // Without a bias the result is the same sums, laid out densely.
        let unbiased: Vec<f64> = expected.iter().enumerate().map(|(i, e)| e - bs[i / (oh * ow) % o]).collect();
        let y = x.conv2d(&wt, None, win, g.groups);
        assert!(y.layout().is_contiguous(), "conv2d without a bias returns a dense tensor");
        assert_close(&y.to_vec(), &unbiased, 1e-12, 1e-12);
        let inputs = [x, wt, bias];
        gradcheck("conv2d", &inputs, |t| t[0].conv2d(&t[1], Some(&t[2]), win, g.groups));
    }

    /// `f32` convolutions with one group (the CPU's direct AVX-512 kernels
    /// where the CPU has them: the forward and the image gradient at
    /// stride 1 and dilation 1, the weight gradient at any): forward and
    /// both gradients against the same convolution in `f64` (unfold +
    /// product), on widths that take whole, partial and several 32-pixel
    /// blocks, channel counts that leave the last block of 8 short, and
    /// 1 to 5 vectors of 16 channels in the weight gradient's blocks; with a
    /// bias half of the time.
    fn f32_conv2d_matches_f64<D>(
        n in 1..3usize, c in 1..4usize, o in prop_oneof![1..20usize, 40..80usize], hw in [1..6usize, 1..41usize],
        kernel in [1..4usize, 1..4usize], padding in 0..3usize, strided in any::<bool>(), seed in any::<u64>(),
    ) {
        // Stride 1 and dilation 1 half of the time: the direct forward's case.
        let (stride, dilation) = if strided { (1 + seed as usize % 2, 1 + (seed >> 4) as usize % 2) } else { (1, 1) };
        let win = window(kernel, stride, padding, dilation);
        let Some([oh, ow]) = win.output_size(hw) else { return Ok(()) };
        let dims = [n, c, hw[0], hw[1]];
        let wdims = [o, c, kernel[0], kernel[1]];
        // Values exact in f32, so both runs see the same inputs.
        let narrow = |v: Vec<f64>| v.into_iter().map(|v| f64::from(v as f32)).collect::<Vec<_>>();
        let (xs, ws) = (narrow(data(dims.iter().product(), seed)), narrow(data(wdims.iter().product(), !seed)));
        let gs = narrow(data(n * o * oh * ow, seed ^ 5));
        let to_f32 = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<f32>>();
        let (x32, w32) = (
            Tensor::<D, f32>::from_vec(to_f32(&xs), dims).requires_grad(),
            Tensor::<D, f32>::from_vec(to_f32(&ws), wdims).requires_grad(),
        );
        let (x64, w64) = (T::<D>::from_vec(xs, dims).requires_grad(), T::<D>::from_vec(ws, wdims).requires_grad());
        let bs = narrow(data(o, seed ^ 9));
        let b32 = Tensor::<D, f32>::from_vec(to_f32(&bs), [o]).requires_grad();
        let b64 = T::<D>::from_vec(bs, [o]).requires_grad();
        let with_bias = (seed >> 8) % 2 == 0;
        let y32 = x32.conv2d(&w32, with_bias.then_some(&b32), win, 1);
        let y64 = x64.conv2d(&w64, with_bias.then_some(&b64), win, 1);
        let as_f64 = |t: &Tensor<D, f32>| t.to_vec().into_iter().map(f64::from).collect::<Vec<_>>();
        assert_close(&as_f64(&y32), &y64.to_vec(), 1e-4, 1e-4);
        let grads32 = (&y32 * &Tensor::<D, f32>::from_vec(to_f32(&gs), [n, o, oh, ow])).sum().backward();
        let grads64 = (&y64 * &T::<D>::from_vec(gs, [n, o, oh, ow])).sum().backward();
        let mut pairs = vec![
            ("image", grads32.get(&x32), grads64.get(&x64)),
            ("weight", grads32.get(&w32), grads64.get(&w64)),
        ];
        if with_bias {
            pairs.push(("bias", grads32.get(&b32), grads64.get(&b64)));
        }
        for (name, g32, g64) in pairs {
            let (g32, g64) = (g32.expect("a gradient"), g64.expect("a gradient"));
            assert_eq!(g32.dims(), g64.dims(), "{name}");
            let scale = 1.0 + (n * oh * ow) as f64 / 100.0;
            assert_close(&as_f64(g32), &g64.to_vec(), 1e-4 * scale, 1e-4);
        }
    }

    fn pooling_matches_direct_loops_and_finite_differences<D>(
        n in 1..3usize, c in 1..3usize, hw in [1..7usize, 1..7usize], kernel in 1..4usize, stride in 1..3usize,
        padding in 0..2usize, dilation in 1..3usize, seed in any::<u64>(),
    ) {
        let padding = padding.min(kernel / 2);
        let win = window([kernel, kernel], stride, padding, dilation);
        prop_assume!(win.output_size(hw).is_some());
        let dims = [n, c, hw[0], hw[1]];
        let count: usize = dims.iter().product();
        // Distinct values, so that the largest element of a window is unique.
        let mut values: Vec<f64> = (0..count).map(|i| i as f64 * 0.25).collect();
        values.sort_by_key(|v| (v.to_bits() ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let x = T::<D>::from_vec(values.clone(), dims);
        let max = windows(&values, dims, win, |_, _, taps| taps.iter().map(|v| v.unwrap_or(f64::NEG_INFINITY)).fold(f64::NEG_INFINITY, f64::max));
        let mean = windows(&values, dims, win, |_, _, taps| taps.iter().map(|v| v.unwrap_or(0.0)).sum::<f64>() / taps.len() as f64);
        assert_close(&x.max_pool2d(win).to_vec(), &max, 0.0, 0.0);
        assert_close(&x.avg_pool2d(win).to_vec(), &mean, 1e-12, 1e-12);
        // With dilation a window can fall wholly in the padding: its max is
        // -inf (as in PyTorch), where differences are undefined.
        if max.iter().all(|v| v.is_finite()) {
            gradcheck("max_pool2d", std::slice::from_ref(&x), |t| t[0].max_pool2d(win));
        }
        gradcheck("avg_pool2d", std::slice::from_ref(&x), |t| t[0].avg_pool2d(win));
        let out = [1 + seed as usize % hw[0], 1 + (seed >> 8) as usize % hw[1]];
        gradcheck("adaptive_avg_pool2d", &[x], |t| t[0].adaptive_avg_pool2d(out));
    }
}

fn adaptive_pooling_uses_pytorch_windows<D: Device>() {
    // 5 rows into 3 cells: rows 0..2, 1..4, 3..5 (floor and ceil of i * 5 / 3).
    let x = T::<D>::from_vec((0..5).map(|v| v as f64).collect(), [1, 1, 5, 1]);
    assert_eq!(x.adaptive_avg_pool2d([3, 1]).to_vec(), vec![0.5, 2.0, 3.5]);
    assert_eq!(AdaptiveAvgPool2d::new([1, 1]).forward(&x).to_vec(), vec![2.0]);
}

fn layers_check_their_inputs<D: Device>() {
    let conv = Conv2d::<D>::new(3, 4, 3).padding(1);
    let err = conv.try_forward(&Tensor::<D>::zeros([1, 2, 5, 5])).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "conv2d", .. }), "{err}");
    let err = conv.try_forward(&Tensor::<D>::zeros([2, 5, 5])).unwrap_err();
    assert!(err.to_string().contains("expected an image batch [N, C, H, W]"), "{err}");
    let err = Tensor::<D>::zeros([1, 1, 2, 2]).try_max_pool2d(window([3, 3], 1, 0, 1)).unwrap_err();
    assert!(err.to_string().contains("does not fit an image of 2x2"), "{err}");
    let err = Tensor::<D>::zeros([1, 1, 4, 4]).try_max_pool2d(window([2, 2], 1, 2, 1)).unwrap_err();
    assert!(matches!(err, Error::Argument { op: "max_pool2d", .. }), "{err}");
    let config = devtensor::nn::Conv2dConfig { groups: 2, ..Default::default() };
    assert!(Conv2d::<D>::try_with_config(3, 4, [3, 3], config).is_err());
    // Columns whose element count overflows: an error before any allocation.
    let huge = Tensor::<D>::zeros([1, 1, 1, 1]).broadcast_to([1 << 31, 1 << 31, 1, 1]);
    let err = huge.try_max_pool2d(window([3, 3], 1, 1, 1)).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "max_pool2d", .. }), "{err}");
    assert_eq!(MaxPool2d::new(2).forward(&Tensor::<D>::zeros([1, 1, 5, 5])).dims(), &[1, 1, 2, 2]);
    assert_eq!(AvgPool2d::new(3).stride(1).padding(1).forward(&Tensor::<D>::zeros([1, 1, 5, 5])).dims(), &[1, 1, 5, 5]);
    // Seed 002's first layers: 64x64 stays 64x64 under Conv2d(3, 16, 3, padding=1), then halves.
    let y = MaxPool2d::new(2).forward(&conv_seed002::<D>().forward(&Tensor::<D>::zeros([2, 3, 64, 64])));
    assert_eq!(y.dims(), &[2, 16, 32, 32]);
}

fn conv_seed002<D: Device>() -> Conv2d<D> {
    Conv2d::new(3, 16, 3).padding(1)
}

fn batch_norm_trains_and_evaluates<D: Device>() {
    let mut bn = BatchNorm2d::<D, f64>::new(2);
    let x = T::<D>::from_vec(data(2 * 2 * 3 * 3, 5), [2, 2, 3, 3]);
    // Training: per channel, mean 0 and variance 1 over N, H, W.
    let y = bn.forward(&x);
    for ch in 0..2 {
        let v = y.select(1, ch).to_vec();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / v.len() as f64;
        assert!(mean.abs() < 1e-12 && (var - 1.0).abs() < 1e-3, "channel {ch}: mean {mean}, var {var}");
    }
    gradcheck("BatchNorm2d", &[x.clone(), bn.weight.detach(), bn.bias.detach()], |t| {
        let mut layer = BatchNorm2d::<D, f64>::new(2);
        layer.weight = t[1].clone();
        layer.bias = t[2].clone();
        layer.forward(&t[0])
    });
    // Evaluation: the running statistics, which are buffers.
    bn.eval();
    let names: Vec<String> = bn.named_tensors().into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, ["weight", "bias", "running_mean", "running_var"]);
    let state = bn.named_tensors();
    let (rm, rv) = (state[2].2.to_vec(), state[3].2.to_vec());
    let y = bn.forward(&x).select(1, 0).to_vec();
    let x0 = x.select(1, 0).to_vec();
    let want: Vec<f64> = x0.iter().map(|v| (v - rm[0]) / (rv[0] + 1e-5).sqrt()).collect();
    assert_close(&y, &want, 1e-12, 1e-12);
    assert!(BatchNorm2d::<D, f64>::new(2).try_forward(&T::<D>::zeros([1, 2, 1, 1])).is_err());
}

/// Batch norm and layer norm on inputs large enough for the CPU's parallel
/// paths, forward and the input's gradient, against plain loops: each group
/// standardised with its biased variance, and the gradient of
/// `sum(r · y)` as `(r − mean r − x̂ · mean(r x̂)) / sqrt(var + eps)` with
/// `r` scaled by the layer's weight; both layers' eps is 1e-5. The weight
/// and bias gradients too: `Σ r · x̂` and `Σ r` per channel (batch norm) or
/// per column (layer norm).
fn norm_layers_match_plain_loops_on_large_inputs<D: Device>() {
    type Affine<'a> = (&'a [f64], &'a [f64]);
    fn check(name: &str, x: &[f64], r: &[f64], groups: &[Vec<usize>], y: &[f64], dx: &[f64], (w, b): Affine) {
        for (c, group) in groups.iter().enumerate() {
            let count = group.len() as f64;
            let mean = group.iter().map(|&i| x[i]).sum::<f64>() / count;
            let var = group.iter().map(|&i| (x[i] - mean).powi(2)).sum::<f64>() / count;
            let scale = 1.0 / (var + 1e-5).sqrt();
            let xhat = |i: usize| (x[i] - mean) * scale;
            let (weight, bias) = (w[c % w.len()], b[c % b.len()]);
            let gr = |i: usize| r[i] * weight;
            let mean_g = group.iter().map(|&i| gr(i)).sum::<f64>() / count;
            let mean_gx = group.iter().map(|&i| gr(i) * xhat(i)).sum::<f64>() / count;
            for &i in group {
                let want = xhat(i) * weight + bias;
                assert!((y[i] - want).abs() < 1e-9, "{name} y[{i}]: {} vs {want}", y[i]);
                let want = (gr(i) - mean_g - xhat(i) * mean_gx) * scale;
                assert!((dx[i] - want).abs() < 1e-9, "{name} dx[{i}]: {} vs {want}", dx[i]);
            }
        }
    }
    // Batch norm over [8, 4, 48, 48]: a group per channel.
    let dims = [8, 4, 48, 48];
    let len: usize = dims.iter().product();
    let (xs, rs) = (data(len, 31), data(len, 32));
    let x = T::<D>::from_vec(xs.clone(), dims).requires_grad();
    let mut bn = BatchNorm2d::<D, f64>::new(4);
    let (w, b) = (vec![0.5, 1.5, -2.0, 3.0], vec![0.25, -1.0, 0.0, 2.0]);
    bn.weight = T::<D>::from_vec(w.clone(), [4]).requires_grad();
    bn.bias = T::<D>::from_vec(b.clone(), [4]).requires_grad();
    let y = bn.forward(&x);
    let grads = (&y * &T::<D>::from_vec(rs.clone(), dims)).sum().backward();
    let dx = grads.get(&x).expect("a gradient").to_vec();
    let plane = 48 * 48;
    let groups: Vec<Vec<usize>> = (0..4)
        .map(|c| (0..8).flat_map(|n| ((n * 4 + c) * plane..(n * 4 + c + 1) * plane).collect::<Vec<_>>()).collect())
        .collect();
    check("BatchNorm2d", &xs, &rs, &groups, &y.to_vec(), &dx, (&w, &b));
    let (dw, db) = (grads.get(&bn.weight).expect("dw").to_vec(), grads.get(&bn.bias).expect("db").to_vec());
    for (c, group) in groups.iter().enumerate() {
        let count = group.len() as f64;
        let mean = group.iter().map(|&i| xs[i]).sum::<f64>() / count;
        let var = group.iter().map(|&i| (xs[i] - mean).powi(2)).sum::<f64>() / count;
        let want_dw: f64 = group.iter().map(|&i| rs[i] * (xs[i] - mean) / (var + 1e-5).sqrt()).sum();
        let want_db: f64 = group.iter().map(|&i| rs[i]).sum();
        assert!((dw[c] - want_dw).abs() < 1e-8, "BatchNorm2d weight gradient [{c}]: {} vs {want_dw}", dw[c]);
        assert!((db[c] - want_db).abs() < 1e-8, "BatchNorm2d bias gradient [{c}]: {} vs {want_db}", db[c]);
    }
    // Layer norm over rows of 96: a group per row, with a weight and bias
    // per column.
    let (rows, width) = (len / 96, 96);
    let x = T::<D>::from_vec(xs.clone(), [rows, width]).requires_grad();
    let mut norm = LayerNorm::<D, f64>::new(&[width]);
    let (w, b) = (data(width, 33), data(width, 34));
    norm.weight = T::<D>::from_vec(w.clone(), [width]).requires_grad();
    norm.bias = Some(T::<D>::from_vec(b.clone(), [width]).requires_grad());
    let y = norm.forward(&x);
    // The same values through a strided view: the kernels read any layout.
    let strided = x.detach().transpose(0, 1).contiguous().transpose(0, 1);
    assert_eq!(norm.forward(&strided).to_vec(), y.to_vec(), "LayerNorm of a strided view");
    let grads = (&y * &T::<D>::from_vec(rs.clone(), [rows, width])).sum().backward();
    let (y, dx) = (y.to_vec(), grads.get(&x).expect("a gradient").to_vec());
    let (dw, db) = (
        grads.get(&norm.weight).expect("dw").to_vec(),
        grads.get(norm.bias.as_ref().expect("a bias")).expect("db").to_vec(),
    );
    let (mut want_dw, mut want_db) = (vec![0.0; width], vec![0.0; width]);
    for row in 0..rows {
        let at = |j: usize| row * width + j;
        let mean = (0..width).map(|j| xs[at(j)]).sum::<f64>() / width as f64;
        let var = (0..width).map(|j| (xs[at(j)] - mean).powi(2)).sum::<f64>() / width as f64;
        let scale = 1.0 / (var + 1e-5).sqrt();
        let xhat = |j: usize| (xs[at(j)] - mean) * scale;
        let gw = |j: usize| rs[at(j)] * w[j];
        let mean_g = (0..width).map(gw).sum::<f64>() / width as f64;
        let mean_gx = (0..width).map(|j| gw(j) * xhat(j)).sum::<f64>() / width as f64;
        for j in 0..width {
            let want = xhat(j) * w[j] + b[j];
            assert!((y[at(j)] - want).abs() < 1e-9, "LayerNorm y[{row}, {j}]: {} vs {want}", y[at(j)]);
            let want = (gw(j) - mean_g - xhat(j) * mean_gx) * scale;
            assert!((dx[at(j)] - want).abs() < 1e-9, "LayerNorm dx[{row}, {j}]: {} vs {want}", dx[at(j)]);
            want_dw[j] += rs[at(j)] * xhat(j);
            want_db[j] += rs[at(j)];
        }
    }
    assert_close(&dw, &want_dw, 1e-9, 1e-9);
    assert_close(&db, &want_db, 1e-9, 1e-9);
}

/// Max pooling's choices where the property test's distinct values do not
/// go: NaN wins, the first of equal values takes the gradient, and a pixel
/// that is the maximum of several overlapping windows collects all their
/// gradients (PyTorch's `F.max_pool2d`).
fn max_pooling_picks_like_pytorch<D: Device>() {
    let two = Window2d { stride: [2, 2], ..Window2d::new([2, 2]) };
    let nan = f64::NAN;
    let x = T::<D>::from_vec(vec![1.0, nan, 3.0, 3.0, 3.0, 1.0, 3.0, 2.0], [2, 1, 2, 2]).requires_grad();
    let y = x.max_pool2d(two);
    let out = y.to_vec();
    assert!(out[0].is_nan() && out[1] == 3.0, "NaN wins, then 3: {out:?}");
    let grad = y.sum().backward().get(&x).expect("a gradient").to_vec();
    assert_eq!(grad, [0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
    // Overlapping 2x2 windows at stride 1: the 5 is the maximum of both
    // windows of the top row, the 4 of both windows of the bottom row.
    let x = T::<D>::from_vec(vec![0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0, 0.0], [1, 1, 3, 3]).requires_grad();
    let y = x.max_pool2d(Window2d::new([2, 2]));
    assert_eq!(y.to_vec(), [5.0, 5.0, 4.0, 4.0]);
    let weights = T::<D>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [1, 1, 2, 2]);
    let grad = (&y * &weights).sum().backward().get(&x).expect("a gradient").to_vec();
    assert_eq!(grad, [0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0, 0.0]);
}

device_proptests! {
    cases = 32;

    /// `F.unfold` against the windows' taps read by direct indexing (zeros
    /// in the padding), unbatched as batched; `F.fold` as its adjoint,
    /// `<unfold(x), y> = <x, fold(y)>`; both by finite differences; on
    /// random geometries and input layouts.
    fn unfold_reads_the_windows_and_fold_is_its_adjoint<D>(g in geometry(), seed in any::<u64>(), v in variant()) {
        let c = g.groups * g.in_per_group;
        let dims = [g.n, c, g.hw[0], g.hw[1]];
        let win = window(g.kernel, g.stride, g.padding, g.dilation);
        let x = tensor_with::<D, f64>(&data(dims.iter().product(), seed), &dims, v);
        let columns = unfold(&x, win);
        let taps = g.kernel[0] * g.kernel[1];
        let [oh, ow] = win.output_size(g.hw).unwrap();
        let positions = oh * ow;
        prop_assert_eq!(columns.dims(), &[g.n, c * taps, positions]);
        let values = x.to_vec();
        let mut expected = vec![0.0; g.n * c * taps * positions];
        for tap in 0..taps {
            // Tap `tap` of every window, `[N, C, OH, OW]`.
            let read = windows(&values, dims, win, |_, _, t| t[tap].unwrap_or(0.0));
            for (at, value) in read.into_iter().enumerate() {
                let (image, position) = (at / positions, at % positions);
                expected[(image * taps + tap) * positions + position] = value;
            }
        }
        prop_assert_eq!(columns.to_vec(), expected);
        prop_assert_eq!(unfold(&x.select(0, 0), win).to_vec(), columns.select(0, 0).to_vec());
        let y = T::<D>::from_vec(data(columns.elem_count(), !seed), columns.dims());
        let image = fold(&y, g.hw, win);
        prop_assert_eq!(image.dims(), &dims);
        let (lhs, rhs) = ((&columns * &y).sum().to_vec()[0], (&x * &image).sum().to_vec()[0]);
        prop_assert!((lhs - rhs).abs() <= 1e-12 * (1.0 + lhs.abs()), "{} != {}", lhs, rhs);
        prop_assert_eq!(fold(&y.select(0, 0), g.hw, win).to_vec(), image.select(0, 0).to_vec());
        gradcheck("unfold", &[x], |t| unfold(&t[0], win));
        gradcheck("fold", &[y], |t| fold(&t[0], g.hw, win));
    }
}

/// `F.unfold` and `F.fold` against PyTorch with every window setting off
/// its default and unequal per axis, values and gradients; and as layers.
fn unfold_and_fold_match_pytorch<D: Device>() {
    let torch = crate::fixture::load("unfold_fold.safetensors");
    let t = |name: &str| {
        let found = torch.tensors().iter().find(|(n, _)| n == name).map(|(_, t)| t.to::<D>());
        found.unwrap_or_else(|| panic!("no `{name}` in unfold_fold.safetensors"))
    };
    let win = Window2d { kernel: [2, 3], stride: [2, 1], padding: [1, 0], dilation: [1, 2] };
    let x = t("unfold.x").requires_grad();
    let out = Unfold::new(win).forward(&x);
    assert_close(&out.to_vec(), &t("unfold.out").to_vec(), 0.0, 0.0);
    let grad = (&out * &t("unfold.g")).sum().backward().get(&x).expect("a gradient").to_vec();
    assert_close(&grad, &t("unfold.grad_x").to_vec(), 1e-12, 1e-12);
    let columns = t("fold.x").requires_grad();
    let image = Fold::new([5, 7], win).forward(&columns);
    assert_close(&image.to_vec(), &t("fold.out").to_vec(), 1e-12, 1e-12);
    let grad = (&image * &t("fold.g")).sum().backward().get(&columns).expect("a gradient").to_vec();
    assert_close(&grad, &t("fold.grad_x").to_vec(), 0.0, 0.0);
}

/// Inputs `F.unfold` and `F.fold` refuse, each with a message naming the
/// shape and what does not fit.
fn unfold_and_fold_check_their_inputs<D: Device>() {
    let name = D::name();
    let message = |r: devtensor::Result<T<D>>| r.unwrap_err().to_string();
    let win = Window2d::new([2, 3]);
    assert_eq!(
        message(try_unfold(&T::<D>::zeros([4, 5]), win)),
        format!("unfold on {name}: shape [4, 5]: expected an image batch [N, C, H, W] or an image [C, H, W]")
    );
    assert_eq!(
        message(try_unfold(&T::<D>::zeros([1, 4, 2]), win)),
        format!(
            "unfold on {name}: shape [1, 4, 2]: a window of kernel [2, 3], stride [1, 1], padding [0, 0] and dilation [1, 1] does not fit an image of 4x2"
        )
    );
    let columns = T::<D>::zeros([1, 12, 6]);
    assert_eq!(
        message(try_fold(&T::<D>::zeros([12]), [3, 5], win)),
        format!(
            "fold on {name}: shape [12]: expected columns [N, C · kernel_size[0] · kernel_size[1], L] or [C · kernel_size[0] · kernel_size[1], L]"
        )
    );
    assert_eq!(
        message(try_fold(&T::<D>::zeros([1, 10, 6]), [3, 5], win)),
        format!(
            "fold on {name}: shape [1, 10, 6]: the columns' axis 1 (10) must be a multiple of the kernel's 2x3 taps"
        )
    );
    assert_eq!(
        message(try_fold(&columns.select(0, 0), [4, 5], win)),
        format!(
            "fold on {name}: shape [12, 6]: an output of 4x5 has 3x3 = 9 window positions, but the columns have 6 (axis 1)"
        )
    );
    assert_eq!(
        message(try_fold(&columns, [1, 5], win)),
        format!(
            "fold on {name}: shape [1, 12, 6]: a window of kernel [2, 3], stride [1, 1], padding [0, 0] and dilation [1, 1] does not fit an output of 1x5"
        )
    );
    assert_eq!(fold(&columns, [3, 5], win).dims(), &[1, 2, 3, 5]);
}

device_tests! {
    unfold_and_fold_match_pytorch => unfold_and_fold_match_pytorch,
    unfold_and_fold_check_their_inputs => unfold_and_fold_check_their_inputs,
    max_pooling_picks_like_pytorch => max_pooling_picks_like_pytorch,
    norm_layers_match_plain_loops_on_large_inputs => norm_layers_match_plain_loops_on_large_inputs,
    adaptive_pooling_uses_pytorch_windows => adaptive_pooling_uses_pytorch_windows,
    layers_check_their_inputs => layers_check_their_inputs,
    batch_norm_trains_and_evaluates => batch_norm_trains_and_evaluates,
    conv1d_and_conv_transpose2d_layers => conv1d_and_conv_transpose2d_layers,
}
