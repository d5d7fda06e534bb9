"""User-defined reduce ops (mpi4py's ``Op.Create``) and ``Reduce_local``, in Python with numpy.

``Op.Create(function, commute=False)`` makes an :class:`Op` whose
``function(invec, inoutvec, datatype)`` computes ``inoutvec[i] = invec[i] op
inoutvec[i]`` in place, as MPI's user functions do. ``invec`` and ``inoutvec``
are flat numpy arrays (they speak the buffer protocol, as mpi4py's buffers
do) and ``datatype`` is the elements' :class:`~omniccl.Datatype`.

Collectives with such an op (``Allreduce``, ``Reduce``,
``Reduce_scatter_block``, ``Reduce_scatter`` and their ``I`` forms) gather
every rank's whole buffer (Allgather, or Gather at the root of a Reduce) and
fold them in rank order, ``b0 op (b1 op (... op b[size-1]))``, so ops that are
associative but not commutative give MPI's result. Correct rather than
efficient: each rank receives size times its buffer.

``Reduce_local(inbuf, inoutbuf)`` (on the predefined ops too) computes
``inoutbuf = inbuf op inoutbuf`` on this rank alone, with numpy: both
buffers must hold the same number of elements of the same type.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from ._datatypes import Datatype
from ._messages import in_place, message
from ._tensors import Tensor
from .errors import InvalidArgumentError
from .ops import MPIOp, ReduceOp

if TYPE_CHECKING:
    from .comm import Communicator

__all__ = ["Op", "reduce_local"]


class Op:
    """A user-defined reduce op (mpi4py's ``MPI.Op.Create``); pass it as ``op`` to buffer and object reductions.

    Object reductions (``allreduce``, ``reduce``) call it as ``op(a, b)``,
    which runs ``function(a, b, None)`` and returns its result (or ``b``, if
    the function returned None after updating ``b`` in place).
    """

    __slots__ = ("function", "commute", "_freed")

    def __init__(self, function: Callable[[Any, Any, Any], Any], commute: bool = False) -> None:
        if not callable(function):
            raise TypeError(f"Op.Create: function must be callable, not {type(function).__name__}")
        self.function = function
        self.commute = bool(commute)
        self._freed = False

    @classmethod
    def Create(cls, function: Callable[[Any, Any, Any], Any], commute: bool = False) -> "Op":  # noqa: N802
        """An op that reduces with ``function(invec, inoutvec, datatype)`` (see the module doc)."""
        return cls(function, commute)

    def Free(self) -> None:  # noqa: N802 - mpi4py's names
        """Frees the op (later use raises InvalidArgumentError)."""
        self._freed = True

    def Is_commutative(self) -> bool:  # noqa: N802
        """Whether it was created with ``commute=True``."""
        return self.commute

    @property
    def is_commutative(self) -> bool:
        """Whether it was created with ``commute=True``."""
        return self.commute

    @property
    def is_predefined(self) -> bool:
        """False: a user-defined op."""
        return False

    def Reduce_local(self, inbuf: Any, inoutbuf: Any) -> None:  # noqa: N802
        """``inoutbuf = inbuf op inoutbuf`` on this rank only."""
        reduce_local(self, inbuf, inoutbuf)

    def __call__(self, x: Any, y: Any) -> Any:
        """``x op y`` for Python objects."""
        self._check("Op")
        out = self.function(x, y, None)
        return y if out is None else out

    def _check(self, what: str) -> None:
        if self._freed:
            raise InvalidArgumentError(f"{what}: the op was freed")

    def __repr__(self) -> str:
        return f"<omniccl.Op {getattr(self.function, '__name__', self.function)!r} commute={self.commute}>"


def _view(t: Tensor) -> Any:
    """A flat numpy view of a Tensor's memory in its element type (complex stays complex)."""
    import numpy
    dtype = numpy.dtype(t.dtype)
    n = t.nbytes // dtype.itemsize
    if n == 0:
        return numpy.zeros(0, dtype)
    raw = numpy.ctypeslib.as_array((ctypes.c_uint8 * t.nbytes).from_address(t.data_ptr))
    return raw.view(dtype)


def _datatype(view: Any) -> Optional[Datatype]:
    char = view.dtype.char
    try:
        return Datatype("?" if char == "?" else char)
    except InvalidArgumentError:
        return None


def _apply(op: Any, a: Any, b: Any, what: str) -> None:
    """b[:] = a op b (numpy arrays of one dtype)."""
    import numpy
    if isinstance(op, Op):
        op._check(what)
        op.function(a, b, _datatype(b))
        return
    if isinstance(op, MPIOp):
        if op in (MPIOp.LAND, MPIOp.LOR, MPIOp.LXOR):
            f = {MPIOp.LAND: numpy.logical_and, MPIOp.LOR: numpy.logical_or, MPIOp.LXOR: numpy.logical_xor}[op]
            b[...] = f(a != 0, b != 0).astype(b.dtype)
        elif op is MPIOp.REPLACE:
            b[...] = a
        elif op is MPIOp.NO_OP:
            pass
        else:
            raise NotImplementedError(f"{what}: {op.name} needs pair datatypes, which OmniCCL does not offer")
        return
    if isinstance(op, bool) or not isinstance(op, int):
        raise TypeError(f"{what}: op must be an omniccl op (SUM, ..., LAND, ...) or an Op, not {type(op).__name__}")
    op = ReduceOp(op)
    kind = b.dtype.kind
    if kind == "b":
        table = {ReduceOp.SUM: numpy.logical_or, ReduceOp.MAX: numpy.logical_or, ReduceOp.BOR: numpy.logical_or,
                 ReduceOp.PRODUCT: numpy.logical_and, ReduceOp.MIN: numpy.logical_and,
                 ReduceOp.BAND: numpy.logical_and, ReduceOp.BXOR: numpy.logical_xor}
    else:
        table = {ReduceOp.SUM: numpy.add, ReduceOp.PRODUCT: numpy.multiply, ReduceOp.MIN: numpy.minimum,
                 ReduceOp.MAX: numpy.maximum}
        if kind in "iu":
            table.update({ReduceOp.BAND: numpy.bitwise_and, ReduceOp.BOR: numpy.bitwise_or,
                          ReduceOp.BXOR: numpy.bitwise_xor})
    f = table.get(op)
    if f is None or (kind == "c" and op in (ReduceOp.MIN, ReduceOp.MAX)):
        raise InvalidArgumentError(f"{what}: {op.name} is not defined for {b.dtype}")
    f(a, b, out=b)


def reduce_local(op: Any, inbuf: Any, inoutbuf: Any) -> None:
    """``inoutbuf = inbuf op inoutbuf`` (same element type and count, else InvalidArgumentError)."""
    s = message(inbuf, "inbuf", False)
    r = message(inoutbuf, "inoutbuf", True)
    if s.dtype != r.dtype:
        raise InvalidArgumentError(f"Reduce_local: inbuf has dtype {s.dtype} but inoutbuf has dtype {r.dtype}")
    if s.count != r.count:
        raise InvalidArgumentError(f"Reduce_local: inbuf has {s.count} elements but inoutbuf {r.count}")
    _apply(op, _view(s), _view(r), "Reduce_local")


def _everyone(comm: "Communicator", mine: Any, root: Optional[int]) -> Any:
    """Every rank's array (rows in rank order) on every rank, or at ``root`` only (None elsewhere)."""
    import numpy
    size = comm.size
    raw = numpy.ascontiguousarray(mine).view(numpy.uint8)
    if root is None:
        out = numpy.empty((size, raw.size), numpy.uint8)
        comm.Allgather(raw, out)
    else:
        out = numpy.empty((size, raw.size), numpy.uint8) if comm.rank == root else None
        comm.Gather(raw, out, root)
    return None if out is None else out.view(mine.dtype)


def _fold(op: Op, rows: Any, what: str) -> Any:
    """rows[0] op (rows[1] op (... op rows[-1])) with MPI's in-place user functions."""
    acc = rows[-1].copy()
    for i in range(rows.shape[0] - 2, -1, -1):
        _apply(op, rows[i], acc, what)
    return acc


def allreduce(comm: "Communicator", sendbuf: Any, recvbuf: Any, op: Op) -> None:
    """Allreduce with a user-defined op."""
    r = message(recvbuf, "recvbuf", True)
    s = r if in_place(sendbuf) else message(sendbuf, "sendbuf", False)
    out = _view(r)
    mine = _view(s).copy()
    if mine.size != out.size:
        raise InvalidArgumentError(f"Allreduce: sendbuf has {mine.size} elements, recvbuf {out.size}")
    out[...] = _fold(op, _everyone(comm, mine, None), "Allreduce")


def reduce(comm: "Communicator", sendbuf: Any, recvbuf: Any, op: Op, root: int) -> None:
    """Reduce with a user-defined op."""
    is_root = comm.rank == root
    r = message(recvbuf, "recvbuf", True) if is_root else None
    s = r if is_root and in_place(sendbuf) else message(sendbuf, "sendbuf", False)
    rows = _everyone(comm, _view(s).copy(), root)
    if r is not None:
        _view(r)[...] = _fold(op, rows, "Reduce")


def reduce_scatter(comm: "Communicator", sendbuf: Any, recvbuf: Any, op: Op,
                   counts: Optional[Sequence[int]]) -> None:
    """Reduce_scatter (``counts`` per rank) or Reduce_scatter_block (``counts`` None) with a user-defined op."""
    size, rank = comm.size, comm.rank
    if in_place(sendbuf):
        full = _view(message(recvbuf, "recvbuf", True))
        out = full
    else:
        full = _view(message(sendbuf, "sendbuf", False))
        out = _view(message(recvbuf, "recvbuf", True))
    if counts is None:
        n = full.size // size if in_place(sendbuf) else out.size
        counts = [n] * size
    counts = [int(c) for c in counts]
    if len(counts) != size or sum(counts) > full.size:
        raise InvalidArgumentError(f"Reduce_scatter: counts {counts} do not fit {size} ranks and "
                                   f"{full.size} elements")
    total = _fold(op, _everyone(comm, full[:sum(counts)].copy(), None), "Reduce_scatter")
    start = sum(counts[:rank])
    out[:counts[rank]] = total[start:start + counts[rank]]
