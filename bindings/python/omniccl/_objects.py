"""Collectives on Python objects: pickle, exchange sizes, then exchange bytes.

Every object is pickled (highest protocol) into bytes. The sizes travel first,
as int64 (so objects of any size work: no 2 GiB limit), then the bytes with
the matching collective (broadcast, all_gatherv, gatherv, scatterv,
all_to_allv, send/recv). Both use only the buffer protocol (``bytes``,
``bytearray``, ``array('q')``), so this module needs no numpy.
"""

from __future__ import annotations

import operator
import pickle
from array import array
from functools import reduce as _fold
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Union, cast

from ._tensors import as_tensor
from .errors import InvalidArgumentError
from .ops import MPIOp, PremulSum, ReduceOp, ReduceOpLike

if TYPE_CHECKING:
    from .comm import Communicator


def _dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _loads(buf: Any) -> Any:
    return pickle.loads(buf)


def _sizes(values: Sequence[int]) -> array:
    return array("q", values)


def _split_bytes(buf: bytearray, sizes: Sequence[int]) -> List[Any]:
    view = memoryview(buf)
    out, offset = [], 0
    for n in sizes:
        out.append(_loads(view[offset:offset + n]))
        offset += n
    return out


def bcast(comm: "Communicator", obj: Any, root: int) -> Any:
    """Returns root's object on every rank."""
    native = comm._live("bcast")
    is_root = native.rank == root
    data = _dumps(obj) if is_root else b""
    size = _sizes([len(data)])
    native.broadcast(as_tensor(size, not is_root, "size"), root, blocking=True)
    if is_root:
        native.broadcast(as_tensor(data, False, "data"), root, blocking=True)
        return obj
    buf = bytearray(size[0])
    native.broadcast(as_tensor(buf, True, "data"), root, blocking=True)
    return _loads(buf)


def allgather(comm: "Communicator", obj: Any) -> List[Any]:
    """Every rank's object, on every rank."""
    native = comm._live("allgather")
    data = _dumps(obj)
    sizes = _sizes([0] * native.size)
    native.all_gather(as_tensor(_sizes([len(data)]), False, "size"), as_tensor(sizes, True, "sizes"), blocking=True)
    buf = bytearray(sum(sizes))
    native.all_gatherv(as_tensor(data, False, "data"), as_tensor(buf, True, "buf"), list(sizes), None, blocking=True)
    return _split_bytes(buf, sizes)


def gather(comm: "Communicator", obj: Any, root: int) -> Optional[List[Any]]:
    """Every rank's object at root (None elsewhere)."""
    native = comm._live("gather")
    is_root = native.rank == root
    data = _dumps(obj)
    sizes = _sizes([0] * native.size) if is_root else None
    native.gather(as_tensor(_sizes([len(data)]), False, "size"),
                             as_tensor(sizes, True, "sizes") if is_root else None, root, blocking=True)
    if sizes is None:  # not the root
        native.gatherv(as_tensor(data, False, "data"), None, None, None, root, blocking=True)
        return None
    buf = bytearray(sum(sizes))
    native.gatherv(as_tensor(data, False, "data"), as_tensor(buf, True, "buf"), list(sizes), None,
                              root, blocking=True)
    return _split_bytes(buf, sizes)


def scatter(comm: "Communicator", objs: Optional[Sequence[Any]], root: int) -> Any:
    """Root passes one object per rank; each rank gets its own."""
    native = comm._live("scatter")
    is_root = native.rank == root
    mine = _sizes([0])
    if is_root:
        if objs is None or len(objs) != native.size:
            raise InvalidArgumentError(
                f"scatter: the root must pass one object per rank ({native.size}), got "
                f"{'None' if objs is None else len(objs)}")
        parts = [_dumps(o) for o in objs]
        sizes = _sizes([len(p) for p in parts])
        native.scatter(as_tensor(sizes, False, "sizes"), as_tensor(mine, True, "size"), root, blocking=True)
        data = b"".join(parts)
        buf = bytearray(mine[0])
        native.scatterv(as_tensor(data, False, "data"), list(sizes), None, as_tensor(buf, True, "buf"),
                                   root, blocking=True)
        return _loads(buf)
    native.scatter(None, as_tensor(mine, True, "size"), root, blocking=True)
    buf = bytearray(mine[0])
    native.scatterv(None, None, None, as_tensor(buf, True, "buf"), root, blocking=True)
    return _loads(buf)


def alltoall(comm: "Communicator", objs: Sequence[Any]) -> List[Any]:
    """Each rank passes one object per rank and gets the ones sent to it."""
    native = comm._live("alltoall")
    if objs is None or len(objs) != native.size:
        raise InvalidArgumentError(f"alltoall: pass one object per rank ({native.size})")
    parts = [_dumps(o) for o in objs]
    send_sizes = _sizes([len(p) for p in parts])
    recv_sizes = _sizes([0] * native.size)
    native.all_to_all(as_tensor(send_sizes, False, "sizes"), as_tensor(recv_sizes, True, "sizes"), blocking=True)
    buf = bytearray(sum(recv_sizes))
    native.all_to_allv(as_tensor(b"".join(parts), False, "data"), list(send_sizes), None,
                                  as_tensor(buf, True, "buf"), list(recv_sizes), None, blocking=True)
    return _split_bytes(buf, recv_sizes)


_PY_OPS: Dict[ReduceOp, Callable[[Any, Any], Any]] = {
    ReduceOp.SUM: operator.add,
    ReduceOp.PRODUCT: operator.mul,
    ReduceOp.MIN: min,
    ReduceOp.MAX: max,
    ReduceOp.BAND: operator.and_,
    ReduceOp.BOR: operator.or_,
    ReduceOp.BXOR: operator.xor,
}

ObjectOp = Union[ReduceOpLike, MPIOp, Callable[[Any, Any], Any]]


def _maxloc(x: Any, y: Any) -> Any:
    (u, i), (v, j) = x, y
    if u > v:
        return u, i
    if v > u:
        return v, j
    return u, min(i, j)


def _minloc(x: Any, y: Any) -> Any:
    (u, i), (v, j) = x, y
    if u < v:
        return u, i
    if v < u:
        return v, j
    return u, min(i, j)


_MPI_OPS: Dict[MPIOp, Callable[[Any, Any], Any]] = {
    MPIOp.LAND: lambda x, y: x and y,
    MPIOp.LOR: lambda x, y: x or y,
    MPIOp.LXOR: lambda x, y: (x or y) and not (x and y),
    MPIOp.MAXLOC: _maxloc,
    MPIOp.MINLOC: _minloc,
    MPIOp.REPLACE: lambda x, y: y,
    MPIOp.NO_OP: lambda x, y: x,
}


def _fold_objects(values: List[Any], op: ObjectOp) -> Any:
    if isinstance(op, MPIOp):
        return _fold(_MPI_OPS[op], values)
    if isinstance(op, PremulSum):
        return _fold(operator.add, [v * op.scalar for v in values])
    if callable(op) and not isinstance(op, int):
        return _fold(cast(Callable[[Any, Any], Any], op), values)
    op = ReduceOp(op)
    if op == ReduceOp.AVG:
        return _fold(operator.add, values) / len(values)
    if op == ReduceOp.PREMUL_SUM:
        return _fold(operator.add, values)
    return _fold(_PY_OPS[op], values)


def allreduce(comm: "Communicator", obj: Any, op: ObjectOp) -> Any:
    """Every rank's object folded with op in rank order, on every rank."""
    return _fold_objects(allgather(comm, obj), op)


def reduce(comm: "Communicator", obj: Any, op: ObjectOp, root: int) -> Any:
    """Every rank's object folded with op in rank order, at root (None elsewhere)."""
    values = gather(comm, obj, root)
    return None if values is None else _fold_objects(values, op)


def scan(comm: "Communicator", obj: Any, op: ObjectOp, exclusive: bool) -> Any:
    """Ranks 0..rank's objects (0..rank-1 if exclusive; None at rank 0) folded with op in rank order."""
    values = allgather(comm, obj)
    upto = comm.rank if exclusive else comm.rank + 1
    return None if upto == 0 else _fold_objects(values[:upto], op)


def send(comm: "Communicator", obj: Any, dest: int) -> None:
    """Sends an object: its size, then its bytes."""
    native = comm._live("send")
    data = _dumps(obj)
    native.send(as_tensor(_sizes([len(data)]), False, "size"), dest, blocking=True)
    native.send(as_tensor(data, False, "data"), dest, blocking=True)


def recv(comm: "Communicator", source: int) -> Any:
    """Receives an object sent with send."""
    native = comm._live("recv")
    size = _sizes([0])
    native.recv(as_tensor(size, True, "size"), source, blocking=True)
    buf = bytearray(size[0])
    native.recv(as_tensor(buf, True, "data"), source, blocking=True)
    return _loads(buf)
