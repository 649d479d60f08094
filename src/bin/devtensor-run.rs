//! `devtensor-run`: starts the processes of one node of a distributed job,
//! one per GPU, in the spirit of `torchrun --nproc-per-node N`.
//!
//! ```text
//! devtensor-run --nproc-per-node 2 target/release/examples/ddp
//! devtensor-run --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --nproc-per-node 8 ./train -- --epochs 3
//! ```
//!
//! Each process gets `WORLD_SIZE`, `RANK`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`,
//! `MASTER_ADDR`, `MASTER_PORT` and `DEVTENSOR_JOB_TOKEN` (the job's
//! secret: a fresh one, or the user's, which a job of several nodes needs);
//! its output lines are forwarded with a `[rank N]` prefix. When a process
//! fails, the others are given `--grace` seconds to end by themselves (a
//! devtensor program's steps return an error naming the failed rank within
//! that time), then killed.
//! The launcher then names the rank that failed first (a devtensor rank
//! writes its own failure to `DEVTENSOR_RUN_ERROR_FILE`; otherwise a rank
//! killed by a signal, otherwise the first to end badly) and exits with its
//! exit code.

use devtensor::parallel::{JOB_TOKEN_VAR, JobToken};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: devtensor-run [--nproc-per-node N] [--nnodes M] [--node-rank R] \
[--master-addr HOST] [--master-port PORT] [--grace SECONDS] PROGRAM [ARGS...]

Starts N processes of PROGRAM on this node (node R of M), each with WORLD_SIZE,
RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, as torchrun does,
and DEVTENSOR_JOB_TOKEN: the job's secret, taken from the environment when set (a job
of several nodes needs the same one on each), else made afresh.
Defaults: 1 process, 1 node, node 0, 127.0.0.1, port 29500, 30 s grace.";

struct Options {
    nproc_per_node: usize,
    nnodes: usize,
    node_rank: usize,
    master_addr: String,
    master_port: u16,
    grace: Duration,
    program: String,
    args: Vec<String>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        nproc_per_node: 1,
        nnodes: 1,
        node_rank: 0,
        master_addr: "127.0.0.1".into(),
        master_port: 29500,
        grace: Duration::from_secs(30),
        program: String::new(),
        args: Vec::new(),
    };
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if arg.starts_with("--") => (flag.to_string(), Some(value.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| inline.clone().or_else(|| args.next()).ok_or(format!("{name} needs a value"));
        let number = |name: &str, text: String| {
            text.parse::<usize>().map_err(|_| format!("{name} {text:?} is not a whole number"))
        };
        match flag.replace('_', "-").as_str() {
            "--nproc-per-node" => options.nproc_per_node = number(&flag, value(&flag)?)?,
            "--nnodes" => options.nnodes = number(&flag, value(&flag)?)?,
            "--node-rank" => options.node_rank = number(&flag, value(&flag)?)?,
            "--master-addr" => options.master_addr = value(&flag)?,
            "--master-port" => {
                let text = value(&flag)?;
                options.master_port =
                    text.parse().ok().filter(|&p| p > 0).ok_or(format!("--master-port {text:?} is not a TCP port"))?;
            }
            "--grace" => {
                let text = value(&flag)?;
                let secs: f64 = text.parse().map_err(|_| format!("--grace {text:?} is not a number of seconds"))?;
                options.grace = Duration::from_secs_f64(secs.max(0.0));
            }
            "-h" | "--help" => return Err(String::new()),
            "--" => {
                options.program = args.next().ok_or("no program after --")?;
                break;
            }
            other if other.starts_with('-') => return Err(format!("unknown option {other}")),
            _ => {
                options.program = arg;
                break;
            }
        }
    }
    if options.program.is_empty() {
        return Err("no program to run".into());
    }
    options.args = args.collect();
    if options.nproc_per_node == 0 || options.nnodes == 0 {
        return Err("--nproc-per-node and --nnodes must be at least 1".into());
    }
    if options.node_rank >= options.nnodes {
        return Err(format!("--node-rank {} is not below --nnodes {}", options.node_rank, options.nnodes));
    }
    Ok(options)
}

/// The job's secret, which every process shows rank 0's store: the one in
/// `DEVTENSOR_JOB_TOKEN` when the user set it (a job of several nodes needs
/// the same one on each), else a fresh one for this node's job.
fn job_token(options: &Options, from_env: Option<String>) -> Result<JobToken, String> {
    match from_env {
        Some(text) => JobToken::new(text).map_err(|e| e.to_string()),
        None if options.nnodes > 1 => Err(format!(
            "a job of {} nodes needs the same {JOB_TOKEN_VAR} on every node, so that only its own processes can \
             join it: set it before starting devtensor-run on each node, e.g. `export {JOB_TOKEN_VAR}=$(openssl rand \
             -hex 32)` on one and the same value on the others (docs/distributed.md)",
            options.nnodes
        )),
        None => JobToken::generate().map_err(|e| e.to_string()),
    }
}

/// Forwards every line of `from` to `to` with `prefix`.
fn forward(from: impl Read + Send + 'static, prefix: String, to_stderr: bool) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            if to_stderr {
                let _ = writeln!(std::io::stderr().lock(), "{prefix}{line}");
            } else {
                let _ = writeln!(std::io::stdout().lock(), "{prefix}{line}");
            }
        }
    })
}

/// How a process ended, in words.
fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            let name = match signal {
                9 => " (SIGKILL)",
                15 => " (SIGTERM)",
                6 => " (SIGABRT)",
                11 => " (SIGSEGV)",
                _ => "",
            };
            return format!("killed by signal {signal}{name}");
        }
    }
    match status.code() {
        Some(code) => format!("exit code {code}"),
        None => "an unknown status".into(),
    }
}

fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("devtensor-run: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let token = match job_token(&options, std::env::var(JOB_TOKEN_VAR).ok()) {
        Ok(token) => token,
        Err(message) => {
            eprintln!("devtensor-run: {message}");
            return ExitCode::from(2);
        }
    };
    let world_size = options.nproc_per_node * options.nnodes;
    let mut children: Vec<(usize, Child)> = Vec::new();
    let errors = std::env::temp_dir().join(format!("devtensor-run-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&errors);
    let error_file = |rank: usize| errors.join(format!("rank-{rank}"));
    let mut forwarders = Vec::new();
    for local_rank in 0..options.nproc_per_node {
        let rank = options.node_rank * options.nproc_per_node + local_rank;
        let spawned = Command::new(&options.program)
            .args(&options.args)
            .env("WORLD_SIZE", world_size.to_string())
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", local_rank.to_string())
            .env("LOCAL_WORLD_SIZE", options.nproc_per_node.to_string())
            .env("MASTER_ADDR", &options.master_addr)
            .env("MASTER_PORT", options.master_port.to_string())
            .env("DEVTENSOR_RUN_ERROR_FILE", error_file(rank))
            .env(JOB_TOKEN_VAR, token.secret())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                eprintln!("devtensor-run: cannot start {} for rank {rank}: {e}", options.program);
                for (_, mut started) in children {
                    let _ = started.kill();
                    let _ = started.wait();
                }
                return ExitCode::from(1);
            }
        };
        let prefix = format!("[rank {rank}] ");
        forwarders.push(forward(child.stdout.take().expect("piped"), prefix.clone(), false));
        forwarders.push(forward(child.stderr.take().expect("piped"), prefix, true));
        children.push((rank, child));
    }

    let mut first_failure: Option<(usize, ExitStatus)> = None;
    let mut statuses: Vec<(usize, ExitStatus)> = Vec::new();
    let mut deadline: Option<Instant> = None;
    let mut running: Vec<(usize, Child)> = children;
    while !running.is_empty() {
        let mut still = Vec::with_capacity(running.len());
        for (rank, mut child) in running {
            match child.try_wait() {
                Ok(Some(status)) => {
                    statuses.push((rank, status));
                    if !status.success() && first_failure.is_none() {
                        eprintln!(
                            "devtensor-run: rank {rank} failed ({}); the other ranks have {:?} to stop",
                            describe(status),
                            options.grace
                        );
                        first_failure = Some((rank, status));
                        deadline = Some(Instant::now() + options.grace);
                    }
                }
                Ok(None) => still.push((rank, child)),
                Err(e) => {
                    eprintln!("devtensor-run: cannot wait for rank {rank}: {e}");
                    still.push((rank, child));
                }
            }
        }
        running = still;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            for (rank, child) in &mut running {
                eprintln!(
                    "devtensor-run: rank {rank} is still running {:?} after the failure; killing it",
                    options.grace
                );
                let _ = child.kill();
            }
            deadline = None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for forwarder in forwarders {
        let _ = forwarder.join();
    }
    // The rank that reported its own failure is the cause; the others
    // stopped because of it.
    let reported = statuses.iter().find_map(|&(rank, status)| {
        let reason = std::fs::read_to_string(error_file(rank)).ok()?;
        Some((rank, status, reason))
    });
    let _ = std::fs::remove_dir_all(&errors);
    // Then a rank killed by a signal (the others' errors would only echo
    // its death), then the first to end badly.
    let killed = statuses.iter().find(|(_, status)| !status.success() && status.code().is_none());
    let status = match (reported, killed, first_failure) {
        (Some((rank, status, reason)), _, _) => {
            eprintln!("devtensor-run: the job failed: rank {rank} failed first ({}): {reason}", describe(status));
            status
        }
        (None, Some(&(rank, status)), _) => {
            eprintln!("devtensor-run: the job failed: rank {rank} was {}", describe(status));
            status
        }
        (None, None, Some((rank, status))) => {
            eprintln!("devtensor-run: the job failed: rank {rank} ended first, with {}", describe(status));
            status
        }
        (None, None, None) => return ExitCode::SUCCESS,
    };
    ExitCode::from(status.code().and_then(|c| u8::try_from(c).ok()).filter(|&c| c != 0).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> impl Iterator<Item = String> {
        text.split_whitespace().map(str::to_string).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn options_follow_torchrun_and_the_program_keeps_its_own() {
        let o =
            parse(args("--nproc-per-node 4 --nnodes=2 --node_rank 1 --master-addr 10.0.0.1 ./train --lr 3")).unwrap();
        assert_eq!((o.nproc_per_node, o.nnodes, o.node_rank), (4, 2, 1));
        assert_eq!((o.master_addr.as_str(), o.master_port), ("10.0.0.1", 29500));
        assert_eq!((o.program.as_str(), o.args.clone()), ("./train", vec!["--lr".to_string(), "3".to_string()]));
        let o = parse(args("--grace 0.5 -- ./train --nnodes 9")).unwrap();
        assert_eq!((o.grace, o.nnodes, o.args.len()), (Duration::from_millis(500), 1, 2));
    }

    #[test]
    fn bad_options_are_named() {
        for (line, message) in [
            ("", "no program to run"),
            ("--nproc-per-node two ./train", "--nproc-per-node \"two\" is not a whole number"),
            ("--node-rank 2 --nnodes 2 ./train", "--node-rank 2 is not below --nnodes 2"),
            ("--master-port 0 ./train", "--master-port \"0\" is not a TCP port"),
            ("--nproc-per-node 0 ./train", "--nproc-per-node and --nnodes must be at least 1"),
            ("--frobnicate ./train", "unknown option --frobnicate"),
            ("--nnodes", "--nnodes needs a value"),
        ] {
            assert_eq!(parse(args(line)).err().as_deref(), Some(message), "{line}");
        }
    }

    #[test]
    fn a_job_gets_a_fresh_token_unless_it_spans_nodes() {
        let (one, two) = (parse(args("./train")).unwrap(), parse(args("--nnodes 2 ./train")).unwrap());
        let (a, b) = (job_token(&one, None).unwrap(), job_token(&one, None).unwrap());
        assert!(a.secret().len() == 64 && a != b);
        let error = job_token(&two, None).unwrap_err();
        assert!(error.starts_with("a job of 2 nodes needs the same DEVTENSOR_JOB_TOKEN on every node"), "{error}");
        let given = "0123456789abcdef0123456789abcdef";
        assert_eq!(job_token(&two, Some(given.into())).unwrap().secret(), given);
        let short = job_token(&one, Some("short".into())).unwrap_err();
        assert!(short.contains("DEVTENSOR_JOB_TOKEN has 5 characters"), "{short}");
    }
}
