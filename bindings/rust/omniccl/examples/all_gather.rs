//! all_gather - concatenate every rank's buffer, in rank order, everywhere.
//!
//! Rank r contributes [2r+1, 2r+2]; every rank receives all of them.
//!
//! Run: omniccl-run -n 4 target/debug/examples/all_gather
//! Output with 4 ranks, in any order:
//!   rank 0: [1, 2, 3, 4, 5, 6, 7, 8]
//!   rank 1: [1, 2, 3, 4, 5, 6, 7, 8]
//!   rank 2: [1, 2, 3, 4, 5, 6, 7, 8]
//!   rank 3: [1, 2, 3, 4, 5, 6, 7, 8]

mod common;

use omniccl::{Communicator, InitMethod};
use std::process::ExitCode;

fn main() -> Result<ExitCode, omniccl::Error> {
    let comm = Communicator::init(InitMethod::Env)?;
    let r = comm.rank() as i64;
    let data = [2 * r + 1, 2 * r + 2];

    let mut all = vec![0i64; 2 * comm.size()];
    comm.all_gather(&data, &mut all)?;

    let want: Vec<i64> = (1..=all.len() as i64).collect();
    Ok(common::report(comm.rank(), &all, &want))
}
