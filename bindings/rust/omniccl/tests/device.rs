//! The device-buffer API (`omniccl::device`) on a machine without a GPU: a
//! CUDA pointer is an Unsupported error naming the device and the reason,
//! mixing host and CUDA buffers is an invalid argument, and the same calls on
//! host buffers work, with a per-call timeout. (The CUDA data path itself is
//! tested by the C++ `gpu` suites on a GPU machine.)

mod common;

use std::time::{Duration, Instant};

use common::Expect;
use omniccl::device::{CallOptions, CudaStream, Device, DeviceBuffer};
use omniccl::{Communicator, Config, Error, ErrorKind, ReduceOp};

const DEADLINE: Duration = Duration::from_secs(120);

/// True where a CUDA driver's device nodes exist: there the fake pointers
/// below would reach a GPU, so the no-GPU tests say so and stop.
fn gpu_present() -> bool {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        eprintln!("SKIPPED: a GPU is present (/dev/nvidiactl); these tests are for machines without one");
        return true;
    }
    false
}

/// A CUDA buffer at a fake address: never dereferenced, because the library
/// rejects it before any data moves when there is no driver or GPU.
fn fake_cuda(len: usize) -> DeviceBuffer<'static> {
    // SAFETY: see above; gpu_present() guards every use.
    unsafe { DeviceBuffer::from_raw_parts(0x7f00_0000_0000usize as *mut f32, len, Device::Cuda(0)) }
}

fn assert_unsupported_cuda(result: omniccl::Result<()>, call: &str) {
    let err: Error = result.expect_err("a CUDA buffer without a GPU must fail");
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{call}: {err}");
    // Names the device and why it cannot be used (no driver/GPU, or a build
    // without CUDA).
    assert!(err.message().contains("cuda:0"), "{call}: {err}");
    assert!(err.message().contains("no CUDA"), "{call}: {err}");
}

#[test]
fn cuda_pointers_are_unsupported_naming_the_device_and_the_reason() {
    if gpu_present() {
        return;
    }
    common::run(
        "cuda_pointers_are_unsupported_naming_the_device_and_the_reason",
        1,
        DEADLINE,
        |comm| {
            let (a, b) = (fake_cuda(4), fake_cuda(4));
            // SAFETY: NULL is the default stream; a made-up handle never reaches CUDA here.
            let stream = unsafe { CudaStream::from_raw(0x1234usize as *mut _) };
            let opts = CallOptions::new().stream(stream);
            let none = CallOptions::new();
            assert_unsupported_cuda(comm.all_reduce_device(&a, &b, ReduceOp::Sum, &opts), "all_reduce");
            assert_unsupported_cuda(
                comm.all_reduce_device(&a, &a, ReduceOp::Avg, &none),
                "all_reduce in place",
            );
            assert_unsupported_cuda(comm.broadcast_device(&a, 0, &opts), "broadcast");
            assert_unsupported_cuda(comm.reduce_device(&a, Some(&b), ReduceOp::Max, 0, &opts), "reduce");
            assert_unsupported_cuda(comm.scatter_device(Some(&a), &b, 0, &opts), "scatter");
            assert_unsupported_cuda(comm.gather_device(&a, Some(&b), 0, &opts), "gather");
            assert_unsupported_cuda(comm.all_gather_device(&a, &b, &opts), "all_gather");
            assert_unsupported_cuda(
                comm.reduce_scatter_device(&a, &b, ReduceOp::Sum, &opts),
                "reduce_scatter",
            );
            assert_unsupported_cuda(comm.all_to_all_device(&a, &b, &opts), "all_to_all");
            assert_unsupported_cuda(comm.all_gatherv_device(&a, &b, &[4], None, &opts), "all_gatherv");
            assert_unsupported_cuda(
                comm.all_to_allv_device(&a, &[4], None, &b, &[4], None, &opts),
                "all_to_allv",
            );
            assert_unsupported_cuda(comm.gatherv_device(&a, Some(&b), &[4], None, 0, &opts), "gatherv");
            assert_unsupported_cuda(comm.scatterv_device(Some(&a), &[4], None, &b, 0, &opts), "scatterv");
            // Non-blocking: the start fails, no request is left behind.
            let mut c = fake_cuda(4);
            let err = comm
                .scope(|s| s.iall_reduce_device(&a, &mut c, ReduceOp::Sum, &opts).map(drop))
                .expect_err("a CUDA buffer without a GPU");
            assert_unsupported_cuda(Err(err), "iall_reduce_device");
            // The communicator is still usable afterwards.
            let mut x = [2i32; 3];
            comm.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
            assert_eq!(x, [2; 3]);
        },
    );
}

#[test]
fn host_and_cuda_buffers_in_one_call_are_an_invalid_argument() {
    if gpu_present() {
        return;
    }
    common::run(
        "host_and_cuda_buffers_in_one_call_are_an_invalid_argument",
        1,
        DEADLINE,
        |comm| {
            let mut host = [0.0f32; 4];
            let h = DeviceBuffer::host(&mut host);
            let d = fake_cuda(4);
            let opts = CallOptions::new();
            for (call, result) in [
                ("all_reduce", comm.all_reduce_device(&h, &d, ReduceOp::Sum, &opts)),
                ("all_gather", comm.all_gather_device(&d, &h, &opts)),
                ("reduce", comm.reduce_device(&h, Some(&d), ReduceOp::Sum, 0, &opts)),
                ("scatter", comm.scatter_device(Some(&d), &h, 0, &opts)),
                (
                    "all_to_allv",
                    comm.all_to_allv_device(&h, &[4], None, &d, &[4], None, &opts),
                ),
            ] {
                let err = result.expect_err("host and CUDA buffers mixed");
                assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{call}: {err}");
                assert!(err.message().contains("different devices"), "{call}: {err}");
                assert!(
                    err.message().contains("cpu") && err.message().contains("cuda:0"),
                    "{call}: {err}"
                );
            }
        },
    );
}

#[test]
fn device_calls_on_host_buffers_are_correct() {
    common::run("device_calls_on_host_buffers_are_correct", 2, DEADLINE, |comm| {
        let r = comm.rank();
        let opts = CallOptions::new().timeout(Duration::from_secs(20));
        // all_reduce: 1 + 2 on both ranks.
        let mut send = [r as i64 + 1; 5];
        let mut recv = [0i64; 5];
        {
            let (s, d) = (DeviceBuffer::host(&mut send), DeviceBuffer::host(&mut recv));
            comm.all_reduce_device(&s, &d, ReduceOp::Sum, &opts).unwrap();
        }
        assert_eq!(recv, [3; 5]);
        // broadcast from rank 1.
        let mut b = [if r == 1 { 9u8 } else { 0 }; 3];
        comm.broadcast_device(&DeviceBuffer::host(&mut b), 1, &opts).unwrap();
        assert_eq!(b, [9; 3]);
        // reduce to rank 0 (None elsewhere).
        let mut mine = [r as f64 + 0.5; 2];
        let mut total = [0.0f64; 2];
        {
            let s = DeviceBuffer::host(&mut mine);
            let t = DeviceBuffer::host(&mut total);
            let recv = if r == 0 { Some(&t) } else { None };
            comm.reduce_device(&s, recv, ReduceOp::Sum, 0, &opts).unwrap();
        }
        assert_eq!(total, if r == 0 { [2.0; 2] } else { [0.0; 2] });
        // gatherv to rank 1: rank i contributes i + 1 values.
        let mut part = vec![r as u32 + 10; r + 1];
        let mut all = [0u32; 3];
        {
            let s = DeviceBuffer::host(&mut part);
            let a = DeviceBuffer::host(&mut all);
            let recv = if r == 1 { Some(&a) } else { None };
            comm.gatherv_device(&s, recv, &[1, 2], None, 1, &opts).unwrap();
        }
        assert_eq!(all, if r == 1 { [10, 11, 11] } else { [0; 3] });
        comm.barrier_with(&opts).unwrap();
        // A missing root buffer is named before anything is sent.
        let mut x = [0u8; 2];
        let err = comm
            .reduce_device(&DeviceBuffer::host(&mut x), None, ReduceOp::Sum, r, &opts)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(
            err.message().contains("root") && err.message().contains("recv"),
            "{err}"
        );
    });
}

#[test]
fn non_blocking_device_calls_on_host_buffers_are_correct() {
    common::run(
        "non_blocking_device_calls_on_host_buffers_are_correct",
        3,
        DEADLINE,
        |comm| {
            let r = comm.rank();
            let opts = CallOptions::new().timeout(Duration::from_secs(20));
            let mut x = [r as i32 + 1; 4];
            let mut mine = vec![r as u16; r + 1];
            let mut all = [9u16; 7];
            let mut y = [r as f32; 2];
            {
                let mut xb = DeviceBuffer::host(&mut x);
                let send = DeviceBuffer::host(&mut mine);
                let mut recv = DeviceBuffer::host(&mut all);
                let mut yb = DeviceBuffer::host(&mut y);
                comm.scope(|s| {
                    let a = s.iall_reduce_device_in_place(&mut xb, ReduceOp::Prod, &opts)?;
                    let b = s.iall_gatherv_device(&send, &mut recv, &[1, 2, 3], Some(&[6, 3, 0]), &opts)?;
                    let c = s.ibroadcast_device(&mut yb, 2, &opts)?;
                    s.ibarrier_with(&opts)?.wait()?;
                    a.wait()?;
                    b.wait()?;
                    c.wait()
                })
                .unwrap();
            }
            assert_eq!(x, [6; 4]);
            assert_eq!(all, [2, 2, 2, 1, 1, 9, 0]);
            assert_eq!(y, [2.0; 2]);
        },
    );
}

#[test]
fn a_per_call_timeout_ends_a_host_call_before_the_communicators_deadline() {
    let name = "a_per_call_timeout_ends_a_host_call_before_the_communicators_deadline";
    common::run_expect(
        name,
        2,
        DEADLINE,
        |_| Expect::Success,
        &[],
        |rank| {
            // The communicator's own deadline is long; the call's is short.
            let config = Config::new().timeout(Duration::from_secs(60));
            let comm = Communicator::init_with_config(common::init_method(), &config).unwrap();
            if rank == 0 {
                let mut buf = [1.0f32; 8];
                let opts = CallOptions::new().timeout(Duration::from_millis(800));
                let start = Instant::now();
                let err = comm
                    .all_reduce_device(
                        &DeviceBuffer::host(&mut buf),
                        &DeviceBuffer::host(&mut [0.0f32; 8]),
                        ReduceOp::Sum,
                        &opts,
                    )
                    .expect_err("rank 1 never calls");
                let took = start.elapsed();
                eprintln!("rank 0: after {took:?}: {err}");
                assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
                assert!(err.message().contains("rank 1"), "{err}");
                assert!(
                    took < Duration::from_secs(30),
                    "took {took:?}: the call's deadline was not used"
                );
            } else {
                std::thread::sleep(Duration::from_secs(4));
            }
            comm.abort().unwrap();
        },
    );
}
