//! The rendezvous store against whatever reaches its port (issue 34): each
//! attack of a hostile process on the same machine, made against the store
//! of a live two-rank job on the emulated GPUs, and the job then trains to
//! the parameters of one device. Each test failed on the store before the
//! issue (a thread and a buffer per connection, no token, no deadline).
//!
//! The attacker speaks the wire format by hand: one JSON object per line.

use crate::distributed::{adam, assert_one_device_parameters, global_batch, gpus_ready};
use crate::parallel::Mlp;
use devtensor::parallel::{DistributedDataParallel, Job, ProcessGroup};
use devtensor::{Device, Result, Tensor};
use proptest::prelude::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The job's secret in these tests (as `devtensor-run` would set one).
const TOKEN: &str = "8f3b5c2a9d1e4f60a7b8c9d0e1f2a3b4";

/// Steps an attacked job trains after the attacks: one shows that its
/// collectives and rendezvous still work (a step on the emulated GPUs takes
/// seconds, and CI runs six such jobs).
const STEPS: u64 = 1;

/// One rank of an attacked job: joins, prints `JOINED`, waits for the
/// test's go-ahead (a file), trains, and prints its parameters. Does
/// nothing unless the test started it.
#[test]
fn attacked_rank() {
    let Ok(go) = std::env::var("DEVTENSOR_TEST_GO") else { return };
    let job = Job::from_env().unwrap();
    match devtensor::on_local_gpu!(job, D => train::<D>(&job, PathBuf::from(go))).and_then(|r| r) {
        Ok(params) => println!("PARAMS {params}"),
        Err(e) => {
            println!("ERROR {e}");
            std::process::exit(1);
        }
    }
}

fn train<D: Device>(job: &Job, go: PathBuf) -> Result<String> {
    let (rank, world) = (job.rank, job.world_size);
    let group = ProcessGroup::<D>::try_new(job)?;
    let mut ddp = DistributedDataParallel::try_new(group, Mlp::<D>::new(16, rank as u64), adam())?;
    println!("JOINED");
    std::io::stdout().flush().unwrap();
    // A guard against a hang only (the test kills its ranks when it ends):
    // a sweep's fuzz (`DEVTENSOR_PROPTEST_FACTOR`) keeps the job waiting
    // that many times longer.
    let patience = Duration::from_secs(300) * crate::common::cases_factor();
    let start = Instant::now();
    while !go.exists() {
        assert!(start.elapsed() < patience, "no go-ahead within {patience:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    for step in 0..STEPS {
        let (x, y) = global_batch(step);
        let (first, end) = (7 * rank / world, 7 * (rank + 1) / world);
        let batch: (Tensor<D>, Tensor<D, i64>) =
            (x.narrow(0, first, end - first).to::<D>(), y.narrow(0, first, end - first).to::<D>());
        ddp.try_step(&batch)?;
    }
    let params: Vec<String> =
        crate::distributed::flat_parameters(ddp.model()).iter().map(|v| format!("{v:?}")).collect();
    Ok(params.join(","))
}

/// A job of two ranks started by hand, each this test binary running
/// [`attacked_rank`] with the job's token.
struct AttackedJob {
    port: u16,
    go: PathBuf,
    ranks: Vec<(Child, Arc<Mutex<String>>)>,
}

impl AttackedJob {
    /// A job whose rank 0 is started (so its store listens); rank 1 waits
    /// for [`start_rank_1`](Self::start_rank_1).
    fn start() -> AttackedJob {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let go = std::env::temp_dir().join(format!("devtensor-attack-go-{port}"));
        let _ = std::fs::remove_file(&go);
        let mut job = AttackedJob { port, go, ranks: Vec::new() };
        job.start_rank(0);
        // Rank 0's store listens once the port is taken (checked without
        // connecting, which the store would count as a refusal).
        let start = Instant::now();
        while std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            assert!(start.elapsed() < Duration::from_secs(120), "rank 0's store never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        job
    }

    /// A job whose two ranks have joined and wait for the go-ahead.
    fn joined() -> AttackedJob {
        let mut job = AttackedJob::start();
        job.start_rank_1();
        for rank in 0..2 {
            job.wait_for(rank, "JOINED");
        }
        job
    }

    fn start_rank_1(&mut self) {
        self.start_rank(1);
    }

    fn start_rank(&mut self, rank: usize) {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "store_attacks::attacked_rank", "--nocapture", "--test-threads=1"])
            .env("DEVTENSOR_TEST_GO", &self.go)
            .env("DEVTENSOR_DIST_TIMEOUT_S", "120")
            .env("DEVTENSOR_JOB_TOKEN", TOKEN)
            .env("WORLD_SIZE", "2")
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", self.port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let output = Arc::new(Mutex::new(String::new()));
        for stream in
            [Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>, Box::new(child.stderr.take().unwrap())]
        {
            let output = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(std::io::Result::ok) {
                    let mut text = output.lock().unwrap();
                    text.push_str(&line);
                    text.push('\n');
                }
            });
        }
        self.ranks.push((child, output));
    }

    fn output(&self, rank: usize) -> String {
        self.ranks[rank].1.lock().unwrap().clone()
    }

    /// Waits until rank `rank` has printed a line containing `text`.
    fn wait_for(&self, rank: usize, text: &str) {
        let start = Instant::now();
        while !self.output(rank).contains(text) {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "rank {rank} never printed {text}:\n{}",
                self.output(rank)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A figure of rank 0's process from `/proc` (`VmRSS` in KiB, `Threads`).
    fn rank_0_status(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.ranks[0].0.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn connect(&self) -> TcpStream {
        TcpStream::connect(("127.0.0.1", self.port)).unwrap()
    }

    /// Lets the ranks train, and checks that both end with the parameters
    /// of one device; returns rank 0's output.
    fn train_to_the_end(mut self) -> String {
        std::fs::write(&self.go, b"").unwrap();
        let start = Instant::now();
        for (rank, (child, _)) in self.ranks.iter_mut().enumerate() {
            while child.try_wait().unwrap().is_none() {
                if start.elapsed() > Duration::from_secs(180) {
                    let _ = child.kill();
                    panic!("rank {rank} did not end within three minutes");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // The output threads end with the pipes.
        std::thread::sleep(Duration::from_millis(200));
        let _ = std::fs::remove_file(&self.go);
        for rank in 0..2 {
            let output = self.output(rank);
            let status = self.ranks[rank].0.wait().unwrap();
            assert!(status.success(), "rank {rank} failed:\n{output}");
            let line = output.lines().find(|l| l.starts_with("PARAMS ")).unwrap_or_else(|| panic!("{output}"));
            assert_one_device_parameters(line, STEPS, &format!("rank {rank}:\n{output}"));
            assert!(!output.contains("panicked"), "rank {rank}:\n{output}");
        }
        self.output(0)
    }
}

impl Drop for AttackedJob {
    fn drop(&mut self) {
        for (child, _) in &mut self.ranks {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.go);
    }
}

/// What the store says to `lines`, sent on a new connection, until it
/// closes the connection (or 30 s pass).
fn exchange(job: &AttackedJob, lines: &[&str]) -> String {
    let mut stream = job.connect();
    for line in lines {
        // A closed connection ends the sending; the answers tell why.
        if stream.write_all(format!("{line}\n").as_bytes()).is_err() {
            break;
        }
    }
    read_until_closed(&mut stream, Duration::from_secs(30)).0
}

/// Everything the peer sends until it closes the connection, and whether
/// it did so within `limit`.
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (String, bool) {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut received = Vec::new();
    let closed = match stream.read_to_end(&mut received) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    (String::from_utf8_lossy(&received).into_owned(), closed)
}

fn hello(rank: usize, token: Option<&str>) -> String {
    match token {
        Some(t) => format!(r#"{{"Hello":{{"rank":{rank},"world_size":2,"process":7,"token":"{t}"}}}}"#),
        None => format!(r#"{{"Hello":{{"rank":{rank},"world_size":2,"process":7}}}}"#),
    }
}

#[test]
fn an_oversized_line_is_cut_off_and_memory_stays_bounded() {
    if !gpus_ready() {
        return;
    }
    let job = AttackedJob::joined();
    let before = job.rank_0_status("VmRSS");
    // One line of 64 MiB, no newline: the store stops reading it at its
    // limit for a hello (4 KiB) and closes the connection.
    let mut stream = job.connect();
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0usize;
    while sent < 64 << 20 {
        match stream.write(&chunk) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let grown = job.rank_0_status("VmRSS").saturating_sub(before);
    assert!(sent < 16 << 20, "the store read {sent} bytes of one line");
    assert!(grown < 16 * 1024, "rank 0's memory grew by {grown} KiB");
    drop(stream);
    let output = job.train_to_the_end();
    assert!(output.contains("longer than 4096 bytes"), "{output}");
}

#[test]
fn a_silent_or_stalled_client_is_dropped() {
    if !gpus_ready() {
        return;
    }
    let job = AttackedJob::joined();
    let start = Instant::now();
    let mut silent = job.connect();
    let mut stalled = job.connect();
    stalled.write_all(br#"{"Hello":{"ra"#).unwrap();
    for (name, stream) in [("silent", &mut silent), ("stalled", &mut stalled)] {
        let (answer, closed) = read_until_closed(stream, Duration::from_secs(30));
        assert!(closed, "the {name} client is still connected after {:?}", start.elapsed());
        assert!(answer.contains("no hello within 5 s"), "{name}: {answer}");
    }
    assert!(start.elapsed() < Duration::from_secs(20), "{:?}", start.elapsed());
    job.train_to_the_end();
}

#[test]
fn a_wrong_or_missing_token_is_refused() {
    if !gpus_ready() {
        return;
    }
    // Before rank 1 has come: its place is free for whoever claims it.
    let mut job = AttackedJob::start();
    let wrong = exchange(&job, &[&hello(1, Some("0000000000000000ffffffffffffffff"))]);
    assert!(
        wrong.contains(r#"{"Refused":"this process's job token (DEVTENSOR_JOB_TOKEN) is not rank 0's"}"#),
        "{wrong}"
    );
    let missing = exchange(&job, &[&hello(1, None)]);
    assert!(missing.contains("this process has no job token (DEVTENSOR_JOB_TOKEN)"), "{missing}");
    job.start_rank_1();
    let output = job.train_to_the_end();
    assert!(output.contains("refused a connection from 127.0.0.1"), "{output}");
}

#[test]
fn an_outsiders_fail_and_set_do_not_reach_the_job() {
    if !gpus_ready() {
        return;
    }
    let mut job = AttackedJob::start();
    let fail = r#"{"Fail":{"reason":"an outsider says so"}}"#;
    let set = r#"{"Set":{"key":"devtensor/nccl-id","value":"00"}}"#;
    // Before any hello, after a hello without the token, and after one
    // with a wrong token: each refused, and nothing after it is read.
    for lines in [vec![fail.to_string()], vec![set.to_string()], vec![hello(1, None), fail.into(), set.into()]] {
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let answer = exchange(&job, &lines);
        assert!(answer.starts_with(r#"{"Refused":"#) && answer.lines().count() == 1, "{lines:?}: {answer}");
    }
    let wrong = exchange(&job, &[&hello(1, Some("0000000000000000ffffffffffffffff")), fail, set]);
    assert!(wrong.starts_with(r#"{"Refused":"#) && wrong.lines().count() == 1, "{wrong}");
    job.start_rank_1();
    let output = job.train_to_the_end();
    assert!(!output.contains("an outsider says so"), "{output}");
}

#[test]
fn a_flood_of_connections_costs_no_threads() {
    if !gpus_ready() {
        return;
    }
    let job = AttackedJob::joined();
    let before = job.rank_0_status("Threads");
    let flood: Vec<TcpStream> = (0..400).map(|_| job.connect()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let during = job.rank_0_status("Threads");
    // A world of 2 admits 4 * 2 + 16 connections at once; the rest are
    // answered `Busy` and closed at once.
    assert!(during <= before + 24, "rank 0 went from {before} to {during} threads");
    let mut busy = 0;
    for mut stream in flood.into_iter().rev().take(100) {
        let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(5));
        busy += usize::from(closed && answer == "\"Busy\"\n");
    }
    assert_eq!(busy, 100);
    let output = job.train_to_the_end();
    assert!(output.contains("over the limit of 24 connections at once"), "{output}");
}

/// Pieces of what a hostile or broken peer may send: arbitrary bytes,
/// fragments of the protocol, every request (with and without a hello, with
/// the job's token and without), lines past the limit, deep nesting.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    const REQUESTS: [&str; 13] = [
        r#"{"Set":{"key":"devtensor/nccl-id","value":"00ff"}}"#,
        r#"{"Set":{"key":"k","value":"0"}}"#,
        r#"{"Get":{"key":"devtensor/nccl-id","timeout_ms":10}}"#,
        r#"{"Add":{"key":"barrier/devtensor/join/1","delta":-1}}"#,
        r#"{"Delete":{"keys":["devtensor/nccl-id"]}}"#,
        r#"{"Wait":{"keys":["x"],"timeout_ms":18446744073709551615}}"#,
        r#"{"Fail":{"reason":"fuzz"}}"#,
        r#"{"Leave":{"steps":1}}"#,
        r#"{"Watch":{"departures":0}}"#,
        r#"{"WaitAlone":{"timeout_ms":5}}"#,
        r#"{"Hello":{"rank":18446744073709551615,"world_size":2,"process":1}}"#,
        r#""Busy""#,
        "null",
    ];
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        prop::sample::select(&REQUESTS[..]).prop_map(|r| r.as_bytes().to_vec()),
        (0..4usize, 0..4usize, prop::option::of(any::<bool>())).prop_map(|(rank, world, token)| {
            let token = token.map(|right| if right { TOKEN.to_string() } else { TOKEN.replace('8', "9") });
            let token = token.map_or(String::new(), |t| format!(r#","token":"{t}""#));
            format!(r#"{{"Hello":{{"rank":{rank},"world_size":{world},"process":3{token}}}}}"#).into_bytes()
        }),
        prop::sample::select(&["\n", "{", "}", "\"", "\\", ",", ":", "\r\n", "\u{0}"][..])
            .prop_map(|s| s.as_bytes().to_vec()),
        (1..6000usize).prop_map(|n| vec![b'['; n]),
        (4000..5000usize).prop_map(|n| vec![b'a'; n]),
    ]
}

#[test]
fn the_store_survives_arbitrary_bytes_while_a_job_trains() {
    if !gpus_ready() {
        return;
    }
    let job = AttackedJob::joined();
    let (memory, threads) = (job.rank_0_status("VmRSS"), job.rank_0_status("Threads"));
    let cases = crate::common::cpu_cases(5000);
    let config = ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(cases) };
    let start = Instant::now();
    proptest!(config, |(pieces in prop::collection::vec(piece(), 0..8), cuts in prop::collection::vec(0.0..1.0f64, 0..4))| {
        let bytes: Vec<u8> = pieces.concat();
        // Sent in parts, at arbitrary points, so that lines arrive split.
        let mut at: Vec<usize> = cuts.iter().map(|c| (c * bytes.len() as f64) as usize).collect();
        at.push(bytes.len());
        at.sort();
        let mut stream = job.connect();
        let mut from = 0;
        for &to in &at {
            if stream.write_all(&bytes[from..to]).is_err() {
                break;
            }
            stream.flush().unwrap();
            from = to;
            std::thread::sleep(Duration::from_micros(200));
        }
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(10));
        prop_assert!(closed, "the store kept the connection open after {bytes:?}");
        for line in answer.lines() {
            prop_assert!(serde_json::from_str::<serde_json::Value>(line).is_ok(), "{line:?}");
        }
        prop_assert!(answer.lines().count() <= 1, "{answer}");
    });
    println!("{cases} connections of arbitrary bytes in {:.1} s", start.elapsed().as_secs_f64());
    std::thread::sleep(Duration::from_millis(500));
    let grown = job.rank_0_status("VmRSS").saturating_sub(memory);
    assert!(grown < 32 * 1024, "rank 0's memory grew by {grown} KiB");
    assert!(job.rank_0_status("Threads") <= threads + 2, "rank 0's threads: {threads} before");
    job.train_to_the_end();
}
