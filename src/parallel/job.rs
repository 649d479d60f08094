//! This process's place in a multi-process job, read from the environment
//! that `torchrun` (and devtensor's launcher) sets, and checked before
//! anything is started (see `docs/distributed.md`).

use crate::error::{Error, Result};

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
#[derive(Clone, Debug, PartialEq, Eq)]
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
        Ok(Job { world_size, rank, local_rank, master_addr, master_port })
    }

    /// This rank's shard of a data set (PyTorch's `DistributedSampler`
    /// with `num_replicas = WORLD_SIZE, rank = RANK`): give it to this
    /// process's `DataLoader`, and call its `set_epoch` each epoch.
    ///
    /// ```
    /// use devtensor::data::Sampler;
    /// use devtensor::parallel::Job;
    /// let job = Job { world_size: 2, rank: 1, local_rank: 1, master_addr: "localhost".into(), master_port: 29500 };
    /// assert_eq!(job.sampler(false, 0).indices(0, 5), vec![1, 3, 0]);
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
