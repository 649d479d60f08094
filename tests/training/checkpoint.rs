//! Checkpoints: save on one device and load on another, model and optimizer
//! state, and every way a file can be wrong.

use devtensor::io::Checkpoint;
use devtensor::nn::{BatchNorm2d, Conv2d, Linear, Module};
use devtensor::optim::{Adam, AdamConfig, Optimizer};
use devtensor::{Cpu, Device, Error, Tensor};
use std::path::PathBuf;

struct Small<D: Device> {
    conv: Conv2d<D>,
    norm: BatchNorm2d<D>,
    fc: Linear<D>,
}
devtensor::module!(Small { conv, norm, fc });

impl<D: Device> Small<D> {
    fn new() -> Self {
        Small { conv: Conv2d::new(1, 2, 3), norm: BatchNorm2d::new(2), fc: Linear::new(8, 3) }
    }

    fn forward(&self, x: &Tensor<D>) -> Tensor<D> {
        self.fc.forward(&self.norm.forward(&self.conv.forward(x)).flatten(1, -1))
    }
}

/// A file of its own for `name` in this process and on `D`: the device
/// instances of one check run side by side in one process (issue 38).
fn temp<D: Device>(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("devtensor-test-{}-{name}-{}.safetensors", std::process::id(), D::name()))
}

fn values<D: Device>(model: &Small<D>) -> Vec<(String, Vec<f32>)> {
    model.named_tensors().into_iter().map(|(n, _, t)| (n, t.to_vec())).collect()
}

fn round_trips_across_devices_with_optimizer_state<D: Device>() {
    let path = temp::<D>("round-trip");
    let mut model = Small::<D>::new();
    let mut opt = Adam::new(&model, AdamConfig::default());
    let x = Tensor::<D>::ones([2, 1, 4, 4]);
    let loss = model.forward(&x).square().mean();
    opt.step(&mut model, &loss.backward());
    Checkpoint::try_from_model(&model).unwrap().with_optimizer(&opt).try_save(&path).unwrap();

    // Loaded onto the CPU: the same values, buffers (running stats) included.
    let mut on_cpu = Small::<Cpu>::new();
    let ckpt = Checkpoint::<Cpu>::try_load(&path).unwrap();
    ckpt.try_load_into(&mut on_cpu).unwrap();
    assert_eq!(values(&on_cpu), values(&model));
    assert!(on_cpu.parameters().iter().all(|(_, p)| p.is_leaf() && p.tracks_grad()));
    // And back onto D, where training resumes with the saved Adam state:
    // the same step as an optimizer that never stopped.
    let mut resumed = Small::<D>::new();
    let ckpt = Checkpoint::<D>::try_load(&path).unwrap();
    ckpt.try_load_into(&mut resumed).unwrap();
    let mut opt2 = Adam::new(&resumed, AdamConfig::default());
    opt2.try_load_state(ckpt.optimizer_state()).unwrap();
    let step = |m: &mut Small<D>, o: &mut Adam<D>| {
        let loss = m.forward(&x).square().mean();
        o.step(m, &loss.backward());
    };
    step(&mut model, &mut opt);
    step(&mut resumed, &mut opt2);
    assert_eq!(values(&resumed), values(&model));
    std::fs::remove_file(&path).ok();
}

fn mismatches_name_the_first_tensor<D: Device>() {
    let path = temp::<D>("mismatch");
    Checkpoint::try_from_model(&Linear::<D>::new(3, 2)).unwrap().try_save(&path).unwrap();
    let ckpt = Checkpoint::<D>::try_load(&path).unwrap();
    let err = ckpt.try_load_into(&mut Linear::<D>::new(4, 2)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "checkpoint {}: tensor `weight` has shape [2, 3] in the checkpoint but [2, 4] in the model",
            path.display()
        )
    );
    let err = ckpt.try_load_into(&mut Small::<D>::new()).unwrap_err();
    assert!(err.to_string().contains("the model's tensor `conv.weight` is missing"), "{err}");
    let err = ckpt.try_load_into(&mut Linear::<D>::new(3, 2).without_bias()).unwrap_err();
    assert!(err.to_string().contains("the checkpoint's tensor `bias` is not in the model"), "{err}");
    let err = Checkpoint::<D, f64>::try_load(&path).unwrap_err();
    assert!(err.to_string().contains("holds F32 elements, but the model's are f64"), "{err}");
    std::fs::remove_file(&path).ok();
}

/// PyTorch's `load_state_dict(strict=False)`: the shared tensors load, the
/// others are reported (a batch norm's counter among them), and a shared
/// name of another shape still fails without changing the model.
fn non_strict_loads_report_missing_and_unexpected<D: Device>() {
    struct Headless<D: Device> {
        conv: Conv2d<D>,
        norm: BatchNorm2d<D>,
        head: Linear<D>,
    }
    devtensor::module!(Headless { conv, norm, head });
    let source = Small::<D>::new();
    let ckpt = Checkpoint::from_model(&source);
    let mut model = Headless { conv: Conv2d::new(1, 2, 3), norm: BatchNorm2d::new(2), head: Linear::new(8, 5) };
    let before = model.head.weight.to_vec();
    let report = ckpt.load_into_non_strict(&mut model);
    assert_eq!(report.missing_keys, ["head.weight", "head.bias"]);
    assert_eq!(report.unexpected_keys, ["fc.weight", "fc.bias"]);
    assert_eq!(model.conv.weight.to_vec(), source.conv.weight.to_vec());
    assert!(model.conv.weight.tracks_grad(), "a loaded parameter stays a parameter");
    assert_eq!(model.head.weight.to_vec(), before, "a missing tensor keeps its values");
    // Everything shared: nothing to report, the same as a strict load.
    let mut same = Small::<D>::new();
    assert_eq!(ckpt.load_into_non_strict(&mut same), Default::default());
    assert_eq!(same.fc.bias.as_ref().unwrap().to_vec(), source.fc.bias.as_ref().unwrap().to_vec());
    // The counter is an integer buffer: reported missing like the others.
    let linear = Checkpoint::from_model(&Linear::<D>::new(8, 3));
    let report = linear.load_into_non_strict(&mut Small::<D>::new());
    assert!(report.missing_keys.contains(&"norm.running_mean".to_string()), "{report:?}");
    assert_eq!(report.unexpected_keys, ["weight", "bias"]);
    let mut wider = Small::<D> { fc: Linear::new(8, 4), ..Small::new() };
    let conv_before = wider.conv.weight.to_vec();
    let err = ckpt.try_load_into_non_strict(&mut wider).unwrap_err();
    assert!(err.to_string().contains("tensor `fc.weight` has shape [3, 8] in the checkpoint but [4, 8]"), "{err}");
    assert_eq!(wider.conv.weight.to_vec(), conv_before, "a failed load changes nothing");
}

#[test]
fn hostile_files_are_errors_not_crashes() {
    let path = temp::<Cpu>("hostile");
    let load = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        Checkpoint::<Cpu>::try_load(&path).unwrap_err()
    };
    Checkpoint::try_from_model(&Linear::<Cpu>::new(3, 2)).unwrap().try_save(&path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let header_len = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&good[8..8 + header_len]).unwrap().to_string();
    let with_header = |h: &str| {
        let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(h.as_bytes());
        bytes.extend_from_slice(&good[8 + header_len..]);
        bytes
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("truncated data", good[..good.len() - 4].to_vec()),
        ("truncated header", good[..8 + header_len / 2].to_vec()),
        ("a header length past the end", [u64::MAX.to_le_bytes().to_vec(), good[8..].to_vec()].concat()),
        ("garbage", b"\x10\0\0\0\0\0\0\0not json at all!".to_vec()),
        ("a huge declared shape", with_header(&header.replacen("[2,3]", "[4000000000,4000000000]", 1))),
        ("overlapping offsets", with_header(&header.replacen("[0,8]", "[0,16]", 1))),
    ];
    for (what, bytes) in cases {
        let err = load(&bytes);
        assert!(matches!(err, Error::Checkpoint { .. }), "{what}: {err}");
    }
    let err = Checkpoint::<Cpu>::try_load(temp::<Cpu>("does-not-exist")).unwrap_err();
    assert!(err.to_string().contains("cannot read the file"), "{err}");
    std::fs::remove_file(&path).ok();
}

/// A list of modules (PyTorch's `nn.ModuleList`) names its members by
/// index, BatchNorm's integer buffers included, trains every member, and
/// round-trips through a checkpoint onto another device.
struct Blocks<D: Device> {
    h: Vec<Small<D>>,
}
devtensor::module!(Blocks { h });

fn module_lists_name_by_index_and_round_trip<D: Device>() {
    let mut blocks = Blocks { h: vec![Small::<D>::new(), Small::new()] };
    let names: Vec<String> = blocks.named_tensors().into_iter().map(|(n, _, _)| n).collect();
    let expected: Vec<String> = (0..2)
        .flat_map(|i| {
            [
                "conv.weight",
                "conv.bias",
                "norm.weight",
                "norm.bias",
                "norm.running_mean",
                "norm.running_var",
                "fc.weight",
                "fc.bias",
            ]
            .map(|n| format!("h.{i}.{n}"))
        })
        .collect();
    assert_eq!(names, expected);
    let mut int_names = Vec::new();
    blocks.visit_int_buffers("", &mut |n, _| int_names.push(n.to_string()));
    assert_eq!(int_names, ["h.0.norm.num_batches_tracked", "h.1.norm.num_batches_tracked"]);
    // eval() reaches every member: BatchNorm then uses its running statistics.
    let x = Tensor::<D>::from_vec((0..32).map(|i| i as f32 * 0.1).collect(), [2, 1, 4, 4]);
    blocks.eval();
    let before = blocks.h[1].forward(&x).to_vec();
    blocks.train();
    assert_ne!(blocks.h[1].forward(&x).to_vec(), before, "train() must reach the list's members");
    blocks.eval();
    // (The training forward moved the running statistics.)
    let evaluated = blocks.h[1].forward(&x).to_vec();
    let path = temp::<D>("module-list");
    Checkpoint::try_from_model(&blocks).unwrap().try_save(&path).unwrap();
    let mut on_cpu = Blocks { h: vec![Small::<Cpu>::new(), Small::new()] };
    Checkpoint::<Cpu>::try_load(&path).unwrap().try_load_into(&mut on_cpu).unwrap();
    let _ = std::fs::remove_file(&path);
    on_cpu.eval();
    let values = |b: &Blocks<Cpu>| b.named_tensors().into_iter().map(|(_, _, t)| t.to_vec()).collect::<Vec<_>>();
    assert_eq!(values(&on_cpu), values(&blocks.to::<Cpu>()));
    // Another device's kernels round differently: close, not equal.
    let loaded = on_cpu.h[1].forward(&x.to::<Cpu>()).to_vec();
    assert!(loaded.iter().zip(&evaluated).all(|(a, b)| (a - b).abs() <= 1e-5), "{loaded:?} vs {evaluated:?}");
}

/// A model with an integer buffer and a mask as fields.
struct WithBuffers<D: Device> {
    fc: Linear<D>,
    steps: Tensor<D, i64>,
    mask: Tensor<D, u8>,
}
devtensor::module!(WithBuffers { fc, steps, mask });

/// An integer field is a buffer saved and loaded by its name; a mask field
/// moves with the model and stays out of checkpoints (PyTorch's
/// non-persistent buffer); neither is a parameter.
fn integer_and_mask_fields_are_buffers<D: Device>() {
    let model = WithBuffers {
        fc: Linear::<D>::new(3, 3),
        steps: Tensor::from_vec(vec![41, 2], [2]),
        mask: Tensor::<D, u8>::ones([3, 3]).tril(0),
    };
    assert_eq!(model.parameters().len(), 2);
    let moved = model.to::<Cpu>();
    assert_eq!((moved.steps.to_vec(), moved.mask.to_vec()), (model.steps.to_vec(), model.mask.to_vec()));
    let ckpt = Checkpoint::try_from_model(&model).unwrap();
    let int_names: Vec<&str> = ckpt.int_tensors().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(int_names, ["steps"]);
    let path = temp::<D>("buffers");
    ckpt.save(&path);
    let mut fresh = WithBuffers {
        fc: Linear::<D>::new(3, 3),
        steps: Tensor::from_vec(vec![0, 0], [2]),
        mask: Tensor::<D, u8>::zeros([3, 3]),
    };
    Checkpoint::<D>::load(&path).load_into(&mut fresh);
    std::fs::remove_file(&path).ok();
    assert_eq!(fresh.steps.to_vec(), vec![41, 2]);
    assert_eq!(fresh.fc.weight.to_vec(), model.fc.weight.to_vec());
    assert_eq!(fresh.mask.to_vec(), vec![0; 9], "a mask is not in the checkpoint");
}

device_tests! {
    integer_and_mask_fields_are_buffers => integer_and_mask_fields_are_buffers,
    module_lists_name_by_index_and_round_trip => module_lists_name_by_index_and_round_trip,
    round_trips_across_devices_with_optimizer_state => round_trips_across_devices_with_optimizer_state,
    mismatches_name_the_first_tensor => mismatches_name_the_first_tensor,
    non_strict_loads_report_missing_and_unexpected => non_strict_loads_report_missing_and_unexpected,
}
