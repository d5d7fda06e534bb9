//! gather - collect every rank's buffer, in rank order, on one rank.
//!
//! Rank r sends [2r+1, 2r+2]; the root (rank 0) receives them all one after
//! the other. Only the root passes a receive buffer; the others pass `None`
//! and print their own input, which the gather leaves unchanged.
//!
//! Run: omniccl-run -n 4 target/debug/examples/gather
//! Output with 4 ranks, in any order:
//!   rank 0: [1, 2, 3, 4, 5, 6, 7, 8]
//!   rank 1: [3, 4]
//!   rank 2: [5, 6]
//!   rank 3: [7, 8]

mod common;

use omniccl::{Communicator, InitMethod};
use std::process::ExitCode;

fn main() -> Result<ExitCode, omniccl::Error> {
    let comm = Communicator::init(InitMethod::Env)?;
    let root = 0;
    let r = comm.rank() as i64;
    let data = [2 * r + 1, 2 * r + 2];

    let mut all = vec![0i64; 2 * comm.size()];
    let recv = if comm.rank() == root { Some(&mut all[..]) } else { None };
    comm.gather(&data, recv, root)?;

    if comm.rank() == root {
        let want: Vec<i64> = (1..=all.len() as i64).collect();
        Ok(common::report(comm.rank(), &all, &want))
    } else {
        Ok(common::report(comm.rank(), &data, &[2 * r + 1, 2 * r + 2]))
    }
}
