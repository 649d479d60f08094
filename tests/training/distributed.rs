//! Multi-process training's pieces that run inside one process: the
//! rendezvous store (its ranks here are threads, each with its own
//! connection, as processes would have).

use devtensor::Error;
use devtensor::parallel::{Job, JobToken, TcpStore};
use std::time::{Duration, Instant};

/// A free port on the loopback interface.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn job(rank: usize, world_size: usize, port: u16) -> Job {
    Job::local(world_size, rank, port).unwrap()
}

/// Runs `f(rank, store)` for every rank on a thread of its own, rank 0 first.
fn ranks<R: Send + 'static>(
    world_size: usize,
    timeout: Duration,
    f: impl Fn(usize, TcpStore) -> R + Send + Sync + Clone + 'static,
) -> Vec<R> {
    let port = free_port();
    let main = TcpStore::try_connect(&job(0, world_size, port), timeout).unwrap();
    let others: Vec<_> = (1..world_size)
        .map(|rank| {
            let f = f.clone();
            std::thread::spawn(move || f(rank, TcpStore::try_connect(&job(rank, world_size, port), timeout).unwrap()))
        })
        .collect();
    let mut results = vec![f(0, main)];
    results.extend(others.into_iter().map(|h| h.join().unwrap()));
    results
}

fn distributed(e: Error) -> (Option<usize>, String) {
    match e {
        Error::Distributed { rank, reason } => (rank, reason),
        other => panic!("expected a distributed-job error, got {other}"),
    }
}

#[test]
fn store_values_counters_and_barriers_reach_every_rank() {
    let results = ranks(3, Duration::from_secs(30), |rank, store| {
        store.try_set(&format!("from/{rank}"), &[rank as u8; 3]).unwrap();
        let total = store.try_add("arrivals", rank as i64 + 1).unwrap();
        for round in 0..3 {
            store.try_barrier("round").unwrap();
            // After the barrier every rank's value of this round is there.
            store.try_set(&format!("round{round}/{rank}"), b"").unwrap();
        }
        store.try_barrier("end").unwrap();
        let seen: Vec<Vec<u8>> = (0..3).map(|r| store.try_get(&format!("from/{r}")).unwrap()).collect();
        let final_count = store.try_add("arrivals", 0).unwrap();
        (total, seen, final_count)
    });
    let mut partial: Vec<i64> = results.iter().map(|r| r.0).collect();
    partial.sort();
    // Every prefix of the arrivals 1 + 2 + 3 is some rank's answer, in some order.
    assert_eq!(partial.last(), Some(&6));
    for (total, seen, final_count) in results {
        assert!((1..=6).contains(&total));
        assert_eq!(seen, vec![vec![0; 3], vec![1; 3], vec![2; 3]]);
        assert_eq!(final_count, 6);
    }
}

#[test]
fn a_rank_that_never_arrives_is_a_timeout_naming_it() {
    let store = TcpStore::try_connect(&job(0, 3, free_port()), Duration::from_millis(300)).unwrap();
    let start = Instant::now();
    let (rank, reason) = distributed(store.try_barrier("start").unwrap_err());
    assert!(start.elapsed() < Duration::from_secs(20), "the wait is bounded");
    assert_eq!(rank, Some(0));
    assert!(reason.contains("timed out") && reason.contains("1 of 3 ranks arrived"), "{reason}");
    assert!(reason.contains("rank 1, 2 never joined"), "{reason}");

    // And a rank whose rank 0 never serves gives up too, naming the address.
    let port = free_port();
    let (rank, reason) = distributed(TcpStore::try_connect(&job(1, 2, port), Duration::from_millis(300)).unwrap_err());
    assert_eq!(rank, Some(1));
    assert!(reason.contains(&format!("127.0.0.1:{port}")) && reason.contains("did not answer"), "{reason}");
}

#[test]
fn rank_0s_port_is_free_again_once_its_store_is_dropped() {
    let port = free_port();
    for _ in 0..2 {
        let store = TcpStore::try_connect(&job(0, 1, port), Duration::from_secs(10)).unwrap();
        store.try_barrier("alone").unwrap();
    }
}

#[test]
fn a_different_world_size_is_refused_naming_both() {
    let port = free_port();
    let _main = TcpStore::try_connect(&job(0, 2, port), Duration::from_secs(10)).unwrap();
    let (rank, reason) = distributed(TcpStore::try_connect(&job(1, 3, port), Duration::from_secs(10)).unwrap_err());
    assert_eq!(rank, Some(1));
    assert!(reason.contains("rank 1 has WORLD_SIZE=3, but rank 0 has WORLD_SIZE=2"), "{reason}");
}

/// Rank 1's error when it joins rank 0's store with `token` where rank 0
/// has `rank_0_token`.
fn refusal(rank_0_token: Option<&str>, token: Option<&str>) -> String {
    let with = |job: Job, token: Option<&str>| match token {
        Some(t) => job.with_token(JobToken::new(t).unwrap()),
        None => job,
    };
    let port = free_port();
    let _main = TcpStore::try_connect(&with(job(0, 2, port), rank_0_token), Duration::from_secs(10)).unwrap();
    let error = TcpStore::try_connect(&with(job(1, 2, port), token), Duration::from_secs(10)).unwrap_err();
    let (rank, reason) = distributed(error);
    assert_eq!(rank, Some(1));
    reason
}

#[test]
fn only_the_jobs_token_joins_it() {
    let (ours, theirs) = ("0123456789abcdef-ours", "0123456789abcdef-theirs");
    let refused = "rank 0's store refused this rank: ";
    assert_eq!(
        refusal(Some(ours), Some(theirs)),
        format!("{refused}this process's job token (DEVTENSOR_JOB_TOKEN) is not rank 0's")
    );
    assert_eq!(
        refusal(Some(ours), None),
        format!("{refused}this process has no job token (DEVTENSOR_JOB_TOKEN), but rank 0's job has one")
    );
    assert!(refusal(None, Some(theirs)).contains("has a job token (DEVTENSOR_JOB_TOKEN), but rank 0 has none"));
    // The same token joins, and the job works.
    let (token, port, timeout) = (JobToken::generate().unwrap(), free_port(), Duration::from_secs(30));
    let main = TcpStore::try_connect(&job(0, 2, port).with_token(token.clone()), timeout).unwrap();
    let other = std::thread::spawn(move || {
        let store = TcpStore::try_connect(&job(1, 2, port).with_token(token), timeout).unwrap();
        store.try_barrier("joined").unwrap();
    });
    main.try_barrier("joined").unwrap();
    other.join().unwrap();
}

#[test]
fn keys_and_values_past_the_limits_are_errors_naming_them() {
    let port = free_port();
    let store = TcpStore::try_connect(&job(0, 1, port), Duration::from_secs(10)).unwrap();
    store.try_set("largest", &vec![7; TcpStore::VALUE_LIMIT]).unwrap();
    assert_eq!(store.try_get("largest").unwrap().len(), TcpStore::VALUE_LIMIT);
    let (_, reason) = distributed(store.try_set("too large", &vec![7; TcpStore::VALUE_LIMIT + 1]).unwrap_err());
    assert_eq!(reason, "set \"too large\": the value is 1048577 bytes, above the store's limit of 1048576 bytes");
    let key = "k".repeat(TcpStore::KEY_LIMIT + 1);
    let (_, reason) = distributed(store.try_add(&key, 1).unwrap_err());
    assert!(reason.ends_with("the key is 1025 bytes, above the store's limit of 1024 bytes"), "{reason}");
    // The store is still there for the rank.
    assert_eq!(store.try_add("counter", 2).unwrap(), 2);
}

#[test]
fn a_job_may_meet_at_barriers_without_filling_the_store() {
    // A world of 2 holds at most 4128 keys, and each round of a barrier
    // sets two: without clearing past rounds, the 2065th would fail.
    let results = ranks(2, Duration::from_secs(60), |_, store| {
        for _ in 0..3000 {
            store.try_barrier("step").unwrap();
        }
        store.try_add("after", 1).unwrap()
    });
    assert_eq!(results.iter().max(), Some(&2));
}

#[test]
fn the_store_listens_on_the_address_master_addr_names() {
    // 127.0.0.1 and 127.0.0.2 are both this machine's loopback, but a store
    // for 127.0.0.1 must not answer on any other address.
    let port = free_port();
    let _store = TcpStore::try_connect(&job(0, 2, port), Duration::from_secs(10)).unwrap();
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    let elsewhere = std::net::TcpStream::connect(("127.0.0.2", port));
    assert!(elsewhere.is_err(), "a store for 127.0.0.1 answered on 127.0.0.2");
    // DEVTENSOR_STORE_BIND=0.0.0.0 asks for every interface.
    let port = free_port();
    let vars = |name: &str| match name {
        "WORLD_SIZE" => Some("2".to_string()),
        "RANK" | "LOCAL_RANK" => Some("0".to_string()),
        "MASTER_ADDR" => Some("127.0.0.1".to_string()),
        "MASTER_PORT" => Some(port.to_string()),
        "DEVTENSOR_STORE_BIND" => Some("0.0.0.0".to_string()),
        _ => None,
    };
    let _everywhere = TcpStore::try_connect(&Job::from_vars(vars).unwrap(), Duration::from_secs(10)).unwrap();
    assert!(std::net::TcpStream::connect(("127.0.0.2", port)).is_ok());
}

#[test]
fn a_failure_ends_every_other_ranks_wait_naming_the_rank() {
    let results = ranks(3, Duration::from_secs(60), |rank, store| {
        if rank == 2 {
            // Fail once the others are about to wait (a failure ends any
            // wait at once, a barrier's too).
            store.try_get("waiting/0").unwrap();
            store.try_get("waiting/1").unwrap();
            store.try_report_failure("out of memory on Cuda<0>").unwrap();
            return None;
        }
        store.try_set(&format!("waiting/{rank}"), b"").unwrap();
        let start = Instant::now();
        // A key nobody sets: only the failure can end this wait.
        let error = store.try_get("never").unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(30));
        Some(distributed(error))
    });
    for (rank, result) in results.into_iter().enumerate().take(2) {
        let (named, reason) = result.unwrap();
        assert_eq!(named, Some(rank));
        assert_eq!(reason, "stopped because rank 2 failed: out of memory on Cuda<0>");
    }
}

/// Rank 1 of `a_killed_rank_fails_the_job`, in a child process: connects
/// and waits to be killed. Does nothing unless started as that child.
#[test]
fn killed_rank_child() {
    let Ok(port) = std::env::var("DEVTENSOR_TEST_STORE_PORT") else { return };
    let store = TcpStore::try_connect(&job(1, 2, port.parse().unwrap()), Duration::from_secs(60)).unwrap();
    store.try_barrier("ready").unwrap();
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn a_killed_rank_fails_the_job_naming_it() {
    let port = free_port();
    let store = TcpStore::try_connect(&job(0, 2, port), Duration::from_secs(60)).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "distributed::killed_rank_child", "--nocapture"])
        .env("DEVTENSOR_TEST_STORE_PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    store.try_barrier("ready").unwrap();
    child.kill().unwrap(); // SIGKILL: the child says nothing
    child.wait().unwrap();
    let start = Instant::now();
    let (named, reason) = distributed(store.try_get("never").unwrap_err());
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(named, Some(0));
    assert!(reason.starts_with("stopped because rank 1 failed: its process ended without leaving"), "{reason}");
}

// ---------------------------------------------------------------------------
// DistributedDataParallel across processes, started by the launcher on the
// emulated GPUs: each rank is this test binary running `ddp_rank` with its
// scenario in the environment.

use crate::parallel::Mlp;
use devtensor::nn::Module;
use devtensor::optim::{AdamConfig, OptimizerConfig, SgdConfig};
use devtensor::parallel::{DistributedDataParallel, Loss, ProcessGroup, ReduceOp};
use devtensor::{Cpu, Cuda, Device, Generator, Result, Tensor, bf16, f16};

/// Global batch `step` (7 rows: split 3 + 4 between two ranks, uneven).
pub(crate) fn global_batch(step: u64) -> (Tensor<Cpu>, Tensor<Cpu, i64>) {
    let rows = 7;
    let mut g = Generator::new(100 + step);
    let x = Tensor::<Cpu>::randn_with([rows, 6], &mut g);
    let y = Tensor::<Cpu, i64>::from_vec((0..rows as i64).map(|i| (i * 7 + step as i64) % 4).collect(), [rows]);
    (x, y)
}

const STEPS: u64 = 3;

pub(crate) fn adam() -> AdamConfig {
    AdamConfig { lr: 0.05, ..Default::default() }
}

pub(crate) fn flat_parameters<D: Device>(model: &Mlp<D>) -> Vec<f32> {
    model.parameters().into_iter().flat_map(|(_, p)| p.to_vec()).collect()
}

/// One rank of a scenario, under the launcher; does nothing otherwise.
#[test]
fn ddp_rank() {
    let Ok(scenario) = std::env::var("DEVTENSOR_TEST_DDP") else { return };
    let job = devtensor::parallel::Job::from_env().unwrap();
    match devtensor::on_local_gpu!(job, D => ddp_scenario::<D>(&job, &scenario)).and_then(|r| r) {
        Ok(()) => println!("DONE"),
        Err(e) => {
            println!("ERROR {e}");
            std::process::exit(1);
        }
    }
}

fn ddp_scenario<D: Device>(job: &devtensor::parallel::Job, scenario: &str) -> Result<()> {
    let (rank, world) = (job.rank, job.world_size);
    if matches!(scenario, "bf16" | "f16" | "mismatch" | "accumulate-bf16" | "accumulate-f16") {
        return compressed_scenario::<D>(job, scenario);
    }
    if scenario == "collectives" {
        return collectives_scenario::<D>(job);
    }
    if scenario == "collective-deserter" {
        // Rank 1 leaves at once; rank 0 calls a collective it will never join.
        let group = ProcessGroup::<D>::try_new(job)?;
        if job.rank == 0 {
            group.try_all_reduce(&Tensor::<D>::ones([1]), ReduceOp::Sum)?;
        }
        return Ok(());
    }
    if scenario == "accumulate" {
        return accumulate_scenario::<D>(job);
    }
    if scenario == "late" && rank == 1 {
        std::thread::sleep(Duration::from_secs(60));
    }
    let group = ProcessGroup::<D>::try_new(job)?;
    let hidden = if scenario == "model" && rank == 1 { 17 } else { 16 };
    // Every rank starts from other weights: DDP must give all rank 0's.
    let model = Mlp::<D>::new(hidden, rank as u64);
    let mut ddp = DistributedDataParallel::try_new(group, model, adam())?.bucket_bytes(256);
    let take_step = |ddp: &mut DistributedDataParallel<D, Mlp<D>, AdamConfig>, step: u64| -> Result<f32> {
        let (x, y) = global_batch(step);
        let (start, end) = (7 * rank / world, 7 * (rank + 1) / world);
        let mut y = y.narrow(0, start, end - start);
        if step == 1 && rank == 1 {
            match scenario {
                "error" => y = Tensor::<Cpu, i64>::from_vec(vec![-1; end - start], [end - start]),
                "panic" => y = Tensor::<Cpu, i64>::from_vec(vec![-2; end - start], [end - start]),
                "kill" => {
                    let _ =
                        std::process::Command::new("kill").args(["-KILL", &std::process::id().to_string()]).status();
                    std::thread::sleep(Duration::from_secs(60));
                }
                _ => {}
            }
        }
        ddp.try_step(&(x.narrow(0, start, end - start).to::<D>(), y.to::<D>()))
    };
    if scenario == "resume" {
        // Save after the first step, take a step that the reload undoes,
        // and go on from the checkpoint: the same parameters as straight on.
        let path = std::env::temp_dir().join(format!("devtensor-ddp-resume-{}.safetensors", job.master_port));
        take_step(&mut ddp, 0)?;
        ddp.try_save_checkpoint(&path)?;
        take_step(&mut ddp, 1)?;
        ddp.try_load_checkpoint(&path)?;
        ddp.group().try_barrier()?;
        if job.is_main() {
            let _ = std::fs::remove_file(&path);
        }
        for step in 1..STEPS {
            take_step(&mut ddp, step)?;
        }
    } else {
        for step in 0..STEPS {
            take_step(&mut ddp, step)?;
        }
    }
    let params: Vec<String> = flat_parameters(ddp.model()).iter().map(|v| format!("{v:?}")).collect();
    println!("PARAMS {}", params.join(","));
    println!("OVERLAP {} of {}", ddp.buckets_sent_during_backward(), ddp.bucket_count());
    Ok(())
}

/// One SGD step of rate 1 on global batch 0 with buckets sent in `bf16`
/// or `f16` (`scenario`), from rank 0's weights; prints the parameters.
/// `mismatch`: only rank 1 compresses (in `bf16`).
fn compressed_scenario<D: Device>(job: &devtensor::parallel::Job, scenario: &str) -> Result<()> {
    let (rank, world) = (job.rank, job.world_size);
    let group = ProcessGroup::<D>::try_new(job)?;
    let sgd = SgdConfig { lr: 1.0, ..Default::default() };
    let ddp = DistributedDataParallel::try_new(group, Mlp::<D>::new(16, rank as u64), sgd)?.bucket_bytes(256);
    let mut ddp = match (scenario, rank) {
        ("bf16" | "accumulate-bf16", _) | ("mismatch", 1) => ddp.compress_gradients::<bf16>(),
        ("f16" | "accumulate-f16", _) => ddp.compress_gradients::<f16>(),
        _ => ddp,
    };
    let (x, y) = global_batch(0);
    let (start, end) = (7 * rank / world, 7 * (rank + 1) / world);
    let rows =
        |from: usize, to: usize| (x.narrow(0, from, to - from).to::<D>(), y.narrow(0, from, to - from).to::<D>());
    if scenario.starts_with("accumulate") {
        // One row without synchronisation, then the rest.
        ddp.try_accumulate(&rows(start, start + 1))?;
        ddp.try_step(&rows(start + 1, end))?;
    } else {
        ddp.try_step(&rows(start, end))?;
    }
    let params: Vec<String> = flat_parameters(ddp.model()).iter().map(|v| format!("{v:?}")).collect();
    println!("PARAMS {}", params.join(","));
    Ok(())
}

/// SGD with momentum, whose steps (unlike Adam's) scale with the gradient,
/// so that a gradient divided by the wrong row count shows.
fn sgd() -> SgdConfig {
    SgdConfig { lr: 0.5, momentum: 0.9, ..Default::default() }
}

/// nanoGPT's loop on two ranks: micro-batches without synchronisation, the
/// last one synchronised. Rank 0 has 3 rows of each global batch (1, then
/// 2), rank 1 has 4 (1, 1, then 2): the ranks accumulate unequally.
fn accumulate_scenario<D: Device>(job: &devtensor::parallel::Job) -> Result<()> {
    let (rank, world) = (job.rank, job.world_size);
    let group = ProcessGroup::<D>::try_new(job)?;
    let mut ddp = DistributedDataParallel::try_new(group, Mlp::<D>::new(16, rank as u64), sgd())?.bucket_bytes(256);
    for step in 0..STEPS {
        let (x, y) = global_batch(step);
        let start = 7 * rank / world;
        let rows = |from: usize, len: usize| {
            (x.narrow(0, start + from, len).to::<D>(), y.narrow(0, start + from, len).to::<D>())
        };
        let accumulated = if rank == 0 { 1 } else { 2 };
        for row in 0..accumulated {
            ddp.try_accumulate(&rows(row, 1))?;
        }
        ddp.try_step(&rows(accumulated, 2))?;
    }
    let params: Vec<String> = flat_parameters(ddp.model()).iter().map(|v| format!("{v:?}")).collect();
    println!("PARAMS {}", params.join(","));
    println!("OVERLAP {} of {}", ddp.buckets_sent_during_backward(), ddp.bucket_count());
    Ok(())
}

/// The collectives of a process group on two ranks, each result printed
/// as `COLL <what>: <values>`, errors as `COLL <what> error: <message>`.
fn collectives_scenario<D: Device>(job: &devtensor::parallel::Job) -> Result<()> {
    let group = ProcessGroup::<D>::try_new(job)?;
    let r = job.rank as f32;
    let show = |what: &str, values: String| println!("COLL {what}: {values}");
    let failed = |what: &str, e: devtensor::Error| println!("COLL {what} error: {e}");
    let mine = Tensor::<D>::from_slice(&[r + 1.0, -2.0 * (r + 1.0), 0.5 * r], [3]);
    for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product, ReduceOp::Max, ReduceOp::Min] {
        show(&format!("{op:?}"), format!("{:?}", group.try_all_reduce(&mine, op)?.to_vec()));
    }
    // A strided view goes as the tensor it shows.
    let grid = Tensor::<D>::from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]) * (r + 1.0);
    let summed = group.try_all_reduce(&grid.transpose(0, 1), ReduceOp::Sum)?;
    show("transposed", format!("{} {:?}", summed.shape(), summed.to_vec()));
    let counts = Tensor::<D, i64>::from_slice(&[10 * job.rank as i64 + 1], [1]);
    show("i64", format!("{:?}", group.try_all_reduce(&counts, ReduceOp::Sum)?.to_vec()));
    let halves = Tensor::<D, bf16>::from_slice(&[bf16::from_f32(1.5 * (r + 1.0))], [1]);
    show("bf16", format!("{:?}", group.try_all_reduce(&halves, ReduceOp::Sum)?.to_vec()));
    show(
        "broadcast",
        format!("{:?}", group.try_broadcast(&Tensor::<D>::from_slice(&[100.0 * r + 7.0], [1]), 1)?.to_vec()),
    );
    let gathered = group.try_all_gather(&Tensor::<D>::full([2], r))?;
    show("all_gather", format!("{:?}", gathered.iter().map(Tensor::to_vec).collect::<Vec<_>>()));
    let into = group.try_all_gather_into_tensor(&Tensor::<D>::full([1, 1], r))?;
    show("all_gather_into_tensor", format!("{} {:?}", into.shape(), into.to_vec()));
    let scalar = group.try_all_gather_into_tensor(&Tensor::<D>::scalar(r))?;
    show("all_gather of a scalar", format!("{} {:?}", scalar.shape(), scalar.to_vec()));
    let spread = Tensor::<D>::from_slice(&[4.0 * r, 4.0 * r + 1.0, 4.0 * r + 2.0, 4.0 * r + 3.0], [4]);
    show("reduce_scatter_tensor", format!("{:?}", group.try_reduce_scatter_tensor(&spread, ReduceOp::Sum)?.to_vec()));
    // Refusals, the same on every rank, after which the group goes on.
    match group.try_all_reduce(&counts, ReduceOp::Avg) {
        Ok(_) => show("Avg of i64", "no error".into()),
        Err(e) => failed("Avg of i64", e),
    }
    match group.try_broadcast(&mine, 2) {
        Ok(_) => show("broadcast from rank 2", "no error".into()),
        Err(e) => failed("broadcast from rank 2", e),
    }
    match group.try_reduce_scatter_tensor(&mine, ReduceOp::Sum) {
        Ok(_) => show("reduce_scatter_tensor of 3 rows", "no error".into()),
        Err(e) => failed("reduce_scatter_tensor of 3 rows", e),
    }
    let uneven = Tensor::<D>::zeros([2 + job.rank]);
    match group.try_all_reduce(&uneven, ReduceOp::Sum) {
        Ok(_) => show("uneven", "no error".into()),
        Err(e) => failed("uneven", e),
    }
    let other_call =
        if job.rank == 0 { group.try_all_reduce(&mine, ReduceOp::Sum) } else { group.try_broadcast(&mine, 0) };
    match other_call {
        Ok(_) => show("different calls", "no error".into()),
        Err(e) => failed("different calls", e),
    }
    group.try_barrier()?;
    show("after", format!("{:?}", group.try_all_reduce(&Tensor::<D>::ones([1]), ReduceOp::Sum)?.to_vec()));
    Ok(())
}

/// Checks a rank's `PARAMS ...` line against the parameters that one
/// device reaches in `steps` steps from rank 0's initial weights on whole
/// global batches.
pub(crate) fn assert_one_device_parameters(line: &str, steps: u64, context: &str) {
    assert_one_device_parameters_with(line, steps, adam(), context)
}

/// As [`assert_one_device_parameters`], with the optimizer `config`.
fn assert_one_device_parameters_with<O: OptimizerConfig>(line: &str, steps: u64, config: O, context: &str) {
    let mut model = Mlp::<Cpu>::new(16, 0);
    let mut opt = config.build(&model);
    for step in 0..steps {
        let grads = model.loss(&global_batch(step)).unwrap().backward();
        devtensor::optim::Optimizer::step(&mut opt, &mut model, &grads);
    }
    let reference = flat_parameters(&model);
    let got: Vec<f32> = line.split_once("PARAMS ").unwrap().1.split(',').map(|v| v.trim().parse().unwrap()).collect();
    assert_eq!(got.len(), reference.len(), "{context}");
    for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
        assert!((g - r).abs() <= 1e-5 * (1.0 + r.abs()), "parameter element {i}: {g} vs {r}, {context}");
    }
}

/// The launcher's output for `scenario` on `ranks` emulated GPUs; fails if
/// it runs for more than three minutes. The ranks' timeout is one that only
/// a hang reaches: these scenarios end by themselves, and on a loaded
/// machine starting the ranks alone can take seconds.
fn launch(scenario: &str, ranks: usize) -> (bool, String) {
    launch_with(scenario, ranks, "20", "60")
}

/// The launcher, `devtensor-run`, built beside this test binary (in
/// `target/<profile>/`, as `cargo test` in the root builds the library's
/// binaries; the suites are a package of their own, so cargo gives them
/// no `CARGO_BIN_EXE_devtensor-run`).
fn launcher() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe.parent().and_then(|deps| deps.parent()).expect("the test binary is in target/<profile>/deps");
    let launcher = dir.join("devtensor-run");
    assert!(launcher.is_file(), "{} is missing: run `cargo build --bin devtensor-run` first", launcher.display());
    launcher
}

/// As [`launch`], with the launcher's grace and the ranks' join timeout in seconds.
fn launch_with(scenario: &str, ranks: usize, grace: &str, timeout: &str) -> (bool, String) {
    let port = free_port();
    let mut child = std::process::Command::new(launcher())
        .args(["--nproc-per-node", &ranks.to_string(), "--master-port", &port.to_string(), "--grace", grace, "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "distributed::ddp_rank", "--nocapture", "--test-threads=1"])
        .env("DEVTENSOR_TEST_DDP", scenario)
        .env("DEVTENSOR_DIST_TIMEOUT_S", timeout)
        .env("DEVTENSOR_EMU_DEVICES", ranks.max(2).to_string())
        .env("DEVTENSOR_EMU_NCCL_HANG_S", "120")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            panic!("the {scenario} job did not end within three minutes");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

pub(crate) fn gpus_ready() -> bool {
    crate::common::cuda_ready::<0>() && crate::common::cuda_ready::<1>()
}

/// Two and three processes, two that save a checkpoint, take a step,
/// reload it on every rank and go on, and two that accumulate micro-batches
/// before each step (one and two, and a last one of two rows each: the
/// parameters of one device on the whole batch).
#[test]
fn processes_train_to_the_parameters_of_one_device() {
    if !gpus_ready() {
        return;
    }
    for (scenario, ranks) in [("train", 2), ("train", 3), ("resume", 2), ("accumulate", 2)] {
        let (ok, text) = launch(scenario, ranks);
        assert!(ok, "{text}");
        for rank in 0..ranks {
            let prefix = format!("[rank {rank}] ");
            let line = text.lines().find(|l| l.starts_with(&prefix) && l.contains("PARAMS ")).expect(&text);
            let context = format!("{scenario} on {ranks} ranks, rank {rank}\n{text}");
            if scenario == "accumulate" {
                assert_one_device_parameters_with(line, STEPS, sgd(), &context);
            } else {
                assert_one_device_parameters(line, STEPS, &context);
            }
        }
        // Buckets of 256 bytes: several, and sent while backward ran.
        assert!(text.contains("[rank 0] OVERLAP 4 of 4"), "{text}");
    }
}

/// Two processes sending their buckets in `bf16` and in `f16`: every rank
/// steps with the sum of the two ranks' weighted gradients each rounded to
/// the half type, the sum rounded again (NCCL's sum in the half type),
/// computed here from each rank's gradient on its own GPU; and the same
/// after each rank accumulated one row before the step.
#[test]
fn processes_sum_compressed_gradients_in_the_half_type() {
    if !gpus_ready() {
        return;
    }
    let model = Mlp::<Cpu>::new(16, 0);
    let batch = global_batch(0);
    let parts = [
        crate::parallel::weighted_gradient::<Cuda<0>>(&model, &batch, 0..3),
        crate::parallel::weighted_gradient::<Cuda<1>>(&model, &batch, 3..7),
    ];
    // After one row accumulated: what each rank sends, in the order the
    // step computes it (the last micro-batch's gradient times its rows,
    // plus the accumulated one, times 1 / the global rows).
    let accumulated = [
        accumulated_gradient::<Cuda<0>>(&model, &batch, 0..1, 1..3),
        accumulated_gradient::<Cuda<1>>(&model, &batch, 3..4, 4..7),
    ];
    let to_bf16 = crate::parallel::to_bf16 as fn(f32) -> f32;
    for (scenario, round, parts) in [
        ("bf16", to_bf16, &parts),
        ("f16", crate::parallel::to_f16, &parts),
        ("accumulate-bf16", to_bf16, &accumulated),
        ("accumulate-f16", crate::parallel::to_f16, &accumulated),
    ] {
        let (ok, text) = launch(scenario, 2);
        assert!(ok, "{text}");
        for rank in 0..2 {
            let prefix = format!("[rank {rank}] ");
            let line = text.lines().find(|l| l.starts_with(&prefix) && l.contains("PARAMS ")).expect(&text);
            let flat: Vec<f32> =
                line.split_once("PARAMS ").unwrap().1.split(',').map(|v| v.trim().parse().unwrap()).collect();
            let mut rest = flat.as_slice();
            let got: Vec<Vec<f32>> = model
                .parameters()
                .into_iter()
                .map(|(_, p)| {
                    let (this, tail) = rest.split_at(p.elem_count());
                    rest = tail;
                    this.to_vec()
                })
                .collect();
            crate::parallel::assert_compressed_step(&got, &model, parts, round, &format!("{scenario}, rank {rank}"));
        }
    }
}

/// The gradient a rank sends after accumulating rows `first` of global
/// batch `batch` and stepping on rows `last`, on `D`: each micro-batch's
/// mean gradient times its rows, summed, times one over the batch's rows.
fn accumulated_gradient<D: Device>(
    model: &Mlp<Cpu>,
    (x, y): &(Tensor<Cpu>, Tensor<Cpu, i64>),
    first: std::ops::Range<usize>,
    last: std::ops::Range<usize>,
) -> Vec<Vec<f32>> {
    let model = model.to::<D>();
    let gradient = |rows: &std::ops::Range<usize>| {
        let shard = (x.narrow(0, rows.start, rows.len()).to::<D>(), y.narrow(0, rows.start, rows.len()).to::<D>());
        let grads = model.loss(&shard).unwrap().backward();
        model.parameters().into_iter().map(|(_, p)| grads.get(&p).unwrap().to_vec()).collect::<Vec<_>>()
    };
    let (earlier, final_part) = (gradient(&first), gradient(&last));
    let (r_first, r_last, share) = (first.len() as f32, last.len() as f32, 1.0 / x.dims()[0] as f32);
    final_part
        .iter()
        .zip(&earlier)
        .map(|(g, e)| g.iter().zip(e).map(|(g, e)| (g * r_last + e * r_first) * share).collect())
        .collect()
}

/// The collectives of a process group, on two processes: every result
/// against its value computed here, and each refusal the same on both
/// ranks, after which the group still works.
#[test]
fn processes_run_collectives_of_their_own() {
    if !gpus_ready() {
        return;
    }
    let (ok, text) = launch("collectives", 2);
    assert!(ok, "{text}");
    let mismatch = "every rank must make the same collective calls in the same order, with tensors of the same \
                    shape and element type";
    let expected: Vec<(&str, String)> = vec![
        ("Sum", "[3.0, -6.0, 0.5]".into()),
        ("Avg", "[1.5, -3.0, 0.25]".into()),
        ("Product", "[2.0, 8.0, 0.0]".into()),
        ("Max", "[2.0, -2.0, 0.5]".into()),
        ("Min", "[1.0, -4.0, 0.0]".into()),
        ("transposed", "[3, 2] [3.0, 12.0, 6.0, 15.0, 9.0, 18.0]".into()),
        ("i64", "[12]".into()),
        ("bf16", "[4.5]".into()),
        ("broadcast", "[107.0]".into()),
        ("all_gather", "[[0.0, 0.0], [1.0, 1.0]]".into()),
        ("all_gather_into_tensor", "[2, 1] [0.0, 1.0]".into()),
        ("all_gather of a scalar", "[2] [0.0, 1.0]".into()),
        (
            "Avg of i64 error",
            "all_reduce on Cuda<R>: ReduceOp::Avg of i64 would round each mean; use \
             ReduceOp::Sum and divide"
                .into(),
        ),
        ("broadcast from rank 2 error", "broadcast on Cuda<R>: src=2, but the group's ranks are 0..2".into()),
        (
            "reduce_scatter_tensor of 3 rows error",
            "reduce_scatter_tensor on Cuda<R>: a tensor of shape [3] does not split into 2 equal \
             parts along its first axis"
                .into(),
        ),
        (
            "uneven error",
            format!(
                "distributed job, rank 1: it called `all_reduce(Sum)` on a tensor of shape [3] and type f32 where \
                 rank 0 called `all_reduce(Sum)` on a tensor of shape [2] and type f32; {mismatch}"
            ),
        ),
        (
            "different calls error",
            format!(
                "distributed job, rank 1: it called `broadcast(src=0)` on a tensor of shape [3] and type f32 where \
                 rank 0 called `all_reduce(Sum)` on a tensor of shape [3] and type f32; {mismatch}"
            ),
        ),
        ("after", "[2.0]".into()),
    ];
    for rank in 0..2 {
        // The first line follows libtest's `test ... ` on the same line.
        let prefix = format!("[rank {rank}] ");
        let got: Vec<(&str, &str)> =
            text.lines().filter_map(|l| l.strip_prefix(&prefix)?.split_once("COLL ")?.1.split_once(": ")).collect();
        let reduce_scatter = if rank == 0 { "[4.0, 6.0]" } else { "[8.0, 10.0]" };
        let mut want = expected.clone();
        want.insert(12, ("reduce_scatter_tensor", reduce_scatter.into()));
        let want: Vec<(&str, String)> =
            want.into_iter().map(|(what, v)| (what, v.replace("Cuda<R>", &format!("Cuda<{rank}>")))).collect();
        assert_eq!(got.len(), want.len(), "rank {rank}:\n{text}");
        for ((what, value), (want_what, want_value)) in got.iter().zip(&want) {
            assert_eq!((*what, *value), (*want_what, want_value.as_str()), "rank {rank}:\n{text}");
        }
    }
}

/// A rank that leaves while another waits for it in a collective: the
/// waiting rank's call fails, naming it, instead of waiting forever.
#[test]
fn a_rank_that_leaves_before_a_collective_is_named() {
    if !gpus_ready() {
        return;
    }
    let (ok, text) = launch("collective-deserter", 2);
    assert!(!ok, "{text}");
    assert_eq!(
        error_of(&text, 0),
        "distributed job, rank 0: stopped because rank 1 failed: it left the job after 0 training steps and \
         collectives, while rank 0 was waiting for it in its 1st one"
    );
}

/// The error line rank `rank` printed, and whether the launcher failed.
fn error_of(text: &str, rank: usize) -> &str {
    let prefix = format!("[rank {rank}] ");
    text.lines()
        .find(|l| l.starts_with(&prefix) && l.contains("ERROR "))
        .map(|l| l.split_once("ERROR ").unwrap().1)
        .unwrap_or_else(|| panic!("rank {rank} printed no error:\n{text}"))
}

#[test]
fn a_rank_that_fails_stops_every_rank_with_its_error() {
    if !gpus_ready() {
        return;
    }
    let (ok, text) = launch("error", 2);
    assert!(!ok, "{text}");
    let own = error_of(&text, 1);
    assert!(own.contains("out of memory"), "{text}");
    assert_eq!(error_of(&text, 0), format!("distributed job, rank 0: stopped because rank 1 failed: {own}"));
    assert!(
        text.contains(&format!("devtensor-run: the job failed: rank 1 failed first (exit code 1): {own}")),
        "{text}"
    );
}

#[test]
fn a_rank_that_panics_stops_every_rank() {
    if !gpus_ready() {
        return;
    }
    let (ok, text) = launch("panic", 2);
    assert!(!ok && text.contains("[rank 1] ") && text.contains("a bug in the loss"), "{text}");
    assert!(
        error_of(&text, 0).starts_with("distributed job, rank 0: stopped because rank 1 failed: it panicked"),
        "{text}"
    );
}

#[test]
fn a_killed_rank_stops_every_rank() {
    if !gpus_ready() {
        return;
    }
    let (ok, text) = launch("kill", 2);
    assert!(!ok, "{text}");
    assert!(
        error_of(&text, 0).starts_with(
            "distributed job, rank 0: stopped because rank 1 failed: its process ended without leaving the job"
        ),
        "{text}"
    );
    assert!(text.contains("devtensor-run: the job failed: rank 1 was killed by signal 9 (SIGKILL)"), "{text}");
}

#[test]
fn a_rank_that_never_arrives_is_named_after_the_timeout() {
    if !gpus_ready() {
        return;
    }
    let start = Instant::now();
    let (ok, text) = launch_with("late", 2, "1", "3");
    assert!(!ok, "{text}");
    assert!(start.elapsed() < Duration::from_secs(60), "bounded: {:?}", start.elapsed());
    let error = error_of(&text, 0);
    assert!(error.contains("timed out after 3s") && error.contains("rank 1 never joined"), "{text}");
    assert!(text.contains("devtensor-run: rank 1 is still running"), "{text}");
}

/// Ranks that would send their buckets in different types (whose NCCL
/// calls would not match, a hang until the timeout) all fail at the first
/// step instead, naming the setting.
#[test]
fn ranks_that_compress_differently_fail_at_the_first_step_naming_the_setting() {
    if !gpus_ready() {
        return;
    }
    let (ok, text) = launch("mismatch", 2);
    assert!(!ok, "{text}");
    // Each rank finds the difference; the one that reports it second
    // passes on the first one's report ("stopped because rank 1 failed: ...").
    let finding = "rank 1's settings differ from rank 0's: gradients sent in bf16 there, but gradients sent in f32 \
                   on rank 0; every rank must call `compress_gradients` alike";
    for rank in 0..2 {
        let error = error_of(&text, rank);
        assert!(error.starts_with(&format!("distributed job, rank {rank}: ")) && error.ends_with(finding), "{text}");
    }
}

#[test]
fn ranks_with_different_models_fail_before_training_naming_the_parameter() {
    if !gpus_ready() {
        return;
    }
    let (ok, text) = launch("model", 2);
    assert!(!ok, "{text}");
    for rank in 0..2 {
        assert_eq!(
            error_of(&text, rank),
            format!(
                "distributed job, rank {rank}: rank 1's model differs from rank 0's: parameter `hidden.weight` is \
                 [17, 6] f32 there, but [16, 6] f32 on rank 0"
            ),
            "{text}"
        );
    }
}

/// Starts one process per `(RANK, WORLD_SIZE, LOCAL_RANK)` by hand, not by
/// the launcher, with `DEVTENSOR_DIST_TIMEOUT_S=timeout_s`, and returns what
/// each printed; each must fail. A test that waits for the timeout gives a
/// short one; the others a long one, which only a hang reaches, so that a
/// loaded machine that starts a process late does not fail them.
fn by_hand(ranks: &[(usize, usize, usize)], timeout_s: u64) -> Vec<String> {
    by_hand_outcomes(ranks, timeout_s)
        .into_iter()
        .map(|(ok, output)| {
            assert!(!ok, "{output}");
            output
        })
        .collect()
}

/// As [`by_hand`], with whether each process succeeded.
fn by_hand_outcomes(ranks: &[(usize, usize, usize)], timeout_s: u64) -> Vec<(bool, String)> {
    let port = free_port();
    let children: Vec<_> = ranks
        .iter()
        .map(|&(rank, world_size, local_rank)| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "distributed::ddp_rank", "--nocapture", "--test-threads=1"])
                .env("DEVTENSOR_TEST_DDP", "train")
                .env("DEVTENSOR_DIST_TIMEOUT_S", timeout_s.to_string())
                .env("WORLD_SIZE", world_size.to_string())
                .env("RANK", rank.to_string())
                .env("LOCAL_RANK", local_rank.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
        })
        .collect()
}

#[test]
fn a_wrong_world_size_is_refused_and_the_others_name_the_missing_rank() {
    if !gpus_ready() {
        return;
    }
    // Rank 1 says WORLD_SIZE=3; rank 0 waits for it until its timeout.
    let outputs = by_hand(&[(0, 2, 0), (1, 3, 1)], 10);
    assert!(
        outputs[1].contains(
            "ERROR distributed job, rank 1: rank 0's store refused this rank: rank 1 has WORLD_SIZE=3, but rank 0 \
             has WORLD_SIZE=2"
        ),
        "{}",
        outputs[1]
    );
    assert!(outputs[0].contains("timed out after 10s") && outputs[0].contains("rank 1 never joined"), "{}", outputs[0]);
}

#[test]
fn a_second_process_with_the_same_rank_is_refused() {
    if !gpus_ready() {
        return;
    }
    // Ranks 0 and 1 train; a third process also says RANK=1.
    let outcomes = by_hand_outcomes(&[(0, 2, 0), (1, 2, 1), (1, 2, 1)], 60);
    let refused: Vec<&(bool, String)> = outcomes[1..].iter().filter(|(ok, _)| !ok).collect();
    assert_eq!(refused.len(), 1, "{outcomes:?}");
    assert!(
        refused[0].1.contains(
            "ERROR distributed job, rank 1: rank 0's store refused this rank: two processes have RANK=1: every \
             process of a job needs a rank of its own"
        ),
        "{outcomes:?}"
    );
    assert!(outcomes[0].0 && outcomes[0].1.contains("PARAMS "), "{outcomes:?}");
}

#[test]
fn two_ranks_on_one_gpu_are_refused_at_once() {
    if !gpus_ready() {
        return;
    }
    // Both with LOCAL_RANK=0: NCCL's duplicate-GPU check, on both ranks.
    let start = Instant::now();
    for (rank, output) in by_hand(&[(0, 2, 0), (1, 2, 0)], 60).iter().enumerate() {
        assert!(
            output.contains(&format!("ERROR distributed job, rank {rank}: could not join the NCCL communicator"))
                && output.contains("duplicate GPU detected"),
            "{output}"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(60), "{:?}", start.elapsed());
}
