"""Reductions the C library has no code for, done in Python with numpy on top of its collectives.

- mpi4py's logical ops (LAND, LOR, LXOR) on buffers: each rank's values
  become 0/1 (uint8), the C library reduces those with MIN (and), MAX (or)
  or BXOR (xor), and the 0/1 result is written back in the array's dtype.
- Scan and Exscan (prefix reductions): Allgather every rank's buffer, then
  reduce ranks 0..i (0..i-1) locally in rank order with numpy's ufuncs.
  Each rank receives size times its buffer: fine for the small buffers
  scans are used for; a native scan belongs in the C library.

Arrays are imported as every collective imports them (one DLPack export,
else the buffer protocol) and viewed with numpy through the imported
memory, so these accept what the collectives accept (numpy's own
from_dlpack is not used: the view lives exactly as long as the import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._messages import in_place, is_type, type_name
from ._tensors import as_tensor
from .errors import InvalidArgumentError
from .ops import MPIOp, PremulSum, ReduceOp, _check_op

if TYPE_CHECKING:
    from .comm import Communicator


def _np() -> Any:
    import numpy
    return numpy


class _Memory:
    """numpy's view of a Tensor's memory (``__array_interface__``); keeps the Tensor alive."""

    def __init__(self, tensor: Any, dtype: Any, count: int) -> None:
        self._tensor = tensor
        self.__array_interface__ = {"version": 3, "data": (tensor.data_ptr, tensor.readonly),
                                    "shape": (count,), "typestr": dtype.str}


def _view(buf: Any, name: str, writable: bool) -> Any:
    """A flat numpy view (no copy) of an array argument or a ``[buf, type]`` message.

    The array is imported the way every collective imports it (DLPack, else
    the buffer protocol), so anything the collectives take works here.
    """
    np = _np()
    typ = None
    if isinstance(buf, (list, tuple)):
        if len(buf) == 2 and is_type(buf[1]):
            buf, typ = buf
        else:
            raise NotImplementedError(f"{name}: [buf, count, type] messages with this op are not supported; "
                                      "pass the array itself or [buf, type]")
    t = as_tensor(buf, writable, name)
    dtype_name = t.dtype
    if dtype_name.startswith("bfloat") or dtype_name.startswith("dtype("):
        raise InvalidArgumentError(f"{name}: {dtype_name} has no numpy dtype for this op")
    dtype = np.dtype(dtype_name)
    arr = np.asarray(_Memory(t, dtype, t.count))
    if typ is not None:
        want = type_name(typ, name)
        if want != dtype_name:
            arr = arr.view(want)
    return arr


_LOGICAL_NATIVE = {MPIOp.LAND: ReduceOp.MIN, MPIOp.LOR: ReduceOp.MAX, MPIOp.LXOR: ReduceOp.BXOR}


def _check_logical(op: MPIOp, what: str) -> ReduceOp:
    if op not in _LOGICAL_NATIVE:
        raise NotImplementedError(f"{what} with MPI.{op.value}: only object methods (allreduce, reduce, scan) "
                                  f"take {op.value}")
    return _LOGICAL_NATIVE[op]


def _truth(arr: Any) -> Any:
    return (arr != 0).astype("uint8")


def allreduce(comm: "Communicator", sendbuf: Any, recvbuf: Any, op: MPIOp) -> None:
    """Allreduce with LAND/LOR/LXOR."""
    native_op = _check_logical(op, "Allreduce")
    out = _view(recvbuf, "recvbuf", True)
    src = out if in_place(sendbuf) else _view(sendbuf, "sendbuf", False)
    if src.size != out.size:
        raise InvalidArgumentError(f"Allreduce: sendbuf has {src.size} elements, recvbuf {out.size}")
    flags = _truth(src)
    comm.Allreduce(comm_in_place(), flags, native_op)
    out[...] = flags.astype(out.dtype)


def reduce(comm: "Communicator", sendbuf: Any, recvbuf: Any, op: MPIOp, root: int) -> None:
    """Reduce with LAND/LOR/LXOR."""
    native_op = _check_logical(op, "Reduce")
    is_root = comm.rank == root
    out = _view(recvbuf, "recvbuf", True) if is_root else None
    src = out if (is_root and in_place(sendbuf)) else _view(sendbuf, "sendbuf", False)
    flags = _truth(src)
    result = _np().zeros_like(flags) if is_root else None
    comm.Reduce(flags, result, native_op, root)
    if is_root:
        out[...] = result.astype(out.dtype)


def reduce_scatter_block(comm: "Communicator", sendbuf: Any, recvbuf: Any, op: MPIOp) -> None:
    """Reduce_scatter_block with LAND/LOR/LXOR."""
    native_op = _check_logical(op, "Reduce_scatter_block")
    out = _view(recvbuf, "recvbuf", True)
    src = out if in_place(sendbuf) else _view(sendbuf, "sendbuf", False)
    flags = _truth(src)
    n = flags.size // comm.size
    result = _np().zeros(n, "uint8")
    comm.Reduce_scatter_block(flags, result, native_op)
    out[:n] = result.astype(out.dtype)


def _ufunc(op: Any, dtype: Any) -> Any:
    np = _np()
    if isinstance(op, MPIOp):
        table = {MPIOp.LAND: np.logical_and, MPIOp.LOR: np.logical_or, MPIOp.LXOR: np.logical_xor}
        if op not in table:
            raise NotImplementedError(f"Scan/Exscan with MPI.{op.value} on buffers is not supported; "
                                      "use the object method scan")
        return table[op]
    op = _check_op(op)
    if isinstance(op, PremulSum) or op in (ReduceOp.AVG, ReduceOp.PREMUL_SUM):
        raise InvalidArgumentError(f"Scan/Exscan: {op!r} has no prefix form; use SUM, PROD, MIN, MAX or bitwise")
    table = {ReduceOp.SUM: np.add, ReduceOp.PRODUCT: np.multiply, ReduceOp.MIN: np.minimum,
             ReduceOp.MAX: np.maximum, ReduceOp.BAND: np.bitwise_and, ReduceOp.BOR: np.bitwise_or,
             ReduceOp.BXOR: np.bitwise_xor}
    if dtype.kind == "b":
        table.update({ReduceOp.SUM: np.logical_or, ReduceOp.MAX: np.logical_or,
                      ReduceOp.PRODUCT: np.logical_and, ReduceOp.MIN: np.logical_and})
    if dtype.kind in "fc" and op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
        raise InvalidArgumentError(f"Scan: bitwise op {op.name} is not defined on {dtype}")
    if dtype.kind == "c" and op in (ReduceOp.MIN, ReduceOp.MAX):
        raise InvalidArgumentError(f"Scan: {op.name} is not defined on {dtype}")
    return table[op]


def scan(comm: "Communicator", sendbuf: Any, recvbuf: Any, op: Any, exclusive: bool) -> None:
    """Scan (inclusive) or Exscan: Allgather, then a local reduction of the ranks before this one."""
    np = _np()
    out = _view(recvbuf, "recvbuf", True)
    src = out if in_place(sendbuf) else _view(sendbuf, "sendbuf", False)
    if src.size != out.size:
        raise InvalidArgumentError(f"Scan: sendbuf has {src.size} elements, recvbuf {out.size}")
    if src.dtype != out.dtype:
        raise InvalidArgumentError(f"Scan: sendbuf is {src.dtype}, recvbuf {out.dtype}")
    fn = _ufunc(op, src.dtype)
    everyone = np.empty((comm.size, src.size), src.dtype)
    comm.Allgather(np.ascontiguousarray(src), everyone)
    upto = comm.rank if exclusive else comm.rank + 1
    if upto == 0:
        return
    acc = everyone[0].copy()
    for row in everyone[1:upto]:
        acc = fn(acc, row).astype(src.dtype, copy=False)
    out[...] = acc


def comm_in_place() -> Any:
    """The IN_PLACE marker (imported late: comm imports this module)."""
    from .comm import IN_PLACE
    return IN_PLACE
