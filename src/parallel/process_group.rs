//! This process's membership of a multi-process job: the rendezvous store,
//! the NCCL communicator on the process's GPU, and the watchdog that turns
//! another rank's failure into an error here instead of a hang.

use super::job::Job;
use super::store::{Failure, JobEvent, TcpStore};
use crate::backend::cuda::nccl::{self, NcclRank};
use crate::error::{Error, Result};
use crate::tensor::Device;
use devtensor_macros::fallible;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long joining may take (every rank started, NCCL connected) unless
/// `DEVTENSOR_DIST_TIMEOUT_S` says otherwise: the launcher starts every
/// process of a node at once, but other nodes may start minutes later.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// What the process and its watchdog share.
struct Membership {
    rank: usize,
    comm: OnceLock<NcclRank>,
    /// The first failure of another rank, as the watchdog learned it.
    failure: Mutex<Option<Failure>>,
    /// Steps started here, and the ranks that have left: one lock, so that
    /// a departure and the start of a step cannot miss each other.
    progress: Mutex<Progress>,
}

#[derive(Default)]
struct Progress {
    /// Operations this rank has started with the group: training steps
    /// and a program's own collectives, every one of which every rank
    /// must take part in.
    operations: u64,
    /// Ranks that left the job, with the operations they had started.
    departed: Vec<(usize, Option<u64>)>,
}

impl Progress {
    /// A rank that left before the operation this rank is in: it will
    /// never take part in its collectives.
    fn deserter(&self, me: usize) -> Option<Failure> {
        let now = self.operations;
        self.departed.iter().find_map(|&(rank, done)| {
            let done = done.filter(|&d| d < now && rank != me)?;
            Some(Failure {
                rank,
                reason: format!(
                    "it left the job after {done} training steps and collectives, while rank {me} was waiting for it \
                     in its {} one",
                    ordinal(now)
                ),
            })
        })
    }
}

/// `n` as an English ordinal: 1st, 2nd, 3rd, 4th, 11th, 21st.
fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, r) if r != 11 => "st",
        (2, r) if r != 12 => "nd",
        (3, r) if r != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

impl Membership {
    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn failure(&self) -> Option<Failure> {
        self.failure.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records `failure` (the first one stays) and aborts the communicator,
    /// which ends any wait of this process on a collective.
    fn stop(&self, failure: Failure) {
        self.failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(failure);
        if let Some(comm) = self.comm.get() {
            comm.abort();
        }
    }
}

/// This process's place in a job of one process per GPU (PyTorch's
/// `init_process_group("nccl")`): rank `job.rank` of `job.world_size`, on
/// the GPU `D`, which must be `Cuda<LOCAL_RANK>` (enter the training code
/// with [`on_local_gpu!`](crate::on_local_gpu) to get it).
///
/// Making one connects to the job's [`TcpStore`] (rank 0 serves it), waits
/// for every rank, and joins an NCCL communicator across the processes
/// (`ncclCommInitRankConfig` in non-blocking mode, polled, so that nothing
/// blocks past the timeout). A watchdog thread then waits on the store: when
/// another rank fails (an error it reported, a panic, or its process ending
/// without leaving, as a killed one does), it aborts the communicator, so
/// that this process's current wait on a collective ends, and the step
/// returns an [`Error::Distributed`] naming that rank.
///
/// Used through [`DistributedDataParallel`](super::DistributedDataParallel),
/// and for a program's own collectives on tensors of `D`
/// ([`all_reduce`](Self::all_reduce), [`broadcast`](Self::broadcast),
/// [`all_gather`](Self::all_gather), [`reduce_scatter_tensor`](Self::reduce_scatter_tensor),
/// [`barrier`](Self::barrier)); dropping it leaves the job (a panicking
/// thread reports a failure instead).
pub struct ProcessGroup<D: Device> {
    job: Job,
    store: TcpStore,
    membership: Arc<Membership>,
    _device: PhantomData<D>,
}

impl<D: Device> std::fmt::Debug for ProcessGroup<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessGroup").field("job", &self.job).field("device", &D::name()).finish()
    }
}

impl<D: Device> ProcessGroup<D> {
    /// Joins the job `job` on `D`, waiting at most `DEVTENSOR_DIST_TIMEOUT_S`
    /// seconds ([`DEFAULT_TIMEOUT`] when unset) for the other ranks.
    pub fn try_new(job: &Job) -> Result<Self> {
        let timeout = match std::env::var("DEVTENSOR_DIST_TIMEOUT_S") {
            Ok(text) => {
                Duration::from_secs_f64(text.trim().parse::<f64>().ok().filter(|s| *s > 0.0).ok_or_else(|| {
                    Error::Distributed {
                        rank: Some(job.rank),
                        reason: format!("DEVTENSOR_DIST_TIMEOUT_S={text:?} is not a positive number of seconds"),
                    }
                })?)
            }
            Err(_) => DEFAULT_TIMEOUT,
        };
        Self::try_with_timeout(job, timeout)
    }

    /// As [`try_new`](Self::try_new), waiting at most `timeout` for the
    /// other ranks. Fails with [`Error::Distributed`] when `D` is not this
    /// process's GPU (`Cuda<LOCAL_RANK>`), a rank does not arrive in time
    /// (naming it), the ranks disagree about the job, or NCCL cannot connect
    /// them; and with [`Error::DeviceUnavailable`] when NCCL or the GPU is
    /// missing.
    pub fn try_with_timeout(job: &Job, timeout: Duration) -> Result<Self> {
        let fail = |reason: String| Error::Distributed { rank: Some(job.rank), reason };
        if D::cuda_ordinal() != Some(job.local_rank) {
            return Err(fail(format!(
                "this process has LOCAL_RANK={}, so its GPU is Cuda<{}>, but the process group was made on {}: \
                 enter the training code with devtensor::on_local_gpu!(job, D => ...)",
                job.local_rank,
                job.local_rank,
                D::name()
            )));
        }
        let deadline = Instant::now() + timeout;
        let store = TcpStore::try_connect(job, timeout)?;
        let membership = Arc::new(Membership {
            rank: job.rank,
            comm: OnceLock::new(),
            failure: Mutex::new(None),
            progress: Mutex::new(Progress::default()),
        });
        let mut watcher = store.watcher()?;
        let watched = membership.clone();
        std::thread::Builder::new()
            .name(format!("devtensor-watchdog-{}", job.rank))
            .spawn(move || {
                loop {
                    match watcher.next() {
                        JobEvent::Failed(failure) => {
                            if failure.rank != watched.rank {
                                watched.stop(failure);
                            }
                            return;
                        }
                        JobEvent::Departed(ranks) => {
                            if ranks.iter().any(|&(rank, _)| rank == watched.rank) {
                                return; // this rank has left: nothing more to watch
                            }
                            let deserter = {
                                let mut progress = watched.progress();
                                progress.departed = ranks;
                                progress.deserter(watched.rank)
                            };
                            if let Some(failure) = deserter {
                                watched.stop(failure);
                                return;
                            }
                        }
                    }
                }
            })
            .map_err(|e| fail(format!("cannot start the watchdog thread: {e}")))?;

        // Every rank first meets at the store, so that a missing one is named.
        let joined = (|| {
            store.try_barrier("devtensor/join")?;
            let id = if job.is_main() {
                let id = nccl::unique_id()?;
                store.try_set("devtensor/nccl-id", &id)?;
                id
            } else {
                store.try_get("devtensor/nccl-id")?
            };
            let cancelled = || membership.failure().map(|f| f.error(job.rank));
            NcclRank::try_join(job.local_rank, job.world_size, job.rank, &id, deadline, &cancelled).map_err(|e| match e
            {
                Error::Distributed { .. } => e,
                other => fail(format!("could not join the NCCL communicator: {other}")),
            })
        })();
        let comm = match joined {
            Ok(comm) => comm,
            Err(error) => {
                // This rank's own failure (NCCL missing, its GPU refused):
                // the others must not wait for it until their timeout.
                if membership.failure().is_none() {
                    let _ = store.try_report_failure(&error.to_string());
                    tell_launcher(&error.to_string());
                }
                return Err(error);
            }
        };
        let _ = membership.comm.set(comm);
        // A failure may have arrived while joining, before the watchdog could abort.
        if let Some(failure) = membership.failure() {
            membership.stop(failure.clone());
            return Err(failure.error(job.rank));
        }
        Ok(ProcessGroup { job: job.clone(), store, membership, _device: PhantomData })
    }

    /// The job, as read from the environment.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.job.rank
    }

    /// Processes in the job.
    pub fn world_size(&self) -> usize {
        self.job.world_size
    }

    /// How long a wait on the other ranks may take.
    pub fn timeout(&self) -> Duration {
        self.store.timeout()
    }

    /// The job's rendezvous store, for a program's own agreements (what
    /// PyTorch programs do with `dist.broadcast_object_list`).
    pub fn store(&self) -> &TcpStore {
        &self.store
    }

    /// Waits until every rank has reached this call as often as this one
    /// (PyTorch's `dist.barrier()`), meeting at the job's store; another
    /// rank's failure ends the wait with an error naming it.
    ///
    /// ```no_run
    /// use devtensor::parallel::ProcessGroup;
    /// use devtensor::{Device, Result};
    ///
    /// /// Rank 0 writes a file (`write`) that every rank reads after this.
    /// fn written_by_rank_0<D: Device>(group: &ProcessGroup<D>, write: impl FnOnce() -> Result<()>) -> Result<()> {
    ///     if group.rank() == 0 {
    ///         write()?;
    ///     }
    ///     group.try_barrier()
    /// }
    /// ```
    #[fallible]
    pub fn barrier(&self) {
        self.barrier_named("devtensor/barrier")
    }

    /// A barrier of its own name (as [`TcpStore::try_barrier`]), so that
    /// devtensor's own meetings never count towards the program's.
    pub(crate) fn barrier_named(&self, name: &str) -> Result<()> {
        self.check()?;
        self.store.try_barrier(name)
    }

    /// The communicator, or the failure that aborted it.
    pub(crate) fn comm(&self) -> Result<&NcclRank> {
        self.check()?;
        self.membership.comm.get().ok_or_else(|| Error::Distributed {
            rank: Some(self.job.rank),
            reason: "the NCCL communicator is gone".into(),
        })
    }

    /// Fails with another rank's failure, if the watchdog saw one.
    pub(crate) fn check(&self) -> Result<()> {
        match self.membership.failure() {
            Some(failure) => Err(failure.error(self.job.rank)),
            None => Ok(()),
        }
    }

    /// Marks the start of an operation every rank takes part in (a
    /// training step, a collective). Fails when another rank has failed,
    /// or has left the job before this operation (it would never join its
    /// collectives).
    pub(crate) fn begin_operation(&self) -> Result<()> {
        let deserter = {
            let mut progress = self.membership.progress();
            progress.operations += 1;
            progress.deserter(self.job.rank)
        };
        if let Some(failure) = deserter {
            self.membership.stop(failure);
        }
        self.check()
    }

    /// The error to return for this rank's own error `e`: another rank's
    /// failure if one came first (`e` is then its echo), otherwise `e`,
    /// reported to the job so that no rank waits for this one.
    pub(crate) fn stopping(&self, e: Error) -> Error {
        self.check().err().unwrap_or_else(|| self.fail(e))
    }

    /// After this rank's own error: reports it to the job, so that every
    /// other rank stops, and aborts the communicator, so that nothing here
    /// waits on it. Returns the error for the caller to pass on.
    pub(crate) fn fail(&self, error: Error) -> Error {
        if self.membership.failure().is_some() {
            return error; // another rank failed first: this error is its echo
        }
        let _ = self.store.try_report_failure(&error.to_string());
        self.membership.stop(Failure { rank: self.job.rank, reason: error.to_string() });
        tell_launcher(&error.to_string());
        error
    }

    /// Leaves the job after the operations the group has seen (what
    /// dropping the group does).
    fn leave(&self) {
        let steps = self.membership.progress().operations;
        let _ = if std::thread::panicking() {
            tell_launcher("it panicked (its output says where)");
            self.store.try_report_failure("it panicked (its output says where)")
        } else {
            self.store.try_leave(Some(steps))
        };
    }
}

impl<D: Device> Drop for ProcessGroup<D> {
    fn drop(&mut self) {
        if self.membership.failure().is_none() {
            self.leave();
        }
    }
}

/// Writes this rank's own failure where `devtensor-run` looks for it
/// (`DEVTENSOR_RUN_ERROR_FILE`), so that the launcher names the rank that
/// failed first rather than the first to exit.
fn tell_launcher(reason: &str) {
    if let Ok(path) = std::env::var("DEVTENSOR_RUN_ERROR_FILE") {
        let _ = std::fs::write(path, reason);
    }
}
