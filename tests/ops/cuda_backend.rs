//! The CUDA backend, run for real on `Cuda<0>` and `Cuda<1>` and compared
//! with the CPU backend.
//!
//! Without a CUDA driver (plain `cargo test`) every test prints a `SKIP`
//! line and passes, unless `DEVTENSOR_REQUIRE_CUDA=1`, which makes it fail.
//! On the emulated GPU:
//!
//! ```sh
//! DEVTENSOR_REQUIRE_CUDA=1 bash scripts/with-emu.sh cargo test --test ops cuda_backend::
//! ```
//!
//! Not under Miri, which cannot load a driver or start the child processes.
#![cfg(not(miri))]

use devtensor::{Cpu, Cuda, Device, Element, Error, Generator, Tensor};

/// Whether `Cuda<N>` can run the test; prints why not, or fails when the
/// environment demands a GPU.
fn ready<const N: usize>(test: &str) -> bool {
    match Cuda::<N>::try_init() {
        Ok(()) => true,
        Err(err) => {
            if std::env::var("DEVTENSOR_REQUIRE_CUDA").as_deref() == Ok("1") {
                panic!("{test}: DEVTENSOR_REQUIRE_CUDA=1 but {err}");
            }
            println!("SKIP {test} on Cuda<{N}>: {err}");
            false
        }
    }
}

/// Runs `body` on both GPUs (when present).
macro_rules! on_gpus {
    ($name:ident, $body:ident) => {
        #[test]
        fn $name() {
            if ready::<0>(stringify!($name)) {
                $body::<Cuda<0>>();
            }
            if ready::<1>(stringify!($name)) {
                $body::<Cuda<1>>();
            }
        }
    };
}

/// Asserts two element lists agree: exactly for integers, to a relative
/// 1e-5 for floats (reductions add in a different order), NaN matching NaN.
fn assert_close<E: Element>(what: &str, gpu: &[E], cpu: &[E]) {
    assert_eq!(gpu.len(), cpu.len(), "{what}: lengths differ");
    for (i, (&g, &c)) in gpu.iter().zip(cpu).enumerate() {
        let ok = if E::IS_FLOAT {
            let (g, c) = (g.to_f64(), c.to_f64());
            (g.is_nan() && c.is_nan()) || g == c || (g - c).abs() <= 1e-5 * c.abs().max(1.0)
        } else {
            g == c
        };
        assert!(ok, "{what}: element {i} is {g} on the GPU and {c} on the CPU");
    }
}

/// The CPU result and the GPU result of the same computation.
fn same<D: Device, E: Element>(what: &str, gpu: &Tensor<D, E>, cpu: &Tensor<Cpu, E>) {
    assert_eq!(gpu.dims(), cpu.dims(), "{what}: shapes differ");
    assert_close(&format!("{what} on {}", D::name()), &gpu.to_vec(), &cpu.to_vec());
}

/// Sizes that cover one element, sizes around and over the block size (256)
/// and not multiples of it, and several blocks.
const SIZES: [usize; 6] = [1, 7, 255, 257, 1000, 5003];

/// A random f32 tensor on the CPU.
fn rand_cpu(shape: &[usize], g: &mut Generator) -> Tensor<Cpu> {
    Tensor::<Cpu>::randn_with(shape, g)
}

fn round_trips<D: Device>() {
    for n in [0, 1, 255, 257, 5003] {
        let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
        let x = Tensor::<D>::from_vec(data.clone(), [n]);
        assert_eq!(x.to_vec(), data, "f32 round trip of {n}");
        let ints: Vec<i64> = (0..n as i64).map(|i| i * 1_000_000_007 - 5).collect();
        assert_eq!(Tensor::<D, i64>::from_vec(ints.clone(), [n]).to_vec(), ints);
        let bytes: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
        assert_eq!(Tensor::<D, u8>::from_vec(bytes.clone(), [n]).to_vec(), bytes);
        let wide: Vec<f64> = (0..n).map(|i| i as f64 / 3.0).collect();
        assert_eq!(Tensor::<D, f64>::from_vec(wide.clone(), [n]).to_vec(), wide);
        assert_eq!(Tensor::<D>::full([n], 2.5).to_vec(), vec![2.5; n]);
        assert_eq!(Tensor::<D, i64>::full([n], -9).to_vec(), vec![-9; n]);
    }
    // Back and forth between the host and the device.
    let cpu = Tensor::<Cpu>::from_vec((0..24).map(|i| i as f32).collect(), [2, 3, 4]);
    let gpu = cpu.to::<D>();
    same("to", &gpu, &cpu);
    same("to and back", &gpu.to::<Cpu>(), &cpu);
}
on_gpus!(round_trip, round_trips);

fn strided_views<D: Device>() {
    let mut g = Generator::new(1);
    let cpu = rand_cpu(&[5, 6, 7], &mut g);
    let gpu = cpu.to::<D>();
    same("transpose", &gpu.transpose(0, 2), &cpu.transpose(0, 2));
    same("permute", &gpu.permute([1, 2, 0]), &cpu.permute([1, 2, 0]));
    same("narrow", &gpu.narrow(1, 2, 3), &cpu.narrow(1, 2, 3));
    same("contiguous", &gpu.transpose(0, 1).contiguous(), &cpu.transpose(0, 1).contiguous());
    same("broadcast", &gpu.narrow(0, 1, 1).broadcast_to([4, 6, 7]), &cpu.narrow(0, 1, 1).broadcast_to([4, 6, 7]));
    same("empty narrow", &gpu.narrow(1, 3, 0), &cpu.narrow(1, 3, 0));
    // Casts between every pair of element types, from a strided view.
    let ints = Tensor::<Cpu, i64>::from_vec((0..42).map(|i| i * 37 - 700).collect(), [6, 7]);
    let ints_gpu = ints.to::<D>();
    same("i64 -> u8", &ints_gpu.t().to_dtype::<u8>(), &ints.t().to_dtype::<u8>());
    same("i64 -> f32", &ints_gpu.t().to_dtype::<f32>(), &ints.t().to_dtype::<f32>());
    same("f32 -> i64", &gpu.transpose(0, 2).to_dtype::<i64>(), &cpu.transpose(0, 2).to_dtype::<i64>());
    same("f32 -> f64", &gpu.to_dtype::<f64>(), &cpu.to_dtype::<f64>());
    same("f32 -> f32", &gpu.transpose(0, 1).to_dtype::<f32>(), &cpu.transpose(0, 1).to_dtype::<f32>());
}
on_gpus!(strided_copies_and_casts, strided_views);

fn binary_ops<D: Device>() {
    let mut g = Generator::new(2);
    for n in SIZES {
        let (a, b) = (rand_cpu(&[n], &mut g), rand_cpu(&[n], &mut g));
        let (ga, gb) = (a.to::<D>(), b.to::<D>());
        same("add", &(&ga + &gb), &(&a + &b));
        same("sub", &(&ga - &gb), &(&a - &b));
        same("mul", &(&ga * &gb), &(&a * &b));
        same("div", &(&ga / &gb), &(&a / &b));
        same("maximum", &ga.maximum(&gb), &a.maximum(&b));
        same("minimum", &ga.minimum(&gb), &a.minimum(&b));
        same("add_scalar", &ga.try_add_scalar(1.5).unwrap(), &a.try_add_scalar(1.5).unwrap());
        same("div_scalar", &ga.try_div_scalar(3.0).unwrap(), &a.try_div_scalar(3.0).unwrap());
    }
    // Broadcasting and non-contiguous operands.
    let a = rand_cpu(&[4, 1, 33], &mut g);
    let b = rand_cpu(&[33, 9], &mut g);
    let (ga, gb) = (a.to::<D>(), b.to::<D>());
    same("broadcast add of a transpose", &(&ga + &gb.t()), &(&a + &b.t()));
    same("broadcast sub of a transpose", &(&gb.t() - &ga), &(&b.t() - &a));
    same("scalar first", &(2.0 - &gb.t()), &(2.0 - &b.t()));
    // In place.
    let (mut x, mut gx) = (rand_cpu(&[9, 33], &mut g), Tensor::<D>::zeros([1]));
    gx = {
        let _ = gx;
        x.to::<D>()
    };
    x += &b.t();
    gx += &gb.t();
    same("+= of a transpose", &gx, &x);
    x *= &a.narrow(0, 1, 1).squeeze(0);
    gx *= &ga.narrow(0, 1, 1).squeeze(0);
    same("*= broadcast", &gx, &x);
    // Integers: wrapping, and division by zero is the CPU's error.
    let i = Tensor::<Cpu, i64>::from_vec((0..600).map(|v| v * 3_000_000_000_000_000 - 7).collect(), [600]);
    let j = Tensor::<Cpu, i64>::from_vec((0..600).map(|v| v % 13 - 6).collect(), [600]);
    let (gi, gj) = (i.to::<D>(), j.to::<D>());
    same("i64 mul wraps", &(&gi * &gj), &(&i * &j));
    for (cpu_err, gpu_err, op) in [
        (i.try_div_trunc(&j).unwrap_err(), gi.try_div_trunc(&gj).unwrap_err(), "div_trunc"),
        (i.try_div_floor(&j).unwrap_err(), gi.try_div_floor(&gj).unwrap_err(), "div_floor"),
    ] {
        assert!(matches!(gpu_err, Error::Argument { op: o, .. } if o == op), "{gpu_err}");
        assert_eq!(gpu_err.to_string(), cpu_err.to_string().replace("Cpu", &D::name()));
    }
    assert!(gi.try_div_trunc_scalar(0).is_err() && gj.try_rdiv_floor_scalar(5).is_err());
    let nonzero = j.try_add_scalar(100).unwrap();
    let gnonzero = nonzero.to::<D>();
    same("i64 div_trunc", &gi.div_trunc(&gnonzero), &i.div_trunc(&nonzero));
    same("i64 div_floor", &gi.div_floor(&gnonzero), &i.div_floor(&nonzero));
    same("i64 / (true division)", &(&gi / &gj), &(&i / &j));
    let (f, g) = (i.to_dtype::<f64>(), j.to_dtype::<f64>());
    same("f64 div_floor", &f.to::<D>().div_floor(&g.to::<D>()), &f.div_floor(&g));
    same("f64 div_trunc", &f.to::<D>().div_trunc(&g.to::<D>()), &f.div_trunc(&g));
    let u = Tensor::<Cpu, u8>::from_vec((0..300).map(|v| v as u8).collect(), [300]);
    same("u8 add wraps", &(&u.to::<D>() + &u.to::<D>()), &(&u + &u));
    // Empty operands launch nothing.
    let e = Tensor::<D>::zeros([0, 3]);
    assert_eq!((&e + &e).dims(), &[0, 3]);
}
on_gpus!(binary, binary_ops);

fn unary_ops<D: Device>() {
    let mut g = Generator::new(3);
    for n in SIZES {
        let x = rand_cpu(&[n], &mut g);
        let gx = x.to::<D>();
        same("neg", &gx.neg(), &x.neg());
        same("abs", &gx.abs(), &x.abs());
        same("relu", &gx.relu(), &x.relu());
        same("square", &gx.square(), &x.square());
        same("clamp", &gx.clamp(-0.5, 0.25), &x.clamp(-0.5, 0.25));
        same("exp", &gx.exp(), &x.exp());
        same("log", &gx.abs().log(), &x.abs().log());
        same("sqrt", &gx.abs().sqrt(), &x.abs().sqrt());
        same("tanh", &gx.tanh(), &x.tanh());
        same("sigmoid", &gx.sigmoid(), &x.sigmoid());
        same("sin", &gx.sin(), &x.sin());
        same("cos", &gx.cos(), &x.cos());
        same("recip", &gx.recip(), &x.recip());
        same("powf", &gx.abs().powf(1.7), &x.abs().powf(1.7));
    }
    let x = rand_cpu(&[17, 23], &mut g);
    same("exp of a transpose", &x.to::<D>().t().exp(), &x.t().exp());
    let i = Tensor::<Cpu, i64>::from_vec(vec![i64::MIN, -3, 0, 5], [4]);
    same("i64 abs", &i.to::<D>().abs(), &i.abs());
    same("i64 clamp", &i.to::<D>().clamp(-2, 3), &i.clamp(-2, 3));
    assert_eq!(Tensor::<D>::zeros([0]).exp().dims(), &[0]);
}
on_gpus!(unary, unary_ops);

fn compare_ops<D: Device>() {
    let mut g = Generator::new(4);
    for n in SIZES {
        let a = rand_cpu(&[n], &mut g);
        let b = rand_cpu(&[n], &mut g);
        let (ga, gb) = (a.to::<D>(), b.to::<D>());
        same("eq", &ga.eq(&ga), &a.eq(&a));
        same("ne", &ga.ne(&gb), &a.ne(&b));
        same("lt", &ga.lt(&gb), &a.lt(&b));
        same("le", &ga.le(&gb), &a.le(&b));
        same("gt", &ga.gt(&gb), &a.gt(&b));
        same("ge", &ga.ge(&gb), &a.ge(&b));
        same("gt_scalar", &ga.gt_scalar(0.0), &a.gt_scalar(0.0));
        let (m, gm) = (a.gt(&b), ga.gt(&gb));
        same("logical_not", &gm.logical_not(), &m.logical_not());
        let (k, gk) = (a.lt_scalar(0.3), ga.lt_scalar(0.3));
        same("logical_and", &gm.logical_and(&gk), &m.logical_and(&k));
        same("logical_or", &gm.logical_or(&gk), &m.logical_or(&k));
        same("where", &gm.where_cond(&ga, &gb), &m.where_cond(&a, &b));
    }
    let a = rand_cpu(&[8, 1], &mut g);
    let b = rand_cpu(&[5, 8], &mut g);
    let (ga, gb) = (a.to::<D>(), b.to::<D>());
    same("broadcast lt of a transpose", &ga.lt(&gb.t()), &a.lt(&b.t()));
    same(
        "broadcast where",
        &ga.gt_scalar(0.0).where_cond(&gb.t(), &Tensor::<D>::zeros([1])),
        &a.gt_scalar(0.0).where_cond(&b.t(), &Tensor::<Cpu>::zeros([1])),
    );
}
on_gpus!(compare, compare_ops);

fn reduce_ops<D: Device>() {
    let mut g = Generator::new(6);
    // Whole tensors (one output, a block), long rows, and short columns
    // with many outputs (a thread each), from dense and strided layouts.
    for shape in [vec![5003], vec![70_001], vec![7, 1000], vec![1000, 7], vec![3, 130, 5], vec![0, 4]] {
        let x = rand_cpu(&shape, &mut g);
        let gx = x.to::<D>();
        if x.elem_count() > 0 {
            same("sum", &gx.sum(), &x.sum());
            same("max", &gx.max(), &x.max());
            same("min", &gx.min(), &x.min());
            same("argmax_all", &gx.argmax_all(), &x.argmax_all());
            same("argmin_all", &gx.argmin_all(), &x.argmin_all());
        }
        for axis in 0..shape.len() as isize {
            same("sum_axis", &gx.sum_axis(axis), &x.sum_axis(axis));
            same("mean_axis", &gx.mean_axis(axis), &x.mean_axis(axis));
            if shape[axis as usize] > 0 {
                same("max_axis", &gx.max_axis(axis), &x.max_axis(axis));
                same("min_axis", &gx.min_axis(axis), &x.min_axis(axis));
                same("argmax", &gx.argmax(axis), &x.argmax(axis));
                same("argmin", &gx.argmin(axis), &x.argmin(axis));
            }
            same("softmax", &gx.softmax(axis), &x.softmax(axis));
            same("log_softmax", &gx.log_softmax(axis), &x.log_softmax(axis));
        }
    }
    let x = rand_cpu(&[40, 300], &mut g);
    let gx = x.to::<D>();
    same("sum_axis of a transpose", &gx.t().sum_axis(1), &x.t().sum_axis(1));
    same("argmax of a transpose", &gx.t().argmax(0), &x.t().argmax(0));
    same("softmax of a transpose", &gx.t().softmax(1), &x.t().softmax(1));
    let i = Tensor::<Cpu, i64>::from_vec((0..999).map(|v| (v * 7919) % 1013 - 500).collect(), [27, 37]);
    let gi = i.to::<D>();
    same("i64 sum_axis", &gi.sum_axis(0), &i.sum_axis(0));
    same("i64 max_axis", &gi.max_axis(1), &i.max_axis(1));
    same("i64 argmin", &gi.argmin(1), &i.argmin(1));
    // A whole tensor above the two-pass threshold, with ties and a NaN.
    let mut v: Vec<f64> = (0..40_000).map(|i| ((i * 37) % 1001) as f64).collect();
    same(
        "f64 sum, two passes",
        &Tensor::<Cpu, f64>::from_vec(v.clone(), [40_000]).to::<D>().sum(),
        &Tensor::<Cpu, f64>::from_vec(v.clone(), [40_000]).sum(),
    );
    let ties = Tensor::<Cpu, f64>::from_vec(v.clone(), [40_000]);
    same("argmax with ties, two passes", &ties.to::<D>().argmax_all(), &ties.argmax_all());
    same("argmin with ties, two passes", &ties.to::<D>().argmin_all(), &ties.argmin_all());
    v[31_000] = f64::NAN;
    let nan = Tensor::<Cpu, f64>::from_vec(v, [40_000]);
    same("argmax with a NaN, two passes", &nan.to::<D>().argmax_all(), &nan.argmax_all());
    same("max with a NaN, two passes", &nan.to::<D>().max(), &nan.max());
    let u = Tensor::<Cpu, u8>::from_vec((0..999).map(|v| (v % 251) as u8).collect(), [999]);
    same("u8 sum wraps", &u.to::<D>().sum(), &u.sum());
}
on_gpus!(reduce, reduce_ops);

fn index_ops<D: Device>() {
    let mut g = Generator::new(7);
    let x = rand_cpu(&[30, 41], &mut g);
    let gx = x.to::<D>();
    let idx = Tensor::<Cpu, i64>::from_vec((0..300).map(|v| (v * 17) % 30).collect(), [300]);
    let gidx = idx.to::<D>();
    same("index_select axis 0", &gx.index_select(0, &gidx), &x.index_select(0, &idx));
    same("index_select of a transpose", &gx.t().index_select(1, &gidx), &x.t().index_select(1, &idx));
    let gather_idx = Tensor::<Cpu, i64>::from_vec((0..30 * 41).map(|v| (v * 13) % 30).collect(), [30, 41]);
    let ggather = gather_idx.to::<D>();
    same("gather", &gx.gather(0, &ggather), &x.gather(0, &gather_idx));
    let dst = Tensor::<Cpu>::zeros([30, 41]);
    same("scatter_add", &dst.to::<D>().scatter_add(0, &ggather, &gx), &dst.scatter_add(0, &gather_idx, &x));
    // A dense destination at an offset: copied device to device, no kernel.
    let big = rand_cpu(&[35, 41], &mut g);
    same(
        "scatter_add into a narrowed tensor",
        &big.to::<D>().narrow(0, 2, 30).scatter_add(0, &ggather, &gx),
        &big.narrow(0, 2, 30).scatter_add(0, &gather_idx, &x),
    );
    let src = rand_cpu(&[300, 41], &mut g);
    same("index_add", &gx.index_add(0, &gidx, &src.to::<D>()), &x.index_add(0, &idx, &src));
    let y = rand_cpu(&[30, 5], &mut g);
    let gy = y.to::<D>();
    same("cat", &Tensor::cat(&[&gx, &gy, &gx.narrow(1, 0, 0)], 1), &Tensor::cat(&[&x, &y, &x.narrow(1, 0, 0)], 1));
    same("cat of transposes", &Tensor::cat(&[&gx.t(), &gy.t()], 0), &Tensor::cat(&[&x.t(), &y.t()], 0));
    same("stack", &Tensor::stack(&[&gx, &gx], 1), &Tensor::stack(&[&x, &x], 1));
    // The bad index is named, with the CPU's message.
    let bad = Tensor::<Cpu, i64>::from_vec(vec![0, 3, 30, -1], [4]);
    let cpu_err = x.try_index_select(0, &bad).unwrap_err();
    let gpu_err = gx.try_index_select(0, &bad.to::<D>()).unwrap_err();
    assert!(matches!(gpu_err, Error::Index { index: 30, .. }), "{gpu_err}");
    assert_eq!(gpu_err.to_string(), cpu_err.to_string().replace("Cpu", &D::name()));
    let empty = Tensor::<D, i64>::zeros([0]);
    assert_eq!(gx.index_select(0, &empty).dims(), &[0, 41]);
}
on_gpus!(index, index_ops);

fn matmul_ops<D: Device>() {
    let mut g = Generator::new(8);
    for (m, k, n) in [(1, 1, 1), (3, 5, 7), (33, 17, 65), (64, 0, 3), (0, 4, 5)] {
        let (a, b) = (rand_cpu(&[m, k], &mut g), rand_cpu(&[k, n], &mut g));
        let (ga, gb) = (a.to::<D>(), b.to::<D>());
        same("matmul", &ga.matmul(&gb), &a.matmul(&b));
    }
    let a = rand_cpu(&[4, 9, 6], &mut g);
    let b = rand_cpu(&[6, 11], &mut g);
    let (ga, gb) = (a.to::<D>(), b.to::<D>());
    same("batched, broadcast rhs", &ga.matmul(&gb), &a.matmul(&b));
    same(
        "transposed operands",
        &gb.t().matmul(&ga.narrow(0, 1, 1).squeeze(0).t()),
        &b.t().matmul(&a.narrow(0, 1, 1).squeeze(0).t()),
    );
    // Transposed operands go to cuBLAS as they are, batched or not.
    let c = rand_cpu(&[4, 11, 9], &mut g);
    let gc = c.to::<D>();
    same("batched transposed lhs", &gc.transpose(1, 2).matmul(&gb.t()), &c.transpose(1, 2).matmul(&b.t()));
    let e = rand_cpu(&[4, 5, 11], &mut g);
    let ge = e.to::<D>();
    same(
        "batched transposed both",
        &gc.transpose(1, 2).matmul(&ge.transpose(1, 2)),
        &c.transpose(1, 2).matmul(&e.transpose(1, 2)),
    );
    let d = rand_cpu(&[7, 3], &mut g);
    let gd = d.to::<D>();
    same("transposed 2-D", &gd.t().matmul(&gd), &d.t().matmul(&d));
    same("row vector times transpose", &gd.narrow(0, 2, 1).matmul(&gd.t()), &d.narrow(0, 2, 1).matmul(&d.t()));
    let a64 = a.to_dtype::<f64>();
    let b64 = b.to_dtype::<f64>();
    same("f64", &a64.to::<D>().matmul(&b64.to::<D>()), &a64.matmul(&b64));
    same("f64 transposed", &b64.to::<D>().t().matmul(&b64.to::<D>()), &b64.t().matmul(&b64));
}
on_gpus!(matmul, matmul_ops);

/// A small deterministic generator for shapes and axes (xorshift).
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn random_views<D: Device>() {
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
    let mut g = Generator::new(9);
    for _ in 0..40 {
        // Rank 1 to 4, sizes 0 to 6 (1 often, so that axes merge and broadcast).
        let rank = 1 + dice.below(4);
        let dims: Vec<usize> = (0..rank).map(|_| [0, 1, 1, 2, 3, 5, 6, 17][dice.below(8)]).collect();
        let x = rand_cpu(&dims, &mut g);
        // A random permutation, then maybe a narrowed first axis: a view
        // that is strided in general.
        let mut perm: Vec<usize> = (0..rank).collect();
        for i in (1..rank).rev() {
            perm.swap(i, dice.below(i + 1));
        }
        let mut view = x.permute(perm.clone());
        let mut gview = x.to::<D>().permute(perm);
        if view.dims()[0] > 1 {
            let len = view.dims()[0] - 1;
            view = view.narrow(0, 1, len);
            gview = gview.narrow(0, 1, len);
        }
        let what = format!("view {:?} of {:?}", view.dims(), dims);
        let shape = view.dims().to_vec();
        // A right-hand side broadcast along random axes.
        let rhs_dims: Vec<usize> = shape.iter().map(|&d| if dice.below(2) == 0 { 1 } else { d }).collect();
        let y = rand_cpu(&rhs_dims, &mut g);
        let gy = y.to::<D>();
        same(&format!("add, {what}"), &(&gview + &gy), &(&view + &y));
        same(&format!("maximum, {what}"), &gview.maximum(&gy), &view.maximum(&y));
        same(&format!("tanh, {what}"), &gview.tanh(), &view.tanh());
        same(&format!("lt, {what}"), &gview.lt(&gy), &view.lt(&y));
        same(&format!("contiguous, {what}"), &gview.contiguous(), &view.contiguous());
        same(&format!("to i64, {what}"), &gview.to_dtype::<i64>(), &view.to_dtype::<i64>());
        for (axis, &size) in shape.iter().enumerate() {
            let a = axis as isize;
            same(&format!("sum_axis {axis}, {what}"), &gview.sum_axis(a), &view.sum_axis(a));
            same(&format!("softmax {axis}, {what}"), &gview.softmax(a), &view.softmax(a));
            if size > 0 {
                same(&format!("min_axis {axis}, {what}"), &gview.min_axis(a), &view.min_axis(a));
                same(&format!("argmax {axis}, {what}"), &gview.argmax(a), &view.argmax(a));
            }
        }
    }
}
on_gpus!(random_shapes_and_views, random_views);

fn moves_between_gpus<D: Device>() {
    let mut g = Generator::new(5);
    let x = rand_cpu(&[33, 17], &mut g);
    let on0 = x.to::<Cuda<0>>();
    let on1: Tensor<Cuda<1>> = on0.t().to::<Cuda<1>>();
    same("Cuda<0> -> Cuda<1>", &on1, &x.t());
    same("Cuda<1> -> Cuda<0> after an op", &(&on1 + &on1).to::<Cuda<0>>(), &(&x.t() + &x.t()));
    let labels = Tensor::<Cpu, i64>::from_vec((0..1000).map(|v| v * 3 - 77).collect(), [10, 100]);
    same("i64 Cuda<0> -> Cuda<1>", &labels.to::<Cuda<0>>().narrow(1, 5, 50).to::<Cuda<1>>(), &labels.narrow(1, 5, 50));
    let empty = Tensor::<Cuda<0>>::zeros([0, 4]).to::<Cuda<1>>();
    assert_eq!(empty.dims(), &[0, 4]);
    let _ = D::name();
}

#[test]
fn moves_between_devices() {
    if ready::<0>("moves_between_devices") && ready::<1>("moves_between_devices") {
        moves_between_gpus::<Cuda<0>>();
    }
}

#[test]
fn unavailable_without_a_driver_or_device() {
    // Ordinal 7 exists on no machine this suite runs on (the emulator has 2).
    assert!(!Cuda::<7>::is_available());
    let err = Tensor::<Cuda<7>>::try_zeros([2]).unwrap_err();
    assert!(matches!(&err, Error::DeviceUnavailable { device, .. } if device == "Cuda<7>"), "{err}");
    if std::env::var_os("DEVTENSOR_EMU_DRIVER").is_none()
        && std::env::var("DEVTENSOR_REQUIRE_CUDA").as_deref() != Ok("1")
    {
        // No driver on this machine: Cuda<0> is unavailable too, with a reason.
        if let Err(err) = Cuda::<0>::try_init() {
            assert!(err.to_string().starts_with("device Cuda<0> is unavailable: "), "{err}");
        }
    }
}

/// Runs this test binary again, filtered to `test` (a test of this module),
/// with `DEVTENSOR_CUDA_CHILD=1` and the given environment changes, and
/// returns its output.
fn run_child(test: &str, env: &[(&str, Option<&str>)]) -> String {
    // The harness names a test by its path below the crate root.
    let module = module_path!().split_once("::").map_or("", |(_, module)| module);
    let exact = format!("{module}::{test}");
    let mut cmd = std::process::Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args(["--exact", &exact, "--nocapture", "--test-threads=1"]).env("DEVTENSOR_CUDA_CHILD", "1");
    for (key, value) in env {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    let out = cmd.output().expect("the test binary runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the child run of {test} failed:\n{text}");
    text
}

fn in_child() -> bool {
    std::env::var_os("DEVTENSOR_CUDA_CHILD").is_some()
}

#[test]
fn unavailable_without_the_driver_on_the_search_path() {
    if in_child() {
        match Cuda::<0>::try_init() {
            Err(err) => {
                assert!(!Cuda::<0>::is_available());
                assert!(matches!(err, Error::DeviceUnavailable { .. }), "{err}");
                let text = err.to_string();
                assert!(text.contains("no CUDA driver") || text.contains("NVRTC"), "{text}");
                println!("CHILD: {text}");
            }
            // A real driver installed system-wide is found without the path.
            Ok(()) => println!("SKIP: a CUDA driver outside LD_LIBRARY_PATH was found"),
        }
        return;
    }
    let text = run_child("unavailable_without_the_driver_on_the_search_path", &[("LD_LIBRARY_PATH", None)]);
    assert!(text.contains("CHILD: ") || text.contains("SKIP"), "{text}");
}

#[test]
fn out_of_memory() {
    const MIB: usize = 1 << 20;
    if in_child() {
        if !ready::<0>("out_of_memory") {
            return;
        }
        // Budget: 5 MiB (set by the parent). A 1.5 MiB tensor takes a 2 MiB
        // block, which stays cached after the drop; a 3 MiB tensor (a 4 MiB
        // block) then only fits once the cache has been emptied.
        let small = Tensor::<Cuda<0>>::zeros([3 * MIB / 8]);
        drop(small);
        let big = Tensor::<Cuda<0>>::full([3 * MIB / 4], 1.0);
        assert_eq!(big.sum().item(), (3 * MIB / 4) as f32);
        drop(big);
        let err = Tensor::<Cuda<0>>::try_zeros([2 * MIB]).unwrap_err();
        match &err {
            Error::OutOfMemory { op, device, requested, free } => {
                assert_eq!(*op, "zeros");
                assert_eq!(device, "Cuda<0>");
                assert_eq!(*requested, 8 * MIB);
                assert!(free.is_some_and(|free| free <= 5 * MIB), "{err}");
            }
            other => panic!("expected OutOfMemory, got {other}"),
        }
        println!("CHILD: {err}");
        return;
    }
    if std::env::var_os("DEVTENSOR_EMU_DRIVER").is_none() {
        // Only the emulator has a memory-size setting.
        if ready::<0>("out_of_memory") {
            println!("SKIP out_of_memory: not on the emulated GPU");
        }
        return;
    }
    let budget = (5 * MIB).to_string();
    let text = run_child("out_of_memory", &[("DEVTENSOR_EMU_MEM_BYTES", Some(&budget))]);
    assert!(text.contains("CHILD: zeros on Cuda<0>: out of memory: tried to allocate"), "{text}");
}

/// A layout of more dimensions than the kernels address, none mergeable:
/// a clear shape error on a GPU, where the CPU copes.
fn rank_beyond_the_kernels<D: Device>() {
    let reversed: Vec<usize> = (0..9).rev().collect();
    let x = Tensor::<Cpu>::arange(0.0, 512.0).reshape([2usize; 9]);
    let on_d = x.to::<D>().permute(reversed.clone());
    let err = on_d.try_neg().unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(&D::name()) && text.contains("at most 8 dimensions") && text.contains("9"), "{text}");
    // The suggested fix works: contiguous on the host, then moved.
    let fixed = on_d.to::<Cpu>().contiguous().to::<D>();
    assert_eq!(fixed.neg().to_vec(), x.permute(reversed).neg().to_vec());
}
on_gpus!(rank_beyond_the_kernels_is_a_clear_error, rank_beyond_the_kernels);

/// Operand layouts that merge to two axes with long rows take the kernels'
/// row path (a block per row): row and column broadcasts, transposed and
/// narrowed operands, in place too, against the CPU.
fn two_axis_layouts<D: Device>() {
    let mut g = Generator::new(21);
    let m = rand_cpu(&[150, 300], &mut g);
    let row = rand_cpu(&[300], &mut g);
    let col = rand_cpu(&[150, 1], &mut g);
    let t = rand_cpu(&[300, 150], &mut g);
    let wide = rand_cpu(&[160, 310], &mut g);
    let (md, rowd, cold, td, wided) = (m.to::<D>(), row.to::<D>(), col.to::<D>(), t.to::<D>(), wide.to::<D>());
    same("matrix + row", &(&md + &rowd), &(&m + &row));
    same("column - matrix", &(&cold - &md), &(&col - &m));
    same("matrix * transposed", &(&md * &td.t()), &(&m * &t.t()));
    let (narrow_d, narrow) = (wided.narrow(0, 5, 150).narrow(1, 7, 300), wide.narrow(0, 5, 150).narrow(1, 7, 300));
    same("narrowed maximum row", &narrow_d.maximum(&rowd), &narrow.maximum(&row));
    let mut in_place_d = md.clone() * 1.0;
    in_place_d += &rowd;
    let mut in_place = m.clone() * 1.0;
    in_place += &row;
    same("in place + row", &in_place_d, &in_place);
    let ints = Tensor::<Cpu, i64>::from_vec((0..150 * 300).map(|v| v * 7 - 5000).collect(), [150, 300]);
    let divisors = Tensor::<Cpu, i64>::from_vec((0..300).map(|v| v % 13 + 1).collect(), [300]);
    same("i64 div_floor row", &ints.to::<D>().div_floor(&divisors.to::<D>()), &ints.div_floor(&divisors));
    same("i64 / row", &(&ints.to::<D>() / &divisors.to::<D>()), &(&ints / &divisors));
    let zero_somewhere = Tensor::<Cpu, i64>::from_vec((0..300).map(|v| v % 13).collect(), [300]).to::<D>();
    assert!(matches!(ints.to::<D>().try_div_trunc(&zero_somewhere), Err(Error::Argument { .. })));
}
on_gpus!(two_axis_layouts_take_the_row_path, two_axis_layouts);

/// Softmax rows longer than a block keeps in registers take the streaming
/// kernel; shorter ones the cached kernel, along the last axis and an inner one.
fn softmax_row_lengths<D: Device>() {
    let mut g = Generator::new(23);
    for dims in [[3usize, 9000], [2, 8192], [5, 33], [40, 1]] {
        let x = rand_cpu(&dims, &mut g) * 4.0;
        let xd = x.to::<D>();
        same("softmax, last axis", &xd.softmax(-1), &x.softmax(-1));
        same("log_softmax, last axis", &xd.log_softmax(-1), &x.log_softmax(-1));
        same("softmax, first axis", &xd.softmax(0), &x.softmax(0));
    }
}
on_gpus!(softmax_takes_the_cached_or_the_streaming_kernel, softmax_row_lengths);
