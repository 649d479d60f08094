//! End-to-end tests of the NCCL stand-in, through cudarc's `nccl` module (the
//! raw `result` layer, and the safe `Comm` where one thread drives every
//! rank). Run by `scripts/test-emu.sh`, which also names the emulator
//! `libnccl.so`.
//!
//! Every test makes its own communicators (its own clique) and streams, so
//! tests running in parallel never match each other's collectives. A test
//! whose ranks run on two threads collects their results through a
//! channel; there is no time limit (the tests assert no timing), so a hang
//! in the emulator would show as CI's own time-out.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr};
use cudarc::nccl::sys::{ncclDataType_t, ncclRedOp_t, ncclResult_t};
use cudarc::nccl::{Comm, NcclType, ReduceOp, group_end, group_start, result, sys};

fn ctx(ordinal: usize) -> Arc<CudaContext> {
    let ctx = CudaContext::new(ordinal).expect("context on the emulated device");
    let name = ctx.name().unwrap();
    assert!(name.contains("devtensor-emu"), "expected the emulated driver, found `{name}`; run scripts/test-emu.sh");
    ctx
}

/// Raw communicators of one clique over `devs`, as integers so they cross threads.
fn init_all(devs: &[i32]) -> Vec<usize> {
    let mut comms = vec![std::ptr::null_mut(); devs.len()];
    // SAFETY: room for one communicator per device.
    unsafe { result::comm_init_all(comms.as_mut_ptr(), devs.len() as i32, devs.as_ptr()) }.expect("ncclCommInitAll");
    comms.into_iter().map(|c| c as usize).collect()
}

fn destroy(comms: &[usize]) {
    for &c in comms {
        // SAFETY: a communicator from init_all, destroyed once.
        unsafe { result::comm_destroy(c as sys::ncclComm_t) }.expect("ncclCommDestroy");
    }
}

fn code<T>(r: Result<T, result::NcclError>) -> ncclResult_t {
    match r {
        Ok(_) => ncclResult_t::ncclSuccess,
        Err(e) => e.0,
    }
}

/// One rank's `ncclAllReduce` over whole slices, on `stream`.
fn all_reduce<T: NcclType + DeviceRepr>(
    comm: usize,
    stream: &Arc<CudaStream>,
    send: &CudaSlice<T>,
    recv: &mut CudaSlice<T>,
    count: usize,
    op: ncclRedOp_t,
) -> ncclResult_t {
    let (s, _s) = send.device_ptr(stream);
    let (r, _r) = recv.device_ptr_mut(stream);
    // SAFETY: both buffers hold at least `count` elements and live past the call.
    code(unsafe {
        result::all_reduce(
            s as _,
            r as _,
            count,
            T::as_nccl_type(),
            op,
            comm as sys::ncclComm_t,
            stream.cu_stream() as _,
        )
    })
}

/// Runs `f(rank)` on one thread per rank and returns the results in rank
/// order, failing (not hanging) if a rank never returns.
fn on_threads<R: Send + 'static>(ranks: usize, f: impl Fn(usize) -> R + Send + Sync + 'static) -> Vec<R> {
    let f = Arc::new(f);
    let (tx, rx) = mpsc::channel();
    for rank in 0..ranks {
        let (f, tx) = (f.clone(), tx.clone());
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(rank)));
            let _ = tx.send((rank, r));
        });
    }
    let mut out: Vec<Option<R>> = (0..ranks).map(|_| None).collect();
    for _ in 0..ranks {
        let (rank, r) = rx.recv().expect("a rank never returned from its collective");
        match r {
            Ok(v) => out[rank] = Some(v),
            Err(p) => std::panic::resume_unwind(p),
        }
    }
    out.into_iter().map(Option::unwrap).collect()
}

fn data(rank: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.37 - 5.0) * (rank as f32 + 1.0) + 0.1 * rank as f32).collect()
}

#[test]
fn version_error_strings_and_communicator_queries() {
    let _ = ctx(0);
    assert_eq!(result::get_nccl_version().unwrap(), 23000);
    // SAFETY: ncclGetErrorString returns a static C string.
    let s = unsafe { std::ffi::CStr::from_ptr(sys::ncclGetErrorString(ncclResult_t::ncclInvalidUsage)) };
    assert!(s.to_str().unwrap().contains("invalid usage"));

    let comms = init_all(&[1, 0]);
    for (rank, &c) in comms.iter().enumerate() {
        let c = c as sys::ncclComm_t;
        // SAFETY: live communicators.
        unsafe {
            assert_eq!(result::comm_count(c).unwrap(), 2);
            assert_eq!(result::comm_user_rank(c).unwrap(), rank as i32);
            assert_eq!(result::comm_cu_device(c).unwrap(), 1 - rank as i32);
        }
    }
    destroy(&comms);
    // SAFETY: a destroyed handle is detected, not dereferenced.
    let stale = unsafe { result::comm_count(comms[0] as sys::ncclComm_t) };
    assert_eq!(code(stale), ncclResult_t::ncclInvalidArgument);

    let mut out = vec![std::ptr::null_mut(); 2];
    // SAFETY: room for two communicators.
    let dup = unsafe { result::comm_init_all(out.as_mut_ptr(), 2, [0, 0].as_ptr()) };
    assert_eq!(code(dup), ncclResult_t::ncclInvalidUsage, "duplicate GPU");
    // SAFETY: as above.
    let bad = unsafe { result::comm_init_all(out.as_mut_ptr(), 2, [0, 7].as_ptr()) };
    assert_eq!(code(bad), ncclResult_t::ncclInvalidArgument, "no device 7");
}

#[test]
fn all_reduce_sum_with_a_thread_per_rank() {
    let n = 1000;
    let comms = init_all(&[0, 1]);
    let results = {
        let comms = comms.clone();
        on_threads(2, move |rank| {
            let stream = ctx(rank).new_stream().unwrap();
            let send = stream.clone_htod(&data(rank, n)).unwrap();
            let mut recv = stream.alloc_zeros::<f32>(n).unwrap();
            let rc = all_reduce(comms[rank], &stream, &send, &mut recv, n, ncclRedOp_t::ncclSum);
            (rc, stream.clone_dtoh(&recv).unwrap())
        })
    };
    let want: Vec<f32> = data(0, n).iter().zip(data(1, n)).map(|(a, b)| a + b).collect();
    for (rank, (rc, got)) in results.into_iter().enumerate() {
        assert_eq!(rc, ncclResult_t::ncclSuccess, "rank {rank}");
        assert_eq!(got, want, "rank {rank}");
    }
    destroy(&comms);
}

#[test]
fn many_collectives_in_a_row_stay_matched() {
    let comms = init_all(&[0, 1]);
    let results = {
        let comms = comms.clone();
        on_threads(2, move |rank| {
            let stream = ctx(rank).new_stream().unwrap();
            let mut buf = stream.clone_htod(&[rank as f64 + 1.0; 33]).unwrap();
            let mut out = Vec::new();
            for round in 0..200 {
                let n = 1 + round % 33;
                let (p, _p) = buf.device_ptr_mut(&stream);
                // SAFETY: in place, `n` <= 33 doubles.
                let rc = code(unsafe {
                    result::all_reduce(
                        p as _,
                        p as _,
                        n,
                        ncclDataType_t::ncclFloat64,
                        ncclRedOp_t::ncclMax,
                        comms[rank] as _,
                        stream.cu_stream() as _,
                    )
                });
                drop(_p);
                assert_eq!(rc, ncclResult_t::ncclSuccess, "round {round}");
                // Rank-specific work between collectives, in stream order.
                stream.memcpy_htod(&[rank as f64 + round as f64; 1], &mut buf.slice_mut(32..)).unwrap();
            }
            out.extend(stream.clone_dtoh(&buf).unwrap());
            out
        })
    };
    // Elements 0..32 only ever hold the max of 1.0 and 2.0; element 32 is
    // each rank's own last copy.
    for (rank, got) in results.into_iter().enumerate() {
        assert_eq!(got[..32], [2.0; 32], "rank {rank}");
        assert_eq!(got[32], rank as f64 + 199.0, "rank {rank}");
    }
    destroy(&comms);
}

#[test]
fn all_reduce_sum_with_one_thread_in_a_group() {
    let n = 257;
    let streams: Vec<_> = (0..2).map(|i| ctx(i).new_stream().unwrap()).collect();
    let comms = Comm::from_devices(streams.clone()).unwrap();
    let sends: Vec<_> = (0..2).map(|r| streams[r].clone_htod(&data(r, n)).unwrap()).collect();
    let mut recvs: Vec<_> = (0..2).map(|r| streams[r].alloc_zeros::<f32>(n).unwrap()).collect();
    group_start().unwrap();
    for (r, recv) in recvs.iter_mut().enumerate() {
        comms[r].all_reduce(&sends[r], recv, &ReduceOp::Sum).unwrap();
    }
    group_end().unwrap();
    let want: Vec<f32> = data(0, n).iter().zip(data(1, n)).map(|(a, b)| a + b).collect();
    for r in 0..2 {
        assert_eq!(streams[r].clone_dtoh(&recvs[r]).unwrap(), want, "rank {r}");
    }
    // Dropping a `Comm` calls ncclCommAbort, which must succeed.
}

#[test]
fn nested_groups_run_at_the_outermost_end() {
    let streams: Vec<_> = (0..2).map(|i| ctx(i).new_stream().unwrap()).collect();
    let comms = Comm::from_devices(streams.clone()).unwrap();
    let sends: Vec<_> = (0..2).map(|r| streams[r].clone_htod(&[r as f64 + 1.0; 4]).unwrap()).collect();
    let mut recvs: Vec<_> = (0..2).map(|r| streams[r].alloc_zeros::<f64>(4).unwrap()).collect();
    group_start().unwrap();
    group_start().unwrap();
    for (r, recv) in recvs.iter_mut().enumerate() {
        comms[r].all_reduce(&sends[r], recv, &ReduceOp::Sum).unwrap();
    }
    group_end().unwrap();
    assert_eq!(streams[0].clone_dtoh(&recvs[0]).unwrap(), [0.0; 4], "still recorded only");
    group_end().unwrap();
    for r in 0..2 {
        assert_eq!(streams[r].clone_dtoh(&recvs[r]).unwrap(), [3.0; 4]);
    }
    assert_eq!(code(group_end()), ncclResult_t::ncclInvalidUsage, "end without start");
}

#[test]
fn all_reduce_avg_in_f32_and_f64() {
    let n = 64;
    let comms = init_all(&[0, 1]);
    let results = {
        let comms = comms.clone();
        on_threads(2, move |rank| {
            let stream = ctx(rank).new_stream().unwrap();
            let x32 = data(rank, n);
            let x64: Vec<f64> = x32.iter().map(|&v| v as f64 * 1.000_000_1).collect();
            let send32 = stream.clone_htod(&x32).unwrap();
            let mut recv32 = stream.alloc_zeros::<f32>(n).unwrap();
            let send64 = stream.clone_htod(&x64).unwrap();
            let mut recv64 = stream.alloc_zeros::<f64>(n).unwrap();
            let a = all_reduce(comms[rank], &stream, &send32, &mut recv32, n, ncclRedOp_t::ncclAvg);
            let b = all_reduce(comms[rank], &stream, &send64, &mut recv64, n, ncclRedOp_t::ncclAvg);
            (a, b, stream.clone_dtoh(&recv32).unwrap(), stream.clone_dtoh(&recv64).unwrap())
        })
    };
    let (d0, d1) = (data(0, n), data(1, n));
    let want32: Vec<f32> = d0.iter().zip(&d1).map(|(a, b)| (a + b) / 2.0).collect();
    let want64: Vec<f64> =
        d0.iter().zip(&d1).map(|(&a, &b)| (a as f64 * 1.000_000_1 + b as f64 * 1.000_000_1) / 2.0).collect();
    for (a, b, got32, got64) in results {
        assert_eq!((a, b), (ncclResult_t::ncclSuccess, ncclResult_t::ncclSuccess));
        assert_eq!(got32, want32);
        assert_eq!(got64, want64);
    }
    destroy(&comms);
}

/// Integer types and f64 under every operator, against a CPU reduction in rank order.
#[test]
fn integer_and_f64_types_under_every_operator_match_the_cpu() {
    fn check<T>(vals: [[T; 4]; 2], want: [[T; 4]; 5])
    where
        T: NcclType + DeviceRepr + cudarc::driver::ValidAsZeroBits + Copy + PartialEq + std::fmt::Debug,
    {
        let streams: Vec<_> = (0..2).map(|i| ctx(i).new_stream().unwrap()).collect();
        let comms = init_all(&[0, 1]);
        let ops = [
            ncclRedOp_t::ncclSum,
            ncclRedOp_t::ncclProd,
            ncclRedOp_t::ncclMax,
            ncclRedOp_t::ncclMin,
            ncclRedOp_t::ncclAvg,
        ];
        let sends: Vec<_> = (0..2).map(|r| streams[r].clone_htod(&vals[r]).unwrap()).collect();
        let mut recvs: Vec<Vec<CudaSlice<T>>> =
            (0..2).map(|r| (0..5).map(|_| streams[r].alloc_zeros::<T>(4).unwrap()).collect()).collect();
        group_start().unwrap();
        for (r, recv) in recvs.iter_mut().enumerate() {
            for (o, op) in ops.iter().enumerate() {
                let rc = all_reduce(comms[r], &streams[r], &sends[r], &mut recv[o], 4, *op);
                assert_eq!(rc, ncclResult_t::ncclSuccess);
            }
        }
        group_end().unwrap();
        for r in 0..2 {
            for (o, op) in ops.iter().enumerate() {
                let got = streams[r].clone_dtoh(&recvs[r][o]).unwrap();
                assert_eq!(got, want[o], "{:?} {op:?} rank {r}", T::as_nccl_type());
            }
        }
        destroy(&comms);
    }
    check::<i32>(
        [[1, -7, 100, 3], [5, 2, -100, 3]],
        [[6, -5, 0, 6], [5, -14, -10000, 9], [5, 2, 100, 3], [1, -7, -100, 3], [3, -2, 0, 3]],
    );
    check::<i64>(
        [[1 << 40, -1, 9, 0], [3, -1, 9, 7]],
        [
            [(1 << 40) + 3, -2, 18, 7],
            [3 << 40, 1, 81, 0],
            [1 << 40, -1, 9, 7],
            [3, -1, 9, 0],
            [((1 << 40) + 3) / 2, -1, 9, 3],
        ],
    );
    check::<u8>(
        [[200, 1, 16, 0], [100, 2, 16, 9]],
        [[44, 3, 32, 9], [32, 2, 0, 0], [200, 2, 16, 9], [100, 1, 16, 0], [22, 1, 16, 4]],
    );
    check::<f64>(
        [[1.5, -2.0, 0.25, 8.0], [2.0, 3.0, -0.5, 8.0]],
        [
            [3.5, 1.0, -0.25, 16.0],
            [3.0, -6.0, -0.125, 64.0],
            [2.0, 3.0, 0.25, 8.0],
            [1.5, -2.0, -0.5, 8.0],
            [1.75, 0.5, -0.125, 8.0],
        ],
    );
}

#[test]
fn half_precision_types_are_summed() {
    let streams: Vec<_> = (0..2).map(|i| ctx(i).new_stream().unwrap()).collect();
    let comms = init_all(&[0, 1]);
    // f16: 1.5 + 2.25 = 3.75; bf16: 1.0 + 2.0 = 3.0.
    let cases = [
        (ncclDataType_t::ncclFloat16, [0x3e00u16, 0x4080], 0x4380u16),
        (ncclDataType_t::ncclBfloat16, [0x3f80, 0x4000], 0x4040),
    ];
    for (dtype, vals, want) in cases {
        let sends: Vec<_> = (0..2).map(|r| streams[r].clone_htod(&[vals[r]; 3]).unwrap()).collect();
        let mut recvs: Vec<_> = (0..2).map(|r| streams[r].alloc_zeros::<u16>(3).unwrap()).collect();
        group_start().unwrap();
        for (r, recv) in recvs.iter_mut().enumerate() {
            let (s, _s) = sends[r].device_ptr(&streams[r]);
            let (p, _p) = recv.device_ptr_mut(&streams[r]);
            // SAFETY: three 2-byte elements in each buffer.
            let rc = unsafe {
                result::all_reduce(
                    s as _,
                    p as _,
                    3,
                    dtype,
                    ncclRedOp_t::ncclSum,
                    comms[r] as _,
                    streams[r].cu_stream() as _,
                )
            };
            rc.unwrap();
        }
        group_end().unwrap();
        for r in 0..2 {
            assert_eq!(streams[r].clone_dtoh(&recvs[r]).unwrap(), [want; 3], "{dtype:?}");
        }
    }
    destroy(&comms);
}

#[test]
fn broadcast_from_rank_one() {
    let n = 100;
    let streams: Vec<_> = (0..2).map(|i| ctx(i).new_stream().unwrap()).collect();
    let comms = Comm::from_devices(streams.clone()).unwrap();
    let root_data = data(1, n);
    let send = streams[1].clone_htod(&root_data).unwrap();
    let mut recvs: Vec<_> = (0..2).map(|r| streams[r].alloc_zeros::<f32>(n).unwrap()).collect();
    group_start().unwrap();
    for (r, recv) in recvs.iter_mut().enumerate() {
        let src = if r == 1 { Some(&send) } else { None };
        comms[r].broadcast(src, recv, 1).unwrap();
    }
    group_end().unwrap();
    for r in 0..2 {
        assert_eq!(streams[r].clone_dtoh(&recvs[r]).unwrap(), root_data, "rank {r}");
    }

    // In place, from rank 0, a thread per rank with the raw API.
    let comms = init_all(&[0, 1]);
    let results = {
        let comms = comms.clone();
        on_threads(2, move |rank| {
            let stream = ctx(rank).new_stream().unwrap();
            let mut buf = stream.clone_htod(&data(rank, 10)).unwrap();
            let (p, _p) = buf.device_ptr_mut(&stream);
            // SAFETY: ten floats, in place.
            let rc = code(unsafe {
                result::broadcast(
                    p as _,
                    p as _,
                    10,
                    ncclDataType_t::ncclFloat32,
                    0,
                    comms[rank] as _,
                    stream.cu_stream() as _,
                )
            });
            drop(_p);
            (rc, stream.clone_dtoh(&buf).unwrap())
        })
    };
    for (rc, got) in results {
        assert_eq!(rc, ncclResult_t::ncclSuccess);
        assert_eq!(got, data(0, 10));
    }
    destroy(&comms);
}

#[test]
fn reduce_all_gather_and_reduce_scatter() {
    let streams: Vec<_> = (0..2).map(|i| ctx(i).new_stream().unwrap()).collect();
    let comms = Comm::from_devices(streams.clone()).unwrap();
    let sends: Vec<_> =
        (0..2).map(|r| streams[r].clone_htod(&[r as i32 * 10 + 1, r as i32 * 10 + 2, 3, 4]).unwrap()).collect();
    let mut reduced = streams[1].alloc_zeros::<i32>(4).unwrap();
    let mut gathered: Vec<_> = (0..2).map(|r| streams[r].alloc_zeros::<i32>(8).unwrap()).collect();
    let mut scattered: Vec<_> = (0..2).map(|r| streams[r].alloc_zeros::<i32>(2).unwrap()).collect();
    group_start().unwrap();
    for r in 0..2 {
        let dst = if r == 1 { Some(&mut reduced) } else { None };
        comms[r].reduce(&sends[r], dst, &ReduceOp::Max, 1).unwrap();
    }
    for (r, g) in gathered.iter_mut().enumerate() {
        comms[r].all_gather(&sends[r], g).unwrap();
    }
    for (r, s) in scattered.iter_mut().enumerate() {
        comms[r].reduce_scatter(&sends[r], s, &ReduceOp::Sum).unwrap();
    }
    group_end().unwrap();
    assert_eq!(streams[1].clone_dtoh(&reduced).unwrap(), [11, 12, 3, 4]);
    for r in 0..2 {
        assert_eq!(streams[r].clone_dtoh(&gathered[r]).unwrap(), [1, 2, 3, 4, 11, 12, 3, 4]);
    }
    assert_eq!(streams[0].clone_dtoh(&scattered[0]).unwrap(), [12, 14]);
    assert_eq!(streams[1].clone_dtoh(&scattered[1]).unwrap(), [6, 8]);
}

#[test]
fn queued_work_on_the_stream_runs_before_the_collective() {
    let streams: Vec<_> = (0..2).map(|i| ctx(i).new_stream().unwrap()).collect();
    let comms = init_all(&[0, 1]);
    let mut sends: Vec<_> = (0..2).map(|r| streams[r].clone_htod(&[7.0f32; 16]).unwrap()).collect();
    let mut recvs: Vec<_> = (0..2).map(|r| streams[r].alloc_zeros::<f32>(16).unwrap()).collect();
    // Queued (not yet run) memsets: the collective must see their zeros.
    for r in 0..2 {
        streams[r].memset_zeros(&mut sends[r]).unwrap();
    }
    group_start().unwrap();
    for (r, recv) in recvs.iter_mut().enumerate() {
        assert_eq!(
            all_reduce(comms[r], &streams[r], &sends[r], recv, 16, ncclRedOp_t::ncclSum),
            ncclResult_t::ncclSuccess
        );
    }
    group_end().unwrap();
    for r in 0..2 {
        assert_eq!(streams[r].clone_dtoh(&recvs[r]).unwrap(), [0.0; 16]);
    }
    destroy(&comms);
}

#[test]
fn null_stream_means_the_communicators_device() {
    // One thread, whose current context ends up on device 0, drives rank 1
    // on the null stream: NCCL uses the communicator's device, not the thread's.
    let c0 = ctx(0);
    let c1 = ctx(1);
    let comms = init_all(&[0, 1]);
    let (s0, s1) = (c0.default_stream(), c1.default_stream());
    let sends = [s0.clone_htod(&[1.0f32, 2.0]).unwrap(), s1.clone_htod(&[10.0f32, 20.0]).unwrap()];
    let mut recvs = [s0.alloc_zeros::<f32>(2).unwrap(), s1.alloc_zeros::<f32>(2).unwrap()];
    c0.bind_to_thread().unwrap();
    group_start().unwrap();
    for (r, recv) in recvs.iter_mut().enumerate() {
        let stream = if r == 0 { &s0 } else { &s1 };
        let (s, _s) = sends[r].device_ptr(stream);
        let (p, _p) = recv.device_ptr_mut(stream);
        // SAFETY: two floats each.
        unsafe {
            result::all_reduce(
                s as _,
                p as _,
                2,
                ncclDataType_t::ncclFloat32,
                ncclRedOp_t::ncclSum,
                comms[r] as _,
                std::ptr::null_mut(),
            )
        }
        .unwrap();
    }
    group_end().unwrap();
    assert_eq!(s0.clone_dtoh(&recvs[0]).unwrap(), [11.0, 22.0]);
    assert_eq!(s1.clone_dtoh(&recvs[1]).unwrap(), [11.0, 22.0]);
    destroy(&comms);
}

#[test]
fn mismatched_counts_fail_on_every_rank() {
    let comms = init_all(&[0, 1]);
    let results = {
        let comms = comms.clone();
        on_threads(2, move |rank| {
            let stream = ctx(rank).new_stream().unwrap();
            let send = stream.clone_htod(&[1.0f32; 8]).unwrap();
            let mut recv = stream.alloc_zeros::<f32>(8).unwrap();
            let count = if rank == 0 { 8 } else { 7 };
            // Queued: the mismatch shows when the stream runs, in the
            // communicator's asynchronous error, as with NCCL.
            let bad = all_reduce(comms[rank], &stream, &send, &mut recv, count, ncclRedOp_t::ncclSum);
            // The communicator's error is not read here: the other rank's
            // thread may already have synchronised and run the mismatched
            // collective, which sets both ranks' errors (a race that once
            // failed CI).
            // The clique goes on: the next calls match again.
            let good = all_reduce(comms[rank], &stream, &send, &mut recv, 8, ncclRedOp_t::ncclSum);
            stream.synchronize().unwrap();
            (bad, good, async_error(comms[rank] as _), stream.clone_dtoh(&recv).unwrap())
        })
    };
    for (bad, good, after, got) in results {
        assert_eq!((bad, good), (ncclResult_t::ncclSuccess, ncclResult_t::ncclSuccess));
        assert_eq!(after, ncclResult_t::ncclInvalidUsage);
        assert_eq!(got, [2.0; 8]);
    }
    destroy(&comms);
}

#[test]
fn invalid_arguments_are_rejected_at_the_call() {
    let streams: Vec<_> = (0..2).map(|i| ctx(i).new_stream().unwrap()).collect();
    let comms = init_all(&[0, 1]);
    let send = streams[0].clone_htod(&[1u8; 4]).unwrap();
    let mut recv = streams[0].alloc_zeros::<u8>(4).unwrap();
    let (s, _s) = send.device_ptr(&streams[0]);
    let (p, _p) = recv.device_ptr_mut(&streams[0]);
    let stream0 = streams[0].cu_stream() as sys::cudaStream_t;
    let stream1 = streams[1].cu_stream() as sys::cudaStream_t;
    // SAFETY (all calls): the emulator checks every argument before using it.
    unsafe {
        let fp8 = result::all_reduce(
            s as _,
            p as _,
            4,
            ncclDataType_t::ncclFloat8e4m3,
            ncclRedOp_t::ncclSum,
            comms[0] as _,
            stream0,
        );
        assert_eq!(code(fp8), ncclResult_t::ncclInvalidArgument, "fp8 is not emulated");
        let op = result::all_reduce(
            s as _,
            p as _,
            4,
            ncclDataType_t::ncclUint8,
            ncclRedOp_t::ncclNumOps,
            comms[0] as _,
            stream0,
        );
        assert_eq!(code(op), ncclResult_t::ncclInvalidArgument, "custom operators are not emulated");
        let overrun = result::all_reduce(
            s as _,
            p as _,
            5,
            ncclDataType_t::ncclUint8,
            ncclRedOp_t::ncclSum,
            comms[0] as _,
            stream0,
        );
        assert_eq!(code(overrun), ncclResult_t::ncclInvalidArgument, "5 bytes of a 4-byte buffer");
        let wrong_dev = result::all_reduce(
            s as _,
            p as _,
            4,
            ncclDataType_t::ncclUint8,
            ncclRedOp_t::ncclSum,
            comms[1] as _,
            streams[1].cu_stream() as _,
        );
        assert_eq!(code(wrong_dev), ncclResult_t::ncclInvalidArgument, "device 0 buffers on rank 1");
        let wrong_stream = result::all_reduce(
            s as _,
            p as _,
            4,
            ncclDataType_t::ncclUint8,
            ncclRedOp_t::ncclSum,
            comms[0] as _,
            stream1,
        );
        assert_eq!(code(wrong_stream), ncclResult_t::ncclInvalidArgument, "a device 1 stream on rank 0");
        let root = result::broadcast(s as _, p as _, 4, ncclDataType_t::ncclUint8, 2, comms[0] as _, stream0);
        assert_eq!(code(root), ncclResult_t::ncclInvalidArgument, "root 2 of 2 ranks");
        // A failed call abandons its group.
        group_start().unwrap();
        let fp8 = result::all_reduce(
            s as _,
            p as _,
            4,
            ncclDataType_t::ncclFloat8e5m2,
            ncclRedOp_t::ncclSum,
            comms[0] as _,
            stream0,
        );
        assert_eq!(code(fp8), ncclResult_t::ncclInvalidArgument);
        assert_eq!(code(group_end()), ncclResult_t::ncclInvalidArgument);
    }
    destroy(&comms);
}

#[test]
fn abort_wakes_a_waiting_rank() {
    let comms = init_all(&[0, 1]);
    let waiter = comms[0];
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let stream = ctx(0).new_stream().unwrap();
        let send = stream.clone_htod(&[1.0f32; 4]).unwrap();
        let mut recv = stream.alloc_zeros::<f32>(4).unwrap();
        // Queued at once; the synchronisation waits, since rank 1 never calls.
        let first = all_reduce(waiter, &stream, &send, &mut recv, 4, ncclRedOp_t::ncclSum);
        stream.synchronize().unwrap();
        let later = all_reduce(waiter, &stream, &send, &mut recv, 4, ncclRedOp_t::ncclSum);
        let _ = tx.send((first, later));
    });
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: a live communicator, aborted once.
    unsafe { result::comm_abort(comms[1] as sys::ncclComm_t) }.unwrap();
    let (first, later) = rx.recv().expect("the waiting rank was not woken");
    assert_eq!(first, ncclResult_t::ncclSuccess, "queued");
    assert_eq!(later, ncclResult_t::ncclRemoteError, "the clique stays broken");
    assert_eq!(async_error(comms[0] as _), ncclResult_t::ncclRemoteError);
    // SAFETY: as above; the aborted handle is detected.
    unsafe {
        result::comm_abort(comms[0] as sys::ncclComm_t).unwrap();
        assert_eq!(
            code(result::comm_abort(comms[1] as sys::ncclComm_t)),
            ncclResult_t::ncclInvalidArgument,
            "aborted twice"
        );
    }
}

#[test]
fn destroying_a_rank_others_wait_for_wakes_them() {
    let comms = init_all(&[0, 1]);
    let waiter = comms[1];
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let stream = ctx(1).new_stream().unwrap();
        let send = stream.clone_htod(&[1.0f64; 4]).unwrap();
        let mut recv = stream.alloc_zeros::<f64>(4).unwrap();
        let queued = all_reduce(waiter, &stream, &send, &mut recv, 4, ncclRedOp_t::ncclSum);
        stream.synchronize().unwrap();
        let _ = tx.send((queued, async_error(waiter as _)));
    });
    std::thread::sleep(Duration::from_millis(200));
    destroy(&comms[..1]);
    let (queued, rc) = rx.recv().expect("the waiting rank was not woken");
    assert_eq!((queued, rc), (ncclResult_t::ncclSuccess, ncclResult_t::ncclRemoteError));
    destroy(&comms[1..]);
}

/// A single thread queues both ranks' calls, then reads one rank's result
/// from a stream that does not wait for the collective: it is not there
/// yet. After synchronising, it is.
#[test]
fn a_collective_runs_when_its_stream_runs() {
    let streams: Vec<_> = (0..2).map(|i| ctx(i).new_stream().unwrap()).collect();
    let comms = init_all(&[0, 1]);
    let sends: Vec<_> = (0..2).map(|r| streams[r].clone_htod(&[1.0f32 + r as f32; 4]).unwrap()).collect();
    let mut recvs: Vec<_> = (0..2).map(|r| streams[r].alloc_zeros::<f32>(4).unwrap()).collect();
    let other = ctx(0).new_stream().unwrap();
    let raw = {
        let (raw, _record) = recvs[0].device_ptr(&streams[0]);
        raw
    };
    for s in &streams {
        s.synchronize().unwrap();
    }
    group_start().unwrap();
    for (r, recv) in recvs.iter_mut().enumerate() {
        assert_eq!(
            all_reduce(comms[r], &streams[r], &sends[r], recv, 4, ncclRedOp_t::ncclSum),
            ncclResult_t::ncclSuccess
        );
    }
    group_end().unwrap();
    let mut early = vec![9.0f32; 4];
    // SAFETY: `raw` holds 4 floats; a copy into pageable memory completes before returning.
    unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut early, raw, other.cu_stream()) }.unwrap();
    assert_eq!(early, [0.0; 4], "the collective ran before its stream was synchronised");
    // Synchronising rank 0's stream runs rank 1's queued call too.
    assert_eq!(streams[0].clone_dtoh(&recvs[0]).unwrap(), [3.0; 4]);
    assert_eq!(streams[1].clone_dtoh(&recvs[1]).unwrap(), [3.0; 4]);
    destroy(&comms);
}

// ---------------------------------------------------------------------------
// Across processes: each rank is a child process running this test binary's
// `net_rank` test with its role in the environment.

/// The parts of a child's role, from the environment.
fn role() -> Option<(String, usize, usize, sys::ncclUniqueId)> {
    let scenario = std::env::var("EMU_NET_SCENARIO").ok()?;
    let rank = std::env::var("EMU_NET_RANK").ok()?.parse().ok()?;
    let device = std::env::var("EMU_NET_DEVICE").ok()?.parse().ok()?;
    let hex = std::env::var("EMU_NET_ID").ok()?;
    let mut id = sys::ncclUniqueId { internal: [0; 128] };
    for (i, slot) in id.internal.iter_mut().enumerate() {
        *slot = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()? as _;
    }
    Some((scenario, rank, device, id))
}

/// Runs `scenario` as two ranks in two processes, on devices `devices`, and
/// returns each one's output, failing if either takes more than a minute.
fn two_processes(scenario: &str, devices: [usize; 2]) -> Vec<(bool, String)> {
    let id = result::get_uniqueid().expect("ncclGetUniqueId");
    let hex: String = id.internal.iter().map(|&b| format!("{:02x}", b as u8)).collect();
    let children: Vec<_> = (0..2)
        .map(|rank| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "net_rank", "--nocapture", "--test-threads=1"])
                .env("EMU_NET_SCENARIO", scenario)
                .env("EMU_NET_RANK", rank.to_string())
                .env("EMU_NET_DEVICE", devices[rank].to_string())
                .env("EMU_NET_ID", &hex)
                .env("DEVTENSOR_EMU_NCCL_HANG_S", "20")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start a rank")
        })
        .collect();
    let start = std::time::Instant::now();
    children
        .into_iter()
        .map(|mut child| {
            while child.try_wait().unwrap().is_none() {
                if start.elapsed() > Duration::from_secs(60) {
                    let _ = child.kill();
                    panic!("a rank of {scenario} did not exit within a minute");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
            (out.status.success(), text)
        })
        .collect()
}

/// A non-blocking `ncclCommInitRankConfig`, polled until every rank joined.
fn join(rank: usize, id: sys::ncclUniqueId) -> Result<sys::ncclComm_t, ncclResult_t> {
    // SAFETY: an all-zero config is valid bytes; the fields NCCL reads are set below.
    let mut config: sys::ncclConfig_t = unsafe { std::mem::zeroed() };
    config.size = std::mem::size_of::<sys::ncclConfig_t>();
    config.magic = 0xcafe_beef;
    config.version = 23000;
    config.blocking = 0;
    let mut comm = std::ptr::null_mut();
    // SAFETY: `comm` and `config` outlive the call.
    let started = unsafe { sys::ncclCommInitRankConfig(&mut comm, 2, id, rank as i32, &mut config) };
    assert_eq!(started, ncclResult_t::ncclInProgress, "a non-blocking init returns at once");
    loop {
        let mut state = ncclResult_t::ncclSuccess;
        // SAFETY: `comm` is the communicator being made.
        unsafe { sys::ncclCommGetAsyncError(comm, &mut state) };
        match state {
            ncclResult_t::ncclInProgress => std::thread::sleep(Duration::from_millis(1)),
            ncclResult_t::ncclSuccess => return Ok(comm),
            error => return Err(error),
        }
    }
}

fn async_error(comm: sys::ncclComm_t) -> ncclResult_t {
    let mut state = ncclResult_t::ncclSuccess;
    // SAFETY: a live communicator.
    unsafe { sys::ncclCommGetAsyncError(comm, &mut state) };
    state
}

/// One rank of a cross-process scenario; does nothing unless started as one.
#[test]
fn net_rank() {
    let Some((scenario, rank, device, id)) = role() else { return };
    let ctx = ctx(device);
    ctx.bind_to_thread().unwrap();
    let comm = match join(rank, id) {
        Ok(comm) => comm,
        Err(error) => {
            println!("rank {rank}: join failed with {error:?}");
            std::process::exit(3);
        }
    };
    let stream = ctx.default_stream();
    let n = if scenario == "mismatch" && rank == 1 { 8 } else { 4 };
    let send = stream.clone_htod(&data(rank, 8)).unwrap();
    let mut recv = stream.alloc_zeros::<f32>(8).unwrap();
    // (Made now: a new stream starts after the default stream's work.)
    let other = ctx.new_stream().unwrap();
    let raw = {
        let (raw, _record) = recv.device_ptr(&stream);
        raw
    };
    stream.synchronize().unwrap();
    if scenario == "peer_exits" && rank == 1 {
        std::process::exit(0);
    }
    if scenario == "peer_exits" {
        // What a watchdog does: abort while the collective waits for the dead rank.
        let comm_addr = comm as usize;
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            // SAFETY: the communicator is live until aborted here.
            unsafe { result::comm_abort(comm_addr as sys::ncclComm_t) }.unwrap();
        });
    }
    let called = all_reduce(comm as usize, &stream, &send, &mut recv, n, ncclRedOp_t::ncclSum);
    assert_eq!(called, ncclResult_t::ncclSuccess, "a collective's errors are asynchronous");
    // Nothing has run yet: the collective is queued on the stream. Another
    // stream that does not wait for it reads the receive buffer unchanged.
    assert_eq!(async_error(comm), ncclResult_t::ncclSuccess);
    if scenario == "sum" {
        let mut early = vec![1.0f32; 8];
        // SAFETY: `raw` holds 8 floats; the copy into pageable memory completes before returning.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut early, raw, other.cu_stream()) }.unwrap();
        assert_eq!(early, vec![0.0; 8], "the collective ran before its stream was synchronised");
    }
    stream.synchronize().unwrap();
    if scenario == "peer_exits" {
        println!("rank {rank}: the wait ended after the abort");
        return;
    }
    let error = async_error(comm);
    if error != ncclResult_t::ncclSuccess {
        println!("rank {rank}: collective failed with {error:?}");
        std::process::exit(4);
    }
    let got = stream.clone_dtoh(&recv).unwrap();
    let want: Vec<f32> = (0..8).map(|i| if i < n { data(0, 8)[i] + data(1, 8)[i] } else { 0.0 }).collect();
    assert_eq!(got, want);
    // SAFETY: destroyed once, after its last use.
    unsafe { result::comm_destroy(comm) }.unwrap();
    println!("rank {rank}: sum ok");
}

#[test]
fn ranks_in_two_processes_sum_through_a_queued_collective() {
    let outs = two_processes("sum", [0, 1]);
    for (rank, (ok, text)) in outs.iter().enumerate() {
        assert!(*ok && text.contains(&format!("rank {rank}: sum ok")), "rank {rank}:\n{text}");
    }
}

#[test]
fn mismatched_calls_across_processes_fail_asynchronously_on_both() {
    for (rank, (ok, text)) in two_processes("mismatch", [0, 1]).iter().enumerate() {
        assert!(!*ok && text.contains("ncclInvalidUsage"), "rank {rank}:\n{text}");
        assert!(text.contains("rank 1 called ncclAllReduce(count 8"), "rank {rank}:\n{text}");
    }
}

#[test]
fn two_ranks_on_one_device_are_a_duplicate_gpu() {
    for (rank, (ok, text)) in two_processes("sum", [1, 1]).iter().enumerate() {
        assert!(!*ok && text.contains("duplicate GPU detected"), "rank {rank}:\n{text}");
    }
}

#[test]
fn abort_ends_a_wait_for_a_rank_that_exited() {
    let outs = two_processes("peer_exits", [0, 1]);
    assert!(outs[0].0 && outs[0].1.contains("the wait ended after the abort"), "{}", outs[0].1);
}
