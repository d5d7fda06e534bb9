//! gradient_averaging - the data-parallel training step: every rank computes
//! gradients on its own data, then all ranks average them, so every replica
//! applies the same update.
//!
//! Rank r's gradients are [r+1, 2(r+1), 0.5]. The mean over 4 ranks is
//! [2.5, 5, 0.5]. It is computed twice: all_reduce SUM then divide by the
//! number of ranks (what frameworks without an average op do), and
//! all_reduce AVG (one call); both must agree.
//!
//! Run: omniccl-run -n 4 target/debug/examples/gradient_averaging
//! Output with 4 ranks, in any order:
//!   rank 0: [2.5, 5.0, 0.5]
//!   rank 1: [2.5, 5.0, 0.5]
//!   rank 2: [2.5, 5.0, 0.5]
//!   rank 3: [2.5, 5.0, 0.5]

mod common;

use omniccl::{Communicator, InitMethod, ReduceOp};
use std::process::ExitCode;

/// This rank's gradients (stand-in for a backward pass).
fn gradients(rank: usize) -> Vec<f32> {
    let g = rank as f32 + 1.0;
    vec![g, 2.0 * g, 0.5]
}

fn main() -> Result<ExitCode, omniccl::Error> {
    let comm = Communicator::init(InitMethod::Env)?;
    let n = comm.size() as f32;

    // 1. SUM, then divide.
    let mut summed = gradients(comm.rank());
    comm.all_reduce_in_place(&mut summed, ReduceOp::Sum)?;
    for g in &mut summed {
        *g /= n;
    }

    // 2. AVG in one call.
    let mut averaged = gradients(comm.rank());
    comm.all_reduce_in_place(&mut averaged, ReduceOp::Avg)?;

    if summed != averaged {
        eprintln!("rank {}: SUM/n {summed:?} differs from AVG {averaged:?}", comm.rank());
        return Ok(ExitCode::FAILURE);
    }
    let mean_g = (n + 1.0) / 2.0; // mean of 1..=n
    Ok(common::report(comm.rank(), &averaged, &[mean_g, 2.0 * mean_g, 0.5]))
}
