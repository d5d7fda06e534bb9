//! The one helper every example uses (like examples/c/example.h).
//!
//! Launching: every example creates its communicator with `InitMethod::Env`,
//! so it runs under any torchrun/mpirun-style launcher, e.g. with 4 ranks:
//!   omniccl-run -n 4 target/debug/examples/all_reduce
//!   torchrun --nproc-per-node 4 --no-python target/debug/examples/all_reduce

use std::fmt::Debug;
use std::process::ExitCode;

/// Prints this rank's result as `rank R: [a, b, ...]` and compares it with
/// the documented one: `ExitCode::FAILURE` (after saying what was expected)
/// if they differ, so CI sees a regression.
pub fn report<T: Debug + PartialEq>(rank: usize, got: &[T], want: &[T]) -> ExitCode {
    println!("rank {rank}: {got:?}");
    if got == want {
        ExitCode::SUCCESS
    } else {
        eprintln!("rank {rank}: WRONG RESULT, expected {want:?}");
        ExitCode::FAILURE
    }
}
