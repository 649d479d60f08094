//! The rendezvous store of a multi-process job: a small key-value service
//! that rank 0 serves on `MASTER_ADDR:MASTER_PORT` and every rank talks to
//! (PyTorch's `TCPStore`). It carries what the ranks must agree on before
//! NCCL can connect them (the `ncclUniqueId`), barriers, and the job's
//! failure flag, which is what lets one rank's failure end every other
//! rank's wait instead of leaving it blocked.
//!
//! The wire format is one JSON object per line (`serde_json`) over TCP.

use super::job::Job;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a client asks of the store.
#[derive(Serialize, Deserialize, Debug)]
enum Request {
    /// The first message of every connection: who is calling.
    Hello {
        rank: usize,
        world_size: usize,
        process: u64,
    },
    Set {
        key: String,
        value: Vec<u8>,
    },
    /// Waits up to `timeout_ms` for the key, then returns its value.
    Get {
        key: String,
        timeout_ms: u64,
    },
    /// Adds `delta` to a counter (0 when absent) and returns the new value.
    Add {
        key: String,
        delta: i64,
    },
    /// Waits up to `timeout_ms` for every key.
    Wait {
        keys: Vec<String>,
        timeout_ms: u64,
    },
    /// Marks the job failed, by the calling rank, unless it already is.
    Fail {
        reason: String,
    },
    /// The calling rank leaves the job normally (after `steps` training
    /// steps, where it counts them).
    Leave {
        steps: Option<u64>,
    },
    /// Answers once the job has failed or some rank has left since the
    /// caller last looked: `departures` is how many departures it has seen.
    Watch {
        departures: usize,
    },
    /// Waits up to `timeout_ms` until no other rank holds a connection:
    /// what rank 0 does before its process, and the store, may end.
    WaitAlone {
        timeout_ms: u64,
    },
}

/// The store's answer to one request.
#[derive(Serialize, Deserialize, Debug)]
enum Response {
    Done,
    Value(Vec<u8>),
    Count(i64),
    /// The wait ran out of time: the keys still missing, and the ranks that
    /// never connected.
    Timeout {
        keys: Vec<String>,
        absent: Vec<usize>,
    },
    /// The job has failed: the first rank to fail, and why.
    Failed(Failure),
    /// The ranks that have left so far, with their step counts.
    Departed(Vec<(usize, Option<u64>)>),
    /// The request was refused (a second process with the same rank, a
    /// different world size).
    Refused(String),
}

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

/// The store's contents and the job's state, shared by its connections.
#[derive(Default)]
struct Shared {
    values: HashMap<String, Vec<u8>>,
    /// Ranks with a live connection: the process that holds them (two
    /// processes claiming one rank is an error) and how many connections.
    connected: HashMap<usize, (u64, usize)>,
    /// Every rank that has connected at some time.
    seen: Vec<usize>,
    /// Ranks that have left normally, in order, with their step counts.
    departed: Vec<(usize, Option<u64>)>,
    failure: Option<Failure>,
}

struct Server {
    world_size: usize,
    shared: Mutex<Shared>,
    changed: Condvar,
}

impl Server {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves one connection until it closes.
    fn serve(self: Arc<Self>, stream: TcpStream) {
        let Ok(reader) = stream.try_clone() else { return };
        let mut lines = BufReader::new(reader).lines();
        let mut writer = stream;
        let mut caller: Option<usize> = None;
        let mut left = false;
        while let Some(Ok(line)) = lines.next() {
            let response = match serde_json::from_str::<Request>(&line) {
                Ok(Request::Hello { rank, world_size, process }) => self.hello(rank, world_size, process, &mut caller),
                Ok(request) => match caller {
                    Some(rank) => {
                        left |= matches!(request, Request::Leave { .. });
                        match self.handle(rank, request, &writer) {
                            Some(response) => response,
                            None => break, // the caller went away while it waited
                        }
                    }
                    None => Response::Refused("the first request must say which rank is calling".into()),
                },
                Err(e) => Response::Refused(format!("not a store request: {e}")),
            };
            let refused = matches!(response, Response::Refused(_));
            if write_line(&mut writer, &response).is_err() || refused {
                break;
            }
        }
        let Some(rank) = caller else { return };
        let mut shared = self.lock();
        let remaining = shared.connected.get_mut(&rank).map(|(_, n)| {
            *n -= 1;
            *n
        });
        if remaining == Some(0) {
            shared.connected.remove(&rank);
        }
        // Any connection of a rank that closes before the rank has left (a
        // rank keeps them open until it leaves) means its process ended.
        let gone = !left && !shared.departed.iter().any(|&(r, _)| r == rank);
        if gone && shared.failure.is_none() {
            shared.failure =
                Some(Failure { rank, reason: "its process ended without leaving the job (killed, or aborted)".into() });
        }
        drop(shared);
        self.changed.notify_all();
    }

    fn hello(&self, rank: usize, world_size: usize, process: u64, caller: &mut Option<usize>) -> Response {
        if world_size != self.world_size {
            return Response::Refused(format!(
                "rank {rank} has WORLD_SIZE={world_size}, but rank 0 has WORLD_SIZE={}",
                self.world_size
            ));
        }
        if rank >= world_size {
            return Response::Refused(format!("RANK={rank} is not below WORLD_SIZE={world_size}"));
        }
        let mut shared = self.lock();
        let (holder, connections) = shared.connected.entry(rank).or_insert((process, 0));
        if *holder != process {
            return Response::Refused(format!(
                "two processes have RANK={rank}: every process of a job needs a rank of its own"
            ));
        }
        *connections += 1;
        if !shared.seen.contains(&rank) {
            shared.seen.push(rank);
        }
        *caller = Some(rank);
        Response::Done
    }

    /// Answers one request; `None` when the caller's connection closed
    /// while the request waited.
    fn handle(&self, rank: usize, request: Request, caller: &TcpStream) -> Option<Response> {
        let mut shared = self.lock();
        Some(match request {
            Request::Hello { .. } => Response::Refused("a connection says hello once".into()),
            Request::Set { key, value } => {
                shared.values.insert(key, value);
                drop(shared);
                self.changed.notify_all();
                Response::Done
            }
            Request::Add { key, delta } => {
                let entry = shared.values.entry(key).or_insert_with(|| b"0".to_vec());
                let now = std::str::from_utf8(entry).ok().and_then(|s| s.parse::<i64>().ok()).unwrap_or(0) + delta;
                *entry = now.to_string().into_bytes();
                drop(shared);
                self.changed.notify_all();
                Response::Count(now)
            }
            Request::Get { key, timeout_ms } => {
                let keys = [key];
                match self.wait_for(shared, &keys, timeout_ms, caller)? {
                    Ok(shared) => Response::Value(shared.values[&keys[0]].clone()),
                    Err(response) => response,
                }
            }
            Request::Wait { keys, timeout_ms } => match self.wait_for(shared, &keys, timeout_ms, caller)? {
                Ok(_) => Response::Done,
                Err(response) => response,
            },
            Request::Fail { reason } => {
                shared.failure.get_or_insert(Failure { rank, reason });
                drop(shared);
                self.changed.notify_all();
                Response::Done
            }
            Request::Leave { steps } => {
                if !shared.departed.iter().any(|&(r, _)| r == rank) {
                    shared.departed.push((rank, steps));
                }
                drop(shared);
                self.changed.notify_all();
                Response::Done
            }
            Request::WaitAlone { timeout_ms } => {
                let deadline = Instant::now() + Duration::from_millis(timeout_ms);
                while shared.connected.keys().any(|&r| r != rank) && Instant::now() < deadline {
                    shared = self.changed.wait_timeout(shared, LIVENESS_CHECK).unwrap_or_else(|e| e.into_inner()).0;
                    if closed(caller) {
                        return None;
                    }
                }
                Response::Done
            }
            Request::Watch { departures } => loop {
                if let Some(failure) = &shared.failure {
                    break Response::Failed(failure.clone());
                }
                if shared.departed.len() > departures {
                    break Response::Departed(shared.departed.clone());
                }
                shared = self.changed.wait_timeout(shared, LIVENESS_CHECK).unwrap_or_else(|e| e.into_inner()).0;
                if closed(caller) {
                    return None;
                }
            },
        })
    }

    /// Waits until every key is present; a failure of the job or the
    /// timeout ends the wait early.
    /// `None` when the caller's connection closed while it waited.
    fn wait_for<'a>(
        &'a self,
        mut shared: MutexGuard<'a, Shared>,
        keys: &[String],
        timeout_ms: u64,
        caller: &TcpStream,
    ) -> Option<std::result::Result<MutexGuard<'a, Shared>, Response>> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        loop {
            if let Some(failure) = &shared.failure {
                return Some(Err(Response::Failed(failure.clone())));
            }
            let missing: Vec<String> = keys.iter().filter(|k| !shared.values.contains_key(*k)).cloned().collect();
            if missing.is_empty() {
                return Some(Ok(shared));
            }
            let now = Instant::now();
            if now >= deadline {
                let absent = (0..self.world_size).filter(|r| !shared.seen.contains(r)).collect();
                return Some(Err(Response::Timeout { keys: missing, absent }));
            }
            let pause = (deadline - now).min(LIVENESS_CHECK);
            shared = self.changed.wait_timeout(shared, pause).unwrap_or_else(|e| e.into_inner()).0;
            if closed(caller) {
                return None;
            }
        }
    }
}

/// How often a waiting request checks that its caller is still there: a
/// killed process's connection closes, but nothing reads it while it waits.
const LIVENESS_CHECK: Duration = Duration::from_millis(100);

/// Whether the peer of `stream`, which is waiting for an answer and sends
/// nothing meanwhile, has closed the connection.
fn closed(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let mut byte = [0u8; 1];
    let gone = match stream.peek(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    let _ = stream.set_nonblocking(false);
    gone
}

fn write_line(stream: &mut TcpStream, message: &impl Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}

/// One connection to the store.
struct Connection {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

/// A client of the job's rendezvous store (PyTorch's `TCPStore`): rank 0
/// serves it on `MASTER_ADDR:MASTER_PORT`, and every rank, rank 0 included,
/// connects to it. Every wait ends with an [`Error::Distributed`] at the
/// store's timeout, or as soon as any rank of the job has failed, naming
/// that rank.
///
/// ```
/// use devtensor::parallel::{Job, TcpStore};
/// use std::time::Duration;
///
/// let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
/// let job = move |rank| Job { world_size: 2, rank, local_rank: rank, master_addr: "127.0.0.1".into(), master_port: port };
/// let timeout = Duration::from_secs(30);
/// let main = TcpStore::try_connect(&job(0), timeout)?;
/// let worker = std::thread::spawn(move || -> devtensor::Result<Vec<u8>> {
///     let store = TcpStore::try_connect(&job(1), timeout)?;
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
    address: String,
    timeout: Duration,
    connection: Mutex<Connection>,
    /// How often this rank has entered each barrier.
    barriers: Mutex<HashMap<String, u64>>,
    /// Whether this rank has left (or reported a failure) already.
    done: std::sync::atomic::AtomicBool,
    /// Rank 0's listener, to close when its store goes: the flag, the port
    /// to wake the accepting thread through, and the thread.
    listener: Option<(Arc<std::sync::atomic::AtomicBool>, u16, std::thread::JoinHandle<()>)>,
}

impl std::fmt::Debug for TcpStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStore").field("rank", &self.rank).field("address", &self.address).finish()
    }
}

impl TcpStore {
    /// Connects rank `job.rank` to the job's store, serving it first when
    /// this is rank 0. Other ranks retry until rank 0 answers or `timeout`
    /// passes. Fails with [`Error::Distributed`] when the port is taken
    /// (rank 0), rank 0 never answers, or rank 0's store refuses this rank
    /// (a different `WORLD_SIZE`).
    pub fn try_connect(job: &Job, timeout: Duration) -> Result<TcpStore> {
        let address = format!("{}:{}", job.master_addr, job.master_port);
        let fail = |reason: String| Error::Distributed { rank: Some(job.rank), reason };
        let mut closing = None;
        if job.is_main() {
            let listener = TcpListener::bind(("0.0.0.0", job.master_port)).map_err(|e| {
                fail(format!("cannot serve the rendezvous store on port {} (MASTER_PORT): {e}", job.master_port))
            })?;
            let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let closing_flag = closed.clone();
            let server = Arc::new(Server {
                world_size: job.world_size,
                shared: Mutex::new(Shared::default()),
                changed: Condvar::new(),
            });
            let accepting = std::thread::Builder::new()
                .name("devtensor-store".into())
                .spawn(move || {
                    for stream in listener.incoming().flatten() {
                        if closed.load(std::sync::atomic::Ordering::Acquire) {
                            break; // connections already open stay served
                        }
                        let server = server.clone();
                        let _ = stream.set_nodelay(true);
                        let _ = std::thread::Builder::new()
                            .name("devtensor-store-conn".into())
                            .spawn(move || server.serve(stream));
                    }
                })
                .map_err(|e| fail(format!("cannot start the store's thread: {e}")))?;
            closing = Some((closing_flag, job.master_port, accepting));
        }
        let store = TcpStore {
            rank: job.rank,
            world_size: job.world_size,
            connection: Mutex::new(connect(&address, job, timeout)?),
            address,
            timeout,
            barriers: Mutex::new(HashMap::new()),
            done: std::sync::atomic::AtomicBool::new(false),
            listener: closing,
        };
        Ok(store)
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

    /// Sets `key` to `value` for every rank to read.
    pub fn try_set(&self, key: &str, value: &[u8]) -> Result<()> {
        let response = self.request(&Request::Set { key: key.into(), value: value.to_vec() }, "set")?;
        self.expect_done(response, "set").map(drop)
    }

    /// The value of `key`, waiting for some rank to set it.
    pub fn try_get(&self, key: &str) -> Result<Vec<u8>> {
        let what = format!("get {key:?}");
        let response = self.request(&Request::Get { key: key.into(), timeout_ms: self.timeout_ms() }, &what)?;
        match self.expect_done(response, &what)? {
            Response::Value(value) => Ok(value),
            other => Err(self.error(format!("{what}: unexpected answer {other:?}"))),
        }
    }

    /// Adds `delta` to the counter `key` (0 when unset) and returns its new value.
    pub fn try_add(&self, key: &str, delta: i64) -> Result<i64> {
        let what = format!("add {key:?}");
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
        let counter = format!("barrier/{name}/{round}");
        let arrived = self.try_add(&counter, 1)?;
        let done = format!("{counter}/done");
        if arrived == self.world_size as i64 {
            self.try_set(&done, b"")?;
        }
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
        let job = Job {
            world_size: self.world_size,
            rank: self.rank,
            local_rank: 0,
            master_addr: String::new(),
            master_port: 0,
        };
        Ok(Watcher { connection: connect(&self.address, &job, self.timeout)?, departures: 0 })
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
        if let Some((closed, port, accepting)) = self.listener.take() {
            let _ = self.request(&Request::WaitAlone { timeout_ms: self.timeout_ms() }, "wait for the other ranks");
            closed.store(true, std::sync::atomic::Ordering::Release);
            if TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).is_ok() {
                let _ = accepting.join();
            }
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

/// Connects to the store, retrying until `timeout`, and says hello.
fn connect(address: &str, job: &Job, timeout: Duration) -> Result<Connection> {
    let fail = |reason: String| Error::Distributed { rank: Some(job.rank), reason };
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(10);
    let stream = loop {
        let attempt = address.to_socket_addrs().and_then(|mut addrs| {
            let addr = addrs.next().ok_or_else(|| std::io::Error::other("the name resolves to no address"))?;
            TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        });
        match attempt {
            Ok(stream) => break stream,
            Err(e) if Instant::now() >= deadline => {
                return Err(fail(format!(
                    "rank 0's rendezvous store at {address} (MASTER_ADDR:MASTER_PORT) did not answer within {timeout:?}: {e}"
                )));
            }
            Err(_) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        }
    };
    let _ = stream.set_nodelay(true);
    let reader = stream.try_clone().map_err(|e| fail(format!("store connection: {e}")))?;
    let mut connection = Connection { writer: stream, reader: BufReader::new(reader) };
    let hello = Request::Hello { rank: job.rank, world_size: job.world_size, process: process_id() };
    match exchange(&mut connection, &hello) {
        Ok(Response::Done) => Ok(connection),
        Ok(Response::Refused(reason)) => Err(fail(format!("rank 0's store refused this rank: {reason}"))),
        Ok(other) => Err(fail(format!("rank 0's store answered {other:?} to hello"))),
        Err(e) => Err(fail(format!("lost the connection to rank 0's store at {address}: {e}"))),
    }
}

fn exchange(connection: &mut Connection, request: &Request) -> std::io::Result<Response> {
    write_line(&mut connection.writer, request)?;
    let mut line = String::new();
    if connection.reader.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the store closed the connection"));
    }
    serde_json::from_str(&line).map_err(std::io::Error::other)
}

/// This process, as the store tells processes apart: its id and start time.
fn process_id() -> u64 {
    static ID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ID.get_or_init(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        (u64::from(std::process::id()) << 32) ^ (nanos as u64)
    })
}
