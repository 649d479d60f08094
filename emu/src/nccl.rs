//! A stand-in for NCCL (`libnccl.so`): collectives between the emulated GPUs
//! of one process (`ncclCommInitAll`), or of several processes
//! (`ncclCommInitRank`, in `net.rs`), computed on the CPU.
//!
//! cudarc opens NCCL as `libnccl.so`; `with-emu.sh` links that name to this
//! same library, so the collectives see the driver's memory and streams.
//!
//! Model: `ncclCommInitAll` makes a *clique* of communicators, one rank per
//! device. The n-th collective a rank calls on its clique matches the n-th
//! call of every other rank (kind, count, type, operator and root must
//! agree). A call is checked at once and **queued on its stream**, as
//! NCCL's kernels are (inside `ncclGroupStart`/`ncclGroupEnd`, at the
//! outermost `ncclGroupEnd`); it runs when the stream runs, after the work
//! queued before it: it deposits itself and waits until every rank has
//! deposited its n-th call; the last depositor computes the result (in rank
//! order, so it is deterministic) and writes every rank's receive buffer. A
//! rank that waits runs the streams where the other ranks' calls sit queued
//! when no thread is running them, so one thread can drive every rank. The
//! receive buffer is therefore written only when the stream is
//! synchronised, and a failure shows in `ncclCommGetAsyncError`, not in the
//! call's result. `ncclCommAbort` (or `ncclCommDestroy` of a rank others
//! wait for) wakes the waiters with an error, so no rank waits forever for
//! one that gave up. There are no timeouts.
//!
//! Lock order: the communicator table, then a clique, then the driver state;
//! nothing blocks while holding the driver state.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{CString, c_char, c_int, c_void};
use std::ops::{Add, Mul};

use crate::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};

use crate::memory;
use crate::state::{self, state};

mod net;
pub use net::NcclUniqueId;

/// `ncclResult_t`.
type NcclResult = u32;
const SUCCESS: NcclResult = 0;
const UNHANDLED_CUDA_ERROR: NcclResult = 1;
const INVALID_ARGUMENT: NcclResult = 4;
const INVALID_USAGE: NcclResult = 5;
const REMOTE_ERROR: NcclResult = 6;

/// NCCL 2.30.0 (`NCCL_VERSION(2, 30, 0)`), the version cudarc's `nccl` feature binds.
const VERSION: c_int = 23000;

fn result_name(code: NcclResult) -> &'static str {
    match code {
        0 => "ncclSuccess",
        1 => "ncclUnhandledCudaError",
        2 => "ncclSystemError",
        3 => "ncclInternalError",
        4 => "ncclInvalidArgument",
        5 => "ncclInvalidUsage",
        6 => "ncclRemoteError",
        7 => "ncclInProgress",
        8 => "ncclTimeout",
        _ => "unknown ncclResult_t",
    }
}

thread_local! {
    /// Text of this thread's last error, for `ncclGetLastError`.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    /// Open `ncclGroupStart`s of this thread and the calls recorded meanwhile.
    static GROUP: RefCell<Group> = RefCell::new(Group::default());
}

/// Prints why a call failed (cudarc only ever sees the code) and keeps the
/// text for `ncclGetLastError`.
fn report(code: NcclResult, msg: impl AsRef<str>) -> NcclResult {
    let msg = msg.as_ref();
    eprintln!("devtensor-emu: error {code} ({}): {msg}", result_name(code));
    let text = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = text);
    code
}

/// `ncclDataType_t` (NCCL 2.24 and later numbering).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dtype {
    I8,
    U8,
    I32,
    U32,
    I64,
    U64,
    F16,
    F32,
    F64,
    Bf16,
}

impl Dtype {
    fn from_raw(t: u32) -> Option<Dtype> {
        Some(match t {
            0 => Dtype::I8,
            1 => Dtype::U8,
            2 => Dtype::I32,
            3 => Dtype::U32,
            4 => Dtype::I64,
            5 => Dtype::U64,
            6 => Dtype::F16,
            7 => Dtype::F32,
            8 => Dtype::F64,
            9 => Dtype::Bf16,
            _ => return None, // the fp8 types (10, 11) are not emulated
        })
    }

    fn size(self) -> usize {
        match self {
            Dtype::I8 | Dtype::U8 => 1,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dtype::I8 => "ncclInt8",
            Dtype::U8 => "ncclUint8",
            Dtype::I32 => "ncclInt32",
            Dtype::U32 => "ncclUint32",
            Dtype::I64 => "ncclInt64",
            Dtype::U64 => "ncclUint64",
            Dtype::F16 => "ncclFloat16",
            Dtype::F32 => "ncclFloat32",
            Dtype::F64 => "ncclFloat64",
            Dtype::Bf16 => "ncclBfloat16",
        }
    }
}

/// `ncclRedOp_t`; custom operators (`ncclRedOpCreatePreMulSum`) are not emulated.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
    Avg,
}

impl RedOp {
    fn from_raw(op: u32) -> Option<RedOp> {
        Some(match op {
            0 => RedOp::Sum,
            1 => RedOp::Prod,
            2 => RedOp::Max,
            3 => RedOp::Min,
            4 => RedOp::Avg,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "ncclSum",
            RedOp::Prod => "ncclProd",
            RedOp::Max => "ncclMax",
            RedOp::Min => "ncclMin",
            RedOp::Avg => "ncclAvg",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    AllReduce,
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AllReduce => "ncclAllReduce",
            Kind::Broadcast => "ncclBroadcast",
            Kind::Reduce => "ncclReduce",
            Kind::AllGather => "ncclAllGather",
            Kind::ReduceScatter => "ncclReduceScatter",
        }
    }
}

/// One rank's collective call, checked and ready to deposit.
#[derive(Clone, Copy, Debug)]
struct Call {
    kind: Kind,
    /// The count argument as passed (per rank for all-gather and reduce-scatter).
    count: usize,
    dtype: Dtype,
    op: Option<RedOp>,
    root: Option<usize>,
    send: u64,
    recv: u64,
    dev: usize,
    stream: u64,
}

impl Call {
    /// What every rank's matching call must agree on.
    fn signature(&self) -> (Kind, usize, Dtype, Option<RedOp>, Option<usize>) {
        (self.kind, self.count, self.dtype, self.op, self.root)
    }

    fn describe(&self) -> String {
        let mut s = format!("{}(count {}, {}", self.kind.name(), self.count, self.dtype.name());
        if let Some(op) = self.op {
            s += &format!(", {}", op.name());
        }
        if let Some(root) = self.root {
            s += &format!(", root {root}");
        }
        s + ")"
    }

    /// Elements of the send buffer this rank reads (None: ignored on this rank).
    fn send_elems(&self, rank: usize, nranks: usize) -> Option<usize> {
        match self.kind {
            Kind::Broadcast if self.root != Some(rank) => None,
            Kind::ReduceScatter => Some(self.count * nranks),
            _ => Some(self.count),
        }
    }

    /// Elements of the receive buffer this rank writes (None: ignored on this rank).
    fn recv_elems(&self, rank: usize, nranks: usize) -> Option<usize> {
        match self.kind {
            Kind::Reduce if self.root != Some(rank) => None,
            Kind::AllGather => Some(self.count * nranks),
            _ => Some(self.count),
        }
    }
}

/// The n-th collective of a clique, as the ranks deposit it.
struct Round {
    calls: Vec<Option<Call>>,
    /// Ranks whose stream's earlier work failed when the call flushed it.
    cuda_failed: Vec<bool>,
    /// Set once the round is decided: the code each rank returns.
    outcome: Option<Vec<NcclResult>>,
    collected: usize,
}

struct CliqueState {
    /// Collectives each rank has queued so far: the next one's number.
    queued: Vec<u64>,
    /// Where each queued, not yet run collective waits: (rank, number) ->
    /// (stream, position in the stream's queue), so that a rank waiting for
    /// it can run that stream when no thread does (one thread driving
    /// every rank queues them all, then synchronises one stream).
    pending: HashMap<(usize, u64), (u64, u64)>,
    /// Each rank's first failed collective (`ncclCommGetAsyncError`).
    errors: Vec<Option<NcclResult>>,
    rounds: BTreeMap<u64, Round>,
    /// How each rank left, if it did ("aborted", "destroyed").
    left: Vec<Option<&'static str>>,
    /// The rank whose `ncclCommAbort` broke the clique.
    aborted: Option<usize>,
}

struct Clique {
    id: u64,
    devs: Vec<usize>,
    inner: Mutex<CliqueState>,
    cv: Condvar,
}

impl Clique {
    fn lock(&self) -> MutexGuard<'_, CliqueState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn nranks(&self) -> usize {
        self.devs.len()
    }
}

struct CommSlot {
    clique: Arc<Clique>,
    rank: usize,
    /// Cleared by destroy/abort; the handle stays known so a stale one is named as such.
    live: bool,
}

static COMMS: LazyLock<Mutex<HashMap<u64, CommSlot>>> = LazyLock::new(|| Mutex::new(HashMap::new()));
/// Communicator handles: never reused, and far from stream and context handles.
static NEXT_COMM: AtomicU64 = AtomicU64::new(0x6e63_0000_0000);
static NEXT_CLIQUE: AtomicU64 = AtomicU64::new(1);

fn comms() -> MutexGuard<'static, HashMap<u64, CommSlot>> {
    COMMS.lock().unwrap_or_else(|e| e.into_inner())
}

fn resolve(comm: *mut c_void, what: &str) -> Result<(Arc<Clique>, usize), NcclResult> {
    let table = comms();
    match table.get(&(comm as u64)) {
        Some(slot) if slot.live => Ok((slot.clique.clone(), slot.rank)),
        Some(_) => Err(report(INVALID_ARGUMENT, format!("{what}: communicator {comm:p} was destroyed or aborted"))),
        None => Err(report(INVALID_ARGUMENT, format!("{what}: {comm:p} is not a communicator"))),
    }
}

#[derive(Default)]
struct Group {
    depth: usize,
    calls: Vec<(Arc<Clique>, usize, Call)>,
    /// First error of a call recorded in the group: the group is abandoned.
    error: Option<NcclResult>,
}

// ---------------------------------------------------------------------------
// Element types and reductions.

trait Elem: Copy {
    const SIZE: usize;
    fn read(b: &[u8]) -> Self;
    fn write(self, b: &mut [u8]);
    fn combine(self, other: Self, op: RedOp) -> Self;
    fn div(self, n: usize) -> Self;
}

/// `Elem` for machine numbers; `add` and `mul` name the sum and product
/// (wrapping for integers, as on a GPU).
macro_rules! number_elem {
    ($($t:ty => $add:ident, $mul:ident;)*) => {$(
        impl Elem for $t {
            const SIZE: usize = size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b[..Self::SIZE].try_into().unwrap())
            }
            fn write(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_ne_bytes());
            }
            fn combine(self, o: Self, op: RedOp) -> Self {
                match op {
                    RedOp::Sum | RedOp::Avg => self.$add(o),
                    RedOp::Prod => self.$mul(o),
                    RedOp::Max => self.max(o),
                    RedOp::Min => self.min(o),
                }
            }
            fn div(self, n: usize) -> Self {
                self / n as $t
            }
        }
    )*};
}
number_elem! {
    i8 => wrapping_add, wrapping_mul;
    u8 => wrapping_add, wrapping_mul;
    i32 => wrapping_add, wrapping_mul;
    u32 => wrapping_add, wrapping_mul;
    i64 => wrapping_add, wrapping_mul;
    u64 => wrapping_add, wrapping_mul;
    f32 => add, mul;
    f64 => add, mul;
}

/// IEEE half and bfloat16 as bits; each step is computed in f32 and rounded
/// back, as a GPU accumulating in the type itself does.
#[derive(Clone, Copy)]
struct F16(u16);
#[derive(Clone, Copy)]
struct Bf16(u16);

macro_rules! half_elem {
    ($t:ident, $to:ident, $from:ident) => {
        impl Elem for $t {
            const SIZE: usize = 2;
            fn read(b: &[u8]) -> Self {
                $t(u16::from_ne_bytes([b[0], b[1]]))
            }
            fn write(self, b: &mut [u8]) {
                b[..2].copy_from_slice(&self.0.to_ne_bytes());
            }
            fn combine(self, o: Self, op: RedOp) -> Self {
                $t($from($to(self.0).combine($to(o.0), op)))
            }
            fn div(self, n: usize) -> Self {
                $t($from($to(self.0) / n as f32))
            }
        }
    };
}
half_elem!(F16, f16_to_f32, f32_to_f16);
half_elem!(Bf16, bf16_to_f32, f32_to_bf16);

/// Element-wise reduction of equally long inputs, in rank order.
fn reduce_as<T: Elem>(inputs: &[Vec<u8>], op: RedOp) -> Vec<u8> {
    let mut out = inputs[0].clone();
    for i in (0..out.len()).step_by(T::SIZE) {
        let mut acc = T::read(&inputs[0][i..]);
        for inp in &inputs[1..] {
            acc = acc.combine(T::read(&inp[i..]), op);
        }
        if op == RedOp::Avg {
            acc = acc.div(inputs.len());
        }
        acc.write(&mut out[i..]);
    }
    out
}

fn reduce(dtype: Dtype, inputs: &[Vec<u8>], op: RedOp) -> Vec<u8> {
    match dtype {
        Dtype::I8 => reduce_as::<i8>(inputs, op),
        Dtype::U8 => reduce_as::<u8>(inputs, op),
        Dtype::I32 => reduce_as::<i32>(inputs, op),
        Dtype::U32 => reduce_as::<u32>(inputs, op),
        Dtype::I64 => reduce_as::<i64>(inputs, op),
        Dtype::U64 => reduce_as::<u64>(inputs, op),
        Dtype::F16 => reduce_as::<F16>(inputs, op),
        Dtype::F32 => reduce_as::<f32>(inputs, op),
        Dtype::F64 => reduce_as::<f64>(inputs, op),
        Dtype::Bf16 => reduce_as::<Bf16>(inputs, op),
    }
}

/// What rank `rank` receives from a call whose every rank's send buffer is
/// in `inputs` (empty where a rank sends nothing); None when it receives
/// nothing.
fn result_for(call: &Call, inputs: &[Vec<u8>], rank: usize) -> Option<Vec<u8>> {
    let nranks = inputs.len();
    call.recv_elems(rank, nranks)?;
    match call.kind {
        Kind::AllReduce | Kind::Reduce => {
            Some(reduce(call.dtype, inputs, call.op.expect("reductions have an operator")))
        }
        Kind::Broadcast => Some(inputs[call.root.expect("broadcast has a root")].clone()),
        Kind::AllGather => Some(inputs.concat()),
        Kind::ReduceScatter => {
            let out = reduce(call.dtype, inputs, call.op.expect("reductions have an operator"));
            let chunk = call.count * call.dtype.size();
            Some(out[rank * chunk..(rank + 1) * chunk].to_vec())
        }
    }
}

/// Computes a round whose calls all agree, reading every send buffer before
/// writing any receive buffer (so in-place calls work).
fn compute(calls: &[Call]) -> Result<(), String> {
    let nranks = calls.len();
    let c = calls[0];
    let esz = c.dtype.size();
    let st = state();
    let read = |rank: usize| -> Result<Vec<u8>, String> {
        let call = &calls[rank];
        let bytes = call.send_elems(rank, nranks).unwrap_or(0) * esz;
        if bytes == 0 {
            return Ok(Vec::new());
        }
        let p = memory::translate(&st, call.dev, call.send, bytes)
            .map_err(|m| format!("rank {rank}'s send buffer: {m}"))?;
        // SAFETY: translate checked that the bytes lie in a live allocation; the state lock keeps it alive.
        Ok(unsafe { std::slice::from_raw_parts(p, bytes) }.to_vec())
    };
    let inputs = (0..nranks).map(read).collect::<Result<Vec<_>, _>>()?;
    let outputs: Vec<Option<Vec<u8>>> = (0..nranks).map(|r| result_for(&calls[r], &inputs, r)).collect();
    // Translate every destination before writing any.
    let mut writes = Vec::new();
    for (rank, out) in outputs.into_iter().enumerate() {
        let Some(out) = out else { continue };
        if out.is_empty() {
            continue;
        }
        let call = &calls[rank];
        let p = memory::translate(&st, call.dev, call.recv, out.len())
            .map_err(|m| format!("rank {rank}'s receive buffer: {m}"))?;
        writes.push((p, out));
    }
    for (p, out) in writes {
        // SAFETY: translated above; `copy` allows the in-place case (it never overlaps `out`, a copy).
        unsafe { std::ptr::copy(out.as_ptr(), p, out.len()) };
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Matching and waiting.

/// Queues a checked call on its stream as rank `rank`'s next collective of
/// the clique; it runs when the stream runs, after the work queued before it.
fn queue(clique: &Arc<Clique>, rank: usize, call: Call) -> NcclResult {
    let mut cs = clique.lock();
    if let Some(who) = cs.aborted {
        return report(
            REMOTE_ERROR,
            format!("{} on rank {rank}: rank {who} aborted its communicator (clique {})", call.kind.name(), clique.id),
        );
    }
    let seq = cs.queued[rank];
    cs.queued[rank] += 1;
    let runner = clique.clone();
    let position = {
        let mut st = state();
        st.enqueue(call.stream, state::Op::Deferred(Box::new(move || run(&runner, rank, seq, call))));
        st.streams[&call.stream].enqueued
    };
    cs.pending.insert((rank, seq), (call.stream, position));
    SUCCESS
}

/// Runs collective `seq` of rank `rank`, from its stream: deposits it, waits
/// for the round, and keeps a failure for `ncclCommGetAsyncError` (the
/// stream itself goes on, as with NCCL).
fn run(clique: &Clique, rank: usize, seq: u64, call: Call) -> Result<(), state::CUresult> {
    // Work queued before the call that failed (an out-of-bounds kernel)
    // fails the collective, on every rank.
    let stream_failed = state().streams.get(&call.stream).is_some_and(|s| s.error.is_some());
    if stream_failed {
        report(
            UNHANDLED_CUDA_ERROR,
            format!("{}: rank {rank}'s stream had failed work queued before it", call.kind.name()),
        );
    }
    let code = match deposit(clique, rank, seq, call, stream_failed) {
        Ok(()) => wait(clique, rank, seq),
        Err(code) => code,
    };
    if code != SUCCESS {
        clique.lock().errors[rank].get_or_insert(code);
    }
    Ok(())
}

/// Deposits rank `rank`'s call as the clique's collective `seq`; the last
/// rank to deposit computes the round. Never blocks on other ranks.
fn deposit(clique: &Clique, rank: usize, seq: u64, call: Call, stream_failed: bool) -> Result<(), NcclResult> {
    let nranks = clique.nranks();
    let mut cs = clique.lock();
    cs.pending.remove(&(rank, seq));
    if let Some(who) = cs.aborted {
        return Err(report(
            REMOTE_ERROR,
            format!("{} on rank {rank}: rank {who} aborted its communicator (clique {})", call.kind.name(), clique.id),
        ));
    }
    let round = cs.rounds.entry(seq).or_insert_with(|| Round {
        calls: vec![None; nranks],
        cuda_failed: vec![false; nranks],
        outcome: None,
        collected: 0,
    });
    if round.outcome.is_none()
        && let Some((other, first)) = round.calls.iter().enumerate().find_map(|(r, c)| c.map(|c| (r, c)))
        && first.signature() != call.signature()
    {
        report(
            INVALID_USAGE,
            format!(
                "collective #{seq} of clique {}: rank {other} called {} but rank {rank} called {}",
                clique.id,
                first.describe(),
                call.describe()
            ),
        );
        round.outcome = Some(vec![INVALID_USAGE; nranks]);
    }
    round.calls[rank] = Some(call);
    round.cuda_failed[rank] = stream_failed;
    if round.outcome.is_none() && round.calls.iter().all(Option::is_some) {
        let outcome = if round.cuda_failed.iter().any(|&f| f) {
            round.cuda_failed.iter().map(|&f| if f { UNHANDLED_CUDA_ERROR } else { REMOTE_ERROR }).collect()
        } else {
            let calls: Vec<Call> = round.calls.iter().map(|c| c.unwrap()).collect();
            match compute(&calls) {
                Ok(()) => vec![SUCCESS; nranks],
                Err(msg) => {
                    report(UNHANDLED_CUDA_ERROR, format!("collective #{seq} of clique {}: {msg}", clique.id));
                    vec![UNHANDLED_CUDA_ERROR; nranks]
                }
            }
        };
        round.outcome = Some(outcome);
    }
    clique.cv.notify_all();
    Ok(())
}

/// Waits until round `seq` is decided, or until it never can be: the clique
/// was aborted, or a rank that has not deposited its call left. While it
/// waits it runs the streams where other ranks' calls of the round sit
/// queued, when no other thread is running them.
fn wait(clique: &Clique, rank: usize, seq: u64) -> NcclResult {
    let nranks = clique.nranks();
    loop {
        let queued_elsewhere: Vec<(u64, u64)> = {
            let mut cs = clique.lock();
            let s = &mut *cs;
            let round = s.rounds.get_mut(&seq).expect("a deposited round stays until collected");
            if let Some(outcome) = &round.outcome {
                let code = outcome[rank];
                round.collected += 1;
                if round.collected == nranks {
                    s.rounds.remove(&seq);
                }
                return code;
            }
            let what = round.calls[rank].map_or("collective", |c| c.kind.name());
            if let Some(who) = s.aborted {
                return report(
                    REMOTE_ERROR,
                    format!("{what} #{seq} on rank {rank}: rank {who} aborted its communicator (clique {})", clique.id),
                );
            }
            let gone = (0..nranks).find(|&r| round.calls[r].is_none() && s.left[r].is_some());
            if let Some(r) = gone {
                return report(
                    REMOTE_ERROR,
                    format!(
                        "{what} #{seq} on rank {rank}: rank {r} {} its communicator before calling it (clique {})",
                        s.left[r].unwrap(),
                        clique.id
                    ),
                );
            }
            (0..nranks)
                .filter(|&r| round.calls[r].is_none())
                .filter_map(|r| s.pending.get(&(r, seq)).copied())
                .collect()
        };
        let mut ran = false;
        for (stream, position) in queued_elsewhere {
            ran |= state::try_flush_through(stream, position);
        }
        if !ran {
            let cs = clique.lock();
            let _ = clique.cv.wait_timeout(cs, std::time::Duration::from_millis(2));
        }
    }
}

/// Checks a collective's arguments as NCCL does at call time, then runs it
/// (outside a group) or records it (inside one).
fn collective(comm: *mut c_void, stream: *mut c_void, mut call: Call) -> NcclResult {
    let name = call.kind.name();
    let network = net::find(comm);
    let (clique, rank, nranks, dev) = match &network {
        Some(n) => (None, n.rank, n.nranks, n.dev),
        None => match resolve(comm, name) {
            Ok((clique, rank)) => {
                let (nranks, dev) = (clique.nranks(), clique.devs[rank]);
                (Some(clique), rank, nranks, dev)
            }
            Err(code) => return note_group_error(code),
        },
    };
    call.dev = dev;
    if let Some(root) = call.root
        && root >= nranks
    {
        return note_group_error(report(
            INVALID_ARGUMENT,
            format!("{name}: root {root} is not a rank of a {nranks}-rank communicator"),
        ));
    }
    let checked = {
        let st = state();
        let raw = stream as u64;
        // The null stream means the communicator's device's default stream
        // (NCCL sets the device itself), not the calling thread's context.
        let sid = if raw <= 2 {
            Ok(st.devices[dev].default_stream)
        } else {
            match st.stream(stream) {
                Ok(id) if st.streams[&id].dev == dev => Ok(id),
                Ok(id) => Err(format!(
                    "stream {stream:p} belongs to device {}, but rank {rank} is on device {dev}",
                    st.streams[&id].dev
                )),
                Err(_) => Err(format!("{stream:p} is not a live stream")),
            }
        };
        sid.and_then(|sid| {
            let esz = call.dtype.size();
            for (what, addr, elems) in [
                ("send", call.send, call.send_elems(rank, nranks)),
                ("receive", call.recv, call.recv_elems(rank, nranks)),
            ] {
                let Some(elems) = elems else { continue };
                let bytes = elems.checked_mul(esz).ok_or_else(|| format!("count {} overflows", call.count))?;
                if bytes > 0 {
                    memory::translate(&st, dev, addr, bytes)
                        .map_err(|m| format!("{what} buffer of rank {rank}: {m}"))?;
                }
            }
            Ok(sid)
        })
    };
    match checked {
        Ok(sid) => call.stream = sid,
        Err(msg) => {
            return note_group_error(report(INVALID_ARGUMENT, format!("{name}: {msg}")));
        }
    }
    // Across processes a call is queued on its stream, in or out of a group.
    let Some(clique) = clique else {
        return note_group_error(net::enqueue(network.expect("a communicator is one or the other"), call));
    };
    let grouped = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth > 0 {
            g.calls.push((clique.clone(), rank, call));
            true
        } else {
            false
        }
    });
    if grouped {
        return SUCCESS;
    }
    queue(&clique, rank, call)
}

/// A failed call inside a group abandons the group (returned again by ncclGroupEnd).
fn note_group_error(code: NcclResult) -> NcclResult {
    GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth > 0 {
            g.error.get_or_insert(code);
        }
    });
    code
}

fn op_and_type(name: &str, datatype: u32, op: Option<u32>) -> Result<(Dtype, Option<RedOp>), NcclResult> {
    let Some(dtype) = Dtype::from_raw(datatype) else {
        return Err(note_group_error(report(
            INVALID_ARGUMENT,
            format!("{name}: data type {datatype} is not emulated (fp8 types and unknown values)"),
        )));
    };
    let op = match op {
        None => None,
        Some(raw) => match RedOp::from_raw(raw) {
            Some(o) => Some(o),
            None => {
                return Err(note_group_error(report(
                    INVALID_ARGUMENT,
                    format!("{name}: reduction operator {raw} is not emulated (custom operators and unknown values)"),
                )));
            }
        },
    };
    Ok((dtype, op))
}

fn out<T>(p: *mut T, v: T, name: &str) -> NcclResult {
    if p.is_null() {
        return report(INVALID_ARGUMENT, format!("{name}: null output pointer"));
    }
    // SAFETY: checked non-null; the caller passes a valid out pointer.
    unsafe { *p = v };
    SUCCESS
}

// ---------------------------------------------------------------------------
// Exported NCCL API.

/// Reports NCCL 2.30.0 (23000), the version cudarc's `nccl` feature binds.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetVersion(version: *mut c_int) -> NcclResult {
    out(version, VERSION, "ncclGetVersion")
}

/// A static description of a result code.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetErrorString(result: u32) -> *const c_char {
    let s: &'static std::ffi::CStr = match result {
        0 => c"no error",
        1 => c"unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        2 => c"unhandled system error (run with NCCL_DEBUG=INFO for details)",
        3 => c"internal error - please report this issue to the NCCL developers",
        4 => c"invalid argument (run with NCCL_DEBUG=WARN for details)",
        5 => c"invalid usage (run with NCCL_DEBUG=WARN for details)",
        6 => c"remote process exited or there was a network error",
        7 => c"NCCL operation in progress",
        8 => c"NCCL operation timed out",
        _ => c"unknown result code",
    };
    s.as_ptr()
}

/// The message of this thread's last failed call ("" if none); valid until
/// this thread's next failing call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetLastError(_comm: *mut c_void) -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// A new id for `ncclCommInitRank`: the folder where the ranks of a
/// cross-process communicator meet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetUniqueId(unique_id: *mut NcclUniqueId) -> NcclResult {
    net::unique_id(unique_id)
}

/// Joins rank `rank` of `nranks`, on the calling thread's current device,
/// to the communicator of `comm_id`; blocks until every rank has joined.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRank(
    comm: *mut *mut c_void,
    nranks: c_int,
    comm_id: NcclUniqueId,
    rank: c_int,
) -> NcclResult {
    net::init_rank("ncclCommInitRank", comm, nranks, comm_id, rank, std::ptr::null())
}

/// As `ncclCommInitRank`; with `config.blocking = 0` it returns
/// `ncclInProgress` at once, and `ncclCommGetAsyncError` says when every
/// rank has joined.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRankConfig(
    comm: *mut *mut c_void,
    nranks: c_int,
    comm_id: NcclUniqueId,
    rank: c_int,
    config: *mut c_void,
) -> NcclResult {
    net::init_rank("ncclCommInitRankConfig", comm, nranks, comm_id, rank, config as *const u8)
}

/// Makes one communicator per device of `devlist` (or devices 0..ndev when
/// null), rank i on `devlist[i]`, all in one new clique.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitAll(
    comms_out: *mut *mut c_void,
    ndev: c_int,
    devlist: *const c_int,
) -> NcclResult {
    if comms_out.is_null() {
        return report(INVALID_ARGUMENT, "ncclCommInitAll: null comm array");
    }
    if ndev <= 0 {
        return report(INVALID_ARGUMENT, format!("ncclCommInitAll: ndev {ndev}"));
    }
    let n = ndev as usize;
    let mut devs = Vec::new();
    {
        // NCCL initialises CUDA itself.
        let mut st = state();
        st.init();
        for i in 0..n {
            let d = if devlist.is_null() {
                i as c_int
            } else {
                // SAFETY: the caller passes `ndev` device ordinals.
                unsafe { *devlist.add(i) }
            };
            let Ok(d) = st.device(d) else {
                return report(
                    INVALID_ARGUMENT,
                    format!("ncclCommInitAll: device {d} does not exist ({} devices)", st.devices.len()),
                );
            };
            if devs.contains(&d) {
                return report(
                    INVALID_USAGE,
                    format!("ncclCommInitAll: duplicate GPU detected: device {d} is listed twice"),
                );
            }
            devs.push(d);
        }
    }
    let clique = Arc::new(Clique {
        id: NEXT_CLIQUE.fetch_add(1, Ordering::Relaxed),
        devs,
        inner: Mutex::new(CliqueState {
            queued: vec![0; n],
            pending: HashMap::new(),
            errors: vec![None; n],
            rounds: BTreeMap::new(),
            left: vec![None; n],
            aborted: None,
        }),
        cv: Condvar::new(),
    });
    let mut table = comms();
    for rank in 0..n {
        let h = NEXT_COMM.fetch_add(0x10, Ordering::Relaxed);
        table.insert(h, CommSlot { clique: clique.clone(), rank, live: true });
        // SAFETY: the caller passes room for `ndev` communicators.
        unsafe { *comms_out.add(rank) = h as *mut c_void };
    }
    SUCCESS
}

/// Marks the rank gone: a later use of the handle fails, and ranks waiting
/// for a collective this rank never called fail with `ncclRemoteError`.
fn leave(comm: *mut c_void, how: &'static str, name: &str) -> NcclResult {
    if how == "destroyed"
        && let Ok((clique, rank)) = resolve(comm, name)
    {
        // As NCCL's destroy (which finalizes first), the rank's queued
        // collectives complete before it goes.
        let queued: Vec<(u64, u64)> =
            clique.lock().pending.iter().filter(|((r, _), _)| *r == rank).map(|(_, &place)| place).collect();
        for (stream, position) in queued {
            let _ = state::flush(stream, Some(position));
        }
    }
    let (clique, rank) = {
        let mut table = comms();
        match table.get_mut(&(comm as u64)) {
            Some(slot) if slot.live => {
                slot.live = false;
                (slot.clique.clone(), slot.rank)
            }
            Some(_) => {
                return report(
                    INVALID_ARGUMENT,
                    format!("{name}: communicator {comm:p} was already destroyed or aborted"),
                );
            }
            None => {
                return report(INVALID_ARGUMENT, format!("{name}: {comm:p} is not a communicator"));
            }
        }
    };
    let mut cs = clique.lock();
    cs.left[rank] = Some(how);
    if how == "aborted" {
        cs.aborted.get_or_insert(rank);
    }
    clique.cv.notify_all();
    SUCCESS
}

/// Frees a communicator. Collectives are synchronous here, so nothing is
/// outstanding; other ranks waiting for a call this rank never made fail.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommDestroy(comm: *mut c_void) -> NcclResult {
    if comm.is_null() {
        return SUCCESS;
    }
    if net::find(comm).is_some() {
        return net::close(comm, false);
    }
    leave(comm, "destroyed", "ncclCommDestroy")
}

/// Frees a communicator and breaks its clique: every rank blocked in a
/// collective of the clique, and every later collective on it, fails with
/// `ncclRemoteError`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommAbort(comm: *mut c_void) -> NcclResult {
    if comm.is_null() {
        return SUCCESS;
    }
    if net::find(comm).is_some() {
        return net::close(comm, true);
    }
    leave(comm, "aborted", "ncclCommAbort")
}

/// Nothing is ever outstanding: a no-op on a live communicator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommFinalize(comm: *mut c_void) -> NcclResult {
    if net::find(comm).is_some() {
        return SUCCESS;
    }
    resolve(comm, "ncclCommFinalize").map_or_else(|code| code, |_| SUCCESS)
}

/// `ncclRemoteError` once the clique was aborted, else the rank's first
/// failed collective, else `ncclSuccess`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommGetAsyncError(comm: *mut c_void, async_error: *mut u32) -> NcclResult {
    if let Some(n) = net::find(comm) {
        return out(async_error, net::async_error(&n), "ncclCommGetAsyncError");
    }
    let (clique, rank) = match resolve(comm, "ncclCommGetAsyncError") {
        Ok(x) => x,
        Err(code) => return code,
    };
    let code = {
        let cs = clique.lock();
        if cs.aborted.is_some() { REMOTE_ERROR } else { cs.errors[rank].unwrap_or(SUCCESS) }
    };
    out(async_error, code, "ncclCommGetAsyncError")
}

/// Number of ranks of the communicator's clique.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCount(comm: *mut c_void, count: *mut c_int) -> NcclResult {
    if let Some(n) = net::find(comm) {
        return out(count, n.nranks as c_int, "ncclCommCount");
    }
    match resolve(comm, "ncclCommCount") {
        Ok((clique, _)) => out(count, clique.nranks() as c_int, "ncclCommCount"),
        Err(code) => code,
    }
}

/// Device ordinal of the communicator's rank.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCuDevice(comm: *mut c_void, device: *mut c_int) -> NcclResult {
    if let Some(n) = net::find(comm) {
        return out(device, n.dev as c_int, "ncclCommCuDevice");
    }
    match resolve(comm, "ncclCommCuDevice") {
        Ok((clique, rank)) => out(device, clique.devs[rank] as c_int, "ncclCommCuDevice"),
        Err(code) => code,
    }
}

/// Rank of the communicator in its clique.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommUserRank(comm: *mut c_void, rank: *mut c_int) -> NcclResult {
    if let Some(n) = net::find(comm) {
        return out(rank, n.rank as c_int, "ncclCommUserRank");
    }
    match resolve(comm, "ncclCommUserRank") {
        Ok((_, r)) => out(rank, r as c_int, "ncclCommUserRank"),
        Err(code) => code,
    }
}

/// One rank's part of a collective: the arguments every entry point shares.
struct Args {
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    datatype: u32,
    comm: *mut c_void,
    stream: *mut c_void,
}

/// Checks the data type, the operator (`op`, for reductions) and the root
/// (`root`, for rooted calls) of collective `name`, and runs it.
fn submit(name: &str, kind: Kind, args: Args, op: Option<u32>, root: Option<c_int>) -> NcclResult {
    let (dtype, op) = match op_and_type(name, args.datatype, op) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let root = match root {
        Some(r) if r < 0 => return note_group_error(report(INVALID_ARGUMENT, format!("{name}: root {r}"))),
        r => r.map(|r| r as usize),
    };
    let call = Call {
        kind,
        count: args.count,
        dtype,
        op,
        root,
        send: args.send as u64,
        recv: args.recv as u64,
        dev: 0,
        stream: 0,
    };
    collective(args.comm, args.stream, call)
}

/// Element-wise reduction of every rank's `sendbuff` into every rank's `recvbuff`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAllReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: u32,
    op: u32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> NcclResult {
    let args = Args { send: sendbuff, recv: recvbuff, count, datatype, comm, stream };
    submit("ncclAllReduce", Kind::AllReduce, args, Some(op), None)
}

/// Copies `count` elements of the root's `sendbuff` into every rank's
/// `recvbuff` (`sendbuff` is ignored on other ranks).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclBroadcast(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: u32,
    root: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> NcclResult {
    let args = Args { send: sendbuff, recv: recvbuff, count, datatype, comm, stream };
    submit("ncclBroadcast", Kind::Broadcast, args, None, Some(root))
}

/// In-place broadcast (the legacy form of `ncclBroadcast`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclBcast(
    buff: *mut c_void,
    count: usize,
    datatype: u32,
    root: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> NcclResult {
    // SAFETY: the same contract as ncclBroadcast, with one buffer.
    unsafe { ncclBroadcast(buff, buff, count, datatype, root, comm, stream) }
}

/// Element-wise reduction of every rank's `sendbuff` into the root's
/// `recvbuff` (`recvbuff` is ignored on other ranks).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: u32,
    op: u32,
    root: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> NcclResult {
    let args = Args { send: sendbuff, recv: recvbuff, count, datatype, comm, stream };
    submit("ncclReduce", Kind::Reduce, args, Some(op), Some(root))
}

/// Every rank's `sendcount` elements, concatenated in rank order into every
/// rank's `recvbuff` (`sendcount * nranks` elements).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAllGather(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    sendcount: usize,
    datatype: u32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> NcclResult {
    let args = Args { send: sendbuff, recv: recvbuff, count: sendcount, datatype, comm, stream };
    submit("ncclAllGather", Kind::AllGather, args, None, None)
}

/// Element-wise reduction of every rank's `sendbuff` (`recvcount * nranks`
/// elements); rank r receives block r (`recvcount` elements).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclReduceScatter(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    recvcount: usize,
    datatype: u32,
    op: u32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> NcclResult {
    let args = Args { send: sendbuff, recv: recvbuff, count: recvcount, datatype, comm, stream };
    submit("ncclReduceScatter", Kind::ReduceScatter, args, Some(op), None)
}

/// Opens a (nestable, per-thread) group: later collectives are only recorded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGroupStart() -> NcclResult {
    GROUP.with(|g| g.borrow_mut().depth += 1);
    SUCCESS
}

/// Closes a group; the outermost close deposits every recorded call (in
/// order), then waits for all of them, and returns the first error.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGroupEnd() -> NcclResult {
    let taken = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth == 0 {
            return Err(());
        }
        g.depth -= 1;
        if g.depth > 0 {
            return Ok(None);
        }
        Ok(Some((std::mem::take(&mut g.calls), g.error.take())))
    });
    let (calls, error) = match taken {
        Err(()) => return report(INVALID_USAGE, "ncclGroupEnd without ncclGroupStart"),
        Ok(None) => return SUCCESS,
        Ok(Some(x)) => x,
    };
    if let Some(code) = error {
        return report(
            code,
            format!(
                "ncclGroupEnd: a call in the group failed, so its other {} recorded calls were dropped",
                calls.len()
            ),
        );
    }
    let mut first = SUCCESS;
    for (clique, rank, call) in calls {
        let code = queue(&clique, rank, call);
        if first == SUCCESS {
            first = code;
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions_round_to_nearest_even() {
        for h in 0..=0xffffu16 {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f32_to_f16(f) & 0x7c00 == 0x7c00 && f32_to_f16(f) & 0x3ff != 0);
            } else {
                assert_eq!(f32_to_f16(f), h, "half {h:#06x} = {f}");
            }
        }
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00); // tie, to even
        assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3c02); // tie, to even (up)
        assert_eq!(f32_to_f16(65520.0), 0x7c00); // rounds to infinity
        // Against a brute-force nearest-half search, over a spread of f32 values.
        let nearest = |x: f32| -> u16 {
            let a = x.abs() as f64;
            let (mut lo, mut hi) = (0u16, 0x7c00u16); // f16_to_f32(lo) <= a < value(hi)
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if f16_to_f32(mid) as f64 <= a {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let hv = if hi == 0x7c00 { 65536.0 } else { f16_to_f32(hi) as f64 };
            let (dl, dh) = (a - f16_to_f32(lo) as f64, hv - a);
            let h = if dl < dh || (dl == dh && lo & 1 == 0) { lo } else { hi };
            h | if x.is_sign_negative() { 0x8000 } else { 0 }
        };
        for bits in (0..0x7f80_0000u32).step_by(4099) {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                assert_eq!(f32_to_f16(x), nearest(x), "{x:e}");
            }
        }
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(bf16_to_f32(0x4040), 3.0);
    }
}
