//! Registered buffers (`Communicator::register_window`, [`Window`]) on
//! communicators without the device path: registering succeeds and changes
//! nothing, deregistering (explicit or by `Drop`) succeeds, and a null or
//! empty buffer is an invalid argument on every rank. (What registration
//! changes on the CUDA IPC path is tested by the C++ `gpu` suites.)

mod common;

use std::time::Duration;

use omniccl::device::DeviceBuffer;
use omniccl::{Communicator, ErrorKind, InitMethod, ReduceOp, Window};

const DEADLINE: Duration = Duration::from_secs(120);

/// A single-rank communicator: it never has the device path (no peers).
fn single(dir: &tempfile::TempDir) -> Communicator {
    Communicator::init(InitMethod::File {
        path: dir.path().into(),
        rank: 0,
        world_size: 1,
    })
    .expect("init")
}

#[test]
fn register_and_deregister_on_a_single_rank() {
    let dir = tempfile::tempdir().unwrap();
    let comm = single(&dir);
    let mut x = vec![1.0f32; 256];
    {
        let w = comm.register_window(&DeviceBuffer::host(&mut x)).expect("register");
        assert_eq!(w.bytes(), 1024);
        assert_ne!(w.as_raw(), 0, "a live window has a handle");
        w.deregister().expect("deregister");
    }
    // Registered through a raw pointer, twice at once, released by Drop (in
    // reverse order of declaration).
    let (a, b) = (x.as_mut_ptr().cast(), 16);
    // SAFETY: `x` outlives both windows.
    let w1 = unsafe { comm.register_window_raw(a, b) }.expect("register 1");
    // SAFETY: as above.
    let w2 = unsafe { comm.register_window_raw(a, 4 * x.len()) }.expect("register 2");
    assert_ne!(w1.as_raw(), w2.as_raw());
    assert!(format!("{w2:?}").contains("bytes: 1024"), "{w2:?}");
    drop(w2);
    drop(w1);
    // The communicator still works afterwards.
    comm.all_reduce_in_place(&mut x, ReduceOp::Sum).expect("all_reduce");
    assert_eq!(x[0], 1.0);
}

#[test]
fn null_or_empty_buffers_are_invalid_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let comm = single(&dir);
    // SAFETY: a null pointer registers nothing; the call fails.
    let err = unsafe { comm.register_window_raw(std::ptr::null_mut(), 64) }.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let mut x = [0u8; 8];
    // SAFETY: `x` outlives the call, which fails (0 bytes).
    let err = unsafe { comm.register_window_raw(x.as_mut_ptr().cast(), 0) }.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let err = comm.register_window(&DeviceBuffer::host::<f32>(&mut [])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    // Nothing was left registered, and the communicator is still usable.
    let w: Window<'_> = comm.register_window(&DeviceBuffer::host(&mut x)).expect("register");
    w.deregister().expect("deregister");
    comm.barrier().expect("barrier");
}

#[test]
fn two_ranks_register_collectively() {
    // Two ranks on one host may get the CUDA IPC path where a GPU is present;
    // there host memory would be refused, so this test is for CPU machines.
    if std::path::Path::new("/dev/nvidiactl").exists() {
        eprintln!("SKIPPED: a GPU is present (/dev/nvidiactl); this test is for machines without one");
        return;
    }
    common::run("two_ranks_register_collectively", 2, DEADLINE, |comm| {
        let mut grads = vec![comm.rank() as f32 + 1.0; 1000 + comm.rank()]; // sizes may differ
        {
            let w = comm.register_window(&DeviceBuffer::host(&mut grads)).expect("register");
            drop(w);
        }
        // A bad argument on one rank fails on every rank, naming it.
        let mut one = [0u8; 4];
        let n = if comm.rank() == 1 { 0 } else { one.len() };
        // SAFETY: `one` outlives the call.
        let err = unsafe { comm.register_window_raw(one.as_mut_ptr().cast(), n) }.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.message().contains("rank 1"), "{err}");
        let w = comm
            .register_window(&DeviceBuffer::host(&mut grads[..1000]))
            .expect("register");
        w.deregister().expect("deregister");
        comm.all_reduce_in_place(&mut grads[..1000], ReduceOp::Sum)
            .expect("all_reduce");
        assert_eq!(grads[0], 3.0);
    });
}
