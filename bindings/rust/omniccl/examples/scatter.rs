//! scatter - hand each rank its own part of the root's buffer.
//!
//! The root (rank 0) holds size parts of 2 elements, [0, 0, 1, 1, 2, 2, 3, 3]
//! with 4 ranks; rank i receives part i, [i, i]. Only the root passes a send
//! buffer; the others pass `None`.
//!
//! Run: omniccl-run -n 4 target/debug/examples/scatter
//! Output with 4 ranks, in any order:
//!   rank 0: [0, 0]
//!   rank 1: [1, 1]
//!   rank 2: [2, 2]
//!   rank 3: [3, 3]

mod common;

use omniccl::{Communicator, InitMethod};
use std::process::ExitCode;

fn main() -> Result<ExitCode, omniccl::Error> {
    let comm = Communicator::init(InitMethod::Env)?;
    let root = 0;
    let part = 2;
    let all: Vec<i64> = (0..comm.size() * part).map(|i| (i / part) as i64).collect();
    let send = if comm.rank() == root { Some(&all[..]) } else { None };

    let mut mine = vec![0i64; part];
    comm.scatter(send, &mut mine, root)?;

    let r = comm.rank() as i64;
    Ok(common::report(comm.rank(), &mine, &[r, r]))
}
