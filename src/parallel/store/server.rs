//! Rank 0's side of the store: the listening thread and one thread per
//! admitted connection, the keys and the job's state they share, and the
//! limits that keep a hostile or broken peer from growing its memory,
//! holding its threads, or touching the job without the token.

use super::wire::{HELLO_LINE_LIMIT, KEY_LIMIT, LINE_LIMIT, LineReader, ReadError, Request, Response, VALUE_LIMIT};
use super::{Failure, wire::write_line};
use crate::parallel::token::{JOB_TOKEN_VAR, JobToken};
use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a new connection has to send its hello.
pub(super) const HELLO_TIME: Duration = Duration::from_secs(5);

/// How long a process that said hello may take over one line, once it has
/// begun it (it writes each line whole, so only a stalled peer takes long).
const LINE_TIME: Duration = Duration::from_secs(10);

/// How often a waiting request checks that its caller is still there: a
/// killed process's connection closes, but nothing reads it while it waits.
const LIVENESS_CHECK: Duration = Duration::from_millis(100);

/// Stack of a connection's thread: its requests are shallow, and
/// `serde_json` stops nesting at 128 levels.
const CONNECTION_STACK: usize = 512 * 1024;

/// What the store holds at most, for a job of `world_size` ranks.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Connections served at once: each rank holds two, and may briefly
    /// open more; beyond this a connection is answered `Busy` and closed.
    pub connections: usize,
    /// Keys held at once (a job holds a few per rank; barriers clean up).
    pub keys: usize,
    /// Bytes of keys and values held at once.
    pub bytes: usize,
}

impl Limits {
    pub(super) fn for_world(world_size: usize) -> Limits {
        Limits {
            connections: world_size.saturating_mul(4).saturating_add(16),
            keys: world_size.saturating_mul(16).saturating_add(4096),
            bytes: 64 << 20,
        }
    }
}

/// Why the store turned a connection away: the kinds counted for the
/// job's output (a rank's own mistakes, such as another `WORLD_SIZE`, are
/// that rank's error instead).
#[derive(Clone, Copy, Debug)]
enum Refusal {
    /// More connections at once than [`Limits::connections`].
    OverLimit,
    /// No hello within [`HELLO_TIME`], or one too long, or not a hello.
    NoHello,
    /// A hello with a wrong or missing token.
    Token,
}

impl Refusal {
    fn describe(self, limits: &Limits) -> String {
        match self {
            Refusal::OverLimit => format!("over the limit of {} connections at once", limits.connections),
            Refusal::NoHello => format!(
                "with no valid hello within {} s (nothing, too slow, longer than {HELLO_LINE_LIMIT} bytes, or not \
                 a hello)",
                HELLO_TIME.as_secs()
            ),
            Refusal::Token => format!("with a wrong or missing job token ({JOB_TOKEN_VAR})"),
        }
    }
}

/// The store's contents and the job's state, shared by its connections.
#[derive(Default)]
struct Shared {
    values: HashMap<String, Vec<u8>>,
    /// Bytes of the keys and values in `values`.
    held: usize,
    /// Ranks with a live connection: the process that holds them (two
    /// processes claiming one rank is an error) and how many connections.
    connected: HashMap<usize, (u64, usize)>,
    /// Every rank that has connected at some time.
    seen: Vec<usize>,
    /// Ranks that have left normally, in order, with their step counts.
    departed: Vec<(usize, Option<u64>)>,
    failure: Option<Failure>,
}

impl Shared {
    /// Sets `key` to `value`, unless that breaks a limit: then why not.
    fn set(&mut self, key: String, value: Vec<u8>, limits: &Limits) -> Result<(), String> {
        if key.len() > KEY_LIMIT || value.len() > VALUE_LIMIT {
            return Err(format!(
                "a key of {} bytes with a value of {} bytes is above the store's limits ({KEY_LIMIT} and \
                 {VALUE_LIMIT} bytes)",
                key.len(),
                value.len()
            ));
        }
        let old = self.values.get(&key).map(|v| key.len() + v.len());
        let held = self.held - old.unwrap_or(0) + key.len() + value.len();
        if (old.is_none() && self.values.len() >= limits.keys) || held > limits.bytes {
            return Err(format!(
                "the store is full: it holds {} keys and {} bytes, and may hold {} keys and {} bytes",
                self.values.len(),
                self.held,
                limits.keys,
                limits.bytes
            ));
        }
        self.held = held;
        self.values.insert(key, value);
        Ok(())
    }

    fn delete(&mut self, key: &str) {
        if let Some(value) = self.values.remove(key) {
            self.held -= key.len() + value.len();
        }
    }
}

/// Refusals counted so far.
#[derive(Default)]
struct Refusals {
    counts: [u64; 3],
    reported: bool,
}

pub(super) struct Server {
    world_size: usize,
    token: Option<JobToken>,
    limits: Limits,
    shared: Mutex<Shared>,
    changed: Condvar,
    /// Connections being served now.
    live: AtomicUsize,
    refusals: Mutex<Refusals>,
    /// Set when the store stops: a connection that closes then is the
    /// listener's own wake-up, not a refusal.
    stopping: AtomicBool,
}

/// A running store: the server, its address, and the listening thread.
pub(super) struct Serving {
    server: Arc<Server>,
    address: SocketAddr,
    accepting: std::thread::JoinHandle<()>,
}

impl Serving {
    /// Serves the store of a job of `world_size` ranks on `listener`,
    /// admitting only processes that show `token` (any process when `None`).
    pub(super) fn start(listener: TcpListener, world_size: usize, token: Option<JobToken>) -> std::io::Result<Serving> {
        let address = listener.local_addr()?;
        let server = Arc::new(Server {
            world_size,
            token,
            limits: Limits::for_world(world_size),
            shared: Mutex::new(Shared::default()),
            changed: Condvar::new(),
            live: AtomicUsize::new(0),
            refusals: Mutex::new(Refusals::default()),
            stopping: AtomicBool::new(false),
        });
        let accepting = {
            let server = server.clone();
            std::thread::Builder::new().name("devtensor-store".into()).spawn(move || server.accept(listener))?
        };
        Ok(Serving { server, address, accepting })
    }

    /// Where this machine reaches the store: the address it listens on,
    /// or the loopback one when it listens on every interface.
    pub(super) fn address(&self) -> SocketAddr {
        let mut address = self.address;
        if address.ip().is_unspecified() {
            address.set_ip(if address.is_ipv4() {
                [127, 0, 0, 1].into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        address
    }

    /// Stops accepting connections (those open stay served until they
    /// close), frees the port, and prints how many connections the store
    /// refused, when more than the one it reported at once.
    pub(super) fn stop(self) {
        self.server.stopping.store(true, Ordering::Release);
        // Wake the listening thread, which then sees the flag and ends.
        if TcpStream::connect_timeout(&self.address(), Duration::from_secs(1)).is_ok() {
            let _ = self.accepting.join();
        }
        let refusals = self.server.refusals.lock().unwrap_or_else(|e| e.into_inner());
        let total: u64 = refusals.counts.iter().sum();
        if total > 1 {
            let kinds = [Refusal::OverLimit, Refusal::Token, Refusal::NoHello];
            let parts: Vec<String> = kinds
                .iter()
                .filter(|&&k| refusals.counts[k as usize] > 0)
                .map(|&k| format!("{} {}", refusals.counts[k as usize], k.describe(&self.server.limits)))
                .collect();
            eprintln!("devtensor: rank 0's rendezvous store refused {total} connections in all: {}", parts.join("; "));
        }
    }
}

/// Ends a connection's count in [`Server::live`] when its thread ends.
struct Admitted(Arc<Server>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Server {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Accepts connections until the store stops: each gets a thread of
    /// its own while fewer than [`Limits::connections`] are served, and a
    /// `Busy` answer otherwise, so that a flood of connections costs no
    /// thread and no memory beyond the sockets the kernel holds.
    fn accept(self: Arc<Self>, listener: TcpListener) {
        for stream in listener.incoming() {
            if self.stopping.load(Ordering::Acquire) {
                break; // connections already open stay served
            }
            let mut stream = match stream {
                Ok(stream) => stream,
                Err(_) => {
                    // Out of file descriptors, or a connection reset
                    // before it was accepted: pause rather than spin.
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            let peer = stream.peer_addr().ok();
            if self.live.fetch_add(1, Ordering::AcqRel) >= self.limits.connections {
                self.live.fetch_sub(1, Ordering::AcqRel);
                self.refuse(peer, Refusal::OverLimit);
                let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                let _ = write_line(&mut stream, &Response::Busy);
                let _ = stream.shutdown(std::net::Shutdown::Both);
                continue;
            }
            let _ = stream.set_nodelay(true);
            let admitted = Admitted(self.clone());
            let spawned = std::thread::Builder::new()
                .name("devtensor-store-conn".into())
                .stack_size(CONNECTION_STACK)
                .spawn(move || {
                    let server = admitted.0.clone();
                    server.serve(stream, peer);
                    drop(admitted);
                });
            if spawned.is_err() {
                // No thread to be had: as good as over the limit. The
                // closure, and with it the count, is dropped.
                self.refuse(peer, Refusal::OverLimit);
            }
        }
    }

    /// Counts a refusal, and reports the first one in the job's output.
    fn refuse(&self, peer: Option<SocketAddr>, why: Refusal) {
        let mut refusals = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
        refusals.counts[why as usize] += 1;
        if !refusals.reported {
            refusals.reported = true;
            let peer = peer.map_or("an unknown address".into(), |p| p.to_string());
            eprintln!(
                "devtensor: rank 0's rendezvous store refused a connection from {peer} {}. Any more refusals \
                 are counted, and their number printed when the store closes.",
                why.describe(&self.limits)
            );
        }
    }

    /// Serves one connection until it closes: its hello first, within
    /// [`HELLO_TIME`] and [`HELLO_LINE_LIMIT`], then its requests.
    fn serve(&self, stream: TcpStream, peer: Option<SocketAddr>) {
        let Ok(read_half) = stream.try_clone() else { return };
        let mut reader = LineReader::new(read_half);
        let mut writer = stream;
        let hello = reader.read::<Request>(HELLO_LINE_LIMIT, Some(Instant::now() + HELLO_TIME), None);
        let (rank, answer) = match hello {
            Ok(Ok(Request::Hello { rank, world_size, process, token })) => {
                match self.hello(rank, world_size, process, token.as_deref()) {
                    Ok(()) => (Some(rank), Response::Done),
                    Err((reason, refusal)) => {
                        if let Some(refusal) = refusal {
                            self.refuse(peer, refusal);
                        }
                        (None, Response::Refused(reason))
                    }
                }
            }
            Err(ReadError::Closed | ReadError::Io(_)) if self.stopping.load(Ordering::Acquire) => return,
            Err(ReadError::Io(_)) => return,
            other => {
                self.refuse(peer, Refusal::NoHello);
                let reason = match other {
                    Ok(Ok(_)) => "the first request must say which rank is calling".into(),
                    Ok(Err(e)) => format!("not a store request: {e}"),
                    Err(ReadError::TooLong) => format!("a hello is at most {HELLO_LINE_LIMIT} bytes"),
                    Err(e) => format!("no hello within {} s: {e}", HELLO_TIME.as_secs()),
                };
                (None, Response::Refused(reason))
            }
        };
        let _ = writer.set_write_timeout(Some(HELLO_TIME));
        if write_line(&mut writer, &answer).is_err() {
            return self.disconnected(rank, false);
        }
        let Some(rank) = rank else { return close_gently(writer) };
        let _ = writer.set_write_timeout(None);
        let mut left = false;
        loop {
            let response = match reader.read::<Request>(LINE_LIMIT, None, Some(LINE_TIME)) {
                Ok(Ok(request)) => {
                    left |= matches!(request, Request::Leave { .. });
                    match self.handle(rank, request, &writer) {
                        Some(response) => response,
                        None => break, // the caller went away while it waited
                    }
                }
                Ok(Err(e)) => Response::Refused(format!("not a store request: {e}")),
                Err(_) => break,
            };
            let garbled = matches!(&response, Response::Refused(r) if r.starts_with("not a store request"));
            if write_line(&mut writer, &response).is_err() || garbled {
                break;
            }
        }
        self.disconnected(Some(rank), left);
    }

    /// Bookkeeping when a connection of `rank` (if it said hello) closes.
    fn disconnected(&self, rank: Option<usize>, left: bool) {
        let Some(rank) = rank else { return };
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

    /// Admits a connection of `rank` from `process`, or says why not (and
    /// whether that counts as a refusal for the job's output).
    fn hello(
        &self,
        rank: usize,
        world_size: usize,
        process: u64,
        token: Option<&str>,
    ) -> Result<(), (String, Option<Refusal>)> {
        // The token first: a process without it learns nothing of the job.
        let token_problem = match (&self.token, token) {
            (Some(ours), Some(theirs)) if ours.matches(theirs) => None,
            (None, None) => None,
            (Some(_), Some(_)) => Some(format!("this process's job token ({JOB_TOKEN_VAR}) is not rank 0's")),
            (Some(_), None) => {
                Some(format!("this process has no job token ({JOB_TOKEN_VAR}), but rank 0's job has one"))
            }
            (None, Some(_)) => Some(format!(
                "this process has a job token ({JOB_TOKEN_VAR}), but rank 0 has none: start every rank the same way"
            )),
        };
        if let Some(reason) = token_problem {
            return Err((reason, Some(Refusal::Token)));
        }
        if world_size != self.world_size {
            return Err((
                format!("rank {rank} has WORLD_SIZE={world_size}, but rank 0 has WORLD_SIZE={}", self.world_size),
                None,
            ));
        }
        if rank >= world_size {
            return Err((format!("RANK={rank} is not below WORLD_SIZE={world_size}"), None));
        }
        let mut shared = self.lock();
        let (holder, connections) = shared.connected.entry(rank).or_insert((process, 0));
        if *holder != process {
            return Err((
                format!("two processes have RANK={rank}: every process of a job needs a rank of its own"),
                None,
            ));
        }
        *connections += 1;
        if !shared.seen.contains(&rank) {
            shared.seen.push(rank);
        }
        Ok(())
    }

    /// Answers one request; `None` when the caller's connection closed
    /// while the request waited.
    fn handle(&self, rank: usize, request: Request, caller: &TcpStream) -> Option<Response> {
        let mut shared = self.lock();
        Some(match request {
            Request::Hello { .. } => Response::Refused("a connection says hello once".into()),
            Request::Set { key, value } => match shared.set(key, value, &self.limits) {
                Ok(()) => {
                    drop(shared);
                    self.changed.notify_all();
                    Response::Done
                }
                Err(reason) => Response::Refused(reason),
            },
            Request::Add { key, delta } => {
                let old = shared.values.get(&key).and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok());
                let now = old.unwrap_or(0).saturating_add(delta);
                match shared.set(key, now.to_string().into_bytes(), &self.limits) {
                    Ok(()) => {
                        drop(shared);
                        self.changed.notify_all();
                        Response::Count(now)
                    }
                    Err(reason) => Response::Refused(reason),
                }
            }
            Request::Delete { keys } => {
                for key in &keys {
                    shared.delete(key);
                }
                Response::Done
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
                let deadline = deadline_after(timeout_ms);
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
        let deadline = deadline_after(timeout_ms);
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

/// Closes a refused connection so that its peer reads the answer: a
/// socket closed with unread data sends a reset, which can discard the
/// answer before the peer reads it, so whatever the peer sent after its
/// refused line is read and dropped first, up to 64 KiB or 100 ms.
fn close_gently(mut stream: TcpStream) {
    use std::io::Read;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let deadline = Instant::now() + Duration::from_millis(100);
    let mut sink = [0u8; 4096];
    let mut drained = 0;
    while drained < 64 * 1024 && Instant::now() < deadline {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// `timeout_ms` from now, or a year from now for a timeout too long to add
/// (a rank's timeout, not an attacker's: only admitted ranks wait).
fn deadline_after(timeout_ms: u64) -> Instant {
    let now = Instant::now();
    now.checked_add(Duration::from_millis(timeout_ms)).unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn server(world_size: usize, token: Option<&str>, limits: Limits) -> Server {
        Server {
            world_size,
            token: token.map(|t| JobToken::new(t).unwrap()),
            limits,
            shared: Mutex::new(Shared::default()),
            changed: Condvar::new(),
            live: AtomicUsize::new(0),
            refusals: Mutex::new(Refusals::default()),
            stopping: AtomicBool::new(false),
        }
    }

    /// One end of a loopback connection, as a request's caller, and the
    /// other end, which keeps it open.
    fn caller() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let near = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (listener.accept().unwrap().0, near)
    }

    /// What a rank may ask: keys from a small set, so that requests meet.
    fn request() -> impl Strategy<Value = Request> {
        let key = prop::sample::select(vec!["a", "b", "c", "dd", "eee"]).prop_map(String::from);
        let keys = prop::collection::vec(key.clone(), 0..3);
        prop_oneof![
            (key.clone(), prop::collection::vec(any::<u8>(), 0..40))
                .prop_map(|(key, value)| Request::Set { key, value }),
            key.clone().prop_map(|key| Request::Get { key, timeout_ms: 0 }),
            (key, any::<i64>()).prop_map(|(key, delta)| Request::Add { key, delta }),
            keys.clone().prop_map(|keys| Request::Delete { keys }),
            keys.prop_map(|keys| Request::Wait { keys, timeout_ms: 0 }),
        ]
    }

    proptest! {
        /// Any sequence of requests leaves the store as a plain map with
        /// the same limits would be, and within its limits. (Not under
        /// Miri, which has no sockets; nothing here is `unsafe`.)
        #[test]
        #[cfg(not(miri))]
        fn requests_keep_the_store_within_its_limits(requests in prop::collection::vec(request(), 0..60)) {
            let limits = Limits { connections: 4, keys: 3, bytes: 60 };
            let server = server(2, None, limits);
            let (caller, _peer) = caller();
            let mut model: HashMap<String, Vec<u8>> = HashMap::new();
            let fits = |model: &HashMap<String, Vec<u8>>, key: &str, len: usize| {
                let held: usize = model.iter().filter(|(k, _)| k.as_str() != key).map(|(k, v)| k.len() + v.len()).sum();
                (model.contains_key(key) || model.len() < limits.keys) && held + key.len() + len <= limits.bytes
            };
            for request in requests {
                let response = server.handle(0, clone_request(&request), &caller).unwrap();
                match (request, response) {
                    (Request::Set { key, value }, Response::Done) => {
                        prop_assert!(fits(&model, &key, value.len()));
                        model.insert(key, value);
                    }
                    (Request::Set { key, value }, Response::Refused(_)) => prop_assert!(!fits(&model, &key, value.len())),
                    (Request::Get { key, .. }, Response::Value(v)) => prop_assert_eq!(Some(&v), model.get(&key)),
                    (Request::Get { key, .. }, Response::Timeout { .. }) => prop_assert!(!model.contains_key(&key)),
                    (Request::Add { key, delta }, response) => {
                        let old = model.get(&key).and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok());
                        let now = old.unwrap_or(0).saturating_add(delta);
                        let text = now.to_string().into_bytes();
                        if fits(&model, &key, text.len()) {
                            prop_assert!(matches!(response, Response::Count(n) if n == now), "{response:?}");
                            model.insert(key, text);
                        } else {
                            prop_assert!(matches!(response, Response::Refused(_)), "{response:?}");
                        }
                    }
                    (Request::Delete { keys }, Response::Done) => keys.iter().for_each(|k| drop(model.remove(k))),
                    (Request::Wait { keys, .. }, Response::Done) => prop_assert!(keys.iter().all(|k| model.contains_key(k))),
                    (Request::Wait { keys, .. }, Response::Timeout { .. }) => {
                        prop_assert!(!keys.iter().all(|k| model.contains_key(k)))
                    }
                    (request, response) => prop_assert!(false, "{request:?} answered {response:?}"),
                }
                let shared = server.lock();
                prop_assert_eq!(&shared.values, &model);
                prop_assert_eq!(shared.held, model.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>());
                prop_assert!(shared.values.len() <= limits.keys && shared.held <= limits.bytes);
            }
        }

        /// A hello is admitted exactly when its token, world size and rank
        /// are right and no other process holds the rank.
        #[test]
        fn hellos_are_admitted_only_with_the_token(
            hellos in prop::collection::vec((0..4usize, 1..4usize, 0..3u64, prop::option::of(0..3usize)), 0..20),
        ) {
            let tokens = ["0123456789abcdef", "0123456789abcdeX", "short"];
            let server = server(2, Some(tokens[0]), Limits::for_world(2));
            let mut holders: HashMap<usize, u64> = HashMap::new();
            for (rank, world, process, token) in hellos {
                let admitted = server.hello(rank, world, process, token.map(|t| tokens[t])).is_ok();
                // The first admitted process holds its rank (it never leaves here).
                let expected =
                    token == Some(0) && world == 2 && rank < 2 && *holders.entry(rank).or_insert(process) == process;
                prop_assert_eq!(admitted, expected, "rank {} world {} process {} token {:?}", rank, world, process, token);
            }
        }
    }

    /// Requests have no `Clone` (nothing else needs one).
    fn clone_request(request: &Request) -> Request {
        serde_json::from_str(&serde_json::to_string(request).unwrap()).unwrap()
    }

    #[test]
    fn the_store_refuses_keys_and_values_past_its_limits() {
        let limits = Limits { connections: 4, keys: 3, bytes: 40 };
        let mut shared = Shared::default();
        shared.set("a".into(), vec![0; 9], &limits).unwrap();
        shared.set("b".into(), vec![0; 9], &limits).unwrap();
        // Replacing a value counts the difference only.
        shared.set("a".into(), vec![0; 19], &limits).unwrap();
        assert_eq!(shared.held, 30);
        let full = shared.set("c".into(), vec![0; 10], &limits).unwrap_err();
        assert_eq!(full, "the store is full: it holds 2 keys and 30 bytes, and may hold 3 keys and 40 bytes");
        shared.set("c".into(), vec![0; 9], &limits).unwrap();
        assert!(shared.set("d".into(), vec![], &limits).unwrap_err().starts_with("the store is full: it holds 3 keys"));
        shared.delete("a");
        shared.delete("a");
        assert_eq!(shared.held, 20);
        shared.set("d".into(), vec![], &limits).unwrap();
        let long = shared.set("k".repeat(KEY_LIMIT + 1), vec![], &Limits::for_world(2)).unwrap_err();
        assert!(long.contains("above the store's limits"), "{long}");
    }
}
