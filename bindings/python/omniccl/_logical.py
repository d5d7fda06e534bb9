"""Complex reductions the C library cannot do on pairs of reals, done in Python with numpy.

The library reduces a complex array as an array of twice as many reals,
which is right for sums only. PROD (a complex product) and the logical ops
LAND/LOR/LXOR (a complex value is true when either part is nonzero) on
complex arrays are computed here instead:

- ``fold`` (Allreduce, Reduce, Reduce_scatter_block, Reduce_scatter):
  every rank's array is gathered and folded with numpy in rank order.
- ``scan`` (Scan, Exscan): Allgather every rank's buffer, then reduce ranks
  0..i (0..i-1) locally in rank order. Each rank receives size times its
  buffer.

Every other dtype and op, logical ops and scans included, goes to the C
library. Arrays are imported as every collective imports them (one DLPack
export, else the buffer protocol) and viewed with numpy through the
imported memory (numpy's own from_dlpack is not used: the view lives
exactly as long as the import).
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
    count = t.count // 2 if t.is_complex else t.count
    arr = np.asarray(_Memory(t, dtype, count))
    if typ is not None:
        want = type_name(typ, name)
        if want != dtype_name:
            arr = arr.view(want)
    return arr


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
    """Scan (inclusive) or Exscan of complex arrays: Allgather, then a local reduction of the ranks before this one."""
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


def _tensor_view(t: Any) -> Any:
    """A flat numpy view of an imported Tensor (complex counted as complex)."""
    np = _np()
    dtype = np.dtype(t.dtype)
    return np.asarray(_Memory(t, dtype, t.count // 2 if t.is_complex else t.count))


def fold(comm: "Communicator", send: Any, recv: Any, op: Any, root: Any = None, block: Any = None) -> None:
    """A reduction done in Python: gather every rank's ``send`` Tensor, fold it with numpy in rank order.

    ``root`` None: every rank gets the result (Allreduce), else only ``root``
    (Reduce). ``block`` (offset, count) in elements: only that part of the
    result goes to ``recv`` (Reduce_scatter_block).
    """
    np = _np()
    src = _tensor_view(send).copy()
    fn = _ufunc(op, src.dtype)
    everyone = np.empty((comm.size, src.size), src.dtype)
    if root is None:
        comm.Allgather(src, everyone)
    else:
        comm.Gather(src, everyone if comm.rank == root else None, root)
        if comm.rank != root:
            return
    acc = everyone[0].copy()
    for row in everyone[1:]:
        acc = fn(acc, row).astype(src.dtype, copy=False)
    out = _tensor_view(recv)
    if block is None:
        out[...] = acc
    else:
        offset, count = block
        out[:count] = acc[offset:offset + count]
