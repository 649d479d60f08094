//! Layers built from the user's own tensors (issue 35). Each layer's
//! `from_weights` computes what the layer its tensors came from computes,
//! settings included; refuses tensors that do not fit with an error naming
//! the constructor and every shape; keeps a leaf as the same leaf (tying);
//! and a table from `Embedding::from_pretrained` stays frozen through moves,
//! checkpoints and optimizer steps, as PyTorch's does; and float buffers.

use crate::common::*;
use devtensor::io::Checkpoint;
use devtensor::nn::{
    BatchNorm2d, Buffer, Conv1d, Conv1dConfig, Conv2d, Conv2dConfig, Conv3d, Conv3dConfig, ConvTranspose1d,
    ConvTranspose1dConfig, ConvTranspose2d, ConvTranspose2dConfig, Embedding, GroupNorm, LayerNorm, Linear, MhaInput,
    Module, MultiheadAttention, RmsNorm, TensorKind, ToDtype,
};
use devtensor::optim::{Optimizer, Sgd, SgdConfig};
use devtensor::{Cpu, Device, Error, Result, Tensor};
use proptest::prelude::*;

type T = Tensor<Cpu, f64>;

fn randn(dims: &[usize]) -> T {
    Tensor::randn(dims)
}

/// `result` is the `Error::Shape` of `op`, whose first shape is `first`.
fn assert_misfit<L: std::fmt::Debug>(result: Result<L>, op: &str, first: &[usize]) {
    match result {
        Err(Error::Shape { op: got, shapes, .. }) if got == op => {
            assert_eq!(shapes[0].dims(), first, "{op}: the shapes it names: {shapes:?}");
        }
        other => panic!("{op} accepted or refused otherwise: {other:?}"),
    }
}

/// `rebuilt` is `layer` computed again: the same numbers on the same input.
fn assert_same(name: &str, rebuilt: &T, layer: &T) {
    assert_eq!(rebuilt.dims(), layer.dims(), "{name}");
    assert_eq!(rebuilt.to_vec(), layer.to_vec(), "{name}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cpu_cases(48)))]

    #[test]
    fn from_weights_rebuilds_each_layer_and_refuses_misfits(
        n in 1..3usize, c in 1..4usize, o in 1..4usize, k in 1..4usize, groups in 1..3usize,
        stride in 1..3usize, padding in 0..2usize, with_bias in any::<bool>(),
    ) {
        let (cg, og) = (c * groups, o * groups);
        let bias = |t: &Option<T>| if with_bias { t.clone() } else { None };

        let linear = Linear::<Cpu, f64>::new(c, o);
        let rebuilt = Linear::from_weights(linear.weight.clone(), bias(&linear.bias));
        let x = randn(&[n, c]);
        let reference = if with_bias { linear.clone() } else { linear.clone().without_bias() };
        assert_same("Linear", &rebuilt.forward(&x), &reference.forward(&x));
        prop_assert_eq!(rebuilt.weight.leaf_id(), linear.weight.leaf_id());
        assert_misfit(Linear::try_from_weights(linear.weight.clone(), Some(randn(&[o + 1]))), "Linear::from_weights", &[o, c]);
        assert_misfit(Linear::try_from_weights(randn(&[o, c, 1]), None), "Linear::from_weights", &[o, c, 1]);

        let config = Conv2dConfig { stride: [stride, 1], padding: [padding, 1], dilation: [1, 2], groups };
        let conv = Conv2d::<Cpu, f64>::with_config(cg, og, [k, 2], config);
        let rebuilt = Conv2d::from_weights(conv.weight.clone(), conv.bias.clone(), config);
        let image = randn(&[n, cg, k + 3, 5]);
        assert_same("Conv2d", &rebuilt.forward(&image), &conv.forward(&image));
        assert_misfit(Conv2d::try_from_weights(conv.weight.clone(), Some(randn(&[og + 1])), config), "Conv2d::from_weights", &[og, c, k, 2]);
        assert_misfit(Conv2d::try_from_weights(randn(&[og, c, k]), None, config), "Conv2d::from_weights", &[og, c, k]);
        let ungrouped = Conv2dConfig { groups: og + 1, ..config };
        assert!(matches!(Conv2d::try_from_weights(conv.weight.clone(), None, ungrouped), Err(Error::Argument { .. })));

        let config = Conv1dConfig { stride, padding, dilation: 1, groups };
        let conv = Conv1d::<Cpu, f64>::with_config(cg, og, k, config);
        let rebuilt = Conv1d::from_weights(conv.weight.clone(), conv.bias.clone(), config);
        let sequence = randn(&[n, cg, k + 4]);
        assert_same("Conv1d", &rebuilt.forward(&sequence), &conv.forward(&sequence));
        assert_misfit(Conv1d::try_from_weights(conv.weight.clone(), Some(randn(&[og + 1])), config), "Conv1d::from_weights", &[og, c, k]);

        let config = ConvTranspose2dConfig { stride: [stride, stride], groups, ..Default::default() };
        let up = ConvTranspose2d::<Cpu, f64>::with_config(cg, og, [k, k], config);
        let rebuilt = ConvTranspose2d::from_weights(up.weight.clone(), up.bias.clone(), config);
        assert_same("ConvTranspose2d", &rebuilt.forward(&image.narrow(3, 0, 3)), &up.forward(&image.narrow(3, 0, 3)));
        assert_misfit(ConvTranspose2d::try_from_weights(up.weight.clone(), Some(randn(&[og + 1])), config), "ConvTranspose2d::from_weights", &[cg, o, k, k]);

        let config = Conv3dConfig { stride: [1, stride, 1], padding: [padding, 0, 1], groups, ..Default::default() };
        let conv = Conv3d::<Cpu, f64>::with_config(cg, og, [k, 2, 1], config);
        let rebuilt = Conv3d::from_weights(conv.weight.clone(), conv.bias.clone(), config);
        let volume = randn(&[n, cg, k + 1, 3, 2]);
        assert_same("Conv3d", &rebuilt.forward(&volume), &conv.forward(&volume));
        prop_assert_eq!(rebuilt.weight.leaf_id(), conv.weight.leaf_id());
        assert_misfit(Conv3d::try_from_weights(conv.weight.clone(), Some(randn(&[og + 1])), config), "Conv3d::from_weights", &[og, c, k, 2, 1]);
        assert_misfit(Conv3d::try_from_weights(randn(&[og, c, k, 2]), None, config), "Conv3d::from_weights", &[og, c, k, 2]);

        let config = ConvTranspose1dConfig { stride, groups, ..Default::default() };
        let up = ConvTranspose1d::<Cpu, f64>::with_config(cg, og, k, config);
        let rebuilt = ConvTranspose1d::from_weights(up.weight.clone(), up.bias.clone(), config);
        assert_same("ConvTranspose1d", &rebuilt.forward(&sequence), &up.forward(&sequence));
        prop_assert_eq!(rebuilt.weight.leaf_id(), up.weight.leaf_id());
        assert_misfit(ConvTranspose1d::try_from_weights(up.weight.clone(), Some(randn(&[og + 1])), config), "ConvTranspose1d::from_weights", &[cg, o, k]);

        let bn = BatchNorm2d::<Cpu, f64>::new(c);
        let stats = |i: usize| bn.named_tensors()[i].2.clone();
        let mut rebuilt = BatchNorm2d::from_weights(randn(&[c]), randn(&[c]), randn(&[c]), stats(3)).eps(1e-3);
        let mut reference = BatchNorm2d::<Cpu, f64>::new(c).eps(1e-3);
        reference.weight = rebuilt.weight.clone();
        reference.bias = rebuilt.bias.clone();
        let image = randn(&[n + 1, c, 2, 2]);
        assert_same("BatchNorm2d (training)", &rebuilt.forward(&image), &reference.forward(&image));
        rebuilt.eval();
        let (mean, var) = (rebuilt.named_tensors()[2].2.clone(), rebuilt.named_tensors()[3].2.clone());
        let per_channel = |t: &T| t.reshape([1, c, 1, 1]);
        let expected = (&image - &per_channel(&mean)) / (&per_channel(&var) + 1e-3).sqrt() * per_channel(&rebuilt.weight)
            + per_channel(&rebuilt.bias);
        assert_same("BatchNorm2d (evaluation)", &rebuilt.forward(&image), &expected);
        assert_misfit(BatchNorm2d::try_from_weights(randn(&[c]), randn(&[c]), randn(&[c]), randn(&[c + 1])), "BatchNorm2d::from_weights", &[c]);

        let norm = GroupNorm::<Cpu, f64>::new(groups, cg);
        let rebuilt = GroupNorm::from_weights(groups, randn(&[cg]), randn(&[cg]));
        let mut reference = norm.clone();
        (reference.weight, reference.bias) = (rebuilt.weight.clone(), rebuilt.bias.clone());
        let x = randn(&[n, cg, 3]);
        assert_same("GroupNorm", &rebuilt.forward(&x), &reference.forward(&x));
        assert_misfit(GroupNorm::try_from_weights(groups, randn(&[cg]), randn(&[cg + 1])), "GroupNorm::from_weights", &[cg]);

        let norm = LayerNorm::<Cpu, f64>::new(&[c, 2]);
        let rebuilt = LayerNorm::from_weights(norm.weight.clone(), norm.bias.clone().expect("a bias"));
        let x = randn(&[n, c, 2]);
        assert_same("LayerNorm", &rebuilt.forward(&x), &norm.forward(&x));
        assert_misfit(LayerNorm::try_from_weights(randn(&[c, 2]), randn(&[2, c + 1])), "LayerNorm::from_weights", &[c, 2]);
        // PyTorch's bias=False: the values and gradients of a zero bias,
        // without the parameter.
        let zero_bias = LayerNorm::from_weights(randn(&[c, 2]), T::zeros([c, 2]));
        let no_bias = zero_bias.clone().without_bias();
        let x = x.requires_grad();
        let (with_zero, without) = (zero_bias.forward(&x), no_bias.forward(&x));
        assert_same("LayerNorm without bias", &without, &with_zero);
        let r = randn(&[n, c, 2]);
        let (g_zero, g_none) = ((&with_zero * &r).sum().backward(), (&without * &r).sum().backward());
        assert_same("LayerNorm without bias, dx", g_none.get(&x).unwrap(), g_zero.get(&x).unwrap());
        let (dw_none, dw_zero) = (g_none.get(&no_bias.weight).unwrap(), g_zero.get(&zero_bias.weight).unwrap());
        assert_same("LayerNorm without bias, dw", dw_none, dw_zero);
        let names: Vec<String> = no_bias.parameters().into_iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["weight"]);
        let rms = RmsNorm::<Cpu, f64>::new(&[c]);
        assert_same("RmsNorm", &RmsNorm::from_weights(rms.weight.clone()).forward(&x.narrow(2, 0, 1).reshape([n, c])), &rms.forward(&x.narrow(2, 0, 1).reshape([n, c])));

        let e = 2 * groups;
        let mha = MultiheadAttention::<Cpu, f64>::new(e, groups);
        let out_proj = Linear::from_weights(mha.out_proj.weight.clone(), bias(&mha.out_proj.bias));
        let rebuilt = MultiheadAttention::from_weights(groups, mha.in_proj_weight.clone(), bias(&mha.in_proj_bias), out_proj);
        let reference = if with_bias { mha.clone() } else { mha.clone().without_bias() };
        let x = randn(&[k, n, e]);
        assert_same("MultiheadAttention", &rebuilt.forward(MhaInput::self_attention(&x)).0, &reference.forward(MhaInput::self_attention(&x)).0);
        assert_misfit(
            MultiheadAttention::try_from_weights(groups, randn(&[3 * e + 1, e]), None, mha.out_proj.clone()),
            "MultiheadAttention::from_weights",
            &[3 * e + 1, e],
        );

        let table = Embedding::<Cpu, f64>::new(k + 1, c);
        let rebuilt = Embedding::from_weights(table.weight.clone(), None);
        let tokens = Tensor::<Cpu, i64>::from_vec((0..=k as i64).rev().collect(), [k + 1]);
        assert_same("Embedding", &rebuilt.forward(&tokens), &table.forward(&tokens));
        assert_misfit(Embedding::try_from_weights(table.weight.clone(), Some(k + 1)), "Embedding::from_weights", &[k + 1, c]);
    }
}

/// A computed tensor given to a layer becomes a new leaf with its values
/// (as `nn.Parameter(t)`); a leaf stays the same leaf, so that one weight
/// given to two layers is one parameter that gets both gradients.
#[test]
fn from_weights_makes_leaves_and_keeps_tied_ones() {
    let base = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]).requires_grad();
    let doubled = Linear::from_weights(&base * 2.0, None);
    assert!(doubled.weight.is_leaf() && doubled.weight.tracks_grad());
    assert_eq!(doubled.weight.to_vec(), vec![2.0, 4.0, 6.0, 8.0]);

    struct Tied<D: Device> {
        wte: Embedding<D>,
        head: Linear<D>,
    }
    devtensor::module!(Tied { wte, head });
    let wte = Embedding::from_weights(base.clone(), None);
    let model = Tied { head: Linear::from_weights(wte.weight.clone(), None), wte };
    assert_eq!(model.parameters().len(), 1);
    let tokens = Tensor::<Cpu, i64>::from_vec(vec![1], [1]);
    let loss = model.head.forward(&model.wte.forward(&tokens)).sum();
    let grads = loss.backward();
    // d/dW of sum(W e_1) where e_1 = W[1] = [3, 4]: the head gives each row
    // [3, 4]; the embedding row 1 gets the column sums [4, 6].
    assert_eq!(grads.get(&base).unwrap().to_vec(), vec![3.0, 4.0, 3.0 + 4.0, 4.0 + 6.0]);
}

/// `Embedding::from_pretrained` freezes its table, as PyTorch's
/// `freeze=True`: no gradient, no optimizer step, and it stays frozen when
/// the model moves to another device and when a checkpoint loads into it.
fn pretrained_tables_stay_frozen<D: Device>() {
    struct Net<D: Device> {
        table: Embedding<D>,
        head: Linear<D>,
    }
    devtensor::module!(Net { table, head });
    let vectors: Vec<f32> = (0..12).map(|v| v as f32 / 4.0).collect();
    let table = Embedding::from_pretrained(Tensor::<Cpu>::from_vec(vectors.clone(), [4, 3]), None);
    let mut net = Net { table, head: Linear::new(3, 2) }.to::<D>();
    assert!(!net.table.weight.tracks_grad() && net.head.weight.tracks_grad());
    let mut sgd = Sgd::new(&net, SgdConfig { lr: 0.5, ..Default::default() });
    let tokens = Tensor::<D, i64>::from_vec(vec![0, 3, 3], [3]);
    let head_before = net.head.weight.to_vec();
    for _ in 0..2 {
        let loss = net.head.forward(&net.table.forward(&tokens)).square().sum();
        let grads = loss.backward();
        assert!(grads.get(&net.table.weight).is_none());
        sgd.step(&mut net, &grads);
    }
    assert_eq!(net.table.weight.to_vec(), vectors);
    assert_ne!(net.head.weight.to_vec(), head_before);
    let mut reloaded =
        Net { table: Embedding::from_pretrained(Tensor::<D>::zeros([4, 3]), None), head: Linear::new(3, 2) };
    Checkpoint::from_model(&net).load_into(&mut reloaded);
    assert!(!reloaded.table.weight.tracks_grad() && reloaded.head.weight.tracks_grad());
    assert_eq!(reloaded.table.weight.to_vec(), vectors);
}

/// Float buffers (`register_buffer`, persistent or not): moved and
/// converted with the model, never trained, and in checkpoints exactly
/// when PyTorch's `state_dict` holds them.
fn float_buffers_move_convert_and_save_as_pytorchs<D: Device>() {
    struct Rotary<D: Device, E: devtensor::FloatElement> {
        proj: Linear<D, E>,
        inv_freq: Buffer<D, E>,
        scale: Buffer<D, E>,
    }
    devtensor::module!(Rotary<E> { proj, inv_freq, scale });
    impl<D: Device, E: devtensor::FloatElement> Rotary<D, E> {
        fn forward(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
            // [N, 4] · scale, plus the angle of each row's position.
            let angles = Tensor::<D, E>::ones([x.dims()[0], 1]).matmul(&self.inv_freq.unsqueeze(0));
            &(self.proj.forward(x) * &*self.scale) + &Tensor::cat(&[&angles.cos(), &angles.sin()], 1)
        }
    }
    let inv_freq: Vec<f32> = vec![1.0, 0.01];
    let mut model = Rotary {
        proj: Linear::<Cpu, f32>::new(4, 4),
        inv_freq: Buffer::non_persistent(Tensor::from_vec(inv_freq.clone(), [2])),
        scale: Buffer::new(Tensor::full([4], 2.0).requires_grad()),
    }
    .to::<D>();
    // PyTorch's state_dict: parameters and persistent buffers, in order.
    let named: Vec<(String, TensorKind)> = model.named_tensors().into_iter().map(|(n, k, _)| (n, k)).collect();
    let want =
        [("proj.weight", TensorKind::Parameter), ("proj.bias", TensorKind::Parameter), ("scale", TensorKind::Buffer)];
    assert_eq!(named, want.map(|(n, k)| (n.to_string(), k)));
    assert_eq!(model.parameters().len(), 2);
    assert!(!model.scale.tracks_grad() && model.scale.is_persistent() && !model.inv_freq.is_persistent());
    // Never trained: no gradient reaches a buffer, and a step leaves it.
    let x = Tensor::<D>::randn([3, 4]);
    let mut sgd = Sgd::new(&model, SgdConfig { lr: 0.1, ..Default::default() });
    let grads = model.forward(&x).square().sum().backward();
    assert!(grads.get(&model.scale).is_none() && grads.get(&model.inv_freq).is_none());
    assert!(grads.get(&model.proj.weight).is_some());
    sgd.step(&mut model, &grads);
    assert_eq!((model.scale.to_vec(), model.inv_freq.to_vec()), (vec![2.0; 4], inv_freq.clone()));
    // A checkpoint holds the persistent buffer and loads it back; the
    // non-persistent one keeps the model's own values.
    let saved = Checkpoint::from_model(&model);
    let names: Vec<&str> = saved.tensors().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["proj.weight", "proj.bias", "scale"]);
    let mut other = Rotary {
        proj: Linear::<D, f32>::new(4, 4),
        inv_freq: Buffer::non_persistent(Tensor::from_vec(vec![3.0, 4.0], [2])),
        scale: Buffer::new(Tensor::zeros([4])),
    };
    saved.load_into(&mut other);
    assert_eq!((other.scale.to_vec(), other.inv_freq.to_vec()), (vec![2.0; 4], vec![3.0, 4.0]));
    assert!(!other.scale.tracks_grad());
    // Moved to the CPU and converted to float64 with the model, persistence kept.
    let moved = model.to::<Cpu>().to_dtype::<f64>();
    assert_eq!(moved.inv_freq.to_vec(), vec![1.0, 0.009999999776482582]);
    assert!(moved.scale.is_persistent() && !moved.inv_freq.is_persistent());
    let (got, want) = (moved.forward(&x.to::<Cpu>().to_dtype::<f64>()).to_vec(), model.forward(&x).to_vec());
    assert!(got.iter().zip(&want).all(|(g, w)| (g - *w as f64).abs() < 1e-5), "{got:?} against {want:?}");
    // Replacing a buffer's values keeps it a buffer.
    model.scale.set(Tensor::<D>::ones([4]).requires_grad());
    assert!(!model.scale.tracks_grad() && model.scale.is_persistent());
}

/// `ModuleDict`: PyTorch's `state_dict` names (`heads.<key>.<name>`, in
/// insertion order, a replaced key keeping its place), checkpoints that
/// load by those names, moves, dtype conversions and train/eval reaching
/// every module, and the names PyTorch refuses.
fn module_dicts_name_save_and_move_as_pytorchs<D: Device>() {
    use devtensor::nn::{BatchNorm1d, ModuleDict, ToDtype};
    struct Heads<D: Device, E: devtensor::FloatElement> {
        heads: ModuleDict<Linear<D, E>>,
        norms: ModuleDict<BatchNorm1d<D, E>>,
    }
    devtensor::module!(Heads<E> { heads, norms });
    let mut heads: ModuleDict<Linear<D, f32>> =
        [("b", Linear::new(4, 2)), ("a", Linear::new(4, 3))].into_iter().collect();
    let replaced = heads.insert("b", Linear::new(4, 5)).expect("the old module");
    assert_eq!(replaced.weight.dims(), &[2, 4]);
    heads.insert("c", Linear::new(4, 1));
    assert_eq!(heads.remove("c").map(|l| l.weight.dims().to_vec()), Some(vec![1, 4]));
    let norms = [("x", BatchNorm1d::new(3))].into_iter().collect();
    let mut model = Heads { heads, norms };
    // torch: {k for k in nn.ModuleDict({"b": nn.Linear(4, 5), "a": nn.Linear(4, 3)}).state_dict()},
    // and BatchNorm1d's buffers, num_batches_tracked among the integers.
    let names: Vec<String> = model.named_tensors().into_iter().map(|(n, _, _)| n).collect();
    let want = ["heads.b.weight", "heads.b.bias", "heads.a.weight", "heads.a.bias", "norms.x.weight", "norms.x.bias"];
    assert_eq!(names[..6], want);
    assert_eq!(names[6..], ["norms.x.running_mean", "norms.x.running_var"]);
    let saved = Checkpoint::from_model(&model);
    assert!(saved.int_tensors().iter().any(|(n, _)| n == "norms.x.num_batches_tracked"));
    // Loaded by name into a dictionary built in another order.
    let mut other = Heads {
        heads: [("a", Linear::<D, f32>::new(4, 3)), ("b", Linear::new(4, 5))].into_iter().collect(),
        norms: [("x", BatchNorm1d::new(3))].into_iter().collect(),
    };
    saved.load_into(&mut other);
    assert_eq!(other.heads["b"].weight.to_vec(), model.heads["b"].weight.to_vec());
    assert_eq!(other.heads.keys().collect::<Vec<_>>(), ["a", "b"]);
    // Eval mode, a move and a conversion reach every module.
    model.eval();
    let x = Tensor::<D>::randn([2, 3]);
    assert_eq!(
        model.norms["x"].forward(&x).to_vec(),
        x.to_vec().iter().map(|v| v / (1f32 + 1e-5).sqrt()).collect::<Vec<_>>()
    );
    let moved = model.to::<Cpu>().to_dtype::<f64>();
    assert_eq!(moved.heads["a"].weight.to_vec().len(), 12);
    assert!(moved.heads.values().all(|l| l.weight.tracks_grad()));
    // PyTorch's KeyError for a name with a dot or an empty one.
    let err = model.heads.try_insert("a.b", Linear::new(4, 1)).unwrap_err().to_string();
    assert!(err.contains("ModuleDict::insert") && err.contains("no \".\""), "{err}");
    assert!(model.heads.try_insert("", Linear::new(4, 1)).is_err());
    assert!(model.heads.get("missing").is_none() && model.heads.len() == 2);
}

device_tests! {
    module_dicts_name_save_and_move_as_pytorchs => module_dicts_name_save_and_move_as_pytorchs,
    pretrained_tables_stay_frozen => pretrained_tables_stay_frozen,
    float_buffers_move_convert_and_save_as_pytorchs => float_buffers_move_convert_and_save_as_pytorchs,
}
