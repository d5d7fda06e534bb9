"""Point-to-point in mpi4py's terms: tags, wildcards, statuses, requests, and objects.

Matching is the C library's (``occl_send_tagged`` / ``occl_recv_tagged``): a
message goes to the first posted receive whose source and tag match it
(``ANY_SOURCE`` / ``ANY_TAG`` match any), messages from one rank arrive in the
order it sent them, a receive buffer is an upper bound (a larger message raises
:class:`~omniccl.TruncatedError` and the communicator stays usable), sends to
the own rank are matched by receives from it, and ``PROC_NULL`` completes at
once.

Objects travel pickled, as mpi4py sends them: a pickle of up to ``_BUF`` bytes
is one message holding just the pickle (so raw pickle bytes sent with ``Isend``
are received as an object, and an empty message as None, as mpi4py does). A
larger pickle goes as a first message of ``_BUF`` bytes (``_MARK``, whose zero
first byte no pickle starts with, the pickle's length as 8 bytes, then its start)
and a second message with the rest, sent with the same tag as int8 data. A
receive posts a ``_BUF``-byte buffer, then receives the rest from the rank and
tag the status names (a matched probe's ``Message.recv`` sizes its buffer from
the probe, so a raw pickle of any size from another library is received too).
Limitation: with several object receives posted at once (``irecv``) that can
match the same sender and tag, an object over 64 KiB from it can reach the
wrong receive; that receive then fails with a MismatchError (dtype) rather than
unpickling garbage.
"""

from __future__ import annotations

import itertools
import pickle
import struct
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple

from . import _omniccl
from ._tensors import as_tensor
from .errors import InvalidArgumentError, Status
from .work import Work

if TYPE_CHECKING:
    from .comm import Communicator

__all__ = ["ANY_SOURCE", "ANY_TAG", "PROC_NULL", "TAG_UB", "RecvStatus", "Request", "REQUEST_NULL", "Prequest",
           "BSEND_OVERHEAD", "Attach_buffer", "Detach_buffer", "Alloc_mem", "Free_mem", "Message", "MESSAGE_NULL",
           "MESSAGE_NO_PROC"]

#: Receive from any rank (mpi4py's MPI.ANY_SOURCE; OCCL_ANY_SOURCE).
ANY_SOURCE = -1
#: Receive any tag (MPI.ANY_TAG; OCCL_ANY_TAG).
ANY_TAG = -1
#: A peer that makes sends and receives complete at once and move nothing (MPI.PROC_NULL).
PROC_NULL = -2
#: The largest tag (tags are 0..TAG_UB).
TAG_UB = 2147483647

_BUF = (64 << 10) + 8  # bytes of an object's first (or only) message at most
_MARK = b"\x00OMNICC"  # starts the first of two messages (no pickle starts with a zero byte)
_HEAD = len(_MARK) + 8  # the mark and the pickle's length
_UNDEFINED = _omniccl.SPLIT_NOCOLOR  # omniccl.UNDEFINED (mpi4py's MPI.UNDEFINED)

_ITEMSIZE = {"F": 8, "D": 16}


def _itemsize(datatype: Any) -> int:
    """Bytes per element of an mpi4py datatype spelling: None (bytes), a typecode, or a numpy dtype."""
    if datatype is None:
        return 1
    if isinstance(datatype, str):
        if datatype in _ITEMSIZE:
            return _ITEMSIZE[datatype]
        return struct.calcsize(datatype)
    size = getattr(datatype, "itemsize", None)
    if isinstance(size, int) and size > 0:
        return size
    raise InvalidArgumentError(f"Get_count: {datatype!r} is not a datatype (a typecode such as 'i', or a dtype)")


class RecvStatus:
    """What a receive got (mpi4py's ``MPI.Status``): the sender's rank, the tag and the size.

    Pass one as ``status=`` to ``Recv``/``recv``/``Sendrecv``/``Wait``...; it is
    filled when the receive ends (also when it ends with TruncatedError). A
    receive from PROC_NULL gives source PROC_NULL, tag ANY_TAG and 0 bytes.
    """

    __slots__ = ("source", "tag", "error", "_bytes", "cancelled")

    def __init__(self, status: Optional["RecvStatus"] = None) -> None:
        self.source = ANY_SOURCE if status is None else status.source
        self.tag = ANY_TAG if status is None else status.tag
        self.error = 0 if status is None else status.error
        self._bytes = 0 if status is None else status._bytes
        self.cancelled = False if status is None else status.cancelled

    def _fill(self, native: Tuple[int, int, int, int], error: int = 0) -> None:
        self.source, self.tag, self._bytes = int(native[0]), int(native[1]), int(native[2])
        self.error = error

    def Get_source(self) -> int:  # noqa: N802 - mpi4py's names
        """The sender's rank."""
        return self.source

    def Set_source(self, source: int) -> None:  # noqa: N802
        """Sets the source (as mpi4py allows)."""
        self.source = int(source)

    def Get_tag(self) -> int:  # noqa: N802
        """The message's tag."""
        return self.tag

    def Set_tag(self, tag: int) -> None:  # noqa: N802
        """Sets the tag."""
        self.tag = int(tag)

    def Get_error(self) -> int:  # noqa: N802
        """0, or the C status code the receive failed with (e.g. Status.TRUNCATED)."""
        return self.error

    def Set_error(self, error: int) -> None:  # noqa: N802
        """Sets the error code."""
        self.error = int(error)

    def Get_count(self, datatype: Any = None) -> int:  # noqa: N802
        """Elements of ``datatype`` received (bytes for None); UNDEFINED if not whole."""
        size = _itemsize(datatype)
        return self._bytes // size if self._bytes % size == 0 else _UNDEFINED

    def Get_elements(self, datatype: Any = None) -> int:  # noqa: N802
        """Same as :meth:`Get_count` (OmniCCL has no derived datatypes)."""
        return self.Get_count(datatype)

    def Set_elements(self, datatype: Any, count: int) -> None:  # noqa: N802
        """Sets the size to ``count`` elements of ``datatype``."""
        self._bytes = int(count) * _itemsize(datatype)

    def Is_cancelled(self) -> bool:  # noqa: N802
        """Whether the request this status is of was cancelled (Request.Cancel)."""
        return self.cancelled

    def Set_cancelled(self, flag: bool) -> None:  # noqa: N802
        """Sets the cancelled flag."""
        self.cancelled = bool(flag)

    @property
    def count(self) -> int:
        """Bytes received (``Get_count()``)."""
        return self.Get_count()

    def __repr__(self) -> str:
        return f"<omniccl.RecvStatus source={self.source} tag={self.tag} bytes={self._bytes} error={self.error}>"


class Request(Work):
    """A started send or receive (mpi4py's ``MPI.Request``); falsy once it has completed.

    ``Wait``/``Test`` take an optional :class:`RecvStatus`; ``wait``/``test``
    return a received object (object receives) or None. The class methods
    ``Waitall``, ``Waitany``, ``Waitsome``, ``Testall``, ``Testany``, ``Testsome``
    (and their lower-case object forms) work over lists of requests.
    """

    __slots__ = ("_recv", "_then", "_value", "_status", "_cancellable", "_handle", "__weakref__")

    def __init__(self, native: Any = None, outputs: Optional[List[Any]] = None, recv: bool = False,
                 then: Optional[Callable[[Tuple[int, int, int, int]], Any]] = None,
                 cancellable: bool = True) -> None:
        super().__init__(native, None, outputs)
        self._recv = recv
        self._then = then  # object receives: turns the first part into the object
        self._value: Any = None
        self._status: Optional[Tuple[int, int, int, int]] = None
        self._cancellable = cancellable  # False: an object sent in two messages (Cancel leaves it alone)
        self._handle: Optional[int] = None  # given on first use of handle/toint/py2f

    # ------------------------------------------------------- integer handles
    # mpi4py's request handles as integers: a request gets one the first time
    # it is asked for it (REQUEST_NULL's is 0); fromhandle/fromint/f2py give
    # back that same request object while it is alive.
    @property
    def handle(self) -> int:
        """This request's integer handle (0 for REQUEST_NULL); :meth:`fromhandle` gives the request back."""
        if self._handle is None:
            self._handle = next(_NEXT_HANDLE)
            _HANDLES[self._handle] = self
        return self._handle

    def toint(self) -> int:
        """Same as :attr:`handle`."""
        return self.handle

    def py2f(self) -> int:
        """Same as :attr:`handle` (OmniCCL has no Fortran handles; the integer serves both)."""
        return self.handle

    @classmethod
    def fromhandle(cls, handle: int) -> "Request":
        """The live request whose :attr:`handle` is ``handle`` (the same object).

        Raises InvalidArgumentError if no live request has that handle, TypeError if it is not
        of this class (``Prequest.fromhandle`` of a plain request's handle).
        """
        if handle == 0:
            found: Optional[Request] = REQUEST_NULL
        else:
            found = _HANDLES.get(int(handle))
        if found is None:
            raise InvalidArgumentError(f"{cls.__name__}.fromhandle: no live request has handle {handle}")
        if not isinstance(found, cls):
            raise TypeError(f"{cls.__name__}.fromhandle: handle {handle} is a {type(found).__name__}")
        return found

    @classmethod
    def fromint(cls, handle: int) -> "Request":
        """Same as :meth:`fromhandle`."""
        return cls.fromhandle(handle)

    @classmethod
    def f2py(cls, handle: int) -> "Request":
        """Same as :meth:`fromhandle`."""
        return cls.fromhandle(handle)

    def _fill_status(self, status: Optional[RecvStatus]) -> None:
        """Fills status from the ended native work (a receive's source, tag and size; whether it was cancelled)."""
        native = self._native
        if self._status is None and self._recv:
            self._status = tuple(native.recv_status)
        if status is None:
            return
        if self._status is not None:
            status._fill(self._status, 0 if native.status == Status.SUCCESS else int(native.status))
        status.cancelled = bool(native.cancelled)

    def _settle(self, status: Optional[RecvStatus]) -> None:
        """After the native work ended (either way): finishes an object receive, fills status, raises."""
        native = self._native
        self._fill_status(status)
        if native.status == Status.SUCCESS and self._then is not None and not native.cancelled:
            then, self._then = self._then, None
            self._value = then(self._status)
        self._finished = True
        Work.wait(self)  # raises the operation's error, if any

    def __bool__(self) -> bool:
        """True while active: until a Wait/Test (or a list form) has seen it complete."""
        return self._native is not None and not self._finished

    def Wait(self, status: Optional[RecvStatus] = None) -> bool:  # noqa: N802
        """Waits for completion (raising its error); fills ``status``; returns True."""
        if self._native is not None:
            self._native.wait(None)
            self._settle(status)
        elif status is not None:
            status._fill((PROC_NULL, ANY_TAG, 0, 0))
        return True

    def Test(self, status: Optional[RecvStatus] = None) -> bool:  # noqa: N802
        """True (filling ``status``) once complete; raises its error if it failed."""
        if self._native is not None and not self._native.test():
            return False
        return self.Wait(status)

    def Get_status(self, status: Optional[RecvStatus] = None) -> bool:  # noqa: N802
        """True (filling ``status``) once complete, like Test, but the request stays active until Wait/Test/Free."""
        if self._native is None or self._finished:
            return self.Test(status)
        if not self._native.test():
            return False
        self._fill_status(status)
        return True

    def get_status(self, status: Optional[RecvStatus] = None) -> bool:
        """Same as :meth:`Get_status` (mpi4py's lower-case spelling)."""
        return self.Get_status(status)

    def wait(self, status: Optional[RecvStatus] = None) -> Any:  # type: ignore[override]
        """Waits; returns the received object (object receives) or None."""
        self.Wait(status)
        return self._value

    def test(self, status: Optional[RecvStatus] = None) -> Tuple[bool, Any]:
        """(True, object) once complete, else (False, None)."""
        if not self.Test(status):
            return False, None
        return True, self._value

    def Free(self) -> None:  # noqa: N802
        """Makes the request inactive (falsy); the operation finishes on its own (its arrays are kept until it does)."""
        self._finished = True

    def Cancel(self) -> None:  # noqa: N802
        """Cancels the operation if it still can be (MPI_Cancel): a receive no message has matched yet, or an
        ``Issend`` to this rank itself that no receive has matched yet.

        A cancelled request completes (Wait/Test) having moved nothing, and the
        status they fill says ``Is_cancelled()``; one that could not be
        cancelled goes on as before (sends to other ranks, matched receives).
        """
        if self._native is not None and not self._finished and self._cancellable:
            self._native.cancel()

    def cancel(self) -> None:
        """Same as :meth:`Cancel` (mpi4py's lower-case spelling)."""
        self.Cancel()

    # ---------------------------------------------------------- over lists
    @staticmethod
    def _poll(requests: Sequence["Request"], pick: Callable[[List[int]], bool]) -> List[int]:
        """Tests the active requests until pick(done indices) is true; returns the done indices."""
        delay = 0.0
        while True:
            done = [i for i, r in enumerate(requests) if r and r._native.test()]
            if pick(done):
                return done
            time.sleep(delay)
            delay = min(0.001, delay + 0.00005)

    @classmethod
    def Waitall(cls, requests: Sequence["Request"], statuses: Optional[List[RecvStatus]] = None) -> bool:  # noqa: N802
        """Waits for every request (statuses, if given, filled in order); returns True."""
        for i, r in enumerate(requests):
            r.Wait(_status_at(statuses, i))
        return True

    @classmethod
    def waitall(cls, requests: Sequence["Request"], statuses: Optional[List[RecvStatus]] = None) -> List[Any]:
        """Waits for every request; returns their objects (None for sends)."""
        return [r.wait(_status_at(statuses, i))
                for i, r in enumerate(requests)]

    @classmethod
    def Testall(cls, requests: Sequence["Request"], statuses: Optional[List[RecvStatus]] = None) -> bool:  # noqa: N802
        """True (completing every request) if all have completed, else False (none is completed)."""
        if any(r and not r._native.test() for r in requests):
            return False
        return cls.Waitall(requests, statuses)

    @classmethod
    def testall(cls, requests: Sequence["Request"], statuses: Optional[List[RecvStatus]] = None
                ) -> Tuple[bool, Optional[List[Any]]]:
        """(True, objects) if all have completed, else (False, None)."""
        if any(r and not r._native.test() for r in requests):
            return False, None
        return True, cls.waitall(requests, statuses)

    @classmethod
    def Waitany(cls, requests: Sequence["Request"], status: Optional[RecvStatus] = None) -> int:  # noqa: N802
        """Waits for one active request; returns its index (UNDEFINED if none is active)."""
        if not any(requests):
            return _UNDEFINED
        i = cls._poll(requests, bool)[0]
        requests[i].Wait(status)
        return i

    @classmethod
    def waitany(cls, requests: Sequence["Request"], status: Optional[RecvStatus] = None) -> Tuple[int, Any]:
        """(index, object) of one completed request ((UNDEFINED, None) if none is active)."""
        if not any(requests):
            return _UNDEFINED, None
        i = cls._poll(requests, bool)[0]
        return i, requests[i].wait(status)

    @classmethod
    def Testany(cls, requests: Sequence["Request"], status: Optional[RecvStatus] = None) -> Tuple[int, bool]:  # noqa: N802
        """(index, True) for a completed request, (UNDEFINED, True) if none is active, else (UNDEFINED, False)."""
        if not any(requests):
            return _UNDEFINED, True
        done = cls._poll(requests, lambda d: True)
        if not done:
            return _UNDEFINED, False
        requests[done[0]].Wait(status)
        return done[0], True

    @classmethod
    def testany(cls, requests: Sequence["Request"], status: Optional[RecvStatus] = None) -> Tuple[int, bool, Any]:
        """(index, True, object), or (UNDEFINED, flag, None) as Testany."""
        if not any(requests):
            return _UNDEFINED, True, None
        done = cls._poll(requests, lambda d: True)
        if not done:
            return _UNDEFINED, False, None
        return done[0], True, requests[done[0]].wait(status)

    @classmethod
    def Waitsome(cls, requests: Sequence["Request"], statuses: Optional[List[RecvStatus]] = None
                 ) -> Optional[List[int]]:  # noqa: N802
        """Waits until at least one active request completes; returns the completed indices (None if none active)."""
        if not any(requests):
            return None
        done = cls._poll(requests, bool)
        for k, i in enumerate(done):
            requests[i].Wait(_status_at(statuses, k))
        return done

    @classmethod
    def waitsome(cls, requests: Sequence["Request"], statuses: Optional[List[RecvStatus]] = None
                 ) -> Tuple[Optional[List[int]], Optional[List[Any]]]:
        """(indices, objects) as Waitsome."""
        if not any(requests):
            return None, None
        done = cls._poll(requests, bool)
        return done, [requests[i].wait(_status_at(statuses, k)) for k, i in enumerate(done)]

    @classmethod
    def Testsome(cls, requests: Sequence["Request"], statuses: Optional[List[RecvStatus]] = None
                 ) -> Optional[List[int]]:  # noqa: N802
        """The indices of the requests completed now (None if none is active)."""
        if not any(requests):
            return None
        done = cls._poll(requests, lambda d: True)
        for k, i in enumerate(done):
            requests[i].Wait(_status_at(statuses, k))
        return done

    @classmethod
    def testsome(cls, requests: Sequence["Request"], statuses: Optional[List[RecvStatus]] = None
                 ) -> Tuple[Optional[List[int]], Optional[List[Any]]]:
        """(indices, objects) as Testsome."""
        if not any(requests):
            return None, None
        done = cls._poll(requests, lambda d: True)
        return done, [requests[i].wait(_status_at(statuses, k)) for k, i in enumerate(done)]

    def __repr__(self) -> str:
        if self._native is None:
            return "<omniccl.Request null>"
        return "<omniccl.Request " + Work.__repr__(self)[len("<omniccl.Work "):]


_HANDLES: "weakref.WeakValueDictionary[int, Request]" = weakref.WeakValueDictionary()
_NEXT_HANDLE = itertools.count(1)

#: A request that is already complete and inactive (mpi4py's MPI.REQUEST_NULL).
REQUEST_NULL = Request(None)
REQUEST_NULL._handle = 0

_REQUEST_SLOTS = ("_native", "_finish", "_outputs", "_finished", "_recv", "_then", "_value", "_status",
                  "_cancellable")


class Prequest(Request):
    """A persistent request (mpi4py's ``MPI.Prequest``): made inactive by ``Send_init``, ``Recv_init``, ...

    :meth:`Start` (or :meth:`Startall`) starts the operation it describes, with
    the buffer, peer and tag given when it was made (the buffer's contents at
    the time of the Start are sent); ``Wait``/``Test`` and the list forms
    complete it, after which it is inactive again and may be started again.
    :meth:`Free` makes it equal to :data:`REQUEST_NULL`. As for other
    requests, it is truthy while active (started and not yet completed);
    list forms skip inactive ones (``Waitany`` over inactive requests gives
    UNDEFINED). Each Start is an ``Isend``/``Irecv`` on the communicator.
    """

    __slots__ = ("_start", "_freed")

    def __init__(self, start: Callable[[], Request]) -> None:
        super().__init__(None)
        self._start = start
        self._freed = False

    def Start(self) -> None:  # noqa: N802 - mpi4py's names
        """Starts the operation (the request must be inactive)."""
        if self._freed:
            raise InvalidArgumentError("Prequest.Start: the request was freed")
        if self:
            raise InvalidArgumentError("Prequest.Start: the request is active; Wait for it before starting it again")
        started = self._start()
        for name in _REQUEST_SLOTS:
            setattr(self, name, getattr(started, name))

    @classmethod
    def Startall(cls, requests: Sequence["Prequest"]) -> None:  # noqa: N802
        """Starts every request of the list, in order."""
        for r in requests:
            r.Start()

    def Free(self) -> None:  # noqa: N802
        """Frees the request: it becomes equal to REQUEST_NULL (an active operation finishes on its own)."""
        self._freed = True
        self._native = None
        self._finished = True

    def __eq__(self, other: object) -> bool:
        if other is REQUEST_NULL:
            return self._freed
        return self is other

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = Request.__hash__

    def __repr__(self) -> str:
        if self._freed:
            return "<omniccl.Prequest freed>"
        return "<omniccl.Prequest " + ("active" if self else "inactive") + ">"


# ---------------------------------------------------------------- matched probes
_MESSAGE_NULL = 0  # OCCL_MESSAGE_NULL
_MESSAGE_NO_PROC = 1  # OCCL_MESSAGE_NO_PROC


class Message:
    """A message taken by a matched probe (mpi4py's ``MPI.Message``): ``Comm.Mprobe``/``Improbe`` for
    buffers, ``mprobe``/``improbe`` for objects.

    No other receive or probe can get the message; only this object's
    ``Recv``/``Irecv`` (buffers) or ``recv``/``irecv`` (objects) receive it,
    once, after which it is falsy (equal to :data:`MESSAGE_NULL`). A matched
    probe of PROC_NULL gives :data:`MESSAGE_NO_PROC`, whose receives complete at
    once with the PROC_NULL status.
    """

    __slots__ = ("_comm", "_handle", "_bytes")

    def __init__(self, comm: Any = None, handle: int = _MESSAGE_NULL, nbytes: int = 0) -> None:
        self._comm = comm  # omniccl.Communicator
        self._handle = handle
        self._bytes = nbytes  # the message's size, from its probe

    def __bool__(self) -> bool:
        """True until received (MESSAGE_NULL is falsy)."""
        return self._handle != _MESSAGE_NULL

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Message) and (self is other or (self._handle == other._handle and
                                                                 self._handle in (_MESSAGE_NULL, _MESSAGE_NO_PROC)))

    __hash__ = object.__hash__

    def _take(self, what: str) -> Tuple[Any, int]:
        """(the communicator's native handle, the message number); the message is spent from here on.

        For MESSAGE_NO_PROC the native handle is None (nothing to receive); the module's
        MESSAGE_NO_PROC constant itself stays as it is.
        """
        if self._handle == _MESSAGE_NULL:
            raise InvalidArgumentError(f"Message.{what}: the message is MESSAGE_NULL (already received)")
        handle = self._handle
        if self is not MESSAGE_NO_PROC:
            self._handle = _MESSAGE_NULL
        if handle == _MESSAGE_NO_PROC:
            return None, handle
        return self._comm._live(f"Message.{what}"), handle

    def Recv(self, buf: Any, status: Optional[RecvStatus] = None) -> None:  # noqa: N802 - mpi4py's names
        """Receives the message into ``buf`` (an upper bound, as ``Comm.Recv``'s); fills ``status``."""
        from .comm import _p2p_message  # noqa: PLC0415 - comm imports this module
        native, handle = self._take("Recv")
        st: Tuple[int, int, int, int] = (PROC_NULL, ANY_TAG, 0, 0)
        if native is not None:
            st = native.mrecv(_p2p_message(buf, "buf", True, 0), handle, blocking=True)
        if status is not None:
            status._fill(st)

    def Irecv(self, buf: Any) -> Request:  # noqa: N802
        """Starts receiving the message into ``buf``; returns a :class:`Request` (its Wait fills a status)."""
        from .comm import _p2p_message  # noqa: PLC0415
        native, handle = self._take("Irecv")
        if native is None:
            return Request(None)  # complete: a Wait fills the PROC_NULL status
        return Request(native.mrecv(_p2p_message(buf, "buf", True, 0), handle), outputs=[buf], recv=True)

    def recv(self, status: Optional[RecvStatus] = None) -> Any:
        """Receives the message as an object (sent with ``send``/``isend``...) and returns it."""
        native, handle = self._take("recv")
        if native is None:
            if status is not None:
                status._fill((PROC_NULL, ANY_TAG, 0, 0))
            return None
        buf = bytearray(self._bytes)
        st = native.mrecv(as_tensor(buf, True, "buf"), handle, blocking=True)
        if status is not None:
            status._fill(st)
        return _unpack(self._comm, buf, st, "Message.recv")

    def irecv(self) -> Request:
        """Starts receiving the message as an object; the request's ``wait()`` returns it."""
        native, handle = self._take("irecv")
        if native is None:
            return Request(None)  # complete; its wait() returns None
        buf = bytearray(self._bytes)
        work = native.mrecv(as_tensor(buf, True, "buf"), handle)
        comm = self._comm
        return Request(work, recv=True, then=lambda st: _unpack(comm, buf, st, "Message.irecv"))

    def __repr__(self) -> str:
        if self._handle == _MESSAGE_NULL:
            return "<omniccl.Message null>"
        if self._handle == _MESSAGE_NO_PROC:
            return "<omniccl.Message no_proc>"
        return f"<omniccl.Message #{self._handle}>"


#: No message (mpi4py's MPI.MESSAGE_NULL): what a received Message equals.
MESSAGE_NULL = Message()
#: The message of a matched probe of PROC_NULL (MPI.MESSAGE_NO_PROC).
MESSAGE_NO_PROC = Message(None, _MESSAGE_NO_PROC)


def matched_probe(comm: Any, source: int, tag: int, status: Optional[RecvStatus], wait: bool,
                  what: str) -> Optional[Message]:
    """Mprobe (wait) / Improbe: the Message found (None if Improbe found none); fills status."""
    native = comm._live(what)
    found = native.mprobe(source, tag) if wait else native.improbe(source, tag)
    if found is None:
        return None
    if status is not None:
        status._fill(found[:4])
    return Message(comm, int(found[4]), int(found[2]))


# ---------------------------------------------------------------- buffered sends
#: Bytes of the attached buffer that each buffered message takes besides its data (MPI.BSEND_OVERHEAD).
BSEND_OVERHEAD = 64


class _Attached:
    """The buffer given to Attach_buffer and the buffered sends still in flight against it."""

    buf: Any = None
    size = 0
    pending: List[Tuple[Request, int]] = []


def Alloc_mem(size: int) -> bytearray:  # noqa: N802 - mpi4py's names
    """A zeroed buffer of ``size`` bytes (mpi4py's ``MPI.Alloc_mem``; plain memory here)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise InvalidArgumentError(f"Alloc_mem: size must be a non-negative int, got {size!r}")
    return bytearray(size)


def Free_mem(buf: Any) -> None:  # noqa: N802
    """Gives back a buffer from :func:`Alloc_mem` (nothing to do here; mpi4py's ``MPI.Free_mem``)."""


def Attach_buffer(buf: Any) -> None:  # noqa: N802
    """Attaches the buffer that buffered sends (``Bsend``, ``Ibsend``, ``bsend``, ...) account against.

    A buffered send copies its message and returns at once; the message, plus
    :data:`BSEND_OVERHEAD` bytes, counts against the attached buffer's size
    until it has been delivered, and a send that does not fit raises
    :class:`~omniccl.InvalidArgumentError`, as MPI requires. (OmniCCL keeps the
    copies in its own memory; the buffer's size is what counts.) One buffer
    per process, as MPI's.
    """
    if _Attached.buf is not None:
        raise InvalidArgumentError("Attach_buffer: a buffer is attached already; call Detach_buffer first")
    size = as_tensor(buf, False, "buf").nbytes  # any array (DLPack or buffer protocol)
    _Attached.buf, _Attached.size, _Attached.pending = buf, size, []


def Detach_buffer() -> Any:  # noqa: N802
    """Waits until every buffered send has been delivered, detaches the buffer and returns it."""
    if _Attached.buf is None:
        raise InvalidArgumentError("Detach_buffer: no buffer is attached (Attach_buffer)")
    pending, _Attached.pending = _Attached.pending, []
    buf, _Attached.buf, _Attached.size = _Attached.buf, None, 0
    for r, _ in pending:
        r.Wait()  # raises a failed delivery's error
    return buf


def _reserve(nbytes: int, what: str) -> None:
    """Accounts a buffered message of nbytes against the attached buffer (raises if it does not fit)."""
    if _Attached.buf is None:
        raise InvalidArgumentError(f"{what}: buffered sends need a buffer attached with Attach_buffer")
    still = []
    for r, n in _Attached.pending:
        if r and not r._native.test():
            still.append((r, n))
        else:
            r.Wait()  # delivered (or raises its error)
    _Attached.pending = still
    used = sum(n + BSEND_OVERHEAD for _, n in still)
    if used + nbytes + BSEND_OVERHEAD > _Attached.size:
        raise InvalidArgumentError(
            f"{what}: the attached buffer has {_Attached.size - used} of {_Attached.size} bytes free; this message "
            f"needs {nbytes} + BSEND_OVERHEAD ({BSEND_OVERHEAD}). Attach a bigger buffer")


def buffered(start: Callable[[], Request], nbytes: int, what: str) -> Request:
    """Starts a buffered send (start() sends a private copy) and returns a completed request."""
    _reserve(nbytes, what)
    _Attached.pending.append((start(), nbytes))
    return Request(None)


def _status_at(statuses: Optional[List[RecvStatus]], k: int) -> Optional[RecvStatus]:
    """statuses[k], appending new RecvStatus objects to a shorter list (as mpi4py fills a list given)."""
    if statuses is None:
        return None
    while len(statuses) <= k:
        statuses.append(RecvStatus())
    return statuses[k]


# ---------------------------------------------------------------- objects
def _pack(obj: Any) -> Tuple[bytearray, Optional[Any]]:
    """The first message (the pickle, or the mark, its length and its start) and the rest (int8 view) or None."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) <= _BUF:
        return bytearray(data), None
    first = bytearray(_MARK + struct.pack("<Q", len(data)))
    first += data[:_BUF - _HEAD]
    return first, memoryview(data)[_BUF - _HEAD:].cast("b")


def isend(comm: "Communicator", obj: Any, dest: int, tag: int, what: str, synchronous: bool = False) -> Request:
    """Starts sending an object; the request completes when both parts are sent.

    synchronous (issend): the last part is sent synchronously, so the request
    completes once the receiver has matched it (and so the first part too).
    """
    native = comm._live(what)
    first, rest = _pack(obj)
    w1 = native.send(as_tensor(first, False, "obj"), dest, tag=tag, synchronous=synchronous and rest is None)
    if rest is None:
        return Request(w1)
    # The first part's work may be dropped: the library finishes it (it was
    # queued first, so it completes before the second) and keeps its buffer.
    del w1
    return Request(native.send(as_tensor(rest, False, "obj"), dest, tag=tag, synchronous=synchronous),
                   cancellable=False)


def ibsend(comm: "Communicator", obj: Any, dest: int, tag: int, what: str) -> Request:
    """A buffered object send: returns a completed request once the pickle is in hand."""
    native = comm._live(what)
    if dest == PROC_NULL:
        return Request(None)
    first, rest = _pack(obj)
    nbytes = len(first) + (len(rest) if rest is not None else 0)

    def start() -> Request:
        w1 = native.send(as_tensor(first, False, "obj"), dest, tag=tag)
        if rest is None:
            return Request(w1)
        del w1  # finished by the library before the second part
        return Request(native.send(as_tensor(rest, False, "obj"), dest, tag=tag))

    return buffered(start, nbytes, what)


def send(comm: "Communicator", obj: Any, dest: int, tag: int, what: str, synchronous: bool = False) -> None:
    """Sends an object (blocking); synchronous (ssend): returns once the receiver has matched it."""
    native = comm._live(what)
    first, rest = _pack(obj)
    native.send(as_tensor(first, False, "obj"), dest, blocking=True, tag=tag,
                synchronous=synchronous and rest is None)
    if rest is not None:
        native.send(as_tensor(rest, False, "obj"), dest, blocking=True, tag=tag, synchronous=synchronous)


def _unpack(comm: "Communicator", buf: bytearray, status: Tuple[int, int, int, int], what: str) -> Any:
    """The object whose (first) message is in buf (status: its receive's), receiving the rest if any."""
    source, tag, nbytes = status[0], status[1], status[2]
    if source == PROC_NULL or nbytes == 0:
        return None  # mpi4py's object for an empty message
    if nbytes < _HEAD or buf[:len(_MARK)] != _MARK:
        return pickle.loads(memoryview(buf)[:nbytes])  # the whole pickle
    (size,) = struct.unpack_from("<Q", buf, len(_MARK))
    head = nbytes - _HEAD
    if size < head:
        raise InvalidArgumentError(f"{what}: a {nbytes}-byte message from rank {source} (tag {tag}) is not an "
                                   "object sent with send/isend")
    data = bytearray(size)
    data[:head] = buf[_HEAD:nbytes]
    if size > head:
        rest = memoryview(data)[head:].cast("b")
        comm._live(what).recv(as_tensor(rest, True, "obj"), source, blocking=True, tag=tag)
    return pickle.loads(data)


def recv(comm: "Communicator", source: int, tag: int, status: Optional[RecvStatus], what: str) -> Any:
    """Receives an object (blocking)."""
    buf = bytearray(_BUF)
    st = comm._live(what).recv(as_tensor(buf, True, "buf"), source, blocking=True, tag=tag)
    if status is not None:
        status._fill(st)
    return _unpack(comm, buf, st, what)


def irecv(comm: "Communicator", source: int, tag: int, what: str) -> Request:
    """Starts receiving an object; its request's wait() returns it."""
    buf = bytearray(_BUF)
    native = comm._live(what).recv(as_tensor(buf, True, "buf"), source, tag=tag)
    return Request(native, recv=True, then=lambda st: _unpack(comm, buf, st, what))

