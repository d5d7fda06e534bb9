"""``ProcessGroupOmniCCL``: a PyTorch process group whose operations run on an OmniCCL communicator.

PyTorch calls these methods with group ranks (``opts.rootRank``, the peer of
``send``) and one tensor per list (one device per process); every method
starts OmniCCL operations without waiting and returns a
:class:`~omniccl.torch._work.TorchWork`. Operations on CUDA tensors are
ordered on PyTorch's current stream of the tensor's device, as with NCCL:
the call returns once the work is enqueued; tensor copies into or out of
staging buffers are enqueued on the same stream.

Operations that PyTorch passes as lists (``all_gather`` into a list,
``reduce_scatter`` from a list, ``gather``, ``scatter``, ``all_to_all``)
run as one OmniCCL operation on a flat staging tensor made by torch, copied
out once it ended (CPU) or right after it on the stream (CUDA).
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
from typing import Any, Callable, ContextManager, List, Optional, Sequence

import torch
import torch.distributed as dist

from .. import distributed as _odist
from .._cuda import cuda_stream
from .._p2p import ANY_SOURCE
from .._tensors import as_tensor
from ..comm import Communicator, get_unique_id
from ..ops import ReduceOp, make_premul_sum
from ._work import Completer, KeepAlive, TorchWork

__all__ = ["ProcessGroupOmniCCL", "create_process_group", "UNIQUE_ID_KEY"]

#: The store key under which rank 0 publishes the communicator's unique id
#: (PyTorch hands each group a store with a prefix of its own).
UNIQUE_ID_KEY = "omniccl/unique_id"

_OPS = {"SUM": ReduceOp.SUM, "AVG": ReduceOp.AVG, "PRODUCT": ReduceOp.PRODUCT, "MIN": ReduceOp.MIN,
        "MAX": ReduceOp.MAX, "BAND": ReduceOp.BAND, "BOR": ReduceOp.BOR, "BXOR": ReduceOp.BXOR}
_names = (f"omniccl-pg-{i}" for i in itertools.count())


def _premul_factor(op: Any) -> float:
    """The factor of a PREMUL_SUM made by ``dist._make_nccl_premul_sum``, where this PyTorch exposes it."""
    for getter in (lambda: op.__getstate__(), lambda: op.supplement):
        try:
            state = getter()
        except (AttributeError, TypeError, RuntimeError):
            continue
        for value in state if isinstance(state, tuple) else (state,):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                return float(value.item())
    raise NotImplementedError(
        f"PREMUL_SUM: PyTorch {torch.__version__} does not let a backend read the factor of "
        "dist._make_nccl_premul_sum (its gloo backend has no PREMUL_SUM either); scale the tensor and use "
        "ReduceOp.SUM, or omniccl.all_reduce(t, op=omniccl.make_premul_sum(factor))")


def reduce_op(op: Any) -> Any:
    """The OmniCCL op for a torch ``ReduceOp`` (or ``ReduceOp.RedOpType``)."""
    kind = getattr(op, "op", op)
    name = getattr(kind, "name", None)
    if name in _OPS:
        return _OPS[name]
    if name == "PREMUL_SUM":
        return make_premul_sum(_premul_factor(op))
    raise ValueError(f"omniccl: unknown reduce op {op!r}")


def _one(tensors: Sequence[Any], what: str) -> Any:
    """The single tensor (or list) of a per-device list: one device per process."""
    if len(tensors) != 1:
        raise ValueError(f"omniccl {what}: one tensor per process is supported (got a list of {len(tensors)}; "
                         "use one process per device)")
    return tensors[0]


def _d(t: torch.Tensor) -> torch.Tensor:
    """``t`` without autograd (DLPack refuses tensors that require grad); same storage."""
    return t.detach()


def _flat_like(t: torch.Tensor, count: int) -> torch.Tensor:
    return torch.empty((count,), dtype=t.dtype, device=t.device)


def _check_like(tensors: Sequence[torch.Tensor], like: torch.Tensor, what: str) -> None:
    """Raises unless every tensor of ``tensors`` has the dtype, size and device of ``like``."""
    for t in tensors:
        if t.dtype != like.dtype or t.numel() != like.numel() or t.device != like.device:
            raise ValueError(f"omniccl {what}: every tensor of the list must have the dtype, size and device of "
                             f"the tensor ({like.dtype}, {like.numel()} elements, {like.device}), got {t.dtype}, "
                             f"{t.numel()}, {t.device}")


def _cat(tensors: Sequence[torch.Tensor], like: torch.Tensor, what: str) -> torch.Tensor:
    """One flat tensor of ``tensors`` (each the dtype and size of ``like``) in order."""
    _check_like(tensors, like, what)
    return torch.cat([_d(t).reshape(-1) for t in tensors]) if tensors else _flat_like(like, 0)


def _copy_out(flat: torch.Tensor, tensors: Sequence[torch.Tensor]) -> Callable[[], None]:
    """A function that copies consecutive parts of ``flat`` into ``tensors``."""
    def copy() -> None:
        offset = 0
        with torch.no_grad():
            for t in tensors:
                n = t.numel()
                t.copy_(flat[offset:offset + n].view(t.shape))
                offset += n
    return copy


def _stream(t: torch.Tensor) -> ContextManager[Any]:
    """Orders OmniCCL's work on ``t`` on PyTorch's current stream of its device (CUDA tensors)."""
    if t.is_cuda:
        return cuda_stream(torch.cuda.current_stream(t.device))
    return contextlib.nullcontext()


class ProcessGroupOmniCCL(dist.ProcessGroup):
    """The process group of backend ``"omniccl"``: made by ``dist.init_process_group("omniccl")`` or
    ``dist.new_group(..., backend="omniccl")`` once :mod:`omniccl.torch` is imported.

    Args:
        store: the PyTorch ``Store`` of this group (rank 0 publishes the
            communicator's unique id in it; the others wait for it).
        rank, size: this process's rank in the group and the group's size.
        timeout: deadline of the rendezvous and of every operation.
    """

    def __init__(self, store: Any, rank: int, size: int, timeout: Optional[datetime.timedelta] = None) -> None:
        """Creates the group's communicator (collective over the group's ``size`` processes)."""
        super().__init__(rank, size)
        self._comm = _rendezvous(store, rank, size, timeout)
        self._keep = KeepAlive()
        self._completer = Completer(next(_names))
        self._coalesced: Optional[List[TorchWork]] = None

    @property
    def communicator(self) -> Communicator:
        """The OmniCCL communicator of the group (for OmniCCL's own API on the same ranks)."""
        return self._comm

    def getBackendName(self) -> str:  # noqa: N802 - PyTorch's name
        """``"omniccl"``."""
        return "omniccl"

    def _get_backend_name(self) -> str:
        return "omniccl"

    # What PyTorch 2.x asks of a group's backend (``pg._get_backend(device).supports_coalescing``):
    # this group is its own backend for every device, and offers neither NCCL-style coalescing
    # of point-to-point calls, nor splitting, nor time estimates.
    supports_coalescing = False
    supports_splitting = False
    _supports_time_estimate = False

    def _get_backend(self, device: Any = None) -> "ProcessGroupOmniCCL":
        """The group itself: it serves CPU and CUDA tensors alike (PyTorch 2.x asks per device)."""
        return self

    def shutdown(self) -> None:
        """Frees the communicator (peers are told this rank left); safe to call twice."""
        self._completer.stop()
        self._keep.clear()
        self._comm.destroy()

    def abort(self) -> None:
        """Aborts the communicator: local, never waits; operations in flight fail."""
        self._comm.abort()

    # ---------------------------------------------------------------- plumbing
    def _work(self, parts: List[Any], result: List[torch.Tensor], finish: Optional[Callable[[], None]] = None,
              cuda: bool = False, hold: Any = None) -> TorchWork:
        """The Work over started ``parts``; ``finish`` runs now on the stream (CUDA) or after they ended (CPU).

        ``hold``: a staging tensor the operation reads, kept until it ended.
        """
        if cuda and finish is not None:
            finish()
            finish = None
        work = TorchWork(parts, result, self._keep, self._completer, finish, hold)
        if self._coalesced is not None:
            self._coalesced.append(work)
        return work

    def _native(self, what: str, start: Callable[[Any], Any]) -> Any:
        """Starts ``start(native communicator)`` without blocking; the omniccl.Work for it."""
        return self._comm._run(start(self._comm._live(what)), True)

    # ---------------------------------------------------------------- collectives
    def broadcast(self, tensors: List[torch.Tensor], opts: Any = None) -> TorchWork:
        """``dist.broadcast``: the root's tensor into every rank's."""
        opts = opts or dist.BroadcastOptions()
        t = _one(tensors, "broadcast")
        with _stream(t):
            part = _odist.broadcast(_d(t), None, self._comm, True, group_src=opts.rootRank)
        return self._work([part], tensors)

    def allreduce(self, tensors: List[torch.Tensor], opts: Any = None) -> TorchWork:
        """``dist.all_reduce``: every rank gets the reduction, bit-identical everywhere."""
        opts = opts or dist.AllreduceOptions()
        t = _one(tensors, "all_reduce")
        with _stream(t):
            part = _odist.all_reduce(_d(t), reduce_op(opts.reduceOp), self._comm, True)
        return self._work([part], tensors)

    def allreduce_coalesced(self, tensors: List[torch.Tensor], opts: Any = None) -> TorchWork:
        """``dist.all_reduce_coalesced``: one all_reduce per tensor, one Work for all."""
        opts = opts or dist.AllreduceCoalescedOptions()
        op = reduce_op(opts.reduceOp)
        parts = []
        for t in tensors:
            with _stream(t):
                parts.append(_odist.all_reduce(_d(t), op, self._comm, True))
        return self._work(parts, tensors)

    def reduce(self, tensors: List[torch.Tensor], opts: Any = None) -> TorchWork:
        """``dist.reduce``: the reduction into the root's tensor; the others' tensors stay as they were."""
        opts = opts or dist.ReduceOptions()
        t = _one(tensors, "reduce")
        with _stream(t):
            part = _odist.reduce(_d(t), None, reduce_op(opts.reduceOp), self._comm, True, group_dst=opts.rootRank)
        return self._work([part], tensors)

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> TorchWork:
        """``dist.all_gather_into_tensor``: every rank's input, in rank order, into ``output``."""
        with _stream(input):
            part = _odist.all_gather_into_tensor(_d(output), _d(input), self._comm, True)
        return self._work([part], [output])

    def _allgather_list(self, outputs: List[torch.Tensor], input: torch.Tensor) -> TorchWork:
        if len(outputs) != self.size():
            raise ValueError(f"omniccl all_gather: the output list has {len(outputs)} tensors, not one per rank "
                             f"({self.size()})")
        _check_like(outputs, input, "all_gather")
        flat = _flat_like(input, input.numel() * self.size())
        with _stream(input):
            part = _odist.all_gather_into_tensor(flat, _d(input).reshape(-1), self._comm, True)
            return self._work([part], outputs, _copy_out(flat, outputs), input.is_cuda)

    def allgather(self, output_tensors: List[List[torch.Tensor]], input_tensors: List[torch.Tensor],
                  opts: Any = None) -> TorchWork:
        """``dist.all_gather``: every rank's tensor into the list, one per rank."""
        return self._allgather_list(_one(output_tensors, "all_gather"), _one(input_tensors, "all_gather"))

    def allgather_coalesced(self, output_lists: List[List[torch.Tensor]], input_list: List[torch.Tensor],
                            opts: Any = None) -> TorchWork:
        """``dist.all_gather_coalesced``: one all_gather per input tensor, one Work for all."""
        works = [self._allgather_list(outs, t) for outs, t in zip(output_lists, input_list)]
        return self._join(works, [t for outs in output_lists for t in outs])

    def gather(self, output_tensors: List[List[torch.Tensor]], input_tensors: List[torch.Tensor],
               opts: Any = None) -> TorchWork:
        """``dist.gather``: every rank's tensor into the root's list."""
        opts = opts or dist.GatherOptions()
        root = opts.rootRank
        inp = _one(input_tensors, "gather")
        s = _d(inp).reshape(-1)
        if self.rank() != root:
            with _stream(inp):
                return self._work([self._native("gather", lambda c: c.gather(as_tensor(s, False, "input"), None,
                                                                             root, blocking=False))], [])
        outs = _one(output_tensors, "gather")
        if len(outs) != self.size():
            raise ValueError(f"omniccl gather: the gather list has {len(outs)} tensors, not {self.size()}")
        _check_like(outs, inp, "gather")
        flat = _flat_like(inp, inp.numel() * self.size())
        with _stream(inp):
            part = self._native("gather", lambda c: c.gather(as_tensor(s, False, "input"),
                                                             as_tensor(flat, True, "output"), root, blocking=False))
            return self._work([part], outs, _copy_out(flat, outs), inp.is_cuda)

    def scatter(self, output_tensors: List[torch.Tensor], input_tensors: List[List[torch.Tensor]],
                opts: Any = None) -> TorchWork:
        """``dist.scatter``: the root's list, one tensor to each rank."""
        opts = opts or dist.ScatterOptions()
        root = opts.rootRank
        out = _one(output_tensors, "scatter")
        r = _d(out)
        send = None
        if self.rank() == root:
            ins = _one(input_tensors, "scatter")
            if len(ins) != self.size():
                raise ValueError(f"omniccl scatter: the scatter list has {len(ins)} tensors, not {self.size()}")
            send = _cat(ins, out, "scatter")
        with _stream(out):
            part = self._native("scatter", lambda c: c.scatter(None if send is None else as_tensor(send, False, "in"),
                                                               as_tensor(r, True, "output"), root, blocking=False))
        return self._work([part], output_tensors, hold=send)

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> TorchWork:
        """``dist.reduce_scatter_tensor``: part i of the reduced input to rank i."""
        opts = opts or dist.ReduceScatterOptions()
        with _stream(input):
            part = _odist.reduce_scatter_tensor(_d(output), _d(input), reduce_op(opts.reduceOp), self._comm, True)
        return self._work([part], [output])

    def reduce_scatter(self, output_tensors: List[torch.Tensor], input_tensors: List[List[torch.Tensor]],
                       opts: Any = None) -> TorchWork:
        """``dist.reduce_scatter``: the reduction of every rank's list item i to rank i."""
        out = _one(output_tensors, "reduce_scatter")
        ins = _one(input_tensors, "reduce_scatter")
        if len(ins) != self.size():
            raise ValueError(f"omniccl reduce_scatter: the input list has {len(ins)} tensors, not {self.size()}")
        flat = _cat(ins, out, "reduce_scatter")
        opts = opts or dist.ReduceScatterOptions()
        with _stream(out):
            part = _odist.reduce_scatter_tensor(_d(out), flat, reduce_op(opts.reduceOp), self._comm, True)
        return self._work([part], output_tensors, hold=flat)

    def alltoall_base(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: List[int],
                      input_split_sizes: List[int], opts: Any = None) -> TorchWork:
        """``dist.all_to_all_single``: rows of ``input`` to every rank, with optional split sizes."""
        with _stream(input):
            part = _odist.all_to_all_single(_d(output), _d(input), list(output_split_sizes) or None,
                                            list(input_split_sizes) or None, self._comm, True)
        return self._work([part], [output])

    def alltoall(self, output_tensors: List[torch.Tensor], input_tensors: List[torch.Tensor],
                 opts: Any = None) -> TorchWork:
        """``dist.all_to_all``: ``input_tensors[j]`` to rank j, into its ``output_tensors[i]``."""
        for name, ts in (("output", output_tensors), ("input", input_tensors)):
            if len(ts) != self.size():
                raise ValueError(f"omniccl all_to_all: the {name} list has {len(ts)} tensors, not {self.size()}")
        like = input_tensors[0]
        if any(t.dtype != like.dtype for t in list(output_tensors) + list(input_tensors)):
            raise ValueError("omniccl all_to_all: every tensor must have the same dtype")
        send = torch.cat([_d(t).reshape(-1) for t in input_tensors])
        recv = _flat_like(like, sum(t.numel() for t in output_tensors))
        with _stream(like):
            part = _odist.all_to_all_single(recv, send, [t.numel() for t in output_tensors],
                                            [t.numel() for t in input_tensors], self._comm, True)
            return self._work([part], output_tensors, _copy_out(recv, output_tensors), like.is_cuda, send)

    def barrier(self, opts: Any = None) -> TorchWork:
        """``dist.barrier``: returns once every rank of the group entered it."""
        return self._work([_odist.barrier(self._comm, True)], [])

    # ---------------------------------------------------------------- point to point
    def send(self, tensors: List[torch.Tensor], dst: int, tag: int = 0) -> TorchWork:
        """``dist.send`` / ``dist.isend`` to group rank ``dst``; messages are matched by tag."""
        t = _one(tensors, "send")
        with _stream(t):
            return self._work([self._comm.Isend(_d(t), dst, tag)], tensors)

    def recv(self, tensors: List[torch.Tensor], src: int, tag: int = 0) -> TorchWork:
        """``dist.recv`` / ``dist.irecv`` from group rank ``src`` with ``tag``."""
        t = _one(tensors, "recv")
        with _stream(t):
            return self._work([self._comm.Irecv(_d(t), src, tag)], tensors)

    def recv_anysource(self, tensors: List[torch.Tensor], tag: int = 0) -> TorchWork:
        """``dist.recv(tensor)`` without ``src``: from whichever rank sends first (``work._source_rank()``)."""
        t = _one(tensors, "recv")
        with _stream(t):
            return self._work([self._comm.Irecv(_d(t), ANY_SOURCE, tag)], tensors)

    # ---------------------------------------------------------------- coalescing
    def _start_coalescing(self, *device: Any) -> None:
        """Starts collecting the Works of the calls that follow (``batch_isend_irecv``, ``_coalescing_manager``)."""
        if self._coalesced is not None:
            raise RuntimeError("omniccl: coalescing already started on this process group")
        self._coalesced = []

    def _end_coalescing(self, *args: Any) -> TorchWork:
        """Ends collecting; a Work that ends when every collected call has (the calls already run)."""
        works, self._coalesced = self._coalesced or [], None
        return self._join(works, [t for w in works for t in w.result()])

    def allgather_into_tensor_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor],
                                        opts: Any = None) -> TorchWork:
        """PyTorch 2.x's coalesced ``all_gather_into_tensor`` calls: one Work for all."""
        return self._join([self._allgather_base(o, i) for o, i in zip(outputs, inputs)], list(outputs))

    def reduce_scatter_tensor_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor],
                                        opts: Any = None) -> TorchWork:
        """PyTorch 2.x's coalesced ``reduce_scatter_tensor`` calls: one Work for all."""
        return self._join([self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)], list(outputs))

    # Newer PyTorch 2.x calls the single-tensor collectives by these names.
    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> TorchWork:
        """``dist.all_gather_into_tensor`` (PyTorch 2.x's name): as :meth:`_allgather_base`."""
        return self._allgather_base(output, input, opts)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> TorchWork:
        """``dist.reduce_scatter_tensor`` (PyTorch 2.x's name): as :meth:`_reduce_scatter_base`."""
        return self._reduce_scatter_base(output, input, opts)

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: List[int],
                          input_split_sizes: List[int], opts: Any = None) -> TorchWork:
        """``dist.all_to_all_single`` (PyTorch 2.x's name): as :meth:`alltoall_base`."""
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> TorchWork:
        """PyTorch 2.x's gather into one tensor (``size * n`` elements, rank order) on the root."""
        opts = opts or dist.GatherOptions()
        root = opts.rootRank
        s = _d(input).reshape(-1)
        r = _d(output) if self.rank() == root else None
        with _stream(input):
            part = self._native("gather", lambda c: c.gather(
                as_tensor(s, False, "input"), None if r is None else as_tensor(r, True, "output"), root,
                blocking=False))
        return self._work([part], [output])

    def all_gather_single_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor],
                                    opts: Any = None) -> TorchWork:
        """PyTorch 2.x's name of :meth:`allgather_into_tensor_coalesced`."""
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def reduce_scatter_single_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor],
                                        opts: Any = None) -> TorchWork:
        """PyTorch 2.x's name of :meth:`reduce_scatter_tensor_coalesced`."""
        return self.reduce_scatter_tensor_coalesced(outputs, inputs, opts)

    def set_timeout(self, timeout: datetime.timedelta) -> None:
        """``dist.set_timeout``: the deadline of the group's later operations."""
        self._comm.set_timeout(timeout)

    def _join(self, works: List[TorchWork], result: List[torch.Tensor]) -> TorchWork:
        """One Work over several (waiting for it waits for each, raising the first error)."""
        parts = [_WorkPart(w) for w in works]
        return TorchWork(parts, result, self._keep, self._completer)


class _WorkPart:
    """A TorchWork seen as a part of another (``wait``, ``_native.test()``)."""

    def __init__(self, work: TorchWork) -> None:
        self._work = work
        self._native = self

    def test(self) -> bool:
        return self._work.is_completed()

    @property
    def status(self) -> int:
        return 0 if self._work._error is None else 1

    def wait(self, timeout: Optional[float] = None) -> None:
        self._work.wait(timeout)


def _rendezvous(store: Any, rank: int, size: int, timeout: Optional[datetime.timedelta]) -> Communicator:
    """The group's communicator: rank 0 publishes a unique id in ``store``, every rank creates from it."""
    if rank == 0:
        store.set(UNIQUE_ID_KEY, get_unique_id())
    else:
        if timeout is not None:
            store.wait([UNIQUE_ID_KEY], timeout)
        else:
            store.wait([UNIQUE_ID_KEY])
    unique_id = store.get(UNIQUE_ID_KEY)
    return Communicator.from_unique_id(bytes(unique_id), rank, size, timeout)


def create_process_group(store: Any, rank: int, size: int, timeout: datetime.timedelta) -> ProcessGroupOmniCCL:
    """The function registered with ``torch.distributed.Backend.register_backend`` for ``"omniccl"``."""
    return ProcessGroupOmniCCL(store, rank, size, timeout)
