"""Reduce operations: :class:`ReduceOp` and pre-multiplied sums."""

from __future__ import annotations

import enum
import math
from typing import Union

__all__ = ["ReduceOp", "PremulSum", "make_premul_sum", "MPIOp"]


class ReduceOp(enum.IntEnum):
    """How a reduction combines the ranks' values (torch.distributed.ReduceOp's names).

    ``PROD`` is an alias of ``PRODUCT`` (mpi4py's name). The values are the C
    library's ``occl_red_op_t``.

    - Integer SUM and PRODUCT wrap around; AVG on integers truncates.
    - float16 is computed in float32 and rounded to nearest-even.
    - MIN and MAX propagate NaN.
    - bool: SUM, MAX and BOR are logical or; PRODUCT, MIN and BAND logical
      and; BXOR is xor.
    - complex64/complex128: SUM, PRODUCT (complex multiplication), AVG and
      PREMUL_SUM (a real factor).
    - ``MAXLOC``, ``MINLOC``: the array holds (value, index) pairs of its own
      dtype side by side (an even element count, e.g. shape ``(n, 2)``);
      the larger (smaller) value wins, equal values keep the smaller index.
      Integer, float32 and float64 arrays.
    - Undefined pairs raise :class:`~omniccl.InvalidArgumentError` before
      anything is sent: bitwise ops on floating or complex types, MIN and MAX
      on complex types, AVG and PREMUL_SUM on bool.
    - ``PREMUL_SUM`` alone multiplies by 1; use :func:`make_premul_sum` for
      another factor.
    """

    SUM = 0
    PRODUCT = 1
    MIN = 2
    MAX = 3
    AVG = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8
    MAXLOC = 12
    MINLOC = 13
    PROD = 1  # alias of PRODUCT

    def Reduce_local(self, inbuf: object, inoutbuf: object) -> None:  # noqa: N802 - mpi4py's name
        """``inoutbuf = inbuf op inoutbuf`` on this rank only, with numpy (same element type and count)."""
        from ._userops import reduce_local
        reduce_local(self, inbuf, inoutbuf)


class PremulSum:
    """A PREMUL_SUM reduce op with a factor: each rank's input is multiplied by ``scalar`` before summing.

    Made by :func:`make_premul_sum`; pass it wherever a :class:`ReduceOp` is
    accepted. For integer dtypes the scalar must be integral.
    """

    __slots__ = ("scalar",)

    def __init__(self, scalar: float) -> None:
        scalar = float(scalar)
        if not math.isfinite(scalar):
            raise ValueError(f"make_premul_sum: the scalar must be finite, got {scalar}")
        self.scalar = scalar

    @property
    def op(self) -> ReduceOp:
        """Always :attr:`ReduceOp.PREMUL_SUM`."""
        return ReduceOp.PREMUL_SUM

    def __repr__(self) -> str:
        return f"make_premul_sum({self.scalar!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PremulSum) and other.scalar == self.scalar

    def __hash__(self) -> int:
        return hash(("PremulSum", self.scalar))


def make_premul_sum(scalar: float) -> PremulSum:
    """Returns a PREMUL_SUM op that multiplies each rank's input by ``scalar`` before summing.

    Like torch's ``_make_nccl_premul_sum``: ``all_reduce(g, op=make_premul_sum(1 / world))``
    averages gradients in one step.
    """
    return PremulSum(scalar)


class MPIOp(enum.Enum):
    """mpi4py's reduce ops beyond :class:`ReduceOp`.

    - ``LAND``, ``LOR``, ``LXOR``: logical and/or/xor; buffer methods
      (Allreduce, Reduce, Reduce_scatter_block, Reduce_scatter, Scan, Exscan)
      hand them to the C library (``OCCL_LAND``, ``OCCL_LOR``, ``OCCL_LXOR``):
      a nonzero element is true, and the result is 0/1 (False/True) in the
      array's dtype (complex arrays are refused, as by the C library);
      object methods apply Python's ``and``/``or``/xor of truth values.
    - ``MAXLOC``, ``MINLOC``: object methods on ``(value, index)`` pairs
      (ties take the lower index, as MPI); buffer methods (Allreduce, Reduce,
      Reduce_scatter_block) hand arrays of such pairs to the C library as
      :attr:`ReduceOp.MAXLOC` / :attr:`ReduceOp.MINLOC` (MPI's ``2INT`` /
      ``2DOUBLE_PRECISION`` layout: value and index of the array's dtype side
      by side, e.g. an ``(n, 2)`` array).
    - ``REPLACE``, ``NO_OP``: object methods only (the last, the first value).
    """

    LAND = "LAND"
    LOR = "LOR"
    LXOR = "LXOR"
    MAXLOC = "MAXLOC"
    MINLOC = "MINLOC"
    REPLACE = "REPLACE"
    NO_OP = "NO_OP"

    def Reduce_local(self, inbuf: object, inoutbuf: object) -> None:  # noqa: N802 - mpi4py's name
        """``inoutbuf = inbuf op inoutbuf`` on this rank only (LAND, LOR, LXOR, REPLACE, NO_OP), with numpy."""
        from ._userops import reduce_local
        reduce_local(self, inbuf, inoutbuf)


#: The C library's values (occl_red_op_t) of the logical ops.
# The mpi4py ops on buffers that the C library computes: the logical ops and
# MAXLOC / MINLOC over (value, index) pairs.
_LOGICAL_VALUES = {MPIOp.LAND: 9, MPIOp.LOR: 10, MPIOp.LXOR: 11, MPIOp.MAXLOC: 12, MPIOp.MINLOC: 13}


def logical_value(op: MPIOp, what: str) -> int:
    """The C value of an mpi4py op for buffer method ``what`` (LAND, LOR, LXOR, MAXLOC, MINLOC);
    NotImplementedError for the object-only ops (REPLACE, NO_OP)."""
    value = _LOGICAL_VALUES.get(op)
    if value is None:
        raise NotImplementedError(f"{what} with MPI.{op.value}: only object methods (allreduce, reduce, scan) "
                                  f"take {op.value}")
    return value


ReduceOpLike = Union[ReduceOp, int, PremulSum]
MPIOpLike = Union[ReduceOp, int, PremulSum, MPIOp]


def _check_op(op: ReduceOpLike) -> ReduceOpLike:
    """Validates a reduce op argument (a ReduceOp, its int value or a PremulSum)."""
    if isinstance(op, PremulSum):
        return op
    if isinstance(op, bool) or not isinstance(op, int):
        raise TypeError(f"op must be an omniccl.ReduceOp or make_premul_sum(...), not {type(op).__name__}")
    try:
        return ReduceOp(op)
    except ValueError:
        raise ValueError(f"op {op} is not a ReduceOp (0..8, 12, 13)") from None
