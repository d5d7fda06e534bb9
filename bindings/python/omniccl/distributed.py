"""The torch.distributed-style API: module-level functions over a default process group.

Names, arguments and defaults follow ``torch.distributed``: ``src``/``dst``
are ranks in the default (world) group even when ``group`` is given (or use
``group_src``/``group_dst`` for ranks in the group); every collective takes
``group=None`` and ``async_op=False`` and returns a :class:`~omniccl.Work`
when ``async_op`` is true, else None. Results are written into the arrays
passed in. A rank that is not a member of ``group`` does nothing (with a
warning) and gets None, as in torch.
"""

from __future__ import annotations

import atexit
import warnings
import weakref
from typing import Any, List, Optional, Sequence

from ._tensors import (Tensor, as_tensor, as_tensors, check_like, check_same_dtype, pack, rows_to_counts,
                       unpack)
from ._cuda import cuda_stream
from ._omniccl import fast_all_gather, fast_all_reduce, fast_barrier, fast_broadcast
from .comm import COMM_NULL, UNDEFINED, Communicator
from .errors import InvalidArgumentError
from .ops import ReduceOp, ReduceOpLike
from .work import Timeout, Work

__all__ = [
    "init_process_group", "destroy_process_group", "is_initialized", "is_available", "get_rank",
    "get_world_size", "get_backend", "new_group", "get_global_rank", "get_group_rank",
    "get_process_group_ranks", "group", "GroupMember",
    "broadcast", "scatter", "gather", "reduce", "all_reduce", "all_gather", "all_gather_into_tensor",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier",
    "send", "recv", "isend", "irecv",
    "broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list",
]

_BACKEND_NAMES = {"omniccl", "gloo", "nccl", "mpi", "ucc", "cpu:gloo,cuda:nccl"}
_NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                    "init_process_group.")


class group:  # noqa: N801 - torch.distributed's name
    """torch.distributed's ``group`` namespace: ``group.WORLD`` is the default group once initialized."""

    WORLD: Optional[Communicator] = None


class GroupMember:
    """torch.distributed's ``GroupMember``: ``WORLD`` and ``NON_GROUP_MEMBER`` (= ``COMM_NULL``)."""

    WORLD: Optional[Communicator] = None
    NON_GROUP_MEMBER: Communicator = COMM_NULL


_world: Optional[Communicator] = None
_groups: "weakref.WeakSet[Communicator]" = weakref.WeakSet()


# --------------------------------------------------------------------------- setup
def init_process_group(backend: Optional[str] = None, init_method: Optional[str] = None, timeout: Timeout = None,
                       world_size: int = -1, rank: int = -1, store: Any = None, group_name: str = "",
                       pg_options: Any = None, device_id: Any = None, *, transport: Optional[str] = None,
                       algorithm: Optional[str] = None) -> None:
    """Creates the default process group (collective over all ranks); torch's parameters in torch's order.

    Args:
        backend: a torch backend name (``"gloo"``, ``"nccl"``, ``"mpi"``,
            ``"omniccl"``, ...) is accepted and ignored: OmniCCL is the
            backend whatever the name. For code written before this order,
            a URL here (``init_process_group("tcp://host:port")``) is taken
            as ``init_method``.
        init_method: ``"env://"`` (the default: MASTER_ADDR, MASTER_PORT and
            rank/size from RANK/WORLD_SIZE as torchrun and ``python -m
            omniccl.run`` set them, or Open MPI, MPICH or Slurm variables),
            ``"tcp://host:port"`` or ``"file:///path"``.
        timeout: deadline of every blocking call (``datetime.timedelta`` or
            seconds); default OMNICCL_TIMEOUT, else 10 minutes.
        world_size, rank: explicit values, or -1 (or None) for the environment's.
        store: a torch ``Store`` is not supported (raises NotImplementedError);
            pass ``init_method`` instead.
        group_name, pg_options, device_id: accepted for torch compatibility
            and ignored (CPU arrays only in this build).
        transport, algorithm: as OMNICCL_TRANSPORT and OMNICCL_ALGO (keyword only).
    """
    global _world
    if _world is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"backend must be a str or None, not {type(backend).__name__}")
    if backend is not None and "://" in backend:
        if init_method is not None:
            raise ValueError(f"backend {backend!r} looks like a URL and init_method is given too")
        backend, init_method = None, backend
    if backend is not None and backend.lower() not in _BACKEND_NAMES:
        raise ValueError(f"backend {backend!r} is not one of {sorted(_BACKEND_NAMES)} "
                         "(OmniCCL runs whichever is named)")
    if store is not None:
        raise NotImplementedError("init_process_group(store=...): torch Store objects are not supported by "
                                  "OmniCCL; pass init_method='tcp://host:port' or 'file:///path' (or env://)")
    if not isinstance(group_name, str):
        raise TypeError(f"group_name must be a str, not {type(group_name).__name__}")
    del pg_options, device_id  # no per-backend options; CPU arrays only
    if init_method is None:
        init_method = "env://"
    if isinstance(init_method, str) and "://" not in init_method:
        raise ValueError(f"init_method {init_method!r} is not env://, tcp://host:port or file:///path")
    comm = Communicator.init(init_method, rank, world_size, timeout, transport=transport, algorithm=algorithm)
    _world = comm
    group.WORLD = GroupMember.WORLD = comm


def destroy_process_group(group: Optional[Communicator] = None) -> None:
    """Destroys ``group``, or with None the default group and every group made by :func:`new_group`."""
    global _world
    if group is None or group is _world or isinstance(group, _DefaultGroup):
        for g in list(_groups):
            g.destroy()
        _groups.clear()
        if _world is not None:
            _world.destroy()
        _world = None
        globals()["group"].WORLD = GroupMember.WORLD = None
        return
    group.destroy()
    _groups.discard(group)


def is_initialized() -> bool:
    """Whether the default process group exists."""
    return _world is not None


def is_available() -> bool:
    """Always True (for code written against torch.distributed)."""
    return True


def _default() -> Communicator:
    if _world is None:
        raise ValueError(_NOT_INITIALIZED)
    return _world


def _member(group: Optional[Communicator], what: str) -> Optional[Communicator]:
    """The communicator to use, or None (after a warning) if this rank is not in ``group``."""
    comm = _default() if group is None else group
    if not isinstance(comm, Communicator):
        raise TypeError(f"{what}: group must be an omniccl.Communicator (from new_group), not {type(comm).__name__}")
    if comm.is_null:
        warnings.warn(f"Running {what} on a rank which does not belong to the given group.", stacklevel=3)
        return None
    return comm


def _peer(comm: Communicator, rank: Optional[int], group_rank: Optional[int], name: str, what: str) -> int:
    """The group rank for a torch-style (world) rank argument or its group_ variant."""
    if group_rank is not None:
        return int(group_rank)
    if rank is None:
        raise ValueError(f"{what}: {name} is required")
    return comm._group_rank(int(rank), what)


def get_rank(group: Optional[Communicator] = None) -> int:
    """This process's rank in ``group`` (default: the world); -1 if not a member."""
    comm = _default() if group is None else group
    return -1 if comm.is_null else comm.rank


def get_world_size(group: Optional[Communicator] = None) -> int:
    """The number of ranks in ``group`` (default: the world); -1 if not a member."""
    comm = _default() if group is None else group
    return -1 if comm.is_null else comm.size


def get_backend(group: Optional[Communicator] = None) -> str:
    """Always ``"omniccl"``."""
    _default() if group is None else group
    return "omniccl"


def new_group(ranks: Optional[Sequence[int]] = None, timeout: Timeout = None, backend: Optional[str] = None,
              pg_options: Any = None) -> Communicator:
    """Creates a group of the world ranks ``ranks`` (all if None); collective over the whole world.

    Every rank of the default group must call it, members or not. Group rank
    i is the i-th smallest of ``ranks``. Non-members get
    ``GroupMember.NON_GROUP_MEMBER`` (:data:`~omniccl.COMM_NULL`). The group
    is a :class:`~omniccl.Communicator`.
    """
    world = _default()
    size = world.size
    members = sorted({int(r) for r in (range(size) if ranks is None else ranks)})
    bad = [r for r in members if not 0 <= r < size]
    if bad:
        raise InvalidArgumentError(f"new_group: ranks {bad} are outside the world of {size} ranks")
    me = world.rank
    if me in members:
        comm = world._split(0, members.index(me), members)
    else:
        comm = world._split(UNDEFINED, 0, None)
    if not comm.is_null:
        if timeout is not None:
            comm.set_timeout(timeout)
        _groups.add(comm)
    return comm


def get_global_rank(group: Communicator, group_rank: int) -> int:
    """The world rank of ``group``'s rank ``group_rank``."""
    return group.global_ranks[group_rank]


def get_group_rank(group: Communicator, global_rank: int) -> int:
    """``group``'s rank of world rank ``global_rank``."""
    return group._group_rank(global_rank, "get_group_rank")


def get_process_group_ranks(group: Communicator) -> List[int]:
    """The world ranks of ``group``'s members, in group rank order."""
    return group.global_ranks


# ---------------------------------------------------------------- collectives
def broadcast(tensor: Any, src: Optional[int] = None, group: Optional[Communicator] = None,
              async_op: bool = False, group_src: Optional[int] = None, *, stream: Any = None) -> Optional[Work]:
    """Copies rank ``src``'s ``tensor`` into ``tensor`` on every rank of the group.

    ``stream``: the CUDA stream CUDA tensors are ordered on (see :func:`omniccl.cuda_stream`).
    """
    if stream is not None:
        with cuda_stream(stream):
            return broadcast(tensor, src, group, async_op, group_src)
    world = _world
    # The hot path (default group, blocking, a plain array): one native call.
    if (world is not None and group is None and not async_op and group_src is None
            and fast_broadcast(world._native, tensor, src, "tensor") is None):
        return None
    comm = _member(group, "broadcast")
    if comm is None:
        return None
    root = _peer(comm, src, group_src, "src", "broadcast")
    native = comm._live("broadcast")
    t = as_tensor(tensor, native.rank != root, "tensor")
    return comm._run(native.broadcast(t, root, blocking=not async_op), async_op, outputs=[tensor])


def all_reduce(tensor: Any, op: ReduceOpLike = ReduceOp.SUM, group: Optional[Communicator] = None,
               async_op: bool = False, *, stream: Any = None) -> Optional[Work]:
    """Reduces ``tensor`` over the ranks with ``op``; every rank gets the (bit-identical) result in place.

    ``stream``: the CUDA stream CUDA tensors are ordered on (see :func:`omniccl.cuda_stream`).
    """
    if stream is not None:
        with cuda_stream(stream):
            return all_reduce(tensor, op, group, async_op)
    world = _world
    # The hot path (default group, blocking, a plain array and op): one native call.
    if (world is not None and group is None and not async_op
            and fast_all_reduce(world._native, None, tensor, op, "tensor") is None):
        return None
    comm = _member(group, "all_reduce")
    if comm is None:
        return None
    native = comm._live("all_reduce")
    t = as_tensor(tensor, True, "tensor")
    return comm._run(comm._reduce_call(op, lambda v: native.all_reduce(t, t, v, blocking=not async_op)),
                     async_op, outputs=[tensor])


def reduce(tensor: Any, dst: Optional[int] = None, op: ReduceOpLike = ReduceOp.SUM,
           group: Optional[Communicator] = None, async_op: bool = False,
           group_dst: Optional[int] = None, *, stream: Any = None) -> Optional[Work]:
    """Reduces ``tensor`` over the ranks into ``tensor`` on rank ``dst``; other ranks' tensors are unchanged.

    ``stream``: the CUDA stream CUDA tensors are ordered on (see :func:`omniccl.cuda_stream`).
    """
    if stream is not None:
        with cuda_stream(stream):
            return reduce(tensor, dst, op, group, async_op, group_dst)
    comm = _member(group, "reduce")
    if comm is None:
        return None
    root = _peer(comm, dst, group_dst, "dst", "reduce")
    native = comm._live("reduce")
    is_root = native.rank == root
    t = as_tensor(tensor, is_root, "tensor")
    blocking = not async_op
    return comm._run(comm._reduce_call(op, lambda v: native.reduce(t, t if is_root else None, v, root,
                                                                   blocking=blocking)),
                     async_op, outputs=[tensor])


def all_gather(tensor_list: List[Any], tensor: Any, group: Optional[Communicator] = None,
               async_op: bool = False) -> Optional[Work]:
    """Gathers every rank's ``tensor`` into ``tensor_list`` (one array per rank, same shape) on every rank."""
    comm = _member(group, "all_gather")
    if comm is None:
        return None
    native = comm._live("all_gather")
    s = as_tensor(tensor, False, "tensor")
    outs = as_tensors(tensor_list, True, "tensor_list", native.size)
    check_like(outs, s, "tensor_list")
    staging = Tensor.empty_like(s, s.count * native.size)
    return comm._run(native.all_gather(s, staging, blocking=not async_op),
                     async_op, lambda: unpack(staging, outs), list(tensor_list))


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Optional[Communicator] = None,
                           async_op: bool = False, *, stream: Any = None) -> Optional[Work]:
    """Gathers every rank's ``input_tensor`` (n elements) into ``output_tensor`` (size * n, rank order).

    ``stream``: the CUDA stream CUDA tensors are ordered on (see :func:`omniccl.cuda_stream`).
    """
    if stream is not None:
        with cuda_stream(stream):
            return all_gather_into_tensor(output_tensor, input_tensor, group, async_op)
    world = _world
    if (world is not None and group is None and not async_op
            and fast_all_gather(world._native, input_tensor, output_tensor) is None):
        return None
    comm = _member(group, "all_gather_into_tensor")
    if comm is None:
        return None
    native = comm._live("all_gather_into_tensor")
    s = as_tensor(input_tensor, False, "input_tensor")
    r = as_tensor(output_tensor, True, "output_tensor")
    return comm._run(native.all_gather(s, r, blocking=not async_op), async_op, outputs=[output_tensor])


def gather(tensor: Any, gather_list: Optional[List[Any]] = None, dst: int = 0,
           group: Optional[Communicator] = None, async_op: bool = False,
           group_dst: Optional[int] = None) -> Optional[Work]:
    """Gathers every rank's ``tensor`` into ``gather_list`` on rank ``dst`` (None on the other ranks)."""
    comm = _member(group, "gather")
    if comm is None:
        return None
    root = _peer(comm, dst, group_dst, "dst", "gather")
    native = comm._live("gather")
    s = as_tensor(tensor, False, "tensor")
    if native.rank != root:
        if gather_list:
            raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
        return comm._run(native.gather(s, None, root, blocking=not async_op), async_op)
    if gather_list is None:
        raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    outs = as_tensors(gather_list, True, "gather_list", native.size)
    check_like(outs, s, "gather_list")
    staging = Tensor.empty_like(s, s.count * native.size)
    return comm._run(native.gather(s, staging, root, blocking=not async_op),
                     async_op, lambda: unpack(staging, outs), list(gather_list))


def scatter(tensor: Any, scatter_list: Optional[List[Any]] = None, src: int = 0,
            group: Optional[Communicator] = None, async_op: bool = False,
            group_src: Optional[int] = None) -> Optional[Work]:
    """Rank ``src`` sends ``scatter_list[i]`` to rank i, which receives it in ``tensor``."""
    comm = _member(group, "scatter")
    if comm is None:
        return None
    root = _peer(comm, src, group_src, "src", "scatter")
    native = comm._live("scatter")
    r = as_tensor(tensor, True, "tensor")
    if native.rank != root:
        if scatter_list:
            raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
        return comm._run(native.scatter(None, r, root, blocking=not async_op), async_op, outputs=[tensor])
    if scatter_list is None:
        raise ValueError("Argument ``scatter_list`` must be specified on source rank.")
    ins = as_tensors(scatter_list, False, "scatter_list", native.size)
    check_like(ins, r, "scatter_list")
    return comm._run(native.scatter(pack(ins, r), r, root, blocking=not async_op), async_op, outputs=[tensor])


def reduce_scatter(output: Any, input_list: List[Any], op: ReduceOpLike = ReduceOp.SUM,
                   group: Optional[Communicator] = None, async_op: bool = False) -> Optional[Work]:
    """Reduces ``input_list[i]`` over the ranks into rank i's ``output``."""
    comm = _member(group, "reduce_scatter")
    if comm is None:
        return None
    native = comm._live("reduce_scatter")
    r = as_tensor(output, True, "output")
    ins = as_tensors(input_list, False, "input_list", native.size)
    check_like(ins, r, "input_list")
    staging = pack(ins, r)
    return comm._run(comm._reduce_call(op, lambda v: native.reduce_scatter(staging, r, v, blocking=not async_op)),
                     async_op, outputs=[output])


def reduce_scatter_tensor(output: Any, input: Any, op: ReduceOpLike = ReduceOp.SUM,
                          group: Optional[Communicator] = None, async_op: bool = False,
                          *, stream: Any = None) -> Optional[Work]:
    """Reduces ``input`` (size * n elements) over the ranks; rank i receives reduced part i in ``output`` (n).

    ``stream``: the CUDA stream CUDA tensors are ordered on (see :func:`omniccl.cuda_stream`).
    """
    if stream is not None:
        with cuda_stream(stream):
            return reduce_scatter_tensor(output, input, op, group, async_op)
    comm = _member(group, "reduce_scatter_tensor")
    if comm is None:
        return None
    native = comm._live("reduce_scatter_tensor")
    s = as_tensor(input, False, "input")
    r = as_tensor(output, True, "output")
    return comm._run(comm._reduce_call(op, lambda v: native.reduce_scatter(s, r, v, blocking=not async_op)), async_op,
                     outputs=[output])


def all_to_all(output_tensor_list: List[Any], input_tensor_list: List[Any],
               group: Optional[Communicator] = None, async_op: bool = False) -> Optional[Work]:
    """Rank i's ``input_tensor_list[j]`` lands in rank j's ``output_tensor_list[i]`` (sizes may differ per pair)."""
    comm = _member(group, "all_to_all")
    if comm is None:
        return None
    native = comm._live("all_to_all")
    ins = as_tensors(input_tensor_list, False, "input_tensor_list", native.size)
    outs = as_tensors(output_tensor_list, True, "output_tensor_list", native.size)
    check_same_dtype(ins + outs, "input_tensor_list + output_tensor_list")
    send = pack(ins, ins[0])
    recv = Tensor.empty_like(outs[0], sum(t.count for t in outs))
    work = native.all_to_allv(send, [t.count for t in ins], None, recv, [t.count for t in outs], None,
                              blocking=not async_op)
    return comm._run(work, async_op, lambda: unpack(recv, outs), list(output_tensor_list))


def all_to_all_single(output: Any, input: Any, output_split_sizes: Optional[List[int]] = None,
                      input_split_sizes: Optional[List[int]] = None, group: Optional[Communicator] = None,
                      async_op: bool = False, *, stream: Any = None) -> Optional[Work]:
    """Splits ``input`` along dimension 0 and scatters the parts to the ranks, gathering into ``output``.

    Without split sizes dimension 0 is split evenly; otherwise
    ``input_split_sizes[j]`` rows go to rank j and ``output_split_sizes[i]``
    rows come from rank i. ``stream``: the CUDA stream CUDA tensors are
    ordered on (see :func:`omniccl.cuda_stream`).
    """
    if stream is not None:
        with cuda_stream(stream):
            return all_to_all_single(output, input, output_split_sizes, input_split_sizes, group, async_op)
    comm = _member(group, "all_to_all_single")
    if comm is None:
        return None
    native = comm._live("all_to_all_single")
    s = as_tensor(input, False, "input")
    r = as_tensor(output, True, "output")
    if output_split_sizes is None and input_split_sizes is None:
        return comm._run(native.all_to_all(s, r, blocking=not async_op), async_op, outputs=[output])
    send_counts = rows_to_counts(s, input_split_sizes, native.size, "input")
    recv_counts = rows_to_counts(r, output_split_sizes, native.size, "output")
    return comm._run(native.all_to_allv(s, send_counts, None, r, recv_counts, None, blocking=not async_op),
                     async_op, outputs=[output])


def barrier(group: Optional[Communicator] = None, async_op: bool = False,
            device_ids: Optional[List[int]] = None) -> Optional[Work]:
    """Returns once every rank of the group has entered the barrier."""
    world = _world
    if world is not None and group is None and not async_op and fast_barrier(world._native) is None:
        return None
    comm = _member(group, "barrier")
    if comm is None:
        return None
    return comm._run(comm._live("barrier").barrier(blocking=not async_op), async_op)


# ---------------------------------------------------------------- point to point
def isend(tensor: Any, dst: Optional[int] = None, group: Optional[Communicator] = None, tag: int = 0,
          group_dst: Optional[int] = None) -> Optional[Work]:
    """Starts sending ``tensor`` to rank ``dst``; returns a Work.

    Messages between two ranks are matched in the order they were sent
    (``tag`` is accepted for compatibility, not used for matching).
    """
    comm = _member(group, "isend")
    if comm is None:
        return None
    peer = _peer(comm, dst, group_dst, "dst", "isend")
    return comm._run(comm._live("isend").send(as_tensor(tensor, False, "tensor"), peer), True)


def irecv(tensor: Any, src: Optional[int] = None, group: Optional[Communicator] = None, tag: int = 0,
          group_src: Optional[int] = None) -> Optional[Work]:
    """Starts receiving into ``tensor`` from rank ``src`` (required: no any-source receive); returns a Work."""
    return _irecv(tensor, src, group, group_src, "irecv")


def _irecv(tensor: Any, src: Optional[int], group: Optional[Communicator], group_src: Optional[int],
           what: str) -> Optional[Work]:
    """irecv, with messages naming ``what`` the user called (recv or irecv)."""
    comm = _member(group, what)
    if comm is None:
        return None
    if src is None and group_src is None:
        raise ValueError(f"{what}: src is required (OmniCCL has no receive from any source); "
                         f"pass the sending rank, e.g. {what}(tensor, src=0)")
    peer = _peer(comm, src, group_src, "src", what)
    return comm._run(comm._live(what).recv(as_tensor(tensor, True, "tensor"), peer), True, outputs=[tensor])


def send(tensor: Any, dst: Optional[int] = None, group: Optional[Communicator] = None, tag: int = 0,
         group_dst: Optional[int] = None) -> None:
    """Sends ``tensor`` to rank ``dst`` and returns when it is sent (see :func:`isend`)."""
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor: Any, src: Optional[int] = None, group: Optional[Communicator] = None, tag: int = 0,
         group_src: Optional[int] = None) -> int:
    """Receives into ``tensor`` from rank ``src``; returns ``src`` (its world rank), or -1 if not a member."""
    work = _irecv(tensor, src, group, group_src, "recv")
    if work is None:
        return -1
    work.wait()
    if group_src is not None:
        return (_default() if group is None else group).global_ranks[int(group_src)]
    assert src is not None  # irecv checked it
    return int(src)


# ------------------------------------------------------------ object collectives
def broadcast_object_list(object_list: List[Any], src: int = 0, group: Optional[Communicator] = None,
                          device: Any = None, group_src: Optional[int] = None) -> None:
    """Replaces the objects of ``object_list`` on every rank by those of rank ``src`` (same length everywhere)."""
    comm = _member(group, "broadcast_object_list")
    if comm is None:
        return
    root = _peer(comm, src, group_src, "src", "broadcast_object_list")
    result = comm.bcast(list(object_list) if comm.rank == root else None, root)
    if comm.rank != root:
        if len(result) != len(object_list):
            raise InvalidArgumentError(
                f"broadcast_object_list: rank {root} sent {len(result)} objects but object_list has "
                f"{len(object_list)}")
        object_list[:] = result


def all_gather_object(object_list: List[Any], obj: Any, group: Optional[Communicator] = None) -> None:
    """Fills ``object_list`` (one slot per rank) with every rank's ``obj``."""
    comm = _member(group, "all_gather_object")
    if comm is None:
        return
    result = comm.allgather(obj)
    if len(object_list) != len(result):
        raise InvalidArgumentError(f"all_gather_object: object_list has {len(object_list)} slots, not {len(result)}")
    object_list[:] = result


def gather_object(obj: Any, object_gather_list: Optional[List[Any]] = None, dst: int = 0,
                  group: Optional[Communicator] = None, group_dst: Optional[int] = None) -> None:
    """Fills ``object_gather_list`` on rank ``dst`` with every rank's ``obj`` (None elsewhere)."""
    comm = _member(group, "gather_object")
    if comm is None:
        return
    root = _peer(comm, dst, group_dst, "dst", "gather_object")
    if comm.rank == root and object_gather_list is None:
        raise ValueError("Argument ``object_gather_list`` must be specified on destination rank.")
    result = comm.gather(obj, root)
    if result is not None and object_gather_list is not None:
        if len(object_gather_list) != len(result):
            raise InvalidArgumentError(
                f"gather_object: object_gather_list has {len(object_gather_list)} slots, not {len(result)}")
        object_gather_list[:] = result


def scatter_object_list(scatter_object_output_list: List[Any], scatter_object_input_list: Optional[List[Any]] = None,
                        src: int = 0, group: Optional[Communicator] = None,
                        group_src: Optional[int] = None) -> None:
    """Rank ``src`` sends ``scatter_object_input_list[i]`` to rank i, stored in ``scatter_object_output_list[0]``."""
    comm = _member(group, "scatter_object_list")
    if comm is None:
        return
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    root = _peer(comm, src, group_src, "src", "scatter_object_list")
    scatter_object_output_list[0] = comm.scatter(scatter_object_input_list if comm.rank == root else None, root)


# ------------------------------------------------------------------ mpi4py-style world
def _comm_world() -> Communicator:
    """The default group, created from env:// first if needed (``omniccl.COMM_WORLD``)."""
    if _world is None:
        init_process_group()
    return _default()


class _DefaultGroup(Communicator):
    """``omniccl.COMM_WORLD``: the default group, created (env://) by the first operation on it.

    Naming it (``from omniccl import *``, ``help(omniccl)``, ``repr``)
    creates nothing; the first method call or property that needs the
    communicator runs :func:`init_process_group` unless it already ran, as
    mpi4py's ``MPI.COMM_WORLD`` exists once MPI is initialised.
    """

    __slots__ = ()

    def __init__(self) -> None:
        """The one instance is ``omniccl.COMM_WORLD``."""

    @property
    def _native(self) -> Any:  # type: ignore[override]
        world = _world  # the common case first: one global read
        return (world if world is not None else _comm_world())._native

    @property
    def _global_ranks(self) -> Optional[List[int]]:  # type: ignore[override]
        return _comm_world()._global_ranks

    def destroy(self) -> None:
        """Destroys the default group (as :func:`destroy_process_group`); a later use creates it again."""
        if _world is not None:
            destroy_process_group()

    close = destroy
    Free = destroy

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        if _world is None:
            return "<omniccl.COMM_WORLD (created from env:// on first use)>"
        return "<omniccl.COMM_WORLD " + repr(_world)[len("<omniccl."):]

    def __reduce__(self) -> str:
        return "COMM_WORLD"


#: The default group as an mpi4py-style Communicator (created from env:// on first use).
COMM_WORLD: Communicator = _DefaultGroup()


@atexit.register
def _destroy_at_exit() -> None:
    # Free the communicators while the interpreter is whole; peers are told
    # this rank left instead of finding out from a closed socket.
    try:
        destroy_process_group()
    except Exception:  # noqa: BLE001 - nothing useful to do at exit
        pass
