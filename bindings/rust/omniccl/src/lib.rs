//! Safe Rust API of OmniCCL, a collective-communication library: all_reduce,
//! broadcast, gather, scatter, all_gather, reduce_scatter, all_to_all (and
//! per-rank-count variants), send/recv and barrier across processes, over
//! shared memory on one host and TCP between hosts.
//!
//! Built on the stable C ABI (`libomniccl.so.1`) through [`omniccl-sys`](sys).
//!
//! - [`Communicator`] owns a communicator; every operation takes slices of an
//!   [`Element`] type and checks lengths before anything is sent.
//! - Every fallible call returns `Result<_, `[`Error`]`>`; an error carries an
//!   [`ErrorKind`] (one per C status) and the library's message naming what
//!   was wrong (rank, peer, field, hint). Nothing waits forever: each
//!   blocking call has a deadline ([`Config::timeout`]).
//! - Non-blocking operations run inside [`Communicator::scope`]; the borrow
//!   checker keeps their buffers untouched until they end.
//! - MPI-style point-to-point: tagged sends and receives with a
//!   [`RecvStatus`], [`Source::Any`] / [`Tag::Any`] / [`PROC_NULL`], probes,
//!   synchronous sends, cancel and matched probes ([`Message`]); see
//!   [`Communicator::recv_tagged`].
//! - [`dlpack`]: an `unsafe` DLPack-level API for memory Rust does not own;
//!   feature `ndarray`: `ndarray` arrays as buffers.
//! - [`device`]: every collective on CUDA device pointers, with per-call
//!   options (a CUDA stream, a deadline) through the C ABI's `_ex` calls.
//! - [`Communicator::register_window`]: registered buffers ([`Window`]),
//!   which collectives on the CUDA IPC path read in place on the peers.
//!
//! Run N ranks with the project's launcher (`omniccl-run -n 4 ./program`) or
//! any torchrun/mpirun-style launcher, and create the communicator with
//! [`InitMethod::Env`]:
//!
//! ```no_run
//! use omniccl::{Communicator, InitMethod, ReduceOp};
//!
//! fn main() -> Result<(), omniccl::Error> {
//!     let comm = Communicator::init(InitMethod::Env)?;
//!     let mut grads = vec![comm.rank() as f32; 4];
//!     comm.all_reduce_in_place(&mut grads, ReduceOp::Avg)?;
//!     println!("rank {}: {grads:?}", comm.rank());
//!     Ok(())
//! }
//! ```
#![deny(missing_docs, unsafe_op_in_unsafe_fn)]

mod comm;
mod config;
pub mod device;
mod device_scope;
pub mod dlpack;
mod element;
mod error;
#[cfg(feature = "ndarray")]
mod ndarray;
mod op;
mod p2p;
mod scope;
mod tensor;
mod window;

pub use comm::Communicator;
pub use config::{Config, InitMethod, UniqueId};
pub use element::Element;
pub use error::{Error, ErrorKind, Result};
pub use op::ReduceOp;
pub use p2p::{Dest, Message, PROC_NULL, ProcNull, RecvStatus, Source, TAG_UB, Tag};
pub use scope::{RecvRequest, Request, Scope};
pub use window::Window;

/// The complex number types [`Element`] takes (`Complex32`, `Complex64`).
pub use num_complex;
/// The raw C bindings (`omniccl-sys`), for what this crate does not wrap.
pub use omniccl_sys as sys;

/// The run-time library version (`MAJOR*10000 + MINOR*100 + PATCH`), checked
/// against the version these bindings were generated for.
///
/// ```
/// let v = omniccl::library_version()?;
/// assert!(v >= 100);
/// # Ok::<(), omniccl::Error>(())
/// ```
pub fn library_version() -> Result<u32> {
    // SAFETY: plain value arguments.
    error::check(unsafe { sys::occl_init_check(sys::OCCL_ABI_VERSION as i32, sys::OCCL_VERSION_CODE as i32) })?;
    let mut v = 0;
    // SAFETY: v is a valid int.
    error::check(unsafe { sys::occl_get_version(&mut v) })?;
    Ok(v as u32)
}
