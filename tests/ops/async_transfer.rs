//! Asynchronous transfers (`to_async`, `PinnedTensor`, `PendingTransfer`)
//! to and from every device, checked against the data sent.
//!
//! Besides round trips on random shapes and layouts, these tests provoke the
//! races that a missing synchronisation would cause, in a form the emulated
//! GPU exposes deterministically (it runs queued work only when something
//! synchronises): refilling a staging buffer while an upload from it is in
//! flight, reusing an upload's destination while kernels still read it,
//! downloading values that queued kernels have not yet computed, and
//! dropping transfers without joining them.
//!
//! Page-locked memory needs a CUDA driver, so without one the `Cpu`
//! instances check only that the error is clear.

use crate::common::*;
use devtensor::{Cpu, Cuda, Device, Error, PinnedTensor, Tensor};
use proptest::prelude::*;

/// Whether page-locked memory can be had (a driver, real or emulated).
fn pinning_available() -> bool {
    cuda_ready::<0>()
}

#[test]
fn without_a_driver_pinning_and_async_uploads_are_clear_errors() {
    if Cuda::<0>::is_available() {
        return;
    }
    let x = Tensor::<Cpu>::ones([2, 3]);
    for err in [x.try_pin_memory().unwrap_err(), x.try_to_async::<Cuda<0>>().unwrap_err()] {
        assert!(matches!(err, Error::DeviceUnavailable { .. }), "{err}");
        assert!(err.to_string().contains("Cuda<0>"), "{err}");
    }
    // Nothing to stage: a move to the same device needs no driver.
    assert_eq!(x.to_async::<Cpu>().wait().to_vec(), vec![1.0; 6]);
}

device_proptests! {
    cases = 24;

    fn uploads_arrive_intact<D>((dims, data) in shaped_data(4, 6), layout in variant()) {
        if !pinning_available() {
            return Ok(());
        }
        let src = tensor_with::<Cpu, f32>(&cast_all::<f32>(&data), &dims, layout);
        let expected = src.to_vec();
        // From pageable memory, any layout: staged, then uploaded.
        let waited: Tensor<D> = src.to_async::<D>().wait();
        prop_assert_eq!(waited.dims(), &dims[..]);
        prop_assert_eq!(waited.to_vec(), expected.clone());
        // From pinned memory, joined: the next kernel runs after the copy.
        let joined: Tensor<D> = src.pin_memory().to_async::<D>().join();
        let doubled: Vec<f32> = expected.iter().map(|x| x * 2.0).collect();
        prop_assert_eq!((&joined * 2.0).to_vec(), doubled);
    }

    fn downloads_see_the_work_queued_before_them<D>((dims, data) in shaped_data(4, 6), layout in variant()) {
        if !pinning_available() {
            return Ok(());
        }
        let x = tensor_with::<D, f32>(&cast_all::<f32>(&data), &dims, layout);
        // Queued, not yet run: the download must wait for it.
        let tripled = &x * 3.0;
        let pending = tripled.to_async::<Cpu>();
        drop(tripled);
        let expected: Vec<f32> = cast_all::<f32>(&data).iter().map(|x| x * 3.0).collect();
        let back = pending.wait();
        prop_assert_eq!(back.dims(), &dims[..]);
        prop_assert_eq!(back.to_vec(), expected.clone());
        // A non-contiguous view downloads its own elements, row-major.
        if dims.len() >= 2 {
            let t = x.transpose(0, -1);
            prop_assert_eq!(t.to_async::<Cpu>().wait().to_vec(), t.to_vec());
        }
    }
}

/// Moves between the two GPUs, both ways, with queued producers.
#[test]
fn peer_transfers_between_gpus() {
    if !(cuda_ready::<0>() && cuda_ready::<1>()) {
        return;
    }
    let data: Vec<f64> = (0..3000).map(|i| i as f64 * 0.5).collect();
    let a = Tensor::<Cuda<0>, f64>::from_slice(&data, [30, 100]);
    let on_1: Tensor<Cuda<1>, f64> = (&a + 1.0).to_async::<Cuda<1>>().join();
    let expected: Vec<f64> = data.iter().map(|x| x + 1.0).collect();
    assert_eq!(on_1.to_vec(), expected);
    let back: Tensor<Cuda<0>, f64> = on_1.t().to_async::<Cuda<0>>().wait();
    assert_eq!(back.to_vec(), on_1.t().to_vec());
}

fn check_restaging_keeps_transfers_in_flight_intact<D: Device>() {
    if !pinning_available() {
        return;
    }
    let (a, b) = (Tensor::<Cpu>::arange(0.0, 5000.0), Tensor::<Cpu>::arange(5000.0, 10000.0));
    let mut staging = PinnedTensor::<f32>::zeros([5000]);
    staging.copy_from(&a);
    let first = staging.to_async::<D>();
    // Refilled while `first` may still be reading it.
    staging.copy_from(&b);
    let second = staging.to_async::<D>();
    assert_eq!(staging.to_tensor().to_vec(), b.to_vec());
    assert_eq!(second.join().to_vec(), b.to_vec());
    assert_eq!(first.join().to_vec(), a.to_vec());
}

fn check_upload_destinations_are_not_reused_under_running_kernels<D: Device>() {
    if !pinning_available() {
        return;
    }
    // Each upload's destination is dropped while the kernel reading it is
    // still queued; the next uploads must not land in it before that kernel
    // has run.
    // The reading kernel is the last one queued before the drop.
    let batches: Vec<Tensor<Cpu>> = (0..12).map(|i| Tensor::<Cpu>::full([4096], i as f32)).collect();
    let pinned: Vec<PinnedTensor> = batches.iter().map(Tensor::pin_memory).collect();
    let mut results = Vec::new();
    for p in &pinned {
        let x = p.to_async::<D>().join();
        results.push(&x * 2.0);
        drop(x);
    }
    for (i, doubled) in results.iter().enumerate() {
        assert_eq!(doubled.to_vec(), vec![2.0 * i as f32; 4096], "batch {i}");
    }
}

fn check_dropped_transfers_are_harmless<D: Device>() {
    if !pinning_available() {
        return;
    }
    let x = Tensor::<Cpu, i64>::arange(0, 10_000);
    for _ in 0..4 {
        let _ = x.to_async::<D>(); // never joined
    }
    let on_d = x.to_async::<D>().join();
    for _ in 0..4 {
        let _ = on_d.to_async::<Cpu>(); // never waited for
    }
    assert_eq!(on_d.to_async::<Cpu>().wait().to_vec(), x.to_vec());
}

fn check_all_element_types_and_empty_tensors<D: Device>() {
    if !pinning_available() {
        return;
    }
    let labels = Tensor::<Cpu, i64>::from_vec(vec![3, -1, 4, 1 << 40], [2, 2]);
    assert_eq!(labels.to_async::<D>().join().to_async::<Cpu>().wait().to_vec(), labels.to_vec());
    let mask = Tensor::<Cpu, u8>::from_vec(vec![1, 0, 1], [3]);
    assert_eq!(mask.pin_memory().to_async::<D>().wait().to_vec(), vec![1, 0, 1]);
    let x = Tensor::<Cpu, f64>::from_vec(vec![0.1, -2.5], [2]);
    assert_eq!(x.to_async::<D>().wait().to_vec(), vec![0.1, -2.5]);
    let empty = Tensor::<Cpu>::zeros([0, 3]);
    let there = empty.to_async::<D>().join();
    assert_eq!(there.dims(), &[0, 3]);
    assert_eq!(there.to_async::<Cpu>().wait().dims(), &[0, 3]);
}

fn check_completion_can_be_polled<D: Device>() {
    if !pinning_available() {
        return;
    }
    let x = Tensor::<D>::ones([1 << 16]);
    let pending = (&x * 2.0).to_async::<Cpu>();
    if let Some(n) = <D as devtensor::Backend>::cuda_ordinal() {
        match n {
            0 => Cuda::<0>::synchronize().unwrap(),
            _ => Cuda::<1>::synchronize().unwrap(),
        }
        assert!(pending.is_complete(), "a device synchronisation also waits for its transfers");
    }
    assert_eq!(pending.wait().sum().item(), 2.0 * (1 << 16) as f32);
}

fn check_pinned_tensor_api<D: Device>() {
    if !pinning_available() {
        return;
    }
    let x = Tensor::<Cpu>::arange(0.0, 12.0).reshape([3, 4]);
    let pinned = x.t().pin_memory();
    assert_eq!(pinned.dims(), &[4, 3]);
    assert_eq!(pinned.elem_count(), 12);
    assert_eq!(pinned.to_tensor().to_vec(), x.t().to_vec());
    let mut staging = PinnedTensor::<f32>::zeros([3, 4]);
    let err = staging.try_copy_from(&x.t().contiguous()).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    assert!(err.to_string().contains("copy_from") && err.to_string().contains("[4, 3]"), "{err}");
    staging.copy_from(&x);
    assert_eq!(staging.to_async::<D>().wait().to_vec(), x.to_vec());
}

// Each check starts with `pinning_available()`: the `Cpu` instances need a
// driver too, for page-locked memory.
device_tests! {
    restaging_keeps_transfers_in_flight_intact => check_restaging_keeps_transfers_in_flight_intact,
    upload_destinations_are_not_reused_under_running_kernels => check_upload_destinations_are_not_reused_under_running_kernels,
    dropped_transfers_are_harmless => check_dropped_transfers_are_harmless,
    all_element_types_and_empty_tensors => check_all_element_types_and_empty_tensors,
    completion_can_be_polled => check_completion_can_be_polled,
    pinned_tensor_api => check_pinned_tensor_api,
}

/// Loader threads hand pinned batches and transfers in flight to the
/// training thread.
#[test]
fn pinned_tensors_and_pending_transfers_cross_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<PinnedTensor<f32>>();
    assert_send::<devtensor::PendingTransfer<Cuda<0>, i64>>();
    assert_send::<devtensor::PendingTransfer<Cpu>>();
}
