//! [`ReduceOp`] and the pre-multiplied sum's lifetime on the C side.

use omniccl_sys as sys;

use crate::error::{Result, check};

/// How an operation combines the ranks' values.
///
/// ```
/// use omniccl::ReduceOp;
/// let ops = [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::PremulSum(0.5)];
/// assert_eq!(ops[2], ReduceOp::PremulSum(0.5));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum ReduceOp {
    /// Sum (on `bool`: logical or).
    Sum,
    /// Product (on `bool`: logical and).
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Sum divided by the number of ranks (integers: truncating division).
    Avg,
    /// Bitwise and (integers and `bool`).
    BitAnd,
    /// Bitwise or (integers and `bool`).
    BitOr,
    /// Bitwise xor (integers and `bool`).
    BitXor,
    /// Each rank's input multiplied by the scalar, then summed (NCCL's
    /// `ncclRedOpCreatePreMulSum`). Integer types need an integral scalar.
    PremulSum(f64),
    /// Logical and (MPI's `LAND`): 1 where every input is nonzero, else 0,
    /// in the element type; every real type, floats included (not complex).
    LogicalAnd,
    /// Logical or (MPI's `LOR`): 1 where any input is nonzero, else 0.
    LogicalOr,
    /// Logical xor (MPI's `LXOR`): 1 where an odd number of inputs are
    /// nonzero, else 0.
    LogicalXor,
    /// MPI's `MAXLOC` over (value, index) pairs: the slice holds `len / 2`
    /// pairs, interleaved, both of its own type (integers, `f32`, `f64`);
    /// the larger value wins, on a tie the smaller index.
    MaxLoc,
    /// MPI's `MINLOC`: as [`MaxLoc`](ReduceOp::MaxLoc), the smaller value
    /// winning.
    MinLoc,
}

/// A reduce op as the C library takes it; a pre-multiplied sum is created on
/// the communicator and destroyed when this is dropped.
pub(crate) struct RawOp {
    pub(crate) op: sys::occl_red_op_t,
    created_on: Option<sys::occl_comm_t>,
}

impl RawOp {
    /// The C value of `op` on `comm` (creating a pre-multiplied sum there).
    pub(crate) fn new(op: ReduceOp, comm: sys::occl_comm_t) -> Result<RawOp> {
        let plain = |op| Ok(RawOp { op, created_on: None });
        match op {
            ReduceOp::Sum => plain(sys::OCCL_SUM),
            ReduceOp::Prod => plain(sys::OCCL_PROD),
            ReduceOp::Min => plain(sys::OCCL_MIN),
            ReduceOp::Max => plain(sys::OCCL_MAX),
            ReduceOp::Avg => plain(sys::OCCL_AVG),
            ReduceOp::BitAnd => plain(sys::OCCL_BAND),
            ReduceOp::BitOr => plain(sys::OCCL_BOR),
            ReduceOp::BitXor => plain(sys::OCCL_BXOR),
            ReduceOp::LogicalAnd => plain(sys::OCCL_LAND),
            ReduceOp::LogicalOr => plain(sys::OCCL_LOR),
            ReduceOp::LogicalXor => plain(sys::OCCL_LXOR),
            ReduceOp::MaxLoc => plain(sys::OCCL_MAXLOC),
            ReduceOp::MinLoc => plain(sys::OCCL_MINLOC),
            ReduceOp::PremulSum(scalar) => {
                let mut raw = sys::OCCL_SUM;
                // SAFETY: comm is a live handle (owned by the caller's
                // Communicator) and raw a valid place for the result.
                check(unsafe { sys::occl_red_op_create_premul_sum(comm, scalar, &mut raw) })?;
                Ok(RawOp {
                    op: raw,
                    created_on: Some(comm),
                })
            }
        }
    }
}

impl Drop for RawOp {
    fn drop(&mut self) {
        if let Some(comm) = self.created_on {
            // SAFETY: the op was created on comm, which outlives this value
            // (blocking calls drop it before returning; requests before their
            // scope, which borrows the communicator, ends). Nothing can be done
            // about a failure here; it only leaks a table entry.
            unsafe { sys::occl_red_op_destroy(comm, self.op) };
        }
    }
}
