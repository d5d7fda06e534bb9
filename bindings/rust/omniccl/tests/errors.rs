//! Error paths: wrong lengths are caught before anything is sent, mismatched
//! calls fail on every rank naming the field, a killed peer is a peer failure
//! and dropping the communicator afterwards returns promptly.

mod common;

use std::time::{Duration, Instant};

use common::Expect;
use omniccl::{Communicator, Config, ErrorKind, InitMethod, ReduceOp, UniqueId};

const DEADLINE: Duration = Duration::from_secs(120);

/// Asserts an InvalidArgument error whose message contains every `needle`.
fn assert_invalid(result: omniccl::Result<()>, needles: &[&str]) {
    let err = result.expect_err("a wrong call must fail");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    for n in needles {
        assert!(
            err.message().contains(n),
            "message {:?} should name {n:?}",
            err.message()
        );
    }
}

#[test]
fn wrong_lengths_fail_before_anything_is_sent() {
    common::run("wrong_lengths_fail_before_anything_is_sent", 2, DEADLINE, |comm| {
        let r = comm.rank();
        let three = [1i32; 3];
        let mut four = [0i32; 4];
        assert_invalid(comm.all_reduce(&three, &mut four, ReduceOp::Sum), &["3", "4"]);
        assert_invalid(comm.all_gather(&three, &mut four), &["4", "3", "2 ranks"]);
        assert_invalid(comm.reduce_scatter(&three, &mut four, ReduceOp::Sum), &["3", "4"]);
        assert_invalid(comm.all_to_all(&three, &mut four), &["3", "4"]);
        let mut seven = [0i32; 7];
        assert_invalid(comm.gather(&three, Some(&mut seven), r), &["7", "3", "2 ranks"]);
        assert_invalid(comm.reduce(&three, Some(&mut four), ReduceOp::Sum, r), &["3", "4"]);
        assert_invalid(comm.reduce(&three, None, ReduceOp::Sum, r), &["root", "recv"]);
        assert_invalid(
            comm.all_gatherv(&three, &mut four, &[3], None),
            &["1 entries", "2 ranks"],
        );
        assert_invalid(comm.all_gatherv(&three, &mut four, &[3, 3], None), &["4 elements"]);
        assert_invalid(comm.broadcast(&mut four, 2), &["root 2", "size 2"]);
        assert_invalid(comm.send(&three, 5), &["peer 5"]);

        // Nothing was sent: the next matching call works and is correct.
        let mut x = [r as i32 + 1; 3];
        comm.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
        assert_eq!(x, [3; 3]);
    });
}

#[test]
fn scatter_root_checks_the_send_length() {
    common::run("scatter_root_checks_the_send_length", 1, DEADLINE, |comm| {
        let three = [1u8; 3];
        let mut two = [0u8; 2];
        assert_invalid(comm.scatter(Some(&three), &mut two, 0), &["3", "2 x 1 ranks"]);
        assert_invalid(comm.scatter(None, &mut two, 0), &["root", "send"]);
    });
}

#[test]
fn mismatched_counts_fail_on_every_rank() {
    common::run("mismatched_counts_fail_on_every_rank", 2, DEADLINE, |comm| {
        let n = 4 + comm.rank();
        let mut buf = vec![1.0f64; n];
        let err = comm
            .all_reduce_in_place(&mut buf, ReduceOp::Sum)
            .expect_err("counts differ");
        assert_eq!(err.kind(), ErrorKind::Mismatch, "{err}");
        assert!(["count", "4", "5"].iter().all(|w| err.message().contains(w)), "{err}");
        assert!(
            err.message().contains("rank 0") && err.message().contains("rank 1"),
            "{err}"
        );
        // The communicator is unusable now, and says why.
        let err = comm.barrier().expect_err("failed communicator");
        assert_eq!(err.kind(), ErrorKind::CommFailed, "{err}");
    });
}

#[test]
fn mismatched_reduce_ops_fail_on_every_rank() {
    common::run("mismatched_reduce_ops_fail_on_every_rank", 2, DEADLINE, |comm| {
        let op = if comm.rank() == 0 { ReduceOp::Sum } else { ReduceOp::Max };
        let mut buf = [1u16; 8];
        let err = comm.all_reduce_in_place(&mut buf, op).expect_err("ops differ");
        assert_eq!(err.kind(), ErrorKind::Mismatch, "{err}");
        assert!(err.message().contains("op"), "{err}");
    });
}

#[test]
fn killed_peer_is_a_peer_failure_and_drop_returns() {
    let name = "killed_peer_is_a_peer_failure_and_drop_returns";
    common::run_expect(
        name,
        3,
        DEADLINE,
        |r| if r == 2 { Expect::Die } else { Expect::Success },
        &[],
        |rank| {
            // A long deadline, so that only peer-failure detection can end the wait.
            let config = Config::new().timeout(Duration::from_secs(100));
            let comm = Communicator::init_with_config(common::init_method(), &config).unwrap();
            comm.barrier().unwrap();
            assert!(comm.async_error().unwrap().is_none(), "usable before the failure");
            if rank == 2 {
                std::process::abort(); // dies without a word to its peers
            }
            let start = Instant::now();
            let mut buf = [1.0f32; 1024];
            let err = comm
                .all_reduce_in_place(&mut buf, ReduceOp::Sum)
                .expect_err("a peer died");
            let took = start.elapsed();
            assert_eq!(err.kind(), ErrorKind::PeerFailure, "{err}");
            eprintln!("rank {rank}: {err} (after {took:?})");
            assert!(took < Duration::from_secs(30), "noticing the dead peer took {took:?}");
            let later = comm.async_error().unwrap().expect("the communicator has failed");
            assert_eq!(later.kind(), ErrorKind::PeerFailure, "{later}");
            let start = Instant::now();
            drop(comm);
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "drop took {:?}",
                start.elapsed()
            );
        },
    );
}

#[test]
fn a_rank_that_never_calls_is_a_timeout_naming_it() {
    let name = "a_rank_that_never_calls_is_a_timeout_naming_it";
    common::run_expect(
        name,
        2,
        DEADLINE,
        |_| Expect::Success,
        &[],
        |rank| {
            let config = Config::new().timeout(Duration::from_millis(1500));
            let comm = Communicator::init_with_config(common::init_method(), &config).unwrap();
            if rank == 0 {
                let start = Instant::now();
                let err = comm.barrier().expect_err("rank 1 never arrives");
                assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
                eprintln!("rank 0: {err}");
                assert!(
                    err.message().contains("did not arrive") && err.message().contains("rank 1"),
                    "{err}"
                );
                assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
            } else {
                std::thread::sleep(Duration::from_secs(3));
            }
            comm.abort().unwrap();
        },
    );
}

#[test]
fn unique_id_created_out_of_band() {
    let name = "unique_id_created_out_of_band";
    let env = if common::as_rank().is_none() {
        // The parent makes the id (and serves the rendezvous while it runs).
        let id = UniqueId::new().unwrap();
        let hex: String = id.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
        vec![("OMNICCL_RUST_TEST_UID", hex)]
    } else {
        vec![]
    };
    common::run_expect(
        name,
        2,
        DEADLINE,
        |_| Expect::Success,
        &env,
        |rank| {
            let hex = std::env::var("OMNICCL_RUST_TEST_UID").unwrap();
            let mut bytes = [0u8; 128];
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
            }
            let id = UniqueId::from_bytes(bytes);
            let comm = Communicator::init(InitMethod::UniqueId {
                id,
                rank,
                world_size: 2,
            })
            .unwrap();
            let mut x = [rank as i64 + 1];
            comm.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
            assert_eq!(x, [3]);
        },
    );
}

/// Bad arguments caught in one process: undefined (type, op) pairs, bad
/// configuration, bad init methods.
#[test]
fn bad_arguments_name_what_is_wrong() {
    common::run("bad_arguments_name_what_is_wrong", 1, DEADLINE, |comm| {
        let mut f = [1.0f32; 2];
        let err = comm.all_reduce_in_place(&mut f, ReduceOp::BitXor).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        let mut b = [true; 2];
        let err = comm.all_reduce_in_place(&mut b, ReduceOp::Avg).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        let mut i = [1i32; 2];
        let err = comm.all_reduce_in_place(&mut i, ReduceOp::PremulSum(0.5)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        comm.all_reduce_in_place(&mut i, ReduceOp::PremulSum(3.0)).unwrap();
        assert_eq!(i, [3, 3]);
        assert!(comm.split(Some(u32::MAX), 0).unwrap_err().message().contains("color"));

        // DLPack tensors the library cannot use: a strided view, a GPU pointer.
        use omniccl::dlpack::{DLDataType, DLDevice, DLTensor};
        let mut data = [1.0f32; 4];
        let mut shape = [2i64];
        let mut strides = [2i64];
        let mut t = DLTensor {
            data: data.as_mut_ptr().cast(),
            device: DLDevice {
                device_type: omniccl::sys::kDLCPU,
                device_id: 0,
            },
            ndim: 1,
            dtype: DLDataType {
                code: omniccl::sys::kDLFloat as u8,
                bits: 32,
                lanes: 1,
            },
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: 0,
        };
        // SAFETY: t describes `data` (every other element), alive for the call.
        let err = unsafe { comm.all_reduce_dlpack(&t, &t, ReduceOp::Sum) }.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.message().contains("contiguous"), "{err}");
        t.strides = std::ptr::null_mut();
        t.device.device_type = omniccl::sys::kDLCUDA;
        // SAFETY: the library refuses the device before touching the pointer.
        let err = unsafe { comm.all_reduce_dlpack(&t, &t, ReduceOp::Sum) }.unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Unsupported | ErrorKind::InvalidArgument),
            "{err}"
        );
        assert_eq!(data, [1.0; 4], "a refused call must not write");
    });
    let dir = tempfile::tempdir().unwrap();
    let file = |rank, world_size| InitMethod::File {
        path: dir.path().into(),
        rank,
        world_size,
    };
    let err = Communicator::init_with_config(file(0, 1), &Config::new().transport("carrier-pigeon")).unwrap_err();
    assert!(err.message().contains("carrier-pigeon"), "{err}");
    let err = Communicator::init_with_config(file(0, 1), &Config::new().algorithm("no-such-algo")).unwrap_err();
    assert!(err.message().contains("no-such-algo"), "{err}");
    let err = Communicator::init(file(3, 2)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let err = Communicator::init(InitMethod::UniqueId {
        id: UniqueId::from_bytes([0; 128]),
        rank: 0,
        world_size: 1,
    })
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

#[test]
fn abort_is_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let comm = Communicator::init(InitMethod::File {
        path: dir.path().into(),
        rank: 0,
        world_size: 1,
    })
    .unwrap();
    let start = Instant::now();
    comm.abort().unwrap();
    assert!(start.elapsed() < Duration::from_secs(2));
}
