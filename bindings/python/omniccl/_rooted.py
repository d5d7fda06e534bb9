"""The buffers of the gathers and scatters (Gather(v), Scatter(v), Allgather(v)) as the native calls take them.

One place for the blocking methods (comm.py) and their non-blocking forms
(_nonblocking.py): the gathered (or scattered) message is split per rank and
IN_PLACE means this rank's own part of it. In the rooted ones, only the root
has that message; the other ranks pass None for the root-only side.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

from ._messages import in_place, message, vmessage
from ._tensors import Tensor

_Counts = Optional[Sequence[int]]


def gather_args(native: Any, sendbuf: Any, recvbuf: Any, root: int) -> Tuple[Any, Any]:
    """(send, recv) of a Gather: recv only at the root; IN_PLACE sendbuf at the root is its block of recv."""
    if native.rank != root:
        return message(sendbuf, "sendbuf", False), None
    r = message(recvbuf, "recvbuf", True, native.size)
    if in_place(sendbuf):
        n = r.count // native.size
        return Tensor.slice(r, root * n, n), r
    return message(sendbuf, "sendbuf", False), r


def all_gather_args(native: Any, sendbuf: Any, recvbuf: Any) -> Tuple[Any, Any]:
    """(send, recv) of an Allgather: IN_PLACE sendbuf is this rank's block of recv."""
    r = message(recvbuf, "recvbuf", True, native.size)
    if in_place(sendbuf):
        n = r.count // native.size
        return Tensor.slice(r, native.rank * n, n), r
    return message(sendbuf, "sendbuf", False), r


def all_gatherv_args(native: Any, sendbuf: Any, recvbuf: Any) -> Tuple[Any, Any, _Counts, _Counts]:
    """(send, recv, counts, displs) of an Allgatherv: IN_PLACE sendbuf is this rank's part of recv."""
    r, counts, displs = vmessage(recvbuf, "recvbuf", True, native.size)
    me = native.rank
    s = Tensor.slice(r, displs[me], counts[me]) if in_place(sendbuf) else message(sendbuf, "sendbuf", False)
    return s, r, counts, displs


def gatherv_args(native: Any, sendbuf: Any, recvbuf: Any, root: int) -> Tuple[Any, Any, _Counts, _Counts]:
    """(send, recv, counts, displs) of a Gatherv: recv, counts and displs only at the root."""
    if native.rank != root:
        return message(sendbuf, "sendbuf", False), None, None, None
    r, counts, displs = vmessage(recvbuf, "recvbuf", True, native.size)
    s = Tensor.slice(r, displs[root], counts[root]) if in_place(sendbuf) else message(sendbuf, "sendbuf", False)
    return s, r, counts, displs


def scatter_args(native: Any, sendbuf: Any, recvbuf: Any, root: int) -> Tuple[Any, Any]:
    """(send, recv) of a Scatter: send only at the root; IN_PLACE recvbuf at the root is its block of send."""
    if native.rank != root:
        return None, message(recvbuf, "recvbuf", True)
    s = message(sendbuf, "sendbuf", False, native.size)
    if in_place(recvbuf):
        n = s.count // native.size
        return s, Tensor.slice(s, root * n, n)
    return s, message(recvbuf, "recvbuf", True)


def scatterv_args(native: Any, sendbuf: Any, recvbuf: Any, root: int) -> Tuple[Any, _Counts, _Counts, Any]:
    """(send, counts, displs, recv) of a Scatterv: send, counts and displs only at the root."""
    if native.rank != root:
        return None, None, None, message(recvbuf, "recvbuf", True)
    s, counts, displs = vmessage(sendbuf, "sendbuf", False, native.size)
    r = Tensor.slice(s, displs[root], counts[root]) if in_place(recvbuf) else message(recvbuf, "recvbuf", True)
    return s, counts, displs, r
