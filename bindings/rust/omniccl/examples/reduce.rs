//! reduce - sum every rank's buffer into one rank.
//!
//! Rank r holds [2r+1, 2r+2]. The root, here the last rank (rank 3 of 4),
//! receives the element-wise SUM [1+3+5+7, 2+4+6+8] = [16, 20] in its receive
//! buffer; the others pass `None` and print their input, left unchanged.
//!
//! Run: omniccl-run -n 4 target/debug/examples/reduce
//! Output with 4 ranks, in any order:
//!   rank 0: [1, 2]
//!   rank 1: [3, 4]
//!   rank 2: [5, 6]
//!   rank 3: [16, 20]

mod common;

use omniccl::{Communicator, InitMethod, ReduceOp};
use std::process::ExitCode;

fn main() -> Result<ExitCode, omniccl::Error> {
    let comm = Communicator::init(InitMethod::Env)?;
    let root = comm.size() - 1;
    let r = comm.rank() as i64;
    let data = [2 * r + 1, 2 * r + 2];

    let mut sum = [0i64; 2];
    let recv = if comm.rank() == root { Some(&mut sum[..]) } else { None };
    comm.reduce(&data, recv, ReduceOp::Sum, root)?;

    if comm.rank() == root {
        let n = comm.size() as i64;
        // sum of 2q+1 and of 2q+2 over q < n
        Ok(common::report(comm.rank(), &sum, &[n * n, n * n + n]))
    } else {
        Ok(common::report(comm.rank(), &data, &[2 * r + 1, 2 * r + 2]))
    }
}
