"""The mpi4py-style :class:`Communicator` (also what ``new_group`` and ``split`` return).

Ranks in a Communicator's methods are ranks *in that communicator* (MPI's
rule). Buffer methods (capitalised: ``Allreduce``, ``Bcast``, ...) take
arrays and write results into them; object methods (lower case: ``bcast``,
``allgather``, ...) take any picklable Python object and return results.
Every call blocks (with the GIL released) unless it is an ``I...`` method.
"""

from __future__ import annotations

import datetime
from array import array
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from . import _objects, _omniccl
from ._tensors import Tensor, as_tensor
from .errors import InvalidArgumentError
from .ops import PremulSum, ReduceOp, ReduceOpLike, _check_op
from .work import Timeout, Work, _seconds

__all__ = ["Communicator", "COMM_NULL", "IN_PLACE", "UNDEFINED", "get_unique_id"]

#: Color for :meth:`Communicator.split` that takes no part in the new communicator (MPI.UNDEFINED).
UNDEFINED = _omniccl.SPLIT_NOCOLOR


class _InPlace:
    """The IN_PLACE marker: the send buffer is (part of) the receive buffer."""

    _instance: Optional["_InPlace"] = None

    def __new__(cls) -> "_InPlace":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "omniccl.IN_PLACE"

    def __reduce__(self) -> str:
        return "IN_PLACE"


#: Pass as sendbuf to work in place (mpi4py's MPI.IN_PLACE).
IN_PLACE = _InPlace()

ArrayLike = Any  # anything with __dlpack__ or the buffer protocol
VSpec = Union[Sequence[Any], Tuple[Any, ...]]


def _timeout_ms(timeout: Timeout) -> Optional[int]:
    seconds = _seconds(timeout)
    if seconds is None:
        return None
    if not seconds > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    return max(1, int(round(seconds * 1000)))


def _rank_arg(value: Optional[int], what: str) -> int:
    if value is None or value == -1:
        return _omniccl.FROM_ENV
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative int or None (from the environment), got {value!r}")
    return value


def get_unique_id() -> bytes:
    """Creates rendezvous bytes for :meth:`Communicator.from_unique_id` (NCCL style).

    This process serves the rendezvous until it exits. Share the bytes with
    every rank out of band (a file, a pipe, another communicator).
    """
    return _omniccl.get_unique_id()


class Communicator:
    """A group of ranks that run collectives together (mpi4py's ``Comm``).

    Create one with :meth:`init` (or :func:`omniccl.init_process_group`,
    whose default group is one), split it with :meth:`split`, free it with
    :meth:`destroy` (also ``close``/``Free``; safe to call twice) or use it as
    a context manager. :data:`COMM_NULL` stands for "no communicator" (what
    :meth:`split` returns to ranks passing :data:`UNDEFINED`).

    One thread at a time may issue operations on a communicator.
    """

    __slots__ = ("_native", "_global_ranks", "__weakref__")

    def __init__(self, native: Any = None, global_ranks: Optional[Sequence[int]] = None) -> None:
        """Wraps a native handle (internal: use :meth:`init`, :meth:`split` or init_process_group)."""
        self._native = native
        self._global_ranks = list(global_ranks) if global_ranks is not None else None

    # ------------------------------------------------------------------ creation
    @classmethod
    def init(cls, init_method: str = "env://", rank: Optional[int] = None, world_size: Optional[int] = None,
             timeout: Timeout = None, *, transport: Optional[str] = None,
             algorithm: Optional[str] = None) -> "Communicator":
        """Creates a communicator; collective over all ``world_size`` ranks.

        Args:
            init_method: ``"env://"`` (MASTER_ADDR/MASTER_PORT, rank and size
                from RANK/WORLD_SIZE, Open MPI, MPICH or Slurm variables),
                ``"tcp://host:port"`` (rank 0 serves the rendezvous) or
                ``"file:///path"`` (a directory every rank sees).
            rank, world_size: explicit values, or None to take them from the
                environment.
            timeout: deadline of every blocking call (seconds or timedelta);
                default OMNICCL_TIMEOUT, else 10 minutes.
            transport: ``"auto"``, ``"shm"`` or ``"tcp"`` (default OMNICCL_TRANSPORT).
            algorithm: algorithm override, as OMNICCL_ALGO.
        """
        if not isinstance(init_method, str):
            raise TypeError(f"init_method must be a str, not {type(init_method).__name__}")
        native = _omniccl.Comm.init(init_method, _rank_arg(rank, "rank"), _rank_arg(world_size, "world_size"),
                                    _timeout_ms(timeout), transport, algorithm)
        return cls(native, range(native.size))

    @classmethod
    def from_unique_id(cls, unique_id: bytes, rank: int, world_size: int, timeout: Timeout = None, *,
                       transport: Optional[str] = None, algorithm: Optional[str] = None) -> "Communicator":
        """Creates a communicator from :func:`get_unique_id` bytes (collective over ``world_size`` ranks)."""
        native = _omniccl.Comm.init_unique_id(bytes(unique_id), rank, world_size, _timeout_ms(timeout),
                                              transport, algorithm)
        return cls(native, range(native.size))

    def split(self, color: Optional[int] = 0, key: int = 0) -> "Communicator":
        """Splits the communicator: ranks passing the same ``color`` form a new one, ordered by ``key``.

        Collective over this communicator. Ties in ``key`` keep the old rank
        order. A rank passing ``UNDEFINED`` (or None) gets :data:`COMM_NULL`.
        """
        return self._split(UNDEFINED if color is None else color, key, None)

    Split = split

    def _split(self, color: int, key: int, global_ranks: Optional[Sequence[int]]) -> "Communicator":
        native = self._live("split")
        child = native.split(int(color), int(key))
        if child is None:
            return COMM_NULL
        comm = Communicator(child, global_ranks)
        if global_ranks is None:
            # Learn the world ranks of the members, so torch-style functions
            # (which name ranks by their world rank) can use this group.
            mine = array("q", [self._global_rank(self.rank)])
            everyone = array("q", [0] * child.size)
            comm._wait(child.all_gather(as_tensor(mine, False, "rank"), as_tensor(everyone, True, "ranks")))
            comm._global_ranks = list(everyone)
        return comm

    # ---------------------------------------------------------------- lifetime
    def destroy(self) -> None:
        """Frees the communicator (local: peers are told this rank left). Safe to call twice."""
        if self._native is not None:
            self._native.destroy()

    close = destroy
    Free = destroy

    def abort(self) -> None:
        """Aborts the communicator: local, never waits for peers; operations in flight fail with ABORTED."""
        if self._native is not None:
            self._native.abort()

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()

    # --------------------------------------------------------------- properties
    @property
    def is_null(self) -> bool:
        """True for :data:`COMM_NULL` (no communicator)."""
        return self._native is None

    def __bool__(self) -> bool:
        return self._native is not None

    @property
    def closed(self) -> bool:
        """True once destroyed or aborted (also after a KeyboardInterrupt aborted it)."""
        return self._native is None or self._native.closed

    @property
    def rank(self) -> int:
        """This process's rank in the communicator."""
        return self._handle("rank").rank

    @property
    def size(self) -> int:
        """The number of ranks."""
        return self._handle("size").size

    def Get_rank(self) -> int:
        """mpi4py spelling of :attr:`rank`."""
        return self.rank

    def Get_size(self) -> int:
        """mpi4py spelling of :attr:`size`."""
        return self.size

    @property
    def transport(self) -> str:
        """``"shm"``, ``"tcp"``, ``"mixed"`` or ``"self"`` (one rank)."""
        return self._live("transport").transport

    @property
    def global_ranks(self) -> List[int]:
        """The default group's (world) rank of each member, in this communicator's rank order."""
        self._handle("global_ranks")
        return list(self._global_ranks or [])

    def set_timeout(self, timeout: Union[float, datetime.timedelta]) -> None:
        """Changes the deadline of later blocking calls (seconds or timedelta)."""
        self._live("set_timeout").set_timeout(_timeout_ms(timeout))

    def __repr__(self) -> str:
        if self._native is None:
            return "<omniccl.COMM_NULL>"
        state = " closed" if self._native.closed else ""
        return f"<omniccl.Communicator rank {self._native.rank} of {self._native.size}{state}>"

    # ---------------------------------------------------------------- internals
    def _handle(self, what: str) -> Any:
        if self._native is None:
            raise InvalidArgumentError(f"{what}: COMM_NULL is not a communicator (this rank is not a member)")
        return self._native

    def _live(self, what: str) -> Any:
        native = self._handle(what)
        if native.closed:
            native.check(what)  # raises, with the status of why it closed
        return native

    def _global_rank(self, rank: int) -> int:
        ranks = self._global_ranks
        return ranks[rank] if ranks is not None else rank

    def _group_rank(self, global_rank: int, what: str) -> int:
        """This communicator's rank of a world rank (torch-style arguments)."""
        ranks = self._global_ranks
        if ranks is None:
            return global_rank
        try:
            return ranks.index(global_rank)
        except ValueError:
            raise InvalidArgumentError(
                f"{what}: world rank {global_rank} is not a member of this group (members: {ranks})") from None

    def _op(self, op: ReduceOpLike) -> Tuple[int, Optional[Callable[[], None]]]:
        """The C value of a reduce op, and how to free it (premultiplied sums are made per call)."""
        op = _check_op(op)
        if isinstance(op, PremulSum):
            native = self._live("make_premul_sum")
            value = native.premul_sum(op.scalar)
            return value, lambda: native.destroy_op(value)
        return int(op), None

    def _reduce_call(self, op: ReduceOpLike, start: Callable[[int], Any]) -> Any:
        """Starts a reduction with the C value of ``op`` (freed once started: the C library copies it)."""
        value, free = self._op(op)
        try:
            return start(value)
        finally:
            if free is not None:
                free()

    @staticmethod
    def _wait(native_work: Any) -> None:
        Work(native_work).wait()

    @staticmethod
    def _run(native_work: Any, async_op: bool, finish: Optional[Callable[[], None]] = None,
             outputs: Optional[List[Any]] = None) -> Optional[Work]:
        """Wraps a started operation: returns the Work if async_op, else waits and returns None."""
        work = Work(native_work, finish, outputs)
        if async_op:
            return work
        work.wait()
        return None

    # ----------------------------------------------------------- buffer methods
    def Barrier(self) -> None:
        """Returns once every rank has entered the barrier."""
        self._wait(self._live("Barrier").barrier())

    def Bcast(self, buf: ArrayLike, root: int = 0) -> None:
        """Copies ``root``'s ``buf`` into every rank's ``buf``."""
        native = self._live("Bcast")
        t = as_tensor(buf, native.rank != root, "buf")
        self._wait(native.broadcast(t, root))

    def Allreduce(self, sendbuf: Any, recvbuf: ArrayLike, op: ReduceOpLike = ReduceOp.SUM) -> None:
        """Reduces every rank's ``sendbuf`` into every rank's ``recvbuf`` (sendbuf may be IN_PLACE)."""
        native = self._live("Allreduce")
        r = as_tensor(recvbuf, True, "recvbuf")
        s = r if sendbuf is IN_PLACE else as_tensor(sendbuf, False, "sendbuf")
        self._wait(self._reduce_call(op, lambda v: native.all_reduce(s, r, v)))

    def Reduce(self, sendbuf: Any, recvbuf: Optional[ArrayLike], op: ReduceOpLike = ReduceOp.SUM,
               root: int = 0) -> None:
        """Reduces every rank's ``sendbuf`` into ``root``'s ``recvbuf`` (ignored elsewhere; IN_PLACE at root)."""
        native = self._live("Reduce")
        if native.rank == root:
            r = as_tensor(recvbuf, True, "recvbuf")
            s = r if sendbuf is IN_PLACE else as_tensor(sendbuf, False, "sendbuf")
        else:
            r, s = None, as_tensor(sendbuf, False, "sendbuf")
        self._wait(self._reduce_call(op, lambda v: native.reduce(s, r, v, root)))

    def Allgather(self, sendbuf: Any, recvbuf: ArrayLike) -> None:
        """Concatenates every rank's ``sendbuf`` (n elements) into every ``recvbuf`` (size * n).

        With IN_PLACE, each rank's contribution is already at its place in ``recvbuf``.
        """
        native = self._live("Allgather")
        r = as_tensor(recvbuf, True, "recvbuf")
        if sendbuf is IN_PLACE:
            n = r.count // native.size
            s = Tensor.slice(r, native.rank * n, n)
        else:
            s = as_tensor(sendbuf, False, "sendbuf")
        self._wait(native.all_gather(s, r))

    def Allgatherv(self, sendbuf: ArrayLike, recvbuf: VSpec) -> None:
        """All-gather with per-rank counts: ``recvbuf`` is ``[buf, counts]`` or ``[buf, counts, displs]``."""
        native = self._live("Allgatherv")
        buf, counts, displs = _vspec(recvbuf, "recvbuf", required=True)
        r = as_tensor(buf, True, "recvbuf")
        s = as_tensor(sendbuf, False, "sendbuf")
        self._wait(native.all_gatherv(s, r, counts, displs))

    def Gather(self, sendbuf: Any, recvbuf: Optional[ArrayLike], root: int = 0) -> None:
        """Collects every rank's ``sendbuf`` (n) into ``root``'s ``recvbuf`` (size * n, rank order)."""
        native = self._live("Gather")
        if native.rank == root:
            r = as_tensor(recvbuf, True, "recvbuf")
            if sendbuf is IN_PLACE:
                n = r.count // native.size
                s = Tensor.slice(r, root * n, n)
            else:
                s = as_tensor(sendbuf, False, "sendbuf")
        else:
            r, s = None, as_tensor(sendbuf, False, "sendbuf")
        self._wait(native.gather(s, r, root))

    def Gatherv(self, sendbuf: ArrayLike, recvbuf: Optional[VSpec], root: int = 0) -> None:
        """Gather with per-rank counts: at ``root``, ``recvbuf`` is ``[buf, counts]`` or ``[buf, counts, displs]``."""
        native = self._live("Gatherv")
        s = as_tensor(sendbuf, False, "sendbuf")
        if native.rank == root:
            buf, counts, displs = _vspec(recvbuf, "recvbuf", required=True)
            r = as_tensor(buf, True, "recvbuf")
        else:
            r, counts, displs = None, None, None
        self._wait(native.gatherv(s, r, counts, displs, root))

    def Scatter(self, sendbuf: Optional[ArrayLike], recvbuf: Any, root: int = 0) -> None:
        """Splits ``root``'s ``sendbuf`` (size * n) into size parts; rank i receives part i in ``recvbuf``.

        At ``root``, ``recvbuf`` may be IN_PLACE (root's part stays where it is).
        """
        native = self._live("Scatter")
        if native.rank == root:
            s = as_tensor(sendbuf, False, "sendbuf")
            if recvbuf is IN_PLACE:
                n = s.count // native.size
                r = Tensor.slice(s, root * n, n)
            else:
                r = as_tensor(recvbuf, True, "recvbuf")
        else:
            s, r = None, as_tensor(recvbuf, True, "recvbuf")
        self._wait(native.scatter(s, r, root))

    def Scatterv(self, sendbuf: Optional[VSpec], recvbuf: ArrayLike, root: int = 0) -> None:
        """Scatter with per-rank counts: at ``root``, ``sendbuf`` is ``[buf, counts]`` or ``[buf, counts, displs]``."""
        native = self._live("Scatterv")
        r = as_tensor(recvbuf, True, "recvbuf")
        if native.rank == root:
            buf, counts, displs = _vspec(sendbuf, "sendbuf", required=True)
            s = as_tensor(buf, False, "sendbuf")
        else:
            s, counts, displs = None, None, None
        self._wait(native.scatterv(s, counts, displs, r, root))

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: ArrayLike, op: ReduceOpLike = ReduceOp.SUM) -> None:
        """Reduces ``sendbuf`` (size * n) over the ranks; rank i receives reduced block i in ``recvbuf`` (n).

        With IN_PLACE, ``recvbuf`` holds the size * n input and the result is
        left in its first n elements (MPI's rule).
        """
        native = self._live("Reduce_scatter_block")
        if sendbuf is IN_PLACE:
            full = as_tensor(recvbuf, True, "recvbuf")
            n = full.count // native.size
            # The result goes to a staging block, then to the first n
            # elements: the rest of recvbuf (this rank's own input block
            # included) is left as it was.
            block = Tensor.empty_like(full, n)
            self._wait(self._reduce_call(op, lambda v: native.reduce_scatter(full, block, v)))
            full.copy_from(block, 0, 0, n)
            return
        s = as_tensor(sendbuf, False, "sendbuf")
        r = as_tensor(recvbuf, True, "recvbuf")
        self._wait(self._reduce_call(op, lambda v: native.reduce_scatter(s, r, v)))

    def Alltoall(self, sendbuf: Any, recvbuf: ArrayLike) -> None:
        """Block j of rank i's ``sendbuf`` becomes block i of rank j's ``recvbuf`` (sendbuf may be IN_PLACE)."""
        native = self._live("Alltoall")
        r = as_tensor(recvbuf, True, "recvbuf")
        s = r if sendbuf is IN_PLACE else as_tensor(sendbuf, False, "sendbuf")
        self._wait(native.all_to_all(s, r))

    def Alltoallv(self, sendbuf: VSpec, recvbuf: VSpec) -> None:
        """All-to-all with per-peer counts: each side is ``[buf, counts]`` or ``[buf, counts, displs]``."""
        native = self._live("Alltoallv")
        sbuf, scounts, sdispls = _vspec(sendbuf, "sendbuf", required=True)
        rbuf, rcounts, rdispls = _vspec(recvbuf, "recvbuf", required=True)
        s = as_tensor(sbuf, False, "sendbuf")
        r = as_tensor(rbuf, True, "recvbuf")
        self._wait(native.all_to_allv(s, scounts, sdispls, r, rcounts, rdispls))

    def Send(self, buf: ArrayLike, dest: int, tag: int = 0) -> None:
        """Sends ``buf`` to rank ``dest`` (matched in order by its Recv; ``tag`` is not used for matching)."""
        self._wait(self._live("Send").send(as_tensor(buf, False, "buf"), dest))

    def Recv(self, buf: ArrayLike, source: int, tag: int = 0) -> None:
        """Receives into ``buf`` from rank ``source`` (sizes must match the send; no ANY_SOURCE)."""
        self._wait(self._live("Recv").recv(as_tensor(buf, True, "buf"), source))

    def Isend(self, buf: ArrayLike, dest: int, tag: int = 0) -> Work:
        """Starts a send; returns a :class:`Work` (mpi4py Request: Wait/Test)."""
        return Work(self._live("Isend").send(as_tensor(buf, False, "buf"), dest))

    def Irecv(self, buf: ArrayLike, source: int, tag: int = 0) -> Work:
        """Starts a receive into ``buf``; returns a :class:`Work` (mpi4py Request: Wait/Test)."""
        return Work(self._live("Irecv").recv(as_tensor(buf, True, "buf"), source), outputs=[buf])

    # ----------------------------------------------------------- object methods
    def barrier(self) -> None:
        """Returns once every rank has entered the barrier (same as :meth:`Barrier`)."""
        self.Barrier()

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Returns ``root``'s ``obj`` (pickled) on every rank."""
        return _objects.bcast(self, obj, root)

    def scatter(self, sendobj: Optional[Sequence[Any]], root: int = 0) -> Any:
        """``root`` passes one object per rank; each rank returns its own."""
        return _objects.scatter(self, sendobj, root)

    def gather(self, sendobj: Any, root: int = 0) -> Optional[List[Any]]:
        """Returns the list of every rank's object at ``root`` (rank order), None elsewhere."""
        return _objects.gather(self, sendobj, root)

    def allgather(self, sendobj: Any) -> List[Any]:
        """Returns the list of every rank's object on every rank."""
        return _objects.allgather(self, sendobj)

    def alltoall(self, sendobj: Sequence[Any]) -> List[Any]:
        """Each rank passes one object per rank; returns the objects the ranks sent to it."""
        return _objects.alltoall(self, sendobj)

    def allreduce(self, sendobj: Any, op: Union[ReduceOpLike, Callable[[Any, Any], Any]] = ReduceOp.SUM) -> Any:
        """Reduces every rank's object with ``op`` (a ReduceOp applied as Python's +, *, min, max, &, |, ^,
        AVG as sum / size, or any function of two objects), in rank order; returns the result on every rank."""
        return _objects.allreduce(self, sendobj, op)

    def reduce(self, sendobj: Any, op: Union[ReduceOpLike, Callable[[Any, Any], Any]] = ReduceOp.SUM,
               root: int = 0) -> Any:
        """Like :meth:`allreduce`, but only ``root`` gets the result (others get None)."""
        return _objects.reduce(self, sendobj, op, root)

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Sends a picklable object to rank ``dest`` (any size; matched in order by its recv)."""
        _objects.send(self, obj, dest)

    def recv(self, source: int, tag: int = 0) -> Any:
        """Receives an object sent by rank ``source`` with :meth:`send`."""
        return _objects.recv(self, source)


def _vspec(spec: Any, name: str, required: bool) -> Tuple[Any, Optional[List[int]], Optional[List[int]]]:
    """Parses a v-variant buffer argument: [buf, counts] or [buf, counts, displs] (mpi4py's form)."""
    if not isinstance(spec, (list, tuple)) or len(spec) not in (2, 3):
        raise TypeError(f"{name} must be [buf, counts] or [buf, counts, displs]")
    buf, counts = spec[0], spec[1]
    displs = spec[2] if len(spec) == 3 else None
    if isinstance(counts, (list, tuple)) and len(counts) == 2 and isinstance(counts[0], (list, tuple)):
        counts, displs = counts  # mpi4py's [buf, (counts, displs)]
    if required and counts is None:
        raise TypeError(f"{name}: counts are required")
    return buf, [int(c) for c in counts], None if displs is None else [int(d) for d in displs]


#: No communicator: what split returns to ranks passing UNDEFINED (MPI.COMM_NULL).
COMM_NULL = Communicator(None)
