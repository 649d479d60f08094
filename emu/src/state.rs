//! Global driver state: devices, contexts, streams and their deferred work.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Instant;

use crate::memory::Alloc;

pub(crate) type CUresult = u32;
pub(crate) const SUCCESS: CUresult = 0;
pub(crate) const INVALID_VALUE: CUresult = 1;
pub(crate) const OUT_OF_MEMORY: CUresult = 2;
pub(crate) const NOT_INITIALIZED: CUresult = 3;
pub(crate) const INVALID_DEVICE: CUresult = 101;
pub(crate) const INVALID_IMAGE: CUresult = 200;
pub(crate) const INVALID_CONTEXT: CUresult = 201;
pub(crate) const INVALID_PTX: CUresult = 218;
pub(crate) const FILE_NOT_FOUND: CUresult = 301;
pub(crate) const INVALID_HANDLE: CUresult = 400;
pub(crate) const NOT_FOUND: CUresult = 500;
pub(crate) const ILLEGAL_ADDRESS: CUresult = 700;
pub(crate) const LAUNCH_FAILED: CUresult = 719;
pub(crate) const NOT_SUPPORTED: CUresult = 801;

/// Prints why a call failed: cudarc only ever sees the code.
pub(crate) fn report(code: CUresult, msg: impl AsRef<str>) -> CUresult {
    eprintln!("devtensor-emu: error {code}: {}", msg.as_ref());
    code
}

/// Work queued on a stream, run at the stream's next synchronisation point.
pub(crate) enum Op {
    HtoD {
        dst: u64,
        src: usize,
        n: usize,
    },
    DtoH {
        dst: usize,
        src: u64,
        n: usize,
    },
    DtoD {
        dst_dev: usize,
        dst: u64,
        src_dev: usize,
        src: u64,
        n: usize,
    },
    Memset {
        dst: u64,
        value: u32,
        width: usize,
        count: usize,
    },
    Free {
        addr: u64,
    },
    Launch {
        kernel: usize,
        dims: [u32; 6],
        params: Vec<Vec<u8>>,
    },
    Host {
        f: unsafe extern "C" fn(*mut c_void),
        data: usize,
    },
    Gemm(Box<crate::cublas::GemmOp>),
    RecordTime {
        event: u64,
    },
    /// Work of a library layered on the driver (NCCL across processes).
    Deferred(Box<dyn FnOnce() -> Result<(), CUresult> + Send>),
}

pub(crate) struct Stream {
    pub dev: usize,
    pub queue: VecDeque<(u64, Op)>,
    /// Sequence number of the last op enqueued.
    pub enqueued: u64,
    /// First error of an op that ran since the last synchronisation.
    pub error: Option<CUresult>,
    /// Held while ops run, so two host threads flushing one stream keep its order.
    pub exec: Arc<Mutex<()>>,
}

pub(crate) struct Event {
    pub dev: usize,
    pub recorded: Option<(u64, u64)>,
    pub time: Option<Instant>,
}

pub(crate) struct Module {
    pub dev: usize,
    /// Entries of the PTX, with the byte width of each parameter.
    pub entries: Vec<(String, Vec<usize>)>,
}

pub(crate) struct Function {
    pub module: u64,
    pub dev: usize,
    pub kernel: usize,
}

pub(crate) struct Device {
    pub total: u64,
    pub used: u64,
    pub next_addr: u64,
    pub allocs: BTreeMap<u64, Alloc>,
    pub default_stream: u64,
    pub primary_refs: u32,
}

pub(crate) struct State {
    pub initialised: bool,
    pub devices: Vec<Device>,
    pub streams: HashMap<u64, Stream>,
    pub events: HashMap<u64, Event>,
    pub modules: HashMap<u64, Module>,
    pub functions: HashMap<u64, Function>,
    pub pinned: BTreeMap<usize, usize>,
    pub blas: HashMap<u64, crate::cublas::Handle>,
    next_handle: u64,
}

/// Device address ranges: far from any host mapping, so a device pointer
/// dereferenced on the host faults instead of reading something plausible.
pub(crate) const DEVICE_BASE: u64 = 0x7e00_0000_0000;
pub(crate) const DEVICE_SPAN: u64 = 0x0080_0000_0000;
const CONTEXT_BASE: usize = 0xc0_0000;

impl State {
    fn new() -> Self {
        State {
            initialised: false,
            devices: Vec::new(),
            streams: HashMap::new(),
            events: HashMap::new(),
            modules: HashMap::new(),
            functions: HashMap::new(),
            pinned: BTreeMap::new(),
            blas: HashMap::new(),
            next_handle: 0x1000,
        }
    }

    /// Handles are never reused, so a stale one is always detected.
    pub fn handle(&mut self) -> u64 {
        self.next_handle += 0x10;
        self.next_handle
    }

    pub fn init(&mut self) {
        if self.initialised {
            return;
        }
        let count = env_u64("DEVTENSOR_EMU_DEVICES").unwrap_or(2).clamp(1, 8) as usize;
        let default_mem = env_u64("DEVTENSOR_EMU_MEM_BYTES").unwrap_or(1 << 30);
        for d in 0..count {
            let total = env_u64(&format!("DEVTENSOR_EMU_MEM_BYTES_{d}")).unwrap_or(default_mem);
            let default_stream = self.handle();
            self.streams.insert(default_stream, Stream::new(d));
            self.devices.push(Device {
                total,
                used: 0,
                next_addr: DEVICE_BASE + d as u64 * DEVICE_SPAN,
                allocs: BTreeMap::new(),
                default_stream,
                primary_refs: 0,
            });
        }
        self.initialised = true;
    }

    pub fn check_init(&self) -> Result<(), CUresult> {
        if self.initialised { Ok(()) } else { Err(NOT_INITIALIZED) }
    }

    pub fn device(&self, dev: i32) -> Result<usize, CUresult> {
        self.check_init()?;
        if dev >= 0 && (dev as usize) < self.devices.len() { Ok(dev as usize) } else { Err(INVALID_DEVICE) }
    }

    /// Streams named by the null handle (legacy default) or by the
    /// per-thread handle both mean the current context's default stream.
    pub fn stream(&self, s: *mut c_void) -> Result<u64, CUresult> {
        self.check_init()?;
        let raw = s as u64;
        if raw == 0 || raw == 1 || raw == 2 {
            let dev = current()?;
            return Ok(self.devices[dev].default_stream);
        }
        if self.streams.contains_key(&raw) { Ok(raw) } else { Err(INVALID_HANDLE) }
    }

    /// Whether `[p, p + n)` lies in page-locked memory from `cuMemHostAlloc`.
    pub fn is_pinned(&self, p: usize, n: usize) -> bool {
        self.pinned.range(..=p).next_back().is_some_and(|(&start, &len)| p + n <= start + len.max(1))
    }

    pub fn enqueue(&mut self, stream: u64, op: Op) {
        let s = self.streams.get_mut(&stream).expect("stream checked by caller");
        s.enqueued += 1;
        let seq = s.enqueued;
        s.queue.push_back((seq, op));
    }
}

impl Stream {
    pub fn new(dev: usize) -> Self {
        Stream { dev, queue: VecDeque::new(), enqueued: 0, error: None, exec: Arc::new(Mutex::new(())) }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(|| Mutex::new(State::new()));

/// A panic inside the driver must not poison every later call.
pub(crate) fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

thread_local! {
    static CURRENT: Cell<Option<usize>> = const { Cell::new(None) };
}

pub(crate) fn context_handle(dev: usize) -> *mut c_void {
    (CONTEXT_BASE + dev * 0x10) as *mut c_void
}

pub(crate) fn context_device(ctx: *mut c_void, st: &State) -> Result<usize, CUresult> {
    let raw = ctx as usize;
    if raw >= CONTEXT_BASE
        && (raw - CONTEXT_BASE).is_multiple_of(0x10)
        && (raw - CONTEXT_BASE) / 0x10 < st.devices.len()
    {
        Ok((raw - CONTEXT_BASE) / 0x10)
    } else {
        Err(INVALID_CONTEXT)
    }
}

pub(crate) fn current() -> Result<usize, CUresult> {
    CURRENT.with(|c| c.get()).ok_or(INVALID_CONTEXT)
}

pub(crate) fn set_current(dev: Option<usize>) {
    CURRENT.with(|c| c.set(dev));
}

/// Runs a stream's queued ops up to sequence number `upto` (all when `None`),
/// then returns, and clears, the first error any of them hit.
///
/// A stream that no longer exists has nothing left to run: destroying a
/// stream runs its work first. (Callers that name a stream handle check it
/// themselves; this case is an event or a context outliving a stream.)
pub(crate) fn flush(stream: u64, upto: Option<u64>) -> Result<(), CUresult> {
    let Some(exec) = executor(stream) else { return Ok(()) };
    let _running = exec.lock().unwrap_or_else(|e| e.into_inner());
    run_queued(stream, upto);
    let mut st = state();
    match st.streams.get_mut(&stream).and_then(|s| s.error.take()) {
        Some(code) => Err(code),
        None => Ok(()),
    }
}

/// Runs a stream's queued ops up to sequence number `upto`, unless another
/// thread is running the stream (then it returns at once). Returns whether
/// it ran anything. What a collective waiting for other ranks' calls does,
/// so that one thread driving every rank cannot wait on a stream that
/// nobody runs. Errors stay with the stream, for its next synchronisation.
pub(crate) fn try_flush_through(stream: u64, upto: u64) -> bool {
    let Some(exec) = executor(stream) else { return false };
    let Ok(_running) = exec.try_lock() else { return false };
    run_queued(stream, Some(upto))
}

/// The lock that orders the running of `stream`'s ops, if it still exists.
fn executor(stream: u64) -> Option<Arc<Mutex<()>>> {
    state().streams.get(&stream).map(|s| s.exec.clone())
}

/// Runs `stream`'s queued ops up to `upto` (all when `None`), keeping the
/// first error in the stream; the caller holds the stream's `exec` lock.
/// Returns whether it ran any.
fn run_queued(stream: u64, upto: Option<u64>) -> bool {
    let mut ran = false;
    loop {
        let (dev, op) = {
            let mut st = state();
            let Some(s) = st.streams.get_mut(&stream) else { return ran };
            match s.queue.front() {
                Some(&(seq, _)) if upto.is_none_or(|u| seq <= u) => (s.dev, s.queue.pop_front().unwrap().1),
                _ => return ran,
            }
        };
        ran = true;
        if let Err(code) = crate::driver::execute(dev, op) {
            let mut st = state();
            if let Some(s) = st.streams.get_mut(&stream) {
                s.error.get_or_insert(code);
            }
        }
    }
}

/// Synchronises every stream of a device (context-wide synchronisation).
pub(crate) fn flush_device(dev: usize) -> Result<(), CUresult> {
    let ids: Vec<u64> = state().streams.iter().filter(|(_, s)| s.dev == dev).map(|(&id, _)| id).collect();
    let mut first = Ok(());
    for id in ids {
        let r = flush(id, None);
        if first.is_ok() {
            first = r;
        }
    }
    first
}
