//! tagged - MPI-style point-to-point: tags, any-source receives, a probe
//! that sizes the buffer, and the status of what came.
//!
//! Rank r > 0 sends r copies of r with tag 100 + r to rank 0. Rank 0 does not
//! know who sends first nor how much: it probes for any message (any
//! source, any tag), allocates exactly the probed count, receives that
//! message (naming the probed source and tag) and records (source, tag,
//! count) from the receive's status; it prints them sorted by source.
//!
//! Run: omniccl-run -n 4 target/debug/examples/tagged
//! Output with 4 ranks, in any order:
//!   rank 0: [(1, 101, 1), (2, 102, 2), (3, 103, 3)]
//!   rank 1: [1]
//!   rank 2: [2, 2]
//!   rank 3: [3, 3, 3]

mod common;

use omniccl::{Communicator, InitMethod, Source, Tag};
use std::process::ExitCode;

fn main() -> Result<ExitCode, omniccl::Error> {
    let comm = Communicator::init(InitMethod::Env)?;
    let r = comm.rank();
    if r > 0 {
        let data = vec![r as u32; r];
        comm.send_tagged(&data, 0, 100 + r as u32)?;
        return Ok(common::report(r, &data, &vec![r as u32; r]));
    }
    let mut got = Vec::new();
    for _ in 1..comm.size() {
        let probed = comm.probe(Source::Any, Tag::Any)?; // waits; receives nothing
        let mut buf = vec![0u32; probed.count];
        let (source, tag) = (probed.source.expect("a rank"), probed.tag.expect("a tag"));
        let st = comm.recv_tagged(&mut buf, source, tag)?; // exactly the probed message
        assert_eq!(buf, vec![source as u32; source]);
        got.push((source, tag, st.count));
    }
    got.sort();
    let want: Vec<_> = (1..comm.size()).map(|s| (s, 100 + s as u32, s)).collect();
    Ok(common::report(r, &got, &want))
}
