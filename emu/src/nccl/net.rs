//! NCCL across processes: communicators made by `ncclCommInitRank` (or
//! `ncclCommInitRankConfig`, blocking or not) from an `ncclUniqueId`, one
//! rank per process, the ranks meeting through a folder.
//!
//! `ncclGetUniqueId` makes a new folder under the temporary directory and
//! writes its path into the id; each rank joins by writing a `rank-<r>`
//! file there (its process, rank count, node and device). A collective is
//! **queued on its stream** and runs when the stream runs, as NCCL's kernels
//! do: then, after the work queued before it, it writes its send buffer to
//! `c<seq>-r<rank>`, waits for every rank's file of the same call, checks
//! that the calls agree, computes its own result (reductions in rank order,
//! so every rank gets the same bits) and writes its receive buffer. So the
//! receive buffer holds the result only once the stream has been
//! synchronised, and an error of the call shows up only in
//! `ncclCommGetAsyncError`, as with NCCL.
//!
//! What a real NCCL does when a peer dies, the emulator does too: the other
//! ranks wait. `ncclCommAbort` on the waiting process ends its wait (with
//! `ncclRemoteError` as the communicator's error); aborting one rank does
//! not wake the others, which must abort their own communicators. As a
//! backstop for tests, a wait gives up after `DEVTENSOR_EMU_NCCL_HANG_S`
//! seconds (default 600) with `ncclSystemError`, saying that a real NCCL
//! would still be waiting.

use super::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SYSTEM_ERROR: NcclResult = 2;
const IN_PROGRESS: NcclResult = 7;
/// `NCCL_CONFIG_UNDEF_INT`: a config field left to NCCL's default.
const CONFIG_UNDEF_INT: c_int = i32::MIN;
/// `ncclConfig_t::magic` as `NCCL_CONFIG_INITIALIZER` sets it.
const CONFIG_MAGIC: u32 = 0xcafe_beef;
const ID_PREFIX: &[u8] = b"devtensor-emu-nccl:";

/// `ncclUniqueId`: 128 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NcclUniqueId {
    internal: [c_char; 128],
}

/// One process's rank of a cross-process communicator.
pub(crate) struct NetComm {
    dir: PathBuf,
    pub(crate) rank: usize,
    pub(crate) nranks: usize,
    pub(crate) dev: usize,
    state: Mutex<NetState>,
}

#[derive(Default)]
struct NetState {
    /// Every rank has joined and the ranks agree.
    joined: bool,
    /// Collectives queued so far: the next one's number.
    queued: u64,
    /// The first error of the communicator (init or a collective).
    error: Option<NcclResult>,
    /// Set by `ncclCommAbort` or `ncclCommDestroy`: a running wait ends.
    closed: bool,
}

static NETS: LazyLock<Mutex<HashMap<u64, Arc<NetComm>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

impl NetComm {
    fn lock(&self) -> MutexGuard<'_, NetState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the communicator's first error and returns `code`.
    fn fail(&self, code: NcclResult) -> NcclResult {
        self.lock().error.get_or_insert(code);
        code
    }
}

/// The cross-process communicator behind `comm`, if it is one.
pub(crate) fn find(comm: *mut c_void) -> Option<Arc<NetComm>> {
    NETS.lock().unwrap_or_else(|e| e.into_inner()).get(&(comm as u64)).cloned()
}

fn hang_limit() -> Duration {
    let secs = std::env::var("DEVTENSOR_EMU_NCCL_HANG_S").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(600);
    Duration::from_secs(secs)
}

/// The node a process is on: `DEVTENSOR_EMU_NODE`, so that one machine can
/// play several nodes, else the host name. Two ranks on one node and one
/// device is NCCL's "duplicate GPU" error.
fn node_name() -> String {
    std::env::var("DEVTENSOR_EMU_NODE")
        .ok()
        .or_else(|| fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map_or_else(|| "localhost".into(), |s| s.trim().to_string())
}

/// Writes `bytes` to `path` so that readers see all of it or nothing.
fn publish(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("partial");
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path)
}

/// `ncclGetUniqueId`: a new meeting folder.
pub(crate) fn unique_id(out: *mut NcclUniqueId) -> NcclResult {
    if out.is_null() {
        return report(INVALID_ARGUMENT, "ncclGetUniqueId: null output pointer");
    }
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "devtensor-emu-nccl-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    if let Err(e) = fs::create_dir_all(&dir) {
        return report(SYSTEM_ERROR, format!("ncclGetUniqueId: cannot make {}: {e}", dir.display()));
    }
    let text = [ID_PREFIX, dir.as_os_str().as_encoded_bytes()].concat();
    if text.len() >= 128 {
        return report(SYSTEM_ERROR, format!("ncclGetUniqueId: the path {} is too long for an id", dir.display()));
    }
    let mut id = NcclUniqueId { internal: [0; 128] };
    for (slot, &b) in id.internal.iter_mut().zip(&text) {
        *slot = b as c_char;
    }
    // SAFETY: checked non-null; the caller passes room for one id.
    unsafe { *out = id };
    SUCCESS
}

/// `ncclCommInitRank` / `ncclCommInitRankConfig`.
pub(crate) fn init_rank(
    name: &str,
    comm_out: *mut *mut c_void,
    nranks: c_int,
    id: NcclUniqueId,
    rank: c_int,
    config: *const u8,
) -> NcclResult {
    if comm_out.is_null() {
        return report(INVALID_ARGUMENT, format!("{name}: null communicator pointer"));
    }
    if nranks < 1 || rank < 0 || rank >= nranks {
        return report(INVALID_ARGUMENT, format!("{name}: rank {rank} of {nranks} ranks"));
    }
    let blocking = if config.is_null() {
        true
    } else {
        // SAFETY: a non-null config points to an `ncclConfig_t`, which starts
        // with `size_t size; unsigned magic; unsigned version; int blocking`.
        let (magic, blocking) =
            unsafe { ((config.add(8) as *const u32).read(), (config.add(16) as *const c_int).read()) };
        if magic != CONFIG_MAGIC {
            return report(
                INVALID_ARGUMENT,
                format!("{name}: the config's magic is {magic:#x}, not NCCL_CONFIG_INITIALIZER's {CONFIG_MAGIC:#x}"),
            );
        }
        blocking == CONFIG_UNDEF_INT || blocking != 0
    };
    let bytes: Vec<u8> = id.internal.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    let Some(path) = bytes.strip_prefix(ID_PREFIX) else {
        return report(INVALID_ARGUMENT, format!("{name}: the id did not come from ncclGetUniqueId"));
    };
    // SAFETY: the bytes came from `as_encoded_bytes` in `unique_id`.
    let dir = PathBuf::from(unsafe { std::ffi::OsStr::from_encoded_bytes_unchecked(path) });
    if !dir.is_dir() {
        return report(
            INVALID_ARGUMENT,
            format!("{name}: the id's folder {} is gone (the process that made the id ended?)", dir.display()),
        );
    }
    // NCCL uses the calling thread's current device.
    let dev = {
        let mut st = state();
        st.init();
        state::current().unwrap_or(0)
    };
    let (nranks, rank) = (nranks as usize, rank as usize);
    let me = dir.join(format!("rank-{rank}"));
    if me.exists() {
        return report(INVALID_USAGE, format!("{name}: rank {rank} joined this communicator twice"));
    }
    let record = format!("{} {nranks} {dev} {}", std::process::id(), node_name());
    if let Err(e) = publish(&me, record.as_bytes()) {
        return report(SYSTEM_ERROR, format!("{name}: cannot join through {}: {e}", dir.display()));
    }
    let net = Arc::new(NetComm { dir, rank, nranks, dev, state: Mutex::new(NetState::default()) });
    let handle = NEXT_COMM.fetch_add(0x10, Ordering::Relaxed);
    NETS.lock().unwrap_or_else(|e| e.into_inner()).insert(handle, net.clone());
    // SAFETY: checked non-null.
    unsafe { *comm_out = handle as *mut c_void };
    if !blocking {
        return IN_PROGRESS;
    }
    let deadline = Instant::now() + hang_limit();
    loop {
        match poll_join(&net) {
            IN_PROGRESS if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            IN_PROGRESS => {
                return net.fail(report(
                    SYSTEM_ERROR,
                    format!("{name}: rank {rank} waited {:?} for the other ranks to join; a real NCCL would still be waiting", hang_limit()),
                ));
            }
            code => return code,
        }
    }
}

/// Whether every rank has joined: `ncclInProgress` until then, an error
/// when the ranks disagree.
fn poll_join(net: &NetComm) -> NcclResult {
    let mut state = net.lock();
    if state.joined {
        return SUCCESS;
    }
    if let Some(code) = state.error {
        return code;
    }
    let mut members = Vec::with_capacity(net.nranks);
    for r in 0..net.nranks {
        match fs::read_to_string(net.dir.join(format!("rank-{r}"))) {
            Ok(text) => members.push(text),
            Err(_) => return IN_PROGRESS,
        }
    }
    let parsed: Vec<Vec<&str>> = members.iter().map(|m| m.splitn(4, ' ').collect()).collect();
    for (r, fields) in parsed.iter().enumerate() {
        if fields.get(1) != Some(&net.nranks.to_string().as_str()) {
            let code = report(
                INVALID_USAGE,
                format!(
                    "ncclCommInitRank: rank {} was told {} ranks, rank {r} {}",
                    net.rank,
                    net.nranks,
                    fields.get(1).unwrap_or(&"?")
                ),
            );
            state.error = Some(code);
            return code;
        }
        for (q, other) in parsed.iter().enumerate().take(r) {
            if other.get(2) == fields.get(2) && other.get(3) == fields.get(3) {
                let code = report(
                    INVALID_USAGE,
                    format!(
                        "ncclCommInitRank: duplicate GPU detected: rank {q} and rank {r} both on CUDA device {} of node {}",
                        fields.get(2).unwrap_or(&"?"),
                        fields.get(3).unwrap_or(&"?")
                    ),
                );
                state.error = Some(code);
                return code;
            }
        }
    }
    state.joined = true;
    SUCCESS
}

/// `ncclCommGetAsyncError`: `ncclInProgress` while joining, then the first error.
pub(crate) fn async_error(net: &NetComm) -> NcclResult {
    match poll_join(net) {
        SUCCESS => net.lock().error.unwrap_or(SUCCESS),
        code => code,
    }
}

/// `ncclCommAbort` / `ncclCommDestroy`: forgets the handle and ends a wait
/// of this process on it. Other ranks are not told, as with NCCL. Once
/// every rank has destroyed its communicator normally, the folder goes.
pub(crate) fn close(comm: *mut c_void, abort: bool) -> NcclResult {
    let net = NETS.lock().unwrap_or_else(|e| e.into_inner()).remove(&(comm as u64));
    let Some(net) = net else { return SUCCESS };
    {
        let mut state = net.lock();
        state.closed = true;
        state.error.get_or_insert(REMOTE_ERROR);
    }
    if !abort {
        let left = |r: usize| net.dir.join(format!("left-r{r}"));
        let _ = fs::write(left(net.rank), b"");
        if (0..net.nranks).all(|r| left(r).exists()) {
            let _ = fs::remove_dir_all(&net.dir);
        }
    }
    SUCCESS
}

/// Queues a checked collective on its stream (`call.stream`).
pub(crate) fn enqueue(net: Arc<NetComm>, call: Call) -> NcclResult {
    let seq = {
        let mut state = net.lock();
        if !state.joined {
            drop(state);
            if poll_join(&net) != SUCCESS {
                return report(
                    INVALID_USAGE,
                    format!(
                        "{}: the communicator of rank {} has not finished joining (poll ncclCommGetAsyncError until it is ncclSuccess)",
                        call.kind.name(),
                        net.rank
                    ),
                );
            }
            state = net.lock();
        }
        state.queued += 1;
        state.queued - 1
    };
    state().enqueue(call.stream, crate::state::Op::Deferred(Box::new(move || run(&net, seq, call))));
    SUCCESS
}

/// Runs collective `seq` of this rank, from its stream.
fn run(net: &NetComm, seq: u64, call: Call) -> Result<(), state::CUresult> {
    if net.lock().closed {
        return Ok(());
    }
    if let Err(msg) = exchange(net, seq, call) {
        let code = if msg.starts_with("mismatch") { INVALID_USAGE } else { SYSTEM_ERROR };
        net.fail(report(code, format!("{} #{seq} on rank {}: {msg}", call.kind.name(), net.rank)));
    }
    Ok(())
}

fn exchange(net: &NetComm, seq: u64, call: Call) -> Result<(), String> {
    let (rank, nranks) = (net.rank, net.nranks);
    let esz = call.dtype.size();
    let send = {
        let bytes = call.send_elems(rank, nranks).unwrap_or(0) * esz;
        if bytes == 0 {
            Vec::new()
        } else {
            let st = state();
            let p = memory::translate(&st, call.dev, call.send, bytes).map_err(|m| format!("send buffer: {m}"))?;
            // SAFETY: translate checked the range; the state lock keeps the allocation alive.
            unsafe { std::slice::from_raw_parts(p, bytes) }.to_vec()
        }
    };
    let header = format!("{:?}\t{}\n", call.signature(), call.describe());
    let file = |r: usize| net.dir.join(format!("c{seq}-r{r}"));
    publish(&file(rank), &[header.as_bytes(), &send].concat()).map_err(|e| format!("cannot deposit: {e}"))?;

    // Wait for every rank's deposit, as NCCL's kernel waits for its peers.
    let deadline = Instant::now() + hang_limit();
    let mut pause = Duration::from_micros(100);
    let mut deposits: Vec<Option<Vec<u8>>> = vec![None; nranks];
    while deposits.iter().any(Option::is_none) {
        for (r, slot) in deposits.iter_mut().enumerate() {
            if slot.is_none() {
                *slot = fs::read(file(r)).ok();
            }
        }
        if deposits.iter().all(Option::is_some) {
            break;
        }
        if net.lock().closed {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let missing: Vec<String> =
                deposits.iter().enumerate().filter(|(_, d)| d.is_none()).map(|(r, _)| r.to_string()).collect();
            return Err(format!(
                "waited {:?} for rank {}; a real NCCL would still be waiting",
                hang_limit(),
                missing.join(", ")
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    }
    let mut inputs = Vec::with_capacity(nranks);
    for (r, deposit) in deposits.into_iter().enumerate() {
        let deposit = deposit.expect("every deposit was read");
        let split = deposit.iter().position(|&b| b == b'\n').ok_or("a deposit without a header")?;
        let (theirs, data) = (&deposit[..split], &deposit[split + 1..]);
        if theirs != header.trim_end().as_bytes() {
            let described = String::from_utf8_lossy(theirs);
            let described = described.split('\t').nth(1).unwrap_or("?");
            return Err(format!("mismatch: rank {r} called {described} but rank {rank} called {}", call.describe()));
        }
        inputs.push(data.to_vec());
    }
    if let Some(out) = result_for(&call, &inputs, rank)
        && !out.is_empty()
    {
        let st = state();
        let p = memory::translate(&st, call.dev, call.recv, out.len()).map_err(|m| format!("receive buffer: {m}"))?;
        // SAFETY: translated above; `copy` allows the in-place case.
        unsafe { std::ptr::copy(out.as_ptr(), p, out.len()) };
    }
    // The last rank done with the call removes its files.
    let done = |r: usize| net.dir.join(format!("d{seq}-r{r}"));
    let _ = fs::write(done(rank), b"");
    if (0..nranks).all(|r| done(r).exists()) {
        for r in 0..nranks {
            let _ = fs::remove_file(file(r));
            let _ = fs::remove_file(done(r));
        }
    }
    Ok(())
}
