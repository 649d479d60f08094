//! The rendezvous store of a multi-process job: a small key-value service
//! that rank 0 serves on `MASTER_ADDR:MASTER_PORT` and every rank talks to
//! (PyTorch's `TCPStore`). It carries what the ranks must agree on before
//! NCCL can connect them (the `ncclUniqueId`), barriers, and the job's
//! failure flag, which is what lets one rank's failure end every other
//! rank's wait instead of leaving it blocked.
//!
//! Unlike PyTorch's, it holds against whatever reaches its port: a process
//! must show the job's token ([`JobToken`](super::JobToken)) in its first
//! line, within a few seconds, before anything else it sends is read; every
//! line has a length limit; keys, values and connections are bounded
//! (`server.rs`); and it listens only on the address `MASTER_ADDR` names.

mod server;
mod wire;

use super::job::Job;
use super::token::JobToken;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use server::Serving;
use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use wire::{LINE_LIMIT, LineReader, Request, Response, write_line};

/// The first failure of a job: which rank, and why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The rank that failed.
    pub rank: usize,
    /// What it reported, or how its process ended.
    pub reason: String,
}

impl Failure {
    /// The error a rank returns when `self`, another rank's failure, ends
    /// its work.
    pub(crate) fn error(&self, rank: usize) -> Error {
        Error::Distributed {
            rank: Some(rank),
            reason: format!("stopped because rank {} failed: {}", self.rank, self.reason),
        }
    }
}

/// A client of the job's rendezvous store (PyTorch's `TCPStore`): rank 0
/// serves it on `MASTER_ADDR:MASTER_PORT`, and every rank, rank 0 included,
/// connects to it. Every wait ends with an [`Error::Distributed`] at the
/// store's timeout, or as soon as any rank of the job has failed, naming
/// that rank.
///
/// ```
/// use devtensor::parallel::{Job, JobToken, TcpStore};
/// use std::time::Duration;
///
/// let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
/// let token = JobToken::generate()?;
/// let job = move |rank| Job::local(2, rank, port).map(|job| job.with_token(token.clone()));
/// let timeout = Duration::from_secs(30);
/// let main = TcpStore::try_connect(&job(0)?, timeout)?;
/// let worker = std::thread::spawn(move || -> devtensor::Result<Vec<u8>> {
///     let store = TcpStore::try_connect(&job(1)?, timeout)?;
///     store.try_barrier("ready")?;
///     store.try_get("greeting")
/// });
/// main.try_set("greeting", b"hello")?;
/// main.try_barrier("ready")?;
/// assert_eq!(worker.join().unwrap()?, b"hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TcpStore {
    rank: usize,
    world_size: usize,
    /// `MASTER_ADDR:MASTER_PORT`, as the errors name it.
    address: String,
    /// What it resolved to, where every connection goes.
    server: SocketAddr,
    token: Option<JobToken>,
    timeout: Duration,
    connection: Mutex<Connection>,
    /// How often this rank has entered each barrier.
    barriers: Mutex<HashMap<String, u64>>,
    /// Whether this rank has left (or reported a failure) already.
    done: std::sync::atomic::AtomicBool,
    /// Rank 0's store, which goes when this does.
    serving: Option<Serving>,
}

impl std::fmt::Debug for TcpStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStore").field("rank", &self.rank).field("address", &self.address).finish()
    }
}

impl TcpStore {
    /// The longest key, in bytes, that the store takes.
    pub const KEY_LIMIT: usize = wire::KEY_LIMIT;

    /// The largest value, in bytes, that the store takes.
    pub const VALUE_LIMIT: usize = wire::VALUE_LIMIT;

    /// Connects rank `job.rank` to the job's store, serving it first when
    /// this is rank 0. Other ranks retry until rank 0 answers or `timeout`
    /// passes. Fails with [`Error::Distributed`] when rank 0 cannot listen
    /// (the port is taken, or `MASTER_ADDR` is not an address of its
    /// machine), rank 0 never answers, or rank 0's store refuses this rank
    /// (another job token, another `WORLD_SIZE`, a rank taken).
    ///
    /// Rank 0's store listens on [`Job::store_bind`] when set, and
    /// otherwise on the address that `MASTER_ADDR` resolves to: a store for
    /// a loopback address is reachable from this machine only.
    pub fn try_connect(job: &Job, timeout: Duration) -> Result<TcpStore> {
        let address = format!("{}:{}", job.master_addr, job.master_port);
        let fail = |reason: String| Error::Distributed { rank: Some(job.rank), reason };
        let deadline = Instant::now() + timeout;
        let resolve = || -> std::io::Result<SocketAddr> {
            let host = job.master_addr.trim().trim_start_matches('[').trim_end_matches(']');
            (host, job.master_port)
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| std::io::Error::other("the name resolves to no address"))
        };
        // Rank 0 serves, and reaches its store where it listens; the others
        // retry the name, which may not resolve until rank 0's machine is up.
        let (serving, server) = if job.is_main() {
            let bind = match job.store_bind {
                Some(ip) => SocketAddr::new(ip, job.master_port),
                None => resolve().map_err(|e| fail(format!("cannot resolve MASTER_ADDR={}: {e}", job.master_addr)))?,
            };
            let listener = TcpListener::bind(bind).map_err(|e| {
                fail(format!(
                    "cannot serve the rendezvous store on {bind} (MASTER_ADDR:MASTER_PORT): {e}. MASTER_ADDR must \
                     name an address of rank 0's machine, and MASTER_PORT a free port; DEVTENSOR_STORE_BIND names \
                     another address to listen on (docs/distributed.md)"
                ))
            })?;
            let serving = Serving::start(listener, job.world_size, job.token.clone())
                .map_err(|e| fail(format!("cannot start the store's thread: {e}")))?;
            let server = serving.address();
            (Some(serving), server)
        } else {
            let server = loop {
                match resolve() {
                    Ok(server) => break server,
                    Err(e) if Instant::now() >= deadline => {
                        return Err(fail(format!("cannot resolve MASTER_ADDR={}: {e}", job.master_addr)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(200)),
                }
            };
            (None, server)
        };
        let hello = Hello { rank: job.rank, world_size: job.world_size, token: job.token.clone() };
        let connection = connect(&address, server, &hello, deadline.saturating_duration_since(Instant::now()))?;
        Ok(TcpStore {
            rank: job.rank,
            world_size: job.world_size,
            address,
            server,
            token: job.token.clone(),
            timeout,
            connection: Mutex::new(connection),
            barriers: Mutex::new(HashMap::new()),
            done: std::sync::atomic::AtomicBool::new(false),
            serving,
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How long a wait may take before it is an error.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn error(&self, reason: impl Into<String>) -> Error {
        Error::Distributed { rank: Some(self.rank), reason: reason.into() }
    }

    /// Sends one request and reads its answer.
    fn request(&self, request: &Request, what: &str) -> Result<Response> {
        let mut conn = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        exchange(&mut conn, request)
            .map_err(|e| self.error(format!("{what}: lost the connection to rank 0's store at {}: {e}", self.address)))
    }

    /// The answer to a request that waits, as a result.
    fn expect_done(&self, response: Response, what: &str) -> Result<Response> {
        match response {
            Response::Timeout { keys, absent } => {
                let mut reason = format!("{what}: timed out after {:?}", self.timeout);
                if !keys.is_empty() {
                    reason += &format!(" waiting for {}", keys.join(", "));
                }
                if !absent.is_empty() {
                    let ranks: Vec<String> = absent.iter().map(usize::to_string).collect();
                    reason += &format!("; rank {} never joined", ranks.join(", "));
                }
                Err(self.error(reason))
            }
            Response::Failed(failure) => Err(failure.error(self.rank)),
            Response::Refused(reason) => Err(self.error(format!("{what}: {reason}"))),
            other => Ok(other),
        }
    }

    fn timeout_ms(&self) -> u64 {
        self.timeout.as_millis().try_into().unwrap_or(u64::MAX)
    }

    /// Sets `key` to `value` for every rank to read. Fails, before sending
    /// anything, when the key is longer than [`KEY_LIMIT`](Self::KEY_LIMIT)
    /// or the value larger than [`VALUE_LIMIT`](Self::VALUE_LIMIT) bytes,
    /// and when the store is full.
    pub fn try_set(&self, key: &str, value: &[u8]) -> Result<()> {
        let what = format!("set {key:?}");
        self.check_key(key, &what)?;
        if value.len() > Self::VALUE_LIMIT {
            return Err(self.error(format!(
                "{what}: the value is {} bytes, above the store's limit of {} bytes",
                value.len(),
                Self::VALUE_LIMIT
            )));
        }
        let response = self.request(&Request::Set { key: key.into(), value: value.to_vec() }, &what)?;
        self.expect_done(response, &what).map(drop)
    }

    /// An error unless `key` is within [`KEY_LIMIT`](Self::KEY_LIMIT).
    fn check_key(&self, key: &str, what: &str) -> Result<()> {
        if key.len() > Self::KEY_LIMIT {
            return Err(self.error(format!(
                "{what}: the key is {} bytes, above the store's limit of {} bytes",
                key.len(),
                Self::KEY_LIMIT
            )));
        }
        Ok(())
    }

    /// The value of `key`, waiting for some rank to set it.
    pub fn try_get(&self, key: &str) -> Result<Vec<u8>> {
        let what = format!("get {key:?}");
        self.check_key(key, &what)?;
        let response = self.request(&Request::Get { key: key.into(), timeout_ms: self.timeout_ms() }, &what)?;
        match self.expect_done(response, &what)? {
            Response::Value(value) => Ok(value),
            other => Err(self.error(format!("{what}: unexpected answer {other:?}"))),
        }
    }

    /// Adds `delta` to the counter `key` (0 when unset) and returns its new value.
    pub fn try_add(&self, key: &str, delta: i64) -> Result<i64> {
        let what = format!("add {key:?}");
        self.check_key(key, &what)?;
        match self.expect_done(self.request(&Request::Add { key: key.into(), delta }, &what)?, &what)? {
            Response::Count(n) => Ok(n),
            other => Err(self.error(format!("{what}: unexpected answer {other:?}"))),
        }
    }

    /// Waits until every rank has called `try_barrier` with this `name` as
    /// often as this rank has.
    pub fn try_barrier(&self, name: &str) -> Result<()> {
        let round = {
            let mut barriers = self.barriers.lock().unwrap_or_else(|e| e.into_inner());
            let round = barriers.entry(name.to_string()).or_insert(0);
            *round += 1;
            *round
        };
        let counter = |round: u64| format!("barrier/{name}/{round}");
        let done = |round: u64| format!("barrier/{name}/{round}/done");
        let arrived = self.try_add(&counter(round), 1)?;
        if arrived == self.world_size as i64 {
            self.try_set(&done(round), b"")?;
            // Every rank has arrived here, so every rank is past the last
            // round's wait: its keys can go, and a job may meet at a
            // barrier as often as it likes without filling the store.
            if round > 1 {
                let keys = vec![counter(round - 1), done(round - 1)];
                self.expect_done(self.request(&Request::Delete { keys }, "barrier")?, "barrier")?;
            }
        }
        let (counter, done) = (counter(round), done(round));
        let what = format!("barrier {name:?}");
        let response = self.request(&Request::Wait { keys: vec![done], timeout_ms: self.timeout_ms() }, &what)?;
        if let Response::Timeout { absent, .. } = response {
            // Say how many arrived rather than which key was missing.
            let arrived = self.try_add(&counter, 0).unwrap_or(arrived);
            let what = format!("{what} ({arrived} of {} ranks arrived)", self.world_size);
            return self.expect_done(Response::Timeout { keys: Vec::new(), absent }, &what).map(drop);
        }
        self.expect_done(response, &what).map(drop)
    }

    /// Marks the job failed by this rank (the first failure is kept), so
    /// that every other rank's wait, and its watcher, ends with an error
    /// naming this rank and `reason`.
    pub fn try_report_failure(&self, reason: &str) -> Result<()> {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        let response = self.request(&Request::Fail { reason: reason.into() }, "report a failure")?;
        self.expect_done(response, "report a failure").map(drop)
    }

    /// Leaves the job normally, after `steps` training steps where the
    /// caller counts them (a rank still waiting for this one past that step
    /// then gets an error naming it, not a hang). Dropping the store leaves
    /// too, or reports a failure when the thread is panicking; a process
    /// that ends without either (killed) fails the job.
    pub fn try_leave(&self, steps: Option<u64>) -> Result<()> {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        let response = self.request(&Request::Leave { steps }, "leave")?;
        self.expect_done(response, "leave").map(drop)
    }

    /// A second connection that blocks until the job fails or a rank
    /// leaves: what a watchdog thread waits on.
    pub(crate) fn watcher(&self) -> Result<Watcher> {
        let hello = Hello { rank: self.rank, world_size: self.world_size, token: self.token.clone() };
        Ok(Watcher { connection: connect(&self.address, self.server, &hello, self.timeout)?, departures: 0 })
    }
}

impl Drop for TcpStore {
    fn drop(&mut self) {
        if !self.done.load(std::sync::atomic::Ordering::Relaxed) {
            // Best effort: the store may be gone already (rank 0 ended first).
            let _ = if std::thread::panicking() {
                self.try_report_failure("it panicked (its output says where)")
            } else {
                self.try_leave(None)
            };
        }
        // Rank 0's process holds the store: it lets the other ranks finish
        // with it (leave, or end after a failure) before it goes, then stops
        // accepting connections, so that its port is free for the next job.
        if let Some(serving) = self.serving.take() {
            let _ = self.request(&Request::WaitAlone { timeout_ms: self.timeout_ms() }, "wait for the other ranks");
            serving.stop();
        }
    }
}

/// What a [`Watcher`] saw.
#[derive(Debug)]
pub(crate) enum JobEvent {
    /// A rank failed (or the store itself went away, as rank 0's failure).
    Failed(Failure),
    /// These ranks have left, with their step counts.
    Departed(Vec<(usize, Option<u64>)>),
}

/// A connection that waits for the job's failures and departures.
pub(crate) struct Watcher {
    connection: Connection,
    departures: usize,
}

impl Watcher {
    /// Blocks until the job fails or a rank leaves that this watcher has
    /// not reported yet. The store going away is rank 0's failure.
    pub(crate) fn next(&mut self) -> JobEvent {
        match exchange(&mut self.connection, &Request::Watch { departures: self.departures }) {
            Ok(Response::Departed(ranks)) => {
                self.departures = ranks.len();
                JobEvent::Departed(ranks)
            }
            Ok(Response::Failed(failure)) => JobEvent::Failed(failure),
            Ok(other) => JobEvent::Failed(Failure { rank: 0, reason: format!("its store answered {other:?}") }),
            Err(e) => JobEvent::Failed(Failure {
                rank: 0,
                reason: format!("its rendezvous store stopped answering ({e}): its process ended"),
            }),
        }
    }
}

/// One connection to the store.
struct Connection {
    writer: TcpStream,
    reader: LineReader,
}

/// What a connection says first.
struct Hello {
    rank: usize,
    world_size: usize,
    token: Option<JobToken>,
}

/// Connects to the store at `server` (`address` as the user wrote it) and
/// says hello, retrying for up to `timeout` while rank 0 is not up yet or
/// its store is busy.
fn connect(address: &str, server: SocketAddr, hello: &Hello, timeout: Duration) -> Result<Connection> {
    let deadline = Instant::now() + timeout;
    let fail = |reason: String| Error::Distributed { rank: Some(hello.rank), reason };
    let mut pause = Duration::from_millis(10);
    let request = Request::Hello {
        rank: hello.rank,
        world_size: hello.world_size,
        process: process_id(),
        token: hello.token.as_ref().map(|t| t.secret().to_string()),
    };
    loop {
        let attempt = TcpStream::connect_timeout(&server, Duration::from_secs(5)).and_then(|stream| {
            let _ = stream.set_nodelay(true);
            let mut connection = Connection { reader: LineReader::new(stream.try_clone()?), writer: stream };
            let response = exchange(&mut connection, &request)?;
            Ok((connection, response))
        });
        let busy = match attempt {
            Ok((connection, Response::Done)) => return Ok(connection),
            Ok((_, Response::Refused(reason))) => {
                return Err(fail(format!("rank 0's store refused this rank: {reason}")));
            }
            Ok((_, Response::Busy)) => "it is serving as many connections as it may".to_string(),
            Ok((_, other)) => return Err(fail(format!("rank 0's store answered {other:?} to hello"))),
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(fail(format!(
                "rank 0's rendezvous store at {address} (MASTER_ADDR:MASTER_PORT) did not answer within \
                 {timeout:?}: {busy}"
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

fn exchange(connection: &mut Connection, request: &Request) -> std::io::Result<Response> {
    write_line(&mut connection.writer, request)?;
    match connection.reader.read::<Response>(LINE_LIMIT, None, None) {
        Ok(response) => response.map_err(std::io::Error::other),
        Err(wire::ReadError::Io(e)) => Err(e),
        Err(wire::ReadError::Closed) => {
            Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the store closed the connection"))
        }
        Err(e) => Err(std::io::Error::other(e.to_string())),
    }
}

/// This process, as the store tells processes apart: its id and start time.
fn process_id() -> u64 {
    static ID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ID.get_or_init(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        (u64::from(std::process::id()) << 32) ^ (nanos as u64)
    })
}
