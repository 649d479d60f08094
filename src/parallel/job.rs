//! This process's place in a multi-process job, read from the environment
//! that `torchrun` (and devtensor's launcher) sets, and checked before
//! anything is started (see `docs/distributed.md`).

use super::token::{JOB_TOKEN_VAR, JobToken};
use crate::error::{Error, Result};
use std::net::IpAddr;

/// The environment variable that names the address rank 0's store listens
/// on, when it should not be the one `MASTER_ADDR` names.
pub const STORE_BIND_VAR: &str = "DEVTENSOR_STORE_BIND";

/// One process of a job of `world_size` processes, as `torchrun --nproc-per-node N`
/// describes it in the environment: `WORLD_SIZE`, `RANK`, `LOCAL_RANK`
/// (the process on its node, and its GPU), and `MASTER_ADDR` /
/// `MASTER_PORT` (where rank 0 serves the rendezvous).
///
/// ```
/// use devtensor::parallel::Job;
/// let env = |name: &str| match name {
///     "WORLD_SIZE" => Some("4".to_string()),
///     "RANK" => Some("3".to_string()),
///     "LOCAL_RANK" => Some("1".to_string()),
///     "MASTER_ADDR" => Some("10.0.0.1".to_string()),
///     "MASTER_PORT" => Some("29500".to_string()),
///     "DEVTENSOR_JOB_TOKEN" => Some("9c1d7e2f4a6b8c0d2e4f6a8b0c2d4e6f".to_string()),
///     _ => None,
/// };
/// let job = Job::from_vars(env)?;
/// assert_eq!((job.world_size, job.rank, job.local_rank, job.master_port), (4, 3, 1, 29500));
/// assert!(!job.is_main());
///
/// let err = Job::from_vars(|name| if name == "RANK" { Some("4".into()) } else { env(name) }).unwrap_err();
/// assert_eq!(err.to_string(), "distributed job, rank 4: RANK=4 is not below WORLD_SIZE=4");
/// # Ok::<(), devtensor::Error>(())
/// ```
///
/// The job's secret, [`token`](Self::token), comes from
/// `DEVTENSOR_JOB_TOKEN` ([`JOB_TOKEN_VAR`]), which `devtensor-run` sets;
/// it may be missing only when `MASTER_ADDR` is a loopback address (a job
/// on one machine), and then any process of the machine may join. The
/// struct is `#[non_exhaustive]`: build one with [`from_env`](Self::from_env),
/// [`from_vars`](Self::from_vars) or [`local`](Self::local), so that a field
/// added later breaks no program.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Job {
    /// Processes in the job (`WORLD_SIZE`, at least 1).
    pub world_size: usize,
    /// This process (`RANK`, below `world_size`).
    pub rank: usize,
    /// This process on its node, and the ordinal of its GPU (`LOCAL_RANK`).
    pub local_rank: usize,
    /// The host rank 0 serves the rendezvous on (`MASTER_ADDR`).
    pub master_addr: String,
    /// Its port (`MASTER_PORT`, 1 to 65535).
    pub master_port: u16,
    /// The job's secret (`DEVTENSOR_JOB_TOKEN`), which every process shows
    /// rank 0's store.
    pub token: Option<JobToken>,
    /// The address rank 0's store listens on (`DEVTENSOR_STORE_BIND`, an IP
    /// address such as `0.0.0.0` for every interface); when `None`, the
    /// address `MASTER_ADDR` names, so that a store for `127.0.0.1` is
    /// reachable from this machine only.
    pub store_bind: Option<IpAddr>,
}

impl Job {
    /// The job this process belongs to, from its environment. Fails with
    /// [`Error::Distributed`] naming the variable that is missing, not a number, or
    /// out of range, and the rank where it is known.
    pub fn from_env() -> Result<Job> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// As [`from_env`](Self::from_env), reading each variable with `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Job> {
        // The rank first, so that every later error can name it.
        let rank = number(&var, "RANK", None)?;
        let fail = |reason: String| Error::Distributed { rank: Some(rank), reason };
        let world_size = number(&var, "WORLD_SIZE", Some(rank))?;
        if world_size == 0 {
            return Err(fail("WORLD_SIZE=0: a job has at least one process".into()));
        }
        if rank >= world_size {
            return Err(fail(format!("RANK={rank} is not below WORLD_SIZE={world_size}")));
        }
        let local_rank = number(&var, "LOCAL_RANK", Some(rank))?;
        if local_rank > rank {
            return Err(fail(format!(
                "LOCAL_RANK={local_rank} is above RANK={rank}: a node's processes are numbered from its first rank"
            )));
        }
        let master_addr = required(&var, "MASTER_ADDR", Some(rank))?;
        if master_addr.trim().is_empty() {
            return Err(fail("MASTER_ADDR is empty: give rank 0's host name or address".into()));
        }
        let port = number(&var, "MASTER_PORT", Some(rank))?;
        let master_port = u16::try_from(port)
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| fail(format!("MASTER_PORT={port} is not a TCP port (1 to 65535)")))?;
        let token = var(JOB_TOKEN_VAR).map(JobToken::new).transpose().map_err(|e| match e {
            Error::Distributed { reason, .. } => fail(reason),
            other => other,
        })?;
        if token.is_none() && !is_loopback(&master_addr) {
            return Err(fail(format!(
                "{JOB_TOKEN_VAR} is not set, and MASTER_ADDR={master_addr} is not a loopback address: without a \
                 job token, anyone who can reach {master_addr}:{master_port} could join this job. devtensor-run \
                 sets one for a job on one machine; for several machines set the same one on each, e.g. \
                 `export {JOB_TOKEN_VAR}=$(openssl rand -hex 32)` (docs/distributed.md)"
            )));
        }
        let store_bind = match var(STORE_BIND_VAR) {
            None => None,
            Some(text) => Some(text.trim().parse().map_err(|_| {
                fail(format!(
                    "{STORE_BIND_VAR}={text:?} is not an IP address (such as 10.0.0.1, or 0.0.0.0 for every interface)"
                ))
            })?),
        };
        Ok(Job { world_size, rank, local_rank, master_addr, master_port, token, store_bind })
    }

    /// Rank `rank` of a job of `world_size` processes on this machine,
    /// with `LOCAL_RANK` equal to `rank`, its store on `127.0.0.1:port`, and
    /// no token: ranks started as threads or by hand, as tests and examples
    /// do (a launcher's processes read theirs with [`from_env`](Self::from_env)).
    /// Fails unless `rank` is below `world_size` and `port` is not 0.
    ///
    /// ```
    /// use devtensor::parallel::{Job, JobToken};
    /// let job = Job::local(2, 1, 29500)?.with_token(JobToken::generate()?);
    /// assert_eq!((job.world_size, job.rank, job.local_rank, job.master_addr.as_str()), (2, 1, 1, "127.0.0.1"));
    /// assert!(Job::local(2, 2, 29500).is_err());
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    pub fn local(world_size: usize, rank: usize, port: u16) -> Result<Job> {
        let text = |n: usize| Some(n.to_string());
        Job::from_vars(|name| match name {
            "WORLD_SIZE" => text(world_size),
            "RANK" | "LOCAL_RANK" => text(rank),
            "MASTER_ADDR" => Some("127.0.0.1".into()),
            "MASTER_PORT" => text(port.into()),
            _ => None,
        })
    }

    /// This job with `token` as its secret: every rank of a job must have
    /// the same one.
    pub fn with_token(mut self, token: JobToken) -> Job {
        self.token = Some(token);
        self
    }

    /// This rank's shard of a data set (PyTorch's `DistributedSampler`
    /// with `num_replicas = WORLD_SIZE, rank = RANK`): give it to this
    /// process's `DataLoader`, and call its `set_epoch` each epoch.
    ///
    /// ```
    /// use devtensor::data::Sampler;
    /// use devtensor::parallel::Job;
    /// let job = Job::local(2, 1, 29500)?;
    /// assert_eq!(job.sampler(false, 0).indices(0, 5), vec![1, 3, 0]);
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    pub fn sampler(&self, shuffle: bool, seed: u64) -> crate::data::Sampler {
        crate::data::Sampler::Distributed { replicas: self.world_size, rank: self.rank, shuffle, seed }
    }

    /// Whether this is rank 0, which serves the rendezvous and writes the
    /// checkpoints.
    pub fn is_main(&self) -> bool {
        self.rank == 0
    }
}

/// The variable `name`, or an error saying that the launcher sets it.
fn required(var: &impl Fn(&str) -> Option<String>, name: &str, rank: Option<usize>) -> Result<String> {
    var(name).ok_or_else(|| Error::Distributed {
        rank,
        reason: format!(
            "{name} is not set: start the processes with devtensor's launcher or torchrun, which set \
             WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR and MASTER_PORT"
        ),
    })
}

/// The variable `name` as a non-negative whole number.
fn number(var: &impl Fn(&str) -> Option<String>, name: &str, rank: Option<usize>) -> Result<usize> {
    let text = required(var, name, rank)?;
    text.trim()
        .parse()
        .map_err(|_| Error::Distributed { rank, reason: format!("{name}={text:?} is not a whole number") })
}

/// Whether `host` is this machine's loopback interface (`localhost`,
/// `127.x.x.x`, `::1`), which no other machine can reach.
fn is_loopback(host: &str) -> bool {
    let host = host.trim().trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
