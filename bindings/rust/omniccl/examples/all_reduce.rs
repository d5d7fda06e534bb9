//! all_reduce - sum every rank's buffer and give the result to every rank.
//!
//! Rank r holds [2r+1, 2r+2]; every rank receives the element-wise SUM
//! [1+3+5+7, 2+4+6+8] = [16, 20]. This example uses separate send and receive
//! buffers; `all_reduce_in_place` reduces one buffer in place.
//!
//! Rank 0 also prints the transport the communicator chose: "shm" for ranks
//! on one host, "tcp" across hosts or with OMNICCL_TRANSPORT=tcp.
//!
//! Run: omniccl-run -n 4 target/debug/examples/all_reduce
//! Output with 4 ranks, in any order:
//!   rank 0: [16, 20]
//!   rank 1: [16, 20]
//!   rank 2: [16, 20]
//!   rank 3: [16, 20]
//! and "transport: shm" (or tcp) from rank 0.

mod common;

use omniccl::{Communicator, InitMethod, ReduceOp};
use std::process::ExitCode;

fn main() -> Result<ExitCode, omniccl::Error> {
    let comm = Communicator::init(InitMethod::Env)?;
    if comm.rank() == 0 {
        println!("transport: {}", comm.transport()?);
    }
    let r = comm.rank() as i64;
    let data = [2 * r + 1, 2 * r + 2];

    let mut result = [0i64; 2];
    comm.all_reduce(&data, &mut result, ReduceOp::Sum)?;

    let n = comm.size() as i64;
    Ok(common::report(comm.rank(), &result, &[n * n, n * n + n]))
}
