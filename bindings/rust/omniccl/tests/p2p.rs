//! MPI-style point-to-point across processes: tags matched out of order,
//! any-source receives and their statuses, truncation and type errors that
//! leave the communicator usable, probes, synchronous sends, cancel and
//! matched probes. Every expected value is written out here, not computed
//! by the library.

mod common;

use std::time::{Duration, Instant};

use omniccl::{ErrorKind, PROC_NULL, RecvStatus, ReduceOp, Source, TAG_UB, Tag};

const DEADLINE: Duration = Duration::from_secs(120);

/// The status of a message from `source` with `tag` of `count` elements of
/// `size` bytes.
fn status(source: usize, tag: u32, count: usize, size: usize) -> RecvStatus {
    RecvStatus {
        source: Some(source),
        tag: Some(tag),
        bytes: count * size,
        count,
    }
}

/// Every rank still runs a correct collective afterwards.
fn all_reduce_works(comm: &omniccl::Communicator) {
    let mut x = [comm.rank() as i64 + 1];
    comm.all_reduce_in_place(&mut x, ReduceOp::Sum)
        .expect("all_reduce after the test");
    let n = comm.size() as i64;
    assert_eq!(x, [n * (n + 1) / 2]);
}

#[test]
fn tags_are_matched_out_of_order() {
    common::run("tags_are_matched_out_of_order", 2, DEADLINE, |comm| {
        if comm.rank() == 0 {
            comm.send_tagged(&[10i32, 11], 1, 1).unwrap();
            comm.send_tagged(&[20i32, 21, 22], 1, 2).unwrap();
        } else {
            let mut buf = [0i32; 4];
            // tag 2 first, although tag 1 was sent (and arrived) first
            let st = comm.recv_tagged(&mut buf, 0, 2).unwrap();
            assert_eq!(st, status(0, 2, 3, 4));
            assert_eq!(buf, [20, 21, 22, 0]);
            let st = comm.recv_tagged(&mut buf, 0, 1).unwrap();
            assert_eq!(st, status(0, 1, 2, 4));
            assert_eq!(&buf[..2], &[10, 11]);
        }
        all_reduce_works(&comm);
    });
}

#[test]
fn any_source_any_tag_fill_the_status() {
    common::run("any_source_any_tag_fill_the_status", 3, DEADLINE, |comm| {
        match comm.rank() {
            0 => {
                let mut got = Vec::new();
                for _ in 0..2 {
                    let mut buf = [0u16; 8];
                    let st = comm.recv_tagged(&mut buf, Source::Any, Tag::Any).unwrap();
                    got.push((st, buf));
                }
                got.sort_by_key(|(st, _)| st.source);
                // rank 1 sends 1 element with tag 101, rank 2 sends 2 with tag 102
                assert_eq!(got[0].0, status(1, 101, 1, 2));
                assert_eq!(got[0].1, [1, 0, 0, 0, 0, 0, 0, 0]);
                assert_eq!(got[1].0, status(2, 102, 2, 2));
                assert_eq!(got[1].1, [2, 2, 0, 0, 0, 0, 0, 0]);
            }
            r => comm.send_tagged(&vec![r as u16; r], 0, 100 + r as u32).unwrap(),
        }
        all_reduce_works(&comm);
    });
}

#[test]
fn proc_null_completes_at_once() {
    common::run("proc_null_completes_at_once", 2, DEADLINE, |comm| {
        comm.send_tagged(&[1u8; 4], PROC_NULL, 3).unwrap();
        comm.ssend(&[1u8; 4], PROC_NULL, 3).unwrap();
        let mut buf = [9u8; 4];
        let st = comm.recv_tagged(&mut buf, PROC_NULL, Tag::Any).unwrap();
        assert_eq!(
            st,
            RecvStatus {
                source: None,
                tag: None,
                bytes: 0,
                count: 0
            }
        );
        assert!(st.is_proc_null());
        assert_eq!(buf, [9; 4]);
        all_reduce_works(&comm);
    });
}

#[test]
fn sendrecv_exchanges_around_a_ring() {
    common::run("sendrecv_exchanges_around_a_ring", 3, DEADLINE, |comm| {
        let (me, n) = (comm.rank(), comm.size());
        let (right, left) = ((me + 1) % n, (me + n - 1) % n);
        let mut from_left = [0.0f64; 2];
        let st = comm
            .sendrecv(&[me as f64, 0.5], right, 4, &mut from_left, left, 4)
            .unwrap();
        assert_eq!(st, status(left, 4, 2, 8));
        assert_eq!(from_left, [left as f64, 0.5]);
        all_reduce_works(&comm);
    });
}

#[test]
fn truncation_is_an_error_and_the_communicator_stays_usable() {
    common::run(
        "truncation_is_an_error_and_the_communicator_stays_usable",
        2,
        DEADLINE,
        |comm| {
            if comm.rank() == 0 {
                comm.send_tagged(&[1i32, 2, 3, 4], 1, 5).unwrap();
                comm.send_tagged(&[7i32], 1, 6).unwrap();
                comm.send_tagged(&[1.5f32], 1, 7).unwrap();
                comm.send_tagged(&[8i32], 1, 8).unwrap();
            } else {
                let mut two = [0i32; 2];
                let err = comm.recv_tagged(&mut two, 0, 5).expect_err("4 elements into 2");
                assert_eq!(err.kind(), ErrorKind::Truncated, "{err}");
                assert_eq!(two, [1, 2], "the buffer holds the first part");
                let st = comm.recv_tagged(&mut two, 0, 6).unwrap();
                assert_eq!(st, status(0, 6, 1, 4));
                assert_eq!(two[0], 7);
                // f32 sent, i32 buffer: a type mismatch naming both types
                let err = comm.recv_tagged(&mut two, 0, 7).expect_err("f32 into i32");
                assert_eq!(err.kind(), ErrorKind::Mismatch, "{err}");
                assert!(err.message().contains("dtype"), "{err}");
                let st = comm.recv_tagged(&mut two, 0, 8).unwrap();
                assert_eq!((st.count, two[0]), (1, 8));
            }
            all_reduce_works(&comm);
        },
    );
}

#[test]
fn bad_tags_and_ranks_are_named() {
    common::run("bad_tags_and_ranks_are_named", 2, DEADLINE, |comm| {
        let mut buf = [0u8; 2];
        let check = |r: omniccl::Result<()>, needles: &[&str]| {
            let err = r.expect_err("a bad argument");
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
            for n in needles {
                assert!(err.message().contains(n), "{err} should name {n}");
            }
        };
        check(comm.send_tagged(&[1u8], 1, TAG_UB + 1), &["tag 2147483648", "TAG_UB"]);
        check(comm.ssend(&[1u8], 1, u32::MAX), &["tag 4294967295"]);
        check(comm.recv_tagged(&mut buf, 0, TAG_UB + 1).map(drop), &["tag 2147483648"]);
        check(comm.probe(Source::Any, TAG_UB + 1).map(drop), &["tag"]);
        check(comm.send_tagged(&[1u8], 2, 0), &["dest 2", "size 2"]);
        check(comm.recv_tagged(&mut buf, 5, 0).map(drop), &["source 5", "size 2"]);
        check(comm.iprobe(7, Tag::Any).map(drop), &["source 7"]);
        check(comm.mprobe(2, Tag::Any).map(drop), &["source 2"]);
        // TAG_UB itself is a valid tag
        let other = 1 - comm.rank();
        let mut got = [0u8];
        let st = comm.sendrecv(&[3u8], other, TAG_UB, &mut got, other, TAG_UB).unwrap();
        assert_eq!(st, status(other, TAG_UB, 1, 1));
        all_reduce_works(&comm);
    });
}

#[test]
fn probe_and_iprobe_describe_the_message() {
    common::run("probe_and_iprobe_describe_the_message", 2, DEADLINE, |comm| {
        if comm.rank() == 1 {
            // Nothing can have been sent yet: rank 0 sends after the barrier.
            assert_eq!(comm.iprobe(Source::Any, Tag::Any).unwrap(), None);
        }
        comm.barrier().unwrap();
        if comm.rank() == 0 {
            comm.send_tagged(&[5u64; 7], 1, 9).unwrap();
            comm.send_tagged(&[6u64; 2], 1, 10).unwrap();
        } else {
            let st = comm.probe(Source::Any, 9).unwrap();
            assert_eq!(st, status(0, 9, 7, 8));
            let mut buf = vec![0u64; st.count];
            assert_eq!(comm.recv_tagged(&mut buf, 0, 9).unwrap(), st);
            assert_eq!(buf, [5; 7]);
            // iprobe until the second message is there (it was sent already)
            let start = Instant::now();
            let st = loop {
                if let Some(st) = comm.iprobe(0, Tag::Any).unwrap() {
                    break st;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "iprobe never saw the message"
                );
                std::thread::sleep(Duration::from_millis(1));
            };
            assert_eq!(st, status(0, 10, 2, 8));
            // a probe does not receive: it is still there
            assert_eq!(comm.iprobe(0, 10).unwrap(), Some(st));
            let mut buf = [0u64; 2];
            comm.recv_tagged(&mut buf, 0, 10).unwrap();
            assert_eq!(buf, [6; 2]);
            assert_eq!(comm.iprobe(Source::Any, Tag::Any).unwrap(), None);
        }
        all_reduce_works(&comm);
    });
}

#[test]
fn ssend_completes_only_once_received() {
    common::run("ssend_completes_only_once_received", 2, DEADLINE, |comm| {
        if comm.rank() == 0 {
            comm.scope(|s| {
                let sent = s.issend(&[42u32; 3], 1, 3)?;
                // Rank 1 posts its receive for tag 3 only after "go" (tag 9).
                std::thread::sleep(Duration::from_millis(300));
                assert!(
                    !sent.test()?,
                    "a synchronous send completed before any receive was posted"
                );
                comm.send_tagged(&[1u8], 1, 9)?;
                sent.wait()
            })
            .unwrap();
            // The blocking form returns once received, too.
            comm.ssend(&[43u32], 1, 4).unwrap();
        } else {
            let mut go = [0u8];
            comm.recv_tagged(&mut go, 0, 9).unwrap();
            let mut buf = [0u32; 3];
            assert_eq!(comm.recv_tagged(&mut buf, 0, 3).unwrap(), status(0, 3, 3, 4));
            assert_eq!(buf, [42; 3]);
            let mut one = [0u32];
            comm.recv_tagged(&mut one, 0, 4).unwrap();
            assert_eq!(one, [43]);
        }
        all_reduce_works(&comm);
    });
}

#[test]
fn a_pending_receive_can_be_cancelled() {
    common::run("a_pending_receive_can_be_cancelled", 2, DEADLINE, |comm| {
        if comm.rank() == 1 {
            let mut buf = [7i16; 2];
            comm.scope(|s| {
                // Nothing is ever sent with tag 42.
                let req = s.irecv_tagged(&mut buf, 0, 42)?;
                assert!(req.cancel()?, "an unmatched receive must be cancellable");
                let (data, _) = req.wait()?;
                assert_eq!(data, [7, 7], "a cancelled receive moves nothing");
                Ok(())
            })
            .unwrap();
            // Only now may rank 0 go on (to its collective, which would fail a
            // receive from it still pending: "matched before that collective runs").
            comm.send_tagged(&[1u8], 0, 45).unwrap();
            // A matched receive cannot be cancelled any more.
            let mut buf = [0i16; 2];
            comm.scope(|s| {
                let req = s.irecv_tagged(&mut buf, 0, 43)?;
                let start = Instant::now();
                while !req.test()? {
                    assert!(start.elapsed() < Duration::from_secs(30), "tag 43 never came");
                    std::thread::sleep(Duration::from_millis(1));
                }
                assert!(!req.cancel()?, "a completed receive was cancelled");
                let (data, st) = req.wait()?;
                assert_eq!((&data[..], st), (&[4i16, 3][..], status(0, 43, 2, 2)));
                Ok(())
            })
            .unwrap();
        } else {
            comm.recv_tagged(&mut [0u8], 1, 45).unwrap();
            comm.send_tagged(&[4i16, 3], 1, 43).unwrap();
        }
        all_reduce_works(&comm);
    });
}

#[test]
fn mprobe_receives_exactly_its_message() {
    common::run("mprobe_receives_exactly_its_message", 2, DEADLINE, |comm| {
        if comm.rank() == 0 {
            // Two messages with the same tag, then two more for the scope form.
            for v in [1u32, 2, 3, 4] {
                comm.send_tagged(&[v; 2], 1, 7).unwrap();
            }
            comm.send_tagged(&[5u32], 1, 8).unwrap();
            comm.send_tagged(&[6u32], 1, 8).unwrap();
        } else {
            let first = comm.mprobe(0, 7).unwrap();
            assert_eq!(first.status(), status(0, 7, 2, 4));
            // The first message is taken: a plain receive gets the second.
            let mut buf = [0u32; 2];
            comm.recv_tagged(&mut buf, 0, 7).unwrap();
            assert_eq!(buf, [2, 2]);
            assert_eq!(first.recv(&mut buf).unwrap(), status(0, 7, 2, 4));
            assert_eq!(buf, [1, 1]);

            // The same through a scope: imrecv of the third while the fourth
            // goes to an irecv posted before it.
            let (mut a, mut b) = ([0u32; 2], [0u32; 2]);
            comm.scope(|s| {
                let third = s.comm().mprobe(Source::Any, Tag::Any)?;
                let fourth = s.irecv_tagged(&mut b, 0, 7)?;
                let (got, st) = s.imrecv(third, &mut a)?.wait()?;
                assert_eq!((&got[..], st), (&[3u32, 3][..], status(0, 7, 2, 4)));
                assert_eq!(fourth.wait()?.0, [4, 4]);
                Ok(())
            })
            .unwrap();

            // A dropped message is discarded: the next receive gets the one after.
            drop(comm.mprobe(0, 8).unwrap());
            let mut one = [0u32];
            assert_eq!(comm.recv_tagged(&mut one, 0, 8).unwrap(), status(0, 8, 1, 4));
            assert_eq!(one, [6]);
            assert_eq!(comm.iprobe(Source::Any, Tag::Any).unwrap(), None);
        }
        all_reduce_works(&comm);
    });
}

#[test]
fn improbe_with_nothing_there_is_none() {
    common::run("improbe_with_nothing_there_is_none", 2, DEADLINE, |comm| {
        // No rank sends anything before the barrier.
        assert!(comm.improbe(Source::Any, Tag::Any).unwrap().is_none());
        comm.barrier().unwrap();
        if comm.rank() == 0 {
            comm.send_tagged(&[9i8], 1, 1).unwrap();
        } else {
            let start = Instant::now();
            let msg = loop {
                if let Some(m) = comm.improbe(0, 1).unwrap() {
                    break m;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "improbe never saw the message"
                );
                std::thread::sleep(Duration::from_millis(1));
            };
            // Taken out of matching: neither probes nor improbe see it again.
            assert!(comm.improbe(0, 1).unwrap().is_none());
            assert_eq!(comm.iprobe(0, 1).unwrap(), None);
            let mut buf = [0i8; 4];
            assert_eq!(msg.recv(&mut buf).unwrap(), status(0, 1, 1, 1));
            assert_eq!(buf[0], 9);
        }
        // PROC_NULL: a message that receives nothing
        let msg = comm.mprobe(PROC_NULL, Tag::Any).unwrap();
        assert!(msg.status().is_proc_null());
        assert!(msg.recv(&mut [0u8; 1]).unwrap().is_proc_null());
        all_reduce_works(&comm);
    });
}
