//! Static shapes: computed sizes, run-time conversions, and seed 002's model
//! written with static layers, trained on the digits.

use devtensor::nn::{Module, Relu};
use devtensor::optim::{Adam, AdamConfig, Optimizer};
use devtensor::static_shapes::{
    Const, ConvOut, Prod, SAvgPool2d, SConv2d, SFlatten, SForward, SLinear, SMaxPool2d, STensor, StaticDim,
};
use devtensor::{Cpu, Device, Error, Tensor};

#[test]
fn computed_sizes_follow_pytorchs_formula() {
    // (I + 2P - DL (K - 1) - 1) / S + 1
    assert_eq!(<ConvOut<Const<64>, 3, 1, 1, 1> as StaticDim>::N, 64);
    assert_eq!(<ConvOut<Const<64>, 2, 2, 0, 1> as StaticDim>::N, 32);
    assert_eq!(<ConvOut<Const<7>, 3, 2, 0, 1> as StaticDim>::N, 3);
    assert_eq!(<ConvOut<Const<10>, 3, 1, 0, 2> as StaticDim>::N, 6);
    assert_eq!(<Prod<Const<16>, Prod<Const<32>, Const<32>>> as StaticDim>::N, 16384);
}

#[test]
fn conversions_check_static_sizes_and_keep_dynamic_ones() {
    type Images = (usize, Const<3>, Const<8>, Const<8>);
    let x = Tensor::<Cpu>::zeros([5, 3, 8, 8]);
    let s: STensor<Cpu, Images> = x.try_static().unwrap();
    assert_eq!(s.shape().0, 5);
    assert_eq!(s.dynamic().dims(), x.dims());
    let err = Tensor::<Cpu>::zeros([5, 3, 8, 9]).try_static::<Images>().unwrap_err();
    assert!(matches!(err, Error::Shape { op: "try_static", .. }));
    assert_eq!(err.to_string(), "try_static on Cpu: shape [5, 3, 8, 9]: expected a shape [_, 3, 8, 8] (`_`: any size)");
    assert!(Tensor::<Cpu>::zeros([5, 3, 8]).try_static::<Images>().is_err());
    let flat = s.flatten();
    assert_eq!(flat.dynamic().dims(), &[5, 192]);
    let y = s.try_reshape((5usize, Const::<192>)).unwrap();
    assert_eq!(y.dynamic().dims(), &[5, 192]);
    // A dynamic size that does not fit is a run-time error.
    assert!(s.try_reshape((4usize, Const::<192>)).is_err());
    // Reductions drop the axis from the type; pooling computes the sizes.
    let ones: STensor<Cpu, (usize, Const<3>, Const<8>, Const<8>)> =
        Tensor::<Cpu>::ones([5, 3, 8, 8]).try_static().unwrap();
    let per_image: STensor<Cpu, (usize, Const<8>, Const<8>)> = ones.sum_axis::<1>();
    assert_eq!(per_image.dynamic().to_vec(), vec![3.0; 5 * 64]);
    let rows: STensor<Cpu, (usize, Const<3>, Const<8>)> = ones.mean_axis::<3>();
    assert_eq!(rows.dynamic().dims(), &[5, 3, 8]);
    let pooled: STensor<Cpu, (usize, Const<3>, ConvOut<Const<8>, 3, 2, 0, 1>, ConvOut<Const<8>, 3, 2, 0, 1>)> =
        SAvgPool2d::<3, 2>.forward(&ones);
    assert_eq!(pooled.dynamic().dims(), &[5, 3, 3, 3]);
    assert_eq!(SMaxPool2d::<2, 2>.forward(&ones).dynamic().dims(), &[5, 3, 4, 4]);
}

/// `n` random values in [-2, 2), as `f32`.
fn values(n: usize, seed: u64) -> Vec<f32> {
    crate::gradcheck::data(n, seed).into_iter().map(|v| v as f32).collect()
}

/// Broadcasting, scalar operators, transposes and products of static
/// tensors, each against a plain loop over the same random data, on
/// random batch sizes.
fn static_ops_match_plain_loops<D: Device>() {
    for batch in [1usize, 3, 7] {
        let batch_seed = 10 * batch as u64;
        let x_vals = values(batch * 4 * 5, 1 + batch_seed);
        let bias_vals = values(5, 2 + batch_seed);
        let x: STensor<D, (usize, Const<4>, Const<5>)> =
            Tensor::<Cpu>::from_slice(&x_vals, [batch, 4, 5]).to::<D>().try_static().unwrap();
        let bias: STensor<D, (Const<5>,)> = Tensor::<Cpu>::from_slice(&bias_vals, [5]).to::<D>().try_static().unwrap();

        // `[B, 4, 5] + [5]` and `[5] * [B, 4, 5]`: the bias along the last axis.
        let shifted: STensor<D, (usize, Const<4>, Const<5>)> = &x + &bias;
        let scaled: STensor<D, (usize, Const<4>, Const<5>)> = &bias * &x;
        let (shifted, scaled) = (shifted.dynamic().to_vec(), scaled.dynamic().to_vec());
        for (i, v) in x_vals.iter().enumerate() {
            assert_eq!(shifted[i], v + bias_vals[i % 5]);
            assert_eq!(scaled[i], bias_vals[i % 5] * v);
        }
        // Scalars, negation, division and subtraction keep the shape.
        let affine = (-(&x * 2.0) + 1.0) / 4.0 - &x;
        let quotient = &x / &(&x.abs() + 1.0);
        for (i, v) in x_vals.iter().enumerate() {
            assert_eq!(affine.dynamic().to_vec()[i], (-(v * 2.0) + 1.0) / 4.0 - v);
            assert_eq!(quotient.dynamic().to_vec()[i], v / (v.abs() + 1.0));
        }

        // transpose::<1, 2>: element [b, i, j] moves to [b, j, i].
        let t: STensor<D, (usize, Const<5>, Const<4>)> = x.transpose::<1, 2>();
        let t = t.dynamic().contiguous().to_vec();
        for b in 0..batch {
            for i in 0..4 {
                for j in 0..5 {
                    assert_eq!(t[b * 20 + j * 4 + i], x_vals[b * 20 + i * 5 + j]);
                }
            }
        }

        // [B * 4, 5] · [5, 3] against a triple loop.
        let rows: STensor<D, (usize, Const<5>)> = x.dynamic().reshape([batch * 4, 5]).try_static().unwrap();
        let w_vals = values(15, 3 + batch_seed);
        let w: STensor<D, (Const<5>, Const<3>)> =
            Tensor::<Cpu>::from_slice(&w_vals, [5, 3]).to::<D>().try_static().unwrap();
        let product = rows.matmul(&w).dynamic().to_vec();
        let back: STensor<D, (Const<3>, Const<5>)> = w.t();
        assert_eq!(back.dynamic().dims(), &[3, 5]);
        for r in 0..batch * 4 {
            for c in 0..3 {
                let expected: f32 = (0..5).map(|k| x_vals[r * 5 + k] * w_vals[k * 3 + c]).sum();
                assert!((product[r * 3 + c] - expected).abs() <= 1e-5 * (1.0 + expected.abs()));
            }
        }
    }
}

/// Seed 002's model for the one-channel 8x8 digits as a tuple of static
/// layers: its output type is computed from the input's, it counts and
/// names its parameters like a dynamic `Sequential`, moves between devices,
/// and trains with one optimizer.
fn tuple_models_chain_types_and_train<D: Device>() {
    let batch_seed = 0;
    type Model<D> = (SConv2d<D, 1, 16, 3, 1, 1>, Relu, SMaxPool2d<2, 2>, SFlatten, SLinear<D, { 16 * 4 * 4 }, 10>);
    devtensor::manual_seed(4);
    let cpu_model: Model<Cpu> = (SConv2d::new(), Relu, SMaxPool2d, SFlatten, SLinear::new());
    let mut model: Model<D> = cpu_model.to::<D>();
    let names: Vec<String> = model.parameters().into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["0.weight", "0.bias", "4.weight", "4.bias"]);

    let x: STensor<D, (usize, Const<1>, Const<8>, Const<8>)> =
        Tensor::<Cpu>::from_slice(&values(6 * 64, 4 + batch_seed), [6, 1, 8, 8]).to::<D>().try_static().unwrap();
    let y: STensor<D, (usize,), i64> =
        Tensor::<Cpu, i64>::from_slice(&[0, 3, 9, 1, 3, 7], [6]).to::<D>().try_static().unwrap();
    // The same computation as the dynamic layers the static ones wrap.
    let logits: STensor<D, (usize, Const<10>)> = model.forward(&x);
    let dynamic = model.4.inner.forward(
        &model
            .0
            .inner
            .forward(x.dynamic())
            .relu()
            .max_pool2d(devtensor::ops::conv::Window2d {
                stride: [2, 2],
                ..devtensor::ops::conv::Window2d::new([2, 2])
            })
            .flatten(1, -1),
    );
    assert_eq!(logits.dynamic().to_vec(), dynamic.to_vec());

    let mut opt = Adam::new(&model, AdamConfig { lr: 1e-2, ..Default::default() });
    let first = model.forward(&x).cross_entropy(&y).item();
    for _ in 0..20 {
        let loss = model.forward(&x).cross_entropy(&y);
        opt.step(&mut model, &loss.backward());
    }
    let last = model.forward(&x).cross_entropy(&y).item();
    assert!(last < first * 0.2, "the loss of a fixed batch must fall: {first} -> {last}");
}

device_tests! {
    static_ops_match_plain_loops => static_ops_match_plain_loops,
    tuple_models_chain_types_and_train => tuple_models_chain_types_and_train,
}

#[allow(dead_code)] // its `main`
#[path = "../../examples/static_cnn.rs"]
mod static_cnn;

#[test]
fn the_static_example_matches_the_dynamic_one_to_the_bit() {
    let (pixels, labels) = static_cnn::digits::load_digits();
    let static_accuracy = static_cnn::run::<Cpu>(&pixels, &labels, 12).unwrap();
    let dynamic_accuracy = crate::nn::train_cnn::run::<Cpu>(&pixels, &labels);
    assert!(static_accuracy >= 0.97, "test accuracy {static_accuracy}");
    assert_eq!(static_accuracy, dynamic_accuracy);
}

/// Seed 002's static model trains on the emulated (or real) `Cuda<0>` too:
/// two epochs, checked against the same two epochs on the CPU.
#[test]
fn the_static_example_trains_on_cuda0() {
    if !crate::common::cuda_ready::<0>() {
        return;
    }
    let (pixels, labels) = static_cnn::digits::load_digits();
    let on_gpu = static_cnn::run::<devtensor::Cuda<0>>(&pixels, &labels, 2).unwrap();
    let on_cpu = static_cnn::run::<Cpu>(&pixels, &labels, 2).unwrap();
    assert!(on_gpu >= 0.85, "test accuracy after two epochs {on_gpu}");
    assert!((on_gpu - on_cpu).abs() <= 2.0 / 360.0, "Cuda<0> {on_gpu} vs Cpu {on_cpu}");
}

#[test]
fn the_dynamic_layer_reports_seed002s_bug_at_run_time() {
    let fc = devtensor::nn::Linear::<Cpu>::new(16 * 16 * 16, 10);
    let err = fc.try_forward(&Tensor::<Cpu>::zeros([64, 16 * 32 * 32])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Linear on Cpu: shapes [64, 16384] and [10, 4096]: the input's last axis must have in_features = 4096 elements"
    );
}
