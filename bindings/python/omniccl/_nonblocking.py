"""mpi4py's non-blocking collectives (``Ibarrier``, ``Ibcast``, ``Iallreduce``, ...).

Each returns a :class:`~omniccl.Request`, so ``Wait``/``Test`` and the list
forms (``Request.Waitall``, ``Testany``, ...) work on them as on point-to-point
requests. The buffers must stay untouched until the request completes.

Operations the C library runs natively are started without waiting (the C
library's work handles, as ``async_op=True``): Ibarrier, Ibcast, Ireduce and
Iallreduce (with the C library's reduce ops), Igather(v), Iscatter(v),
Iallgather(v), Ialltoall(v) and Ireduce_scatter_block. The others run the
blocking method to completion inside the call and return a request that is
already complete: the mpi4py ops (LAND, LOR, LXOR, MAXLOC, MINLOC, which the
blocking methods hand to the C library), complex PROD, user-defined ops
(``Op.Create``, computed in Python), Iscan and Iexscan, Ireduce_scatter
(per-rank counts), Ialltoallw and derived datatypes. That is correct MPI (a
request may complete at any time before its Wait), but such a call does not
overlap with other work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Optional

from . import _datatypes, _rooted
from ._messages import in_place, message, vmessage
from ._p2p import Request
from ._tensors import Tensor
from .ops import MPIOp, PremulSum, ReduceOp

if TYPE_CHECKING:
    from .comm import Communicator

__all__ = ["started", "completed"]


def started(native_work: Any, outputs: Optional[List[Any]] = None,
            finish: Optional[Callable[[], None]] = None) -> Request:
    """A Request over a native work handle; ``finish`` runs once it completed successfully."""
    r = Request(native_work, outputs=outputs, cancellable=False)  # MPI: collectives cannot be cancelled
    r._finish = finish
    return r


def completed(run: Callable[[], Any]) -> Request:
    """Runs a blocking operation now; returns a request that is already complete."""
    run()
    return Request(None)


def _native_op(op: Any) -> bool:
    """Whether the C library reduces with ``op`` (else the blocking method computes it in Python)."""
    if isinstance(op, (MPIOp, PremulSum)):
        return isinstance(op, PremulSum)
    return isinstance(op, int) and not isinstance(op, bool) and op in ReduceOp._value2member_map_


def _complex_prod(t: Tensor, op: Any) -> bool:
    return t.is_complex and isinstance(op, int) and op == ReduceOp.PRODUCT


def ibarrier(comm: "Communicator") -> Request:
    return started(comm._live("Ibarrier").barrier())


def ibcast(comm: "Communicator", buf: Any, root: int) -> Request:
    if _datatypes.is_derived(buf):
        return completed(lambda: comm.Bcast(buf, root))
    native = comm._live("Ibcast")
    t = message(buf, "buf", native.rank != root)
    return started(native.broadcast(t, root), [buf])


def iallreduce(comm: "Communicator", sendbuf: Any, recvbuf: Any, op: Any) -> Request:
    native = comm._live("Iallreduce")
    if not _native_op(op):
        return completed(lambda: comm.Allreduce(sendbuf, recvbuf, op))
    r = message(recvbuf, "recvbuf", True)
    s = r if in_place(sendbuf) else message(sendbuf, "sendbuf", False)
    if _complex_prod(r, op):
        return completed(lambda: comm.Allreduce(sendbuf, recvbuf, op))
    return started(comm._reduce_call(op, lambda v: native.all_reduce(s, r, v)), [recvbuf])


def ireduce(comm: "Communicator", sendbuf: Any, recvbuf: Any, op: Any, root: int) -> Request:
    native = comm._live("Ireduce")
    if not _native_op(op):
        return completed(lambda: comm.Reduce(sendbuf, recvbuf, op, root))
    if native.rank == root:
        r = message(recvbuf, "recvbuf", True)
        s = r if in_place(sendbuf) else message(sendbuf, "sendbuf", False)
    else:
        r, s = None, message(sendbuf, "sendbuf", False)
    if _complex_prod(s, op):
        return completed(lambda: comm.Reduce(sendbuf, recvbuf, op, root))
    return started(comm._reduce_call(op, lambda v: native.reduce(s, r, v, root)), [recvbuf])


def iallgather(comm: "Communicator", sendbuf: Any, recvbuf: Any) -> Request:
    native = comm._live("Iallgather")
    s, r = _rooted.all_gather_args(native, sendbuf, recvbuf)
    return started(native.all_gather(s, r), [recvbuf])


def iallgatherv(comm: "Communicator", sendbuf: Any, recvbuf: Any) -> Request:
    native = comm._live("Iallgatherv")
    s, r, counts, displs = _rooted.all_gatherv_args(native, sendbuf, recvbuf)
    return started(native.all_gatherv(s, r, counts, displs), [recvbuf])


def igather(comm: "Communicator", sendbuf: Any, recvbuf: Any, root: int) -> Request:
    native = comm._live("Igather")
    s, r = _rooted.gather_args(native, sendbuf, recvbuf, root)
    return started(native.gather(s, r, root), [recvbuf])


def igatherv(comm: "Communicator", sendbuf: Any, recvbuf: Any, root: int) -> Request:
    native = comm._live("Igatherv")
    s, r, counts, displs = _rooted.gatherv_args(native, sendbuf, recvbuf, root)
    return started(native.gatherv(s, r, counts, displs, root), [recvbuf])


def iscatter(comm: "Communicator", sendbuf: Any, recvbuf: Any, root: int) -> Request:
    native = comm._live("Iscatter")
    s, r = _rooted.scatter_args(native, sendbuf, recvbuf, root)
    return started(native.scatter(s, r, root), [recvbuf])


def iscatterv(comm: "Communicator", sendbuf: Any, recvbuf: Any, root: int) -> Request:
    native = comm._live("Iscatterv")
    s, counts, displs, r = _rooted.scatterv_args(native, sendbuf, recvbuf, root)
    return started(native.scatterv(s, counts, displs, r, root), [recvbuf])


def ialltoall(comm: "Communicator", sendbuf: Any, recvbuf: Any) -> Request:
    native = comm._live("Ialltoall")
    r = message(recvbuf, "recvbuf", True, native.size)
    if in_place(sendbuf):
        # The C library reads every block before writing (as Alltoall with
        # IN_PLACE does); a copy keeps the input intact until then.
        s = Tensor.empty_like(r, r.count)
        s.copy_from(r)
    else:
        s = message(sendbuf, "sendbuf", False, native.size)
    return started(native.all_to_all(s, r), [recvbuf])


def ialltoallv(comm: "Communicator", sendbuf: Any, recvbuf: Any) -> Request:
    native = comm._live("Ialltoallv")
    r, rcounts, rdispls = vmessage(recvbuf, "recvbuf", True, native.size)
    if in_place(sendbuf):
        s = Tensor.empty_like(r, r.count)
        s.copy_from(r)
        scounts, sdispls = rcounts, rdispls
    else:
        s, scounts, sdispls = vmessage(sendbuf, "sendbuf", False, native.size)
    return started(native.all_to_allv(s, scounts, sdispls, r, rcounts, rdispls), [recvbuf])


def ireduce_scatter_block(comm: "Communicator", sendbuf: Any, recvbuf: Any, op: Any) -> Request:
    native = comm._live("Ireduce_scatter_block")
    if not _native_op(op) or in_place(sendbuf):
        return completed(lambda: comm.Reduce_scatter_block(sendbuf, recvbuf, op))
    r = message(recvbuf, "recvbuf", True)
    s = message(sendbuf, "sendbuf", False, native.size)
    if _complex_prod(s, op):
        return completed(lambda: comm.Reduce_scatter_block(sendbuf, recvbuf, op))
    return started(comm._reduce_call(op, lambda v: native.reduce_scatter(s, r, v)), [recvbuf])
