//! Which threads run CPU kernels (`backend/cpu/threads.rs`): the main
//! thread joins rayon's pool at the first operation, except where that
//! could starve or override something, and no arrangement hangs.
//!
//! Which thread is "main" and whether rayon's pool exists are facts about a
//! whole process, so each case runs in a fresh process of its own: this
//! binary (no test harness, so its `main` is the program's main thread)
//! starts itself once per case, with the case's name as its argument.

use devtensor::{Cpu, Tensor};
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Long enough that the kernels below take their parallel paths.
const LEN: usize = 1 << 18;
/// Generous: only there so that a deadlock fails instead of hanging CI.
const HANG: Duration = Duration::from_secs(120);

/// Runs large parallel operations on this thread and checks them against
/// plain loops: an element-wise product, a sum, a matrix product, and a
/// convolution's forward (unfold) and gradients (fold for the image; the
/// weight's sums images on each thread), which split image planes or images
/// across threads when there is more than one.
fn work() {
    let data: Vec<f32> = (0..LEN).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
    let x = Tensor::<Cpu>::from_slice(&data, [LEN]);
    let squares = (&x * &x).to_vec();
    for (got, v) in squares.iter().zip(&data) {
        assert_eq!(*got, v * v);
    }
    let expected: f64 = data.iter().map(|&v| f64::from(v)).sum();
    let sum = f64::from(x.sum().to_vec()[0]);
    assert!((sum - expected).abs() <= 1e-3 * (1.0 + expected.abs()), "sum {sum}, expected {expected}");
    let n = 256;
    let a = x.narrow(0, 0, n * n).reshape([n, n]);
    let product = a.matmul(&a).to_vec();
    for (i, j) in [(0, 0), (17, 200), (255, 255)] {
        let expected: f32 = (0..n).map(|k| data[i * n + k] * data[k * n + j]).sum();
        let got = product[i * n + j];
        assert!((got - expected).abs() <= 1e-3 * (1.0 + expected.abs()), "[{i}, {j}]: {got} vs {expected}");
    }
    convolution(&data);
}

/// `conv2d` with padding 1 of a [2, 3, 16, 16] image by a [4, 3, 3, 3]
/// kernel, and the gradients of the sum of its outputs with respect to the
/// image and the kernel, each against a direct loop.
fn convolution(data: &[f32]) {
    use devtensor::ops::conv::Window2d;
    let (n, c, o, hw) = (2, 3, 4, 16);
    let image = &data[..n * c * hw * hw];
    let weight = &data[LEN - o * c * 9..];
    let x = Tensor::<Cpu>::from_slice(image, [n, c, hw, hw]).requires_grad();
    let w = Tensor::<Cpu>::from_slice(weight, [o, c, 3, 3]).requires_grad();
    let window = Window2d { padding: [1, 1], ..Window2d::new([3, 3]) };
    let y = x.conv2d(&w, None, window, 1);
    let got = y.to_vec();
    let grads = y.sum().backward();
    let grad = grads.get(&x).expect("x needs a gradient").to_vec();
    let weight_grad = grads.get(&w).expect("w needs a gradient").to_vec();
    let pixel = |b: usize, ch: usize, r: isize, col: isize| -> Option<usize> {
        let inside = (0..hw as isize).contains(&r) && (0..hw as isize).contains(&col);
        inside.then(|| ((b * c + ch) * hw + r as usize) * hw + col as usize)
    };
    let mut expected_grad = vec![0.0f32; image.len()];
    let mut expected_weight_grad = vec![0.0f32; weight.len()];
    for b in 0..n {
        for k in 0..o {
            for (r, col) in (0..hw).flat_map(|r| (0..hw).map(move |col| (r as isize, col as isize))) {
                let mut sum = 0.0f32;
                for ch in 0..c {
                    for (tap, &wv) in weight[(k * c + ch) * 9..][..9].iter().enumerate() {
                        if let Some(p) = pixel(b, ch, r + tap as isize / 3 - 1, col + tap as isize % 3 - 1) {
                            sum += image[p] * wv;
                            expected_grad[p] += wv;
                            expected_weight_grad[(k * c + ch) * 9 + tap] += image[p];
                        }
                    }
                }
                let at = ((b * o + k) * hw + r as usize) * hw + col as usize;
                assert!((got[at] - sum).abs() <= 1e-4 * (1.0 + sum.abs()), "conv2d at {at}: {} vs {sum}", got[at]);
            }
        }
    }
    for (at, (g, e)) in grad.iter().zip(&expected_grad).enumerate() {
        assert!((g - e).abs() <= 1e-4 * (1.0 + e.abs()), "image gradient at {at}: {g} vs {e}");
    }
    for (at, (g, e)) in weight_grad.iter().zip(&expected_weight_grad).enumerate() {
        assert!((g - e).abs() <= 1e-4 * (1.0 + e.abs()), "weight gradient at {at}: {g} vs {e}");
    }
}

/// Runs `work` on a spawned thread while this one blocks, as a data loader
/// or a user's worker thread would; fails rather than hangs.
fn work_elsewhere_while_blocked() {
    let (done, finished) = mpsc::channel();
    let worker = thread::spawn(move || {
        work();
        let _ = done.send(());
    });
    finished.recv_timeout(HANG).expect("an operation from another thread finished while main waited");
    worker.join().expect("the other thread's checks passed");
}

fn case(name: &str) {
    match name {
        // Two or more threads: main joins as worker 0, runs its share, and
        // other threads still get the remaining workers.
        "joins" => {
            work();
            assert_eq!(rayon::current_thread_index(), Some(0), "main is worker 0 of the pool");
            assert_eq!(rayon::current_num_threads(), 2, "the pool has RAYON_NUM_THREADS threads in all");
            work();
            work_elsewhere_while_blocked();
        }
        // One thread: joining would leave no worker for other threads'
        // loops while main blocks, so main stays outside.
        "single" => {
            work();
            assert_eq!(rayon::current_thread_index(), None, "main stays outside a one-thread pool");
            work_elsewhere_while_blocked();
        }
        // A program that built rayon's pool itself keeps it.
        "configured" => {
            rayon::ThreadPoolBuilder::new().num_threads(2).build_global().expect("the first build of the pool");
            work();
            assert_eq!(rayon::current_thread_index(), None, "the program's own pool is left as it is");
            work_elsewhere_while_blocked();
        }
        // The first operation on another thread decides for the default
        // pool: main does not join later.
        "first_elsewhere" => {
            work_elsewhere_while_blocked();
            work();
            assert_eq!(rayon::current_thread_index(), None, "main does not join a pool that already runs");
        }
        other => panic!("unknown case {other}"),
    }
}

fn main() {
    if let Some(name) = std::env::args().nth(1).filter(|a| !a.starts_with('-')) {
        case(&name);
        return;
    }
    let exe = std::env::current_exe().expect("the test's own path");
    let cases = [("joins", "2"), ("single", "1"), ("configured", "3"), ("first_elsewhere", "2")];
    for (name, threads) in cases {
        let mut child = Command::new(&exe)
            .arg(name)
            .env("RAYON_NUM_THREADS", threads)
            .spawn()
            .expect("the test starts itself for each case");
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("the case's status") {
                break status;
            }
            if start.elapsed() > HANG {
                let _ = child.kill();
                panic!("case {name} (RAYON_NUM_THREADS={threads}) hung for {HANG:?}");
            }
            thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "case {name} (RAYON_NUM_THREADS={threads}) failed: {status}");
        println!("threads: case {name} with RAYON_NUM_THREADS={threads}: ok");
    }
}
