//! broadcast - copy one rank's buffer to every rank.
//!
//! Rank r starts with [2r+1, 2r+2]: rank 0 holds [1, 2], rank 1 [3, 4],
//! rank 2 [5, 6], rank 3 [7, 8]. `broadcast` works in place: afterwards every
//! rank holds the root's (rank 0's) [1, 2].
//!
//! Run: omniccl-run -n 4 target/debug/examples/broadcast
//! Output with 4 ranks, in any order:
//!   rank 0: [1, 2]
//!   rank 1: [1, 2]
//!   rank 2: [1, 2]
//!   rank 3: [1, 2]

mod common;

use omniccl::{Communicator, InitMethod};
use std::process::ExitCode;

fn main() -> Result<ExitCode, omniccl::Error> {
    // env://: rank, size and rendezvous come from the launcher's environment.
    let comm = Communicator::init(InitMethod::Env)?;
    let r = comm.rank() as i64;
    let mut data = [2 * r + 1, 2 * r + 2];

    let root = 0;
    comm.broadcast(&mut data, root)?;

    let want = [2 * root as i64 + 1, 2 * root as i64 + 2];
    Ok(common::report(comm.rank(), &data, &want))
}
