"""The mpi4py-style :class:`Communicator` (also what ``new_group`` and ``split`` return).

Ranks in a Communicator's methods are ranks *in that communicator* (MPI's
rule). Buffer methods (capitalised: ``Allreduce``, ``Bcast``, ...) take
arrays and write results into them; object methods (lower case: ``bcast``,
``allgather``, ...) take any picklable Python object and return results.
Every call blocks (with the GIL released) unless it is an ``I...`` method.
"""

from __future__ import annotations

import datetime
import os
import sys
import warnings
from array import array
from typing import Any, Callable, List, Literal, Optional, Sequence, Tuple, Union

from . import _datatypes, _failure, _nonblocking, _objects, _omniccl, _p2p, _rooted, _userops
from ._omniccl import fast_all_gather, fast_all_reduce, fast_barrier, fast_broadcast
from ._p2p import ANY_SOURCE, ANY_TAG, PROC_NULL, Message, Prequest, RecvStatus, Request
from ._tensors import Tensor, as_tensor
from ._windows import Window
from .errors import InvalidArgumentError, OmniCCLError
from ._messages import in_place, message, vmessage
from .ops import MPIOp, MPIOpLike, PremulSum, ReduceOp, ReduceOpLike, _check_op, logical_value
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


def _launched() -> bool:
    """Whether a launcher set a rank/size pair (the ones env:// reads)."""
    pairs = (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
             ("SLURM_PROCID", "SLURM_NTASKS"))
    return any(os.environ.get(a) or os.environ.get(b) for a, b in pairs)


def _how_to_launch() -> str:
    """The error for env:// in a process no launcher started, with the commands for this script."""
    script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-") else "script.py"
    return ("env:// found no rank and world size: none of RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/SIZE, "
            "PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS is set, so this process was not started by a launcher. "
            f"Start the ranks with one, e.g. 2 local ranks:\n  python -m omniccl.run -n 2 {script}\n"
            f"  torchrun --nproc-per-node 2 {script}\n"
            "or pass rank and world_size (and init_method tcp://host:port) explicitly.")


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
        if native is not None:
            _failure.track(self)  # aborted, not destroyed, if the process dies of an exception

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
        from_env = (None, -1)  # torch's default for "from the environment" is -1
        if init_method == "env://" and (rank in from_env or world_size in from_env) and not _launched():
            raise InvalidArgumentError(_how_to_launch())
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
            child.all_gather(as_tensor(mine, False, "rank"), as_tensor(everyone, True, "ranks"), blocking=True)
            comm._global_ranks = list(everyone)
        return comm

    # ------------------------------------------------------ registered buffers
    def register_window(self, buffer: Any) -> Window:
        """Registers a CUDA array (torch, CuPy, anything with ``__dlpack__``) with the communicator.

        Collective: every rank registers one buffer of its own, in the same
        order. Operations whose buffers lie in registered ones on every rank
        then read the peers' buffers in place on the CUDA IPC path:
        all_reduce (input and output registered), all_gather, broadcast and
        reduce_scatter (input registered). Use the returned :class:`Window`
        with ``with``, or call its ``deregister()``. Memory of PyTorch's
        expandable segments is mapped too; memory of CUDA's virtual memory
        API without a shareable handle type is refused (``UnsupportedError``).
        """
        tensor = as_tensor(buffer, True, "buffer")
        native = self._live("register_window")
        return Window(native, native.window_register(tensor.data_ptr, tensor.nbytes), tensor)

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

    def async_error(self) -> Optional[OmniCCLError]:
        """The error that made the communicator unusable, or None while it is usable.

        NCCL's ``ncclCommGetAsyncError``: after an operation failed (a peer
        died, a deadline passed, a mismatch was reported), every later call
        raises; this returns that error as an exception object without
        raising it, e.g. for a watchdog thread that decides to abort::

            if (err := comm.async_error()) is not None:
                log.error("communicator failed: %s", err)
                comm.abort()
        """
        return self._live("async_error").async_error()

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

    def _any_op_call(self, op: MPIOpLike, what: str, start: Callable[[int], Any]) -> Any:
        """As _reduce_call, also for the logical MPI ops (LAND, LOR, LXOR), which the C library reduces."""
        if isinstance(op, MPIOp):
            return start(logical_value(op, what))
        return self._reduce_call(op, start)

    @staticmethod
    def _wait(native_work: Any) -> None:
        Work(native_work).wait()

    @staticmethod
    def _run(native_work: Any, async_op: bool, finish: Optional[Callable[[], None]] = None,
             outputs: Optional[List[Any]] = None) -> Optional[Work]:
        """Wraps an operation: returns the Work if async_op, else waits and returns None.

        ``native_work`` is None when the operation ran blocking (``blocking=True``, no
        hand-off and no Work): it is complete, so only ``finish`` is left to do.
        """
        if native_work is None:
            if finish is not None:
                finish()
            return None
        work = Work(native_work, finish, outputs)
        if async_op:
            return work
        work.wait()
        return None

    # ----------------------------------------------------------- buffer methods
    # Buffers are mpi4py messages (see omniccl._messages): an array, or
    # [buf, type], [buf, count, type], [buf, (count, displ), type], ... A send
    # buffer of IN_PLACE or None means in place.
    def Barrier(self) -> None:
        """Returns once every rank has entered the barrier."""
        native = self._native
        if native is None or fast_barrier(native) is not None:
            self._live("Barrier").barrier(blocking=True)

    def Bcast(self, buf: Any, root: int = 0) -> None:
        """Copies ``root``'s ``buf`` into every rank's ``buf`` (derived datatypes allowed: ``[buf, count, type]``)."""
        if _datatypes.is_derived(buf):
            return _datatypes.bcast(self, buf, root)
        native = self._native
        if native is not None and fast_broadcast(native, buf, root, "buf") is None:
            return
        native = self._live("Bcast")
        t = message(buf, "buf", native.rank != root)
        native.broadcast(t, root, blocking=True)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: MPIOpLike = ReduceOp.SUM) -> None:
        """Reduces every rank's ``sendbuf`` into every rank's ``recvbuf`` (sendbuf may be IN_PLACE)."""
        if isinstance(op, _userops.Op):
            return _userops.allreduce(self, sendbuf, recvbuf, op)
        native = self._native
        if (native is not None
                and fast_all_reduce(native, None if sendbuf is IN_PLACE else sendbuf, recvbuf, op, "recvbuf") is None):
            return None
        native = self._live("Allreduce")
        r = message(recvbuf, "recvbuf", True)
        s = r if in_place(sendbuf) else message(sendbuf, "sendbuf", False)
        self._any_op_call(op, "Allreduce", lambda v: native.all_reduce(s, r, v, blocking=True))
        return None

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: MPIOpLike = ReduceOp.SUM, root: int = 0) -> None:
        """Reduces every rank's ``sendbuf`` into ``root``'s ``recvbuf`` (ignored elsewhere; IN_PLACE at root)."""
        native = self._live("Reduce")
        if isinstance(op, _userops.Op):
            return _userops.reduce(self, sendbuf, recvbuf, op, root)
        if native.rank == root:
            r = message(recvbuf, "recvbuf", True)
            s = r if in_place(sendbuf) else message(sendbuf, "sendbuf", False)
        else:
            r, s = None, message(sendbuf, "sendbuf", False)
        self._any_op_call(op, "Reduce", lambda v: native.reduce(s, r, v, root, blocking=True))
        return None

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        """Concatenates every rank's ``sendbuf`` (n elements) into every ``recvbuf`` (size * n).

        With IN_PLACE, each rank's contribution is already at its place in ``recvbuf``.
        """
        native = self._native
        if (native is not None and sendbuf is not None and sendbuf is not IN_PLACE
                and fast_all_gather(native, sendbuf, recvbuf) is None):
            return
        native = self._live("Allgather")
        s, r = _rooted.all_gather_args(native, sendbuf, recvbuf)
        native.all_gather(s, r, blocking=True)

    def Allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
        """All-gather with per-rank counts: ``recvbuf`` is a v-message (``[buf, counts, displs, type]``, ...).

        With IN_PLACE, this rank's contribution is already at its place in ``recvbuf``.
        """
        native = self._live("Allgatherv")
        s, r, counts, displs = _rooted.all_gatherv_args(native, sendbuf, recvbuf)
        native.all_gatherv(s, r, counts, displs, blocking=True)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Collects every rank's ``sendbuf`` (n) into ``root``'s ``recvbuf`` (size * n, rank order)."""
        native = self._live("Gather")
        s, r = _rooted.gather_args(native, sendbuf, recvbuf, root)
        native.gather(s, r, root, blocking=True)

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Gather with per-rank counts: at ``root``, ``recvbuf`` is a v-message (IN_PLACE sendbuf at root)."""
        native = self._live("Gatherv")
        s, r, counts, displs = _rooted.gatherv_args(native, sendbuf, recvbuf, root)
        native.gatherv(s, r, counts, displs, root, blocking=True)

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Splits ``root``'s ``sendbuf`` (size * n) into size parts; rank i receives part i in ``recvbuf``.

        At ``root``, ``recvbuf`` may be IN_PLACE (root's part stays where it is).
        """
        native = self._live("Scatter")
        s, r = _rooted.scatter_args(native, sendbuf, recvbuf, root)
        native.scatter(s, r, root, blocking=True)

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Scatter with per-rank counts: at ``root``, ``sendbuf`` is a v-message (IN_PLACE recvbuf at root)."""
        native = self._live("Scatterv")
        s, counts, displs, r = _rooted.scatterv_args(native, sendbuf, recvbuf, root)
        native.scatterv(s, counts, displs, r, root, blocking=True)

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: MPIOpLike = ReduceOp.SUM) -> None:
        """Reduces ``sendbuf`` (size * n) over the ranks; rank i receives reduced block i in ``recvbuf`` (n).

        With IN_PLACE, ``recvbuf`` holds the size * n input and the result is
        left in its first n elements; the rest is left as it was (MPI's rule).
        """
        native = self._live("Reduce_scatter_block")
        if isinstance(op, _userops.Op):
            return _userops.reduce_scatter(self, sendbuf, recvbuf, op, None)
        if in_place(sendbuf):
            full = message(recvbuf, "recvbuf", True, native.size)
            n = full.count // native.size
            # The result goes to a staging block, then to the first n
            # elements: the rest of recvbuf (this rank's own input block
            # included) is left as it was.
            block = Tensor.empty_like(full, n)
            self._any_op_call(op, "Reduce_scatter_block",
                              lambda v: native.reduce_scatter(full, block, v, blocking=True))
            full.copy_from(block, 0, 0, n)
            return None
        r = message(recvbuf, "recvbuf", True)
        s = message(sendbuf, "sendbuf", False, native.size)
        self._any_op_call(op, "Reduce_scatter_block", lambda v: native.reduce_scatter(s, r, v, blocking=True))
        return None

    def Reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Optional[Sequence[int]] = None,
                       op: MPIOpLike = ReduceOp.SUM) -> None:
        """Reduce-scatter with per-rank counts: rank i gets ``recvcounts[i]`` reduced elements.

        ``recvcounts`` None means each rank's ``recvbuf`` size (as mpi4py).
        Built on Allreduce (the C library has no per-rank-count
        reduce-scatter yet): it moves size times the data of a native one.
        With IN_PLACE the input is ``recvbuf`` and the result lands in its
        first ``recvcounts[rank]`` elements.
        """
        native = self._live("Reduce_scatter")
        if isinstance(op, _userops.Op):
            return _userops.reduce_scatter(self, sendbuf, recvbuf, op, recvcounts)
        size, rank = native.size, native.rank
        if in_place(sendbuf):
            full = message(recvbuf, "recvbuf", True)
            mine = None
        else:
            full = message(sendbuf, "sendbuf", False)
            mine = message(recvbuf, "recvbuf", True)
        if recvcounts is None:
            if mine is None:
                raise InvalidArgumentError("Reduce_scatter: recvcounts are required with IN_PLACE")
            counts = self.allgather(mine.count)
        else:
            counts = [int(c) for c in recvcounts]
            if len(counts) != size:
                raise InvalidArgumentError(f"Reduce_scatter: {len(counts)} recvcounts for {size} ranks")
        if sum(counts) > full.count:
            raise InvalidArgumentError(f"Reduce_scatter: the input has {full.count} elements, the counts "
                                       f"add up to {sum(counts)}")
        whole = Tensor.slice(full, 0, sum(counts))
        out = full if mine is None else mine
        staging = Tensor.empty_like(whole, whole.count)
        self._any_op_call(op, "Reduce_scatter", lambda v: native.all_reduce(whole, staging, v, blocking=True))
        out.copy_from(staging, 0, sum(counts[:rank]), counts[rank])
        return None

    def Scan(self, sendbuf: Any, recvbuf: Any, op: MPIOpLike = ReduceOp.SUM) -> None:
        """Inclusive prefix reduction: rank i gets the reduction of ranks 0..i's ``sendbuf`` (IN_PLACE allowed).

        ``op``: SUM, PROD, MIN, MAX, the bitwise ops or LAND/LOR/LXOR (occl_scan);
        AVG and PREMUL_SUM have no prefix meaning (InvalidArgumentError).
        """
        self._scan("Scan", sendbuf, recvbuf, op, exclusive=False)

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: MPIOpLike = ReduceOp.SUM) -> None:
        """Exclusive prefix reduction: rank i > 0 gets the reduction of ranks 0..i-1; rank 0's recvbuf is untouched.

        Ops as :meth:`Scan` (occl_exscan).
        """
        self._scan("Exscan", sendbuf, recvbuf, op, exclusive=True)

    def _scan(self, what: str, sendbuf: Any, recvbuf: Any, op: MPIOpLike, exclusive: bool) -> None:
        native = self._live(what)
        r = message(recvbuf, "recvbuf", True)
        s = r if in_place(sendbuf) else message(sendbuf, "sendbuf", False)
        self._any_op_call(op, what, lambda v: native.scan(s, r, v, exclusive, blocking=True))
        return None

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        """Block j of rank i's ``sendbuf`` becomes block i of rank j's ``recvbuf`` (sendbuf may be IN_PLACE)."""
        native = self._live("Alltoall")
        r = message(recvbuf, "recvbuf", True, native.size)
        s = r if in_place(sendbuf) else message(sendbuf, "sendbuf", False, native.size)
        native.all_to_all(s, r, blocking=True)

    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        """All-to-all with per-peer counts: each side is a v-message (``[buf, counts, displs, type]``, ...)."""
        native = self._live("Alltoallv")
        r, rcounts, rdispls = vmessage(recvbuf, "recvbuf", True, native.size)
        if in_place(sendbuf):
            s, scounts, sdispls = r, rcounts, rdispls
        else:
            s, scounts, sdispls = vmessage(sendbuf, "sendbuf", False, native.size)
        native.all_to_allv(s, scounts, sdispls, r, rcounts, rdispls, blocking=True)

    def Alltoallw(self, sendbuf: Any, recvbuf: Any) -> None:
        """All-to-all with a count, byte displacement and datatype per peer (sendbuf may be IN_PLACE).

        Each side is ``[buf, (counts, displs), types]`` or ``[buf, counts,
        displs, types]``; displacements are in bytes, types are datatypes
        (``omniccl.INT``, derived ones, typecodes). Each block is packed to
        contiguous bytes with numpy, the bytes go by :meth:`Alltoallv`, and
        the receiver unpacks them with its own types.
        """
        _datatypes.alltoallw(self, sendbuf, recvbuf)

    # Non-blocking collectives (omniccl._nonblocking): each returns a Request
    # (Wait, Test, Request.Waitall, ...); buffers stay untouched until it completes.
    def Ibarrier(self) -> Request:
        """Starts a barrier; the request completes once every rank has entered it."""
        return _nonblocking.ibarrier(self)

    def Ibcast(self, buf: Any, root: int = 0) -> Request:
        """Starts a :meth:`Bcast`."""
        return _nonblocking.ibcast(self, buf, root)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: MPIOpLike = ReduceOp.SUM) -> Request:
        """Starts an :meth:`Allreduce`."""
        return _nonblocking.iallreduce(self, sendbuf, recvbuf, op)

    def Ireduce(self, sendbuf: Any, recvbuf: Any, op: MPIOpLike = ReduceOp.SUM, root: int = 0) -> Request:
        """Starts a :meth:`Reduce`."""
        return _nonblocking.ireduce(self, sendbuf, recvbuf, op, root)

    def Iallgather(self, sendbuf: Any, recvbuf: Any) -> Request:
        """Starts an :meth:`Allgather`."""
        return _nonblocking.iallgather(self, sendbuf, recvbuf)

    def Iallgatherv(self, sendbuf: Any, recvbuf: Any) -> Request:
        """Starts an :meth:`Allgatherv`."""
        return _nonblocking.iallgatherv(self, sendbuf, recvbuf)

    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        """Starts a :meth:`Gather`."""
        return _nonblocking.igather(self, sendbuf, recvbuf, root)

    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        """Starts a :meth:`Gatherv`."""
        return _nonblocking.igatherv(self, sendbuf, recvbuf, root)

    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        """Starts a :meth:`Scatter`."""
        return _nonblocking.iscatter(self, sendbuf, recvbuf, root)

    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        """Starts a :meth:`Scatterv`."""
        return _nonblocking.iscatterv(self, sendbuf, recvbuf, root)

    def Ialltoall(self, sendbuf: Any, recvbuf: Any) -> Request:
        """Starts an :meth:`Alltoall`."""
        return _nonblocking.ialltoall(self, sendbuf, recvbuf)

    def Ialltoallv(self, sendbuf: Any, recvbuf: Any) -> Request:
        """Starts an :meth:`Alltoallv`."""
        return _nonblocking.ialltoallv(self, sendbuf, recvbuf)

    def Ialltoallw(self, sendbuf: Any, recvbuf: Any) -> Request:
        """:meth:`Alltoallw`, run to completion; returns a request that is already complete."""
        return _nonblocking.completed(lambda: self.Alltoallw(sendbuf, recvbuf))

    def Ireduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: MPIOpLike = ReduceOp.SUM) -> Request:
        """Starts a :meth:`Reduce_scatter_block`."""
        return _nonblocking.ireduce_scatter_block(self, sendbuf, recvbuf, op)

    def Ireduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Optional[Sequence[int]] = None,
                        op: MPIOpLike = ReduceOp.SUM) -> Request:
        """:meth:`Reduce_scatter`, run to completion; returns a request that is already complete."""
        return _nonblocking.completed(lambda: self.Reduce_scatter(sendbuf, recvbuf, recvcounts, op))

    def Iscan(self, sendbuf: Any, recvbuf: Any, op: MPIOpLike = ReduceOp.SUM) -> Request:
        """:meth:`Scan`, run to completion; returns a request that is already complete."""
        return _nonblocking.completed(lambda: self.Scan(sendbuf, recvbuf, op))

    def Iexscan(self, sendbuf: Any, recvbuf: Any, op: MPIOpLike = ReduceOp.SUM) -> Request:
        """:meth:`Exscan`, run to completion; returns a request that is already complete."""
        return _nonblocking.completed(lambda: self.Exscan(sendbuf, recvbuf, op))

    # Point-to-point (omniccl._p2p): tags are matched, ANY_SOURCE / ANY_TAG
    # receive from any rank / with any tag, a receive buffer is an upper bound
    # (status says how much came), dest/source may be this rank or PROC_NULL.
    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Sends ``buf`` to rank ``dest`` with ``tag``; returns once ``buf`` may be reused.

        With a derived datatype (``[buf, count, type]``) the elements are packed and sent as elements
        of its base type.
        """
        if _datatypes.is_derived(buf):
            return _datatypes.send(self, buf, dest, tag)
        self._live("Send").send(_p2p_message(buf, "buf", False, dest), dest, blocking=True, tag=tag)

    def Recv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: Optional[RecvStatus] = None) -> None:
        """Receives into ``buf`` the first message from ``source`` with ``tag``; fills ``status``.

        ``buf`` is an upper bound: a smaller message fills its start (``status.Get_count()``
        says how much came); a larger one raises :class:`~omniccl.TruncatedError`. With a derived
        datatype (``[buf, count, type]``) the elements arrive packed and are unpacked in type-map order.
        """
        if _datatypes.is_derived(buf):
            return _datatypes.recv(self, buf, source, tag, status)
        st = self._live("Recv").recv(_p2p_message(buf, "buf", True, source), source, blocking=True, tag=tag)
        if status is not None:
            status._fill(st)

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Starts a send; returns a :class:`Request` (Wait/Test, falsy once complete)."""
        return Request(self._live("Isend").send(_p2p_message(buf, "buf", False, dest), dest, tag=tag))

    def Irecv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Starts a receive into ``buf``; returns a :class:`Request` (its Wait fills a status)."""
        native = self._live("Irecv").recv(_p2p_message(buf, "buf", True, source), source, tag=tag)
        return Request(native, outputs=[buf], recv=True)

    # Send modes. A synchronous send (Ssend/Issend, occl_ssend_tagged)
    # completes only once a receive has matched its message; a ready send may
    # be used only when the receive has been posted, so a standard send is a
    # correct one. Buffered sends copy the message and return at once,
    # accounted against the buffer given to omniccl.Attach_buffer.
    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """A synchronous send: returns once a receive on ``dest`` has matched the message.

        To this rank itself the receive must be posted first (else
        :class:`~omniccl.MismatchError`: it could never be matched); use
        :meth:`Issend` otherwise.
        """
        self._live("Ssend").send(_p2p_message(buf, "buf", False, dest), dest, blocking=True, tag=tag,
                                 synchronous=True)

    def Issend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Starts a synchronous send: its request completes once a receive on ``dest`` has matched the message."""
        return Request(self._live("Issend").send(_p2p_message(buf, "buf", False, dest), dest, tag=tag,
                                                 synchronous=True))

    def Rsend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """A ready send (the receive must be posted already), done as a standard :meth:`Send`, as MPI allows."""
        self._live("Rsend").send(_p2p_message(buf, "buf", False, dest), dest, blocking=True, tag=tag)

    def Irsend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """A non-blocking ready send, done as a standard :meth:`Isend`, as MPI allows."""
        return Request(self._live("Irsend").send(_p2p_message(buf, "buf", False, dest), dest, tag=tag))

    def Bsend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """A buffered send: copies ``buf`` and returns at once (see :func:`omniccl.Attach_buffer`)."""
        self._bsend(buf, dest, tag, "Bsend")

    def Ibsend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """A buffered send returning a request, complete as soon as ``buf`` was copied."""
        return self._bsend(buf, dest, tag, "Ibsend")

    def _bsend(self, buf: Any, dest: int, tag: int, what: str) -> Request:
        native = self._live(what)
        if dest == PROC_NULL:
            return Request(None)  # moves nothing; needs no buffer space
        t = _p2p_message(buf, "buf", False, dest)
        copy = Tensor.empty_like(t, t.count)
        copy.copy_from(t)
        return _p2p.buffered(lambda: Request(native.send(copy, dest, tag=tag)), t.nbytes, what)

    # Persistent requests: each Start is the Isend/Irecv (or Ibsend) described here.
    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent standard send of ``buf`` to ``dest`` (inactive until ``Start``)."""
        self._live("Send_init")
        return Prequest(lambda: self.Isend(buf, dest, tag))

    def Ssend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent synchronous send (each Start is an :meth:`Issend`)."""
        self._live("Ssend_init")
        return Prequest(lambda: self.Issend(buf, dest, tag))

    def Rsend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent :meth:`Irsend` (a standard send)."""
        self._live("Rsend_init")
        return Prequest(lambda: self.Irsend(buf, dest, tag))

    def Bsend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent buffered send (each Start copies ``buf`` as :meth:`Ibsend`)."""
        self._live("Bsend_init")
        return Prequest(lambda: self.Ibsend(buf, dest, tag))

    def Recv_init(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Prequest:
        """A persistent receive into ``buf`` (inactive until ``Start``; Wait fills a status)."""
        self._live("Recv_init")
        return Prequest(lambda: self.Irecv(buf, source, tag))

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Optional[RecvStatus] = None) -> None:
        """Sends ``sendbuf`` to ``dest`` and receives into ``recvbuf`` from ``source``, both at once."""
        if recvbuf is None and source != PROC_NULL:
            raise InvalidArgumentError("Sendrecv: recvbuf is required (use Sendrecv_replace to reuse sendbuf)")
        native = self._live("Sendrecv")
        r = Request(native.recv(_p2p_message(recvbuf, "recvbuf", True, source), source, tag=recvtag), recv=True)
        try:
            native.send(_p2p_message(sendbuf, "sendbuf", False, dest), dest, blocking=True, tag=sendtag)
        finally:
            r.Wait(status)

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int = ANY_SOURCE,
                         recvtag: int = ANY_TAG, status: Optional[RecvStatus] = None) -> None:
        """Sends ``buf`` to ``dest``, then replaces it with the message from ``source``."""
        native = self._live("Sendrecv_replace")
        recv = _p2p_message(buf, "buf", True, source)
        copy = Tensor.empty_like(recv, recv.count)
        copy.copy_from(recv)
        r = Request(native.recv(recv, source, tag=recvtag), recv=True)
        try:
            native.send(copy, dest, blocking=True, tag=sendtag)
        finally:
            r.Wait(status)

    # Probes (occl_probe / occl_iprobe): they look at the first matching
    # message in arrival order without receiving it; a receive from this
    # thread naming the status's source and tag then gets exactly that one.
    def Probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,  # noqa: N802 - mpi4py's names
              status: Optional[RecvStatus] = None) -> Literal[True]:
        """Waits until a message from ``source`` with ``tag`` can be received; fills ``status``; returns True.

        The message is not received. ``status.Get_count(datatype)`` sizes a buffer for it. A source
        of PROC_NULL returns at once with source PROC_NULL, tag ANY_TAG and 0 bytes.
        """
        st = self._live("Probe").probe(source, tag)
        if status is not None:
            status._fill(st)
        return True

    def Iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,  # noqa: N802 - mpi4py's names
               status: Optional[RecvStatus] = None) -> bool:
        """Whether a message from ``source`` with ``tag`` has arrived (does not wait); fills ``status`` if so.

        The message is not received; ``status`` is left alone when nothing matched.
        """
        st = self._live("Iprobe").iprobe(source, tag)
        if st is None:
            return False
        if status is not None:
            status._fill(st)
        return True

    def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: Optional[RecvStatus] = None) -> RecvStatus:
        """Waits until a message from ``source`` with ``tag`` can be received, without receiving it.

        Returns its :class:`RecvStatus` (always true, where mpi4py returns True) and fills ``status``
        if given. Works for objects (:meth:`send`) and buffers (:meth:`Send`) alike; for an object the
        size is that of its first message.
        """
        st = self._live("probe").probe(source, tag)
        out = RecvStatus()
        out._fill(st)
        if status is not None:
            status._fill(st)
        return out

    def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Optional[RecvStatus] = None) -> Optional[RecvStatus]:
        """The :class:`RecvStatus` of a matching message that has arrived, or None; does not wait.

        Its truth value is mpi4py's flag. ``status`` (if given) is filled when one matched.
        """
        st = self._live("iprobe").iprobe(source, tag)
        if st is None:
            return None
        out = RecvStatus()
        out._fill(st)
        if status is not None:
            status._fill(st)
        return out

    def Mprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,  # noqa: N802 - mpi4py's names
               status: Optional[RecvStatus] = None) -> Message:
        """Matched probe: waits for a message from ``source`` with ``tag`` and takes it out of matching.

        Returns a :class:`Message` whose ``Recv``/``Irecv`` receive exactly that message (no other
        receive can get it); fills ``status``. PROC_NULL gives MESSAGE_NO_PROC at once.
        """
        msg = _p2p.matched_probe(self, source, tag, status, True, "Mprobe")
        assert msg is not None
        return msg

    def Improbe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,  # noqa: N802
                status: Optional[RecvStatus] = None) -> Optional[Message]:
        """Matched probe that does not wait: the :class:`Message` found (taken out of matching), or None."""
        return _p2p.matched_probe(self, source, tag, status, False, "Improbe")

    def mprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Optional[RecvStatus] = None) -> Message:
        """Matched probe for an object: as :meth:`Mprobe`; receive it with the Message's ``recv``/``irecv``."""
        msg = _p2p.matched_probe(self, source, tag, status, True, "mprobe")
        assert msg is not None
        return msg

    def improbe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                status: Optional[RecvStatus] = None) -> Optional[Message]:
        """Matched probe for an object that does not wait: the :class:`Message` found, or None."""
        return _p2p.matched_probe(self, source, tag, status, False, "improbe")

    def Dup(self) -> "Communicator":
        """A new communicator with the same ranks in the same order (collective; free it with Free)."""
        return self._split(0, self.rank, self._global_ranks)

    def Clone(self) -> "Communicator":
        """Same as :meth:`Dup`."""
        return self.Dup()

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
        """Reduces every rank's object with ``op`` (a ReduceOp applied as Python's ``+``, ``*``, ``min``, ``max``, ``&``, ``|``, ``^``,
        AVG as sum / size, or any function of two objects), in rank order; returns the result on every rank."""
        return _objects.allreduce(self, sendobj, op)

    def reduce(self, sendobj: Any, op: Union[ReduceOpLike, Callable[[Any, Any], Any]] = ReduceOp.SUM,
               root: int = 0) -> Any:
        """Like :meth:`allreduce`, but only ``root`` gets the result (others get None)."""
        return _objects.reduce(self, sendobj, op, root)

    def scan(self, sendobj: Any, op: Union[MPIOpLike, Callable[[Any, Any], Any]] = ReduceOp.SUM) -> Any:
        """Inclusive prefix reduction of Python objects: rank i gets ranks 0..i's objects folded with ``op``."""
        return _objects.scan(self, sendobj, op, exclusive=False)

    def exscan(self, sendobj: Any, op: Union[MPIOpLike, Callable[[Any, Any], Any]] = ReduceOp.SUM) -> Any:
        """Exclusive prefix reduction of Python objects: rank i > 0 gets ranks 0..i-1's; rank 0 gets None."""
        return _objects.scan(self, sendobj, op, exclusive=True)

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Sends a picklable object (any size) to rank ``dest`` with ``tag``."""
        _p2p.send(self, obj, dest, tag, "send")

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Sends an object synchronously: returns once a receive on ``dest`` has matched it (see :meth:`Ssend`)."""
        _p2p.send(self, obj, dest, tag, "ssend", synchronous=True)

    def bsend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """A buffered object send: returns at once (see :func:`omniccl.Attach_buffer`)."""
        _p2p.ibsend(self, obj, dest, tag, "bsend")

    def ibsend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """A buffered object send returning a request that is already complete."""
        return _p2p.ibsend(self, obj, dest, tag, "ibsend")

    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Starts sending an object; returns a :class:`Request`."""
        return _p2p.isend(self, obj, dest, tag, "isend")

    def issend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Starts a synchronous object send: the request completes once a receive on ``dest`` has matched it."""
        return _p2p.isend(self, obj, dest, tag, "issend", synchronous=True)

    def recv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: Optional[RecvStatus] = None) -> Any:
        """Receives an object sent with :meth:`send`/:meth:`isend`.

        ``buf`` is ignored; giving one warns (UserWarning), as mpi4py 4 does ("the 'buf' argument is
        deprecated").
        """
        if buf is not None:
            warnings.warn("the 'buf' argument is deprecated", UserWarning, stacklevel=2)
        return _p2p.recv(self, source, tag, status, "recv")

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Starts receiving an object; the request's ``wait()`` returns it."""
        return _p2p.irecv(self, source, tag, "irecv")

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Optional[RecvStatus] = None) -> Any:
        """Sends ``sendobj`` to ``dest`` and returns the object received from ``source``."""
        r = _p2p.irecv(self, source, recvtag, "sendrecv")
        try:
            _p2p.send(self, sendobj, dest, sendtag, "sendrecv")
        finally:
            value = r.wait(status)
        return value


def _p2p_message(buf: Any, name: str, writable: bool, peer: int) -> Tensor:
    """message(buf), where None is an empty buffer as mpi4py allows: for a PROC_NULL peer, and as the
    buffer of a spec with count 0 (``[None, 0, MPI.BYTE]``)."""
    if buf is None and peer == PROC_NULL:
        buf = bytearray(0)
    elif isinstance(buf, (list, tuple)) and len(buf) == 3 and buf[0] is None:
        count = buf[1]
        if isinstance(count, (list, tuple)) and len(count) == 2:
            count = count[0]  # (count, displ)
        if count == 0 or peer == PROC_NULL:
            buf = [bytearray(0), 0, buf[2]]
    return message(buf, name, writable)


# mpi4py Comm methods that OmniCCL does not offer: each raises
# NotImplementedError naming the mpi4py feature (not AttributeError, so that
# code ported from mpi4py learns why).
_NOT_OFFERED = {
    "Isendrecv": "Isendrecv", "Isendrecv_replace": "Isendrecv_replace",
    "Get_group": "MPI groups (Get_group)", "Create": "MPI groups (Create)", "Create_group": "MPI groups (Create_group)",
    "Split_type": "Split_type", "Create_cart": "topologies (Create_cart)", "Create_graph": "topologies (Create_graph)",
    "Create_dist_graph": "topologies (Create_dist_graph)", "Spawn": "dynamic processes (Spawn)",
    "Get_attr": "attributes (Get_attr)", "Set_attr": "attributes (Set_attr)", "Get_name": "Get_name",
    "Set_name": "Set_name", "Abort": "Abort (use abort(), which is local)",
    "Neighbor_allgather": "neighbourhood collectives", "Neighbor_alltoall": "neighbourhood collectives",
}


def _not_offered(name: str, feature: str) -> Callable[..., Any]:
    def method(self: "Communicator", *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"Communicator.{name}: mpi4py's {feature} is not offered by OmniCCL")
    method.__name__ = name
    method.__doc__ = f"Not offered: raises NotImplementedError (mpi4py's {feature})."
    return method


for _name, _feature in _NOT_OFFERED.items():
    setattr(Communicator, _name, _not_offered(_name, _feature))
del _name, _feature


#: No communicator: what split returns to ranks passing UNDEFINED (MPI.COMM_NULL).
COMM_NULL = Communicator(None)


