//! Static shapes: computed sizes, run-time conversions, and seed 002's model
//! written with static layers, trained on the digits.

use devtensor::nn::Module;
use devtensor::optim::{Adam, AdamConfig, Optimizer};
use devtensor::shapes::{Const, ConvOut, Prod, SAvgPool2d, SConv2d, SLinear, SMaxPool2d, STensor, StaticDim};
use devtensor::{Cpu, Error, Generator, Tensor, no_grad};

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
    let ones: STensor<Cpu, (usize, Const<3>, Const<8>, Const<8>)> = Tensor::<Cpu>::ones([5, 3, 8, 8]).try_static().unwrap();
    let per_image: STensor<Cpu, (usize, Const<8>, Const<8>)> = ones.sum_axis::<1>();
    assert_eq!(per_image.dynamic().to_vec(), vec![3.0; 5 * 64]);
    let rows: STensor<Cpu, (usize, Const<3>, Const<8>)> = ones.mean_axis::<3>();
    assert_eq!(rows.dynamic().dims(), &[5, 3, 8]);
    let pooled: STensor<Cpu, (usize, Const<3>, ConvOut<Const<8>, 3, 2, 0, 1>, ConvOut<Const<8>, 3, 2, 0, 1>)> =
        SAvgPool2d::<3, 2>.forward(&ones);
    assert_eq!(pooled.dynamic().dims(), &[5, 3, 3, 3]);
    assert_eq!(SMaxPool2d::<2, 2>.forward(&ones).dynamic().dims(), &[5, 3, 4, 4]);
}

/// Seed 002's model for the one-channel 8x8 digits, every size in a type.
struct StaticCnn {
    conv: SConv2d<Cpu, 1, 16, 3, 1, 1>,
    pool: SMaxPool2d<2, 2>,
    fc: SLinear<Cpu, { 16 * 4 * 4 }, 10>,
}

impl StaticCnn {
    fn forward(&self, x: &STensor<Cpu, (usize, Const<1>, Const<8>, Const<8>)>) -> STensor<Cpu, (usize, Const<10>)> {
        self.fc.forward(&self.pool.forward(&self.conv.forward(x).relu()).flatten())
    }
}

#[test]
fn seed002_with_static_shapes_trains_on_the_digits() {
    let (pixels, labels) = crate::nn::train_cnn::digits::load_digits();
    let n = labels.len();
    let images = Tensor::<Cpu>::from_slice(&pixels, [n, 1, 8, 8]) / 16.0;
    let labels = Tensor::<Cpu, i64>::from_slice(&labels, [n]);
    let order = Tensor::<Cpu, i64>::randperm_with(n, &mut Generator::new(5));
    let train = n * 4 / 5;
    type Images = STensor<Cpu, (usize, Const<1>, Const<8>, Const<8>)>;
    type Labels = STensor<Cpu, (usize,), i64>;
    let pick = |start: usize, len: usize| -> (Images, Labels) {
        let rows = order.narrow(0, start, len);
        (images.index_select(0, &rows).try_static().unwrap(), labels.index_select(0, &rows).try_static().unwrap())
    };
    let ((x_train, y_train), (x_test, y_test)) = (pick(0, train), pick(train, n - train));
    devtensor::manual_seed(3);
    let mut model = StaticCnn { conv: SConv2d::new(), pool: SMaxPool2d, fc: SLinear::new() };
    let (mut opt_conv, mut opt_fc) =
        (Adam::new(&model.conv, AdamConfig { lr: 1e-2, ..Default::default() }), Adam::new(&model.fc, AdamConfig { lr: 1e-2, ..Default::default() }));
    for _ in 0..60 {
        let loss = model.forward(&x_train).cross_entropy(&y_train);
        let grads = loss.backward();
        opt_conv.step(&mut model.conv, &grads);
        opt_fc.step(&mut model.fc, &grads);
    }
    let accuracy = no_grad(|| {
        let predicted = model.forward(&x_test).dynamic().argmax(-1);
        predicted.eq(y_test.dynamic()).to_dtype::<f32>().mean().item()
    });
    assert!(accuracy >= 0.93, "test accuracy {accuracy}");
    assert_eq!(model.fc.num_parameters(), 256 * 10 + 10);
    assert_eq!(y_train.dynamic().elem_count(), train);
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
